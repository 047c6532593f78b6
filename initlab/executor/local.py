"""Running cells here: in this process, in order (:func:`run_inline`), or on a persistent pool of ``spawn`` worker
processes, each importing torch and the cells' modules once (:func:`run_pool`); GPU pools give worker i GPU i.
Ctrl-C reaches only the parent, which stops the workers (their checkpoints stay)."""

from __future__ import annotations

import contextlib
import importlib
import os
import queue
import signal
import sys
from typing import Any, Sequence

from initlab.executor.core import (Cell, ExecutionReport, Progress, SweepBar, dependency_order, execute_cell, handle_failure,
                                   record_result, set_worker_queue, sigint_ignored_in_children, take_result, worker_setup)

__all__ = ["run_inline", "run_pool", "gpu_count"]


def _pool_init(q: Any, modules: Sequence[str]) -> None:
    """Local pool worker start: ignore Ctrl-C (the parent stops the workers), import torch and the cells'
    modules once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_worker_queue(q)
    worker_setup()
    for m in modules:
        importlib.import_module(m)
    if "transformers" in sys.modules:
        with contextlib.suppress(Exception):
            sys.modules["transformers"].logging.disable_progress_bar()
    worker_setup()


def _pool_execute(root, name, fn, args, key) -> dict[str, Any]:
    return execute_cell(root, name, fn, args, key, Progress(name, ("pool",)))


def run_inline(root: str, todo: Sequence[Cell], bar: SweepBar, rep: ExecutionReport, on_error: str) -> None:
    import torch

    from initlab.runs import torch_threads

    det, warn = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    lost: set[str] = set()
    with torch_threads(1):
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            for c in dependency_order(todo):
                if c.name in lost:
                    continue
                prog = Progress(c.name, lambda ev: bar.event(*ev))
                try:
                    out = execute_cell(root, c.name, c.target, c.call_args(root), c.key, prog, in_worker=False)
                except Exception as err:  # noqa: BLE001 - handed to the on_error policy
                    lost |= handle_failure(rep, todo, c, None, err, on_error)
                    continue
                record_result(rep, bar, c, out)
                if "nonfinite" in out:
                    lost |= handle_failure(rep, todo, c, out, None, on_error)
        finally:
            torch.use_deterministic_algorithms(det, warn_only=warn)


def run_pool(root: str, todo: Sequence[Cell], workers: int, modules: Sequence[str], bar: SweepBar,
              rep: ExecutionReport, on_error: str, gpus: bool) -> None:
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    workers = min(workers, len(todo))
    if gpus:
        counter = ctx.Value("i", 0)
        pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_pool_init_gpu, initargs=(q, modules, counter))
    else:
        pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_pool_init, initargs=(q, modules))
    pending = list(dependency_order(todo))
    running: dict[Any, Cell] = {}
    ended: set[str] = set()
    lost: set[str] = set()
    by_name = {c.name: c for c in todo}

    def drain() -> None:
        while True:
            try:
                ev = q.get_nowait()
            except (queue.Empty, OSError, ValueError):
                return
            bar.event(*ev)

    try:
        while pending or running:
            for c in list(pending):  # in plan order, one cell per free worker: the plan's order is the run's
                if c.name in lost:
                    pending.remove(c)
                elif len(running) < workers and all(n in ended or n not in by_name for n in c.needs):
                    with sigint_ignored_in_children():  # submit() may start a worker process
                        fut = pool.submit(_pool_execute, root, c.name, c.target, c.call_args(root), c.key)
                    running[fut] = c
                    pending.remove(c)
            if not running:
                break
            done, _ = wait(list(running), timeout=0.2, return_when=FIRST_COMPLETED)
            drain()
            for fut in done:
                c = running.pop(fut)
                lost |= take_result(fut, rep, bar, todo, c, on_error, ended)  # a cell's error, or a worker that died
            bar.refresh()
    except BaseException:
        bar.close()
        _stop_pool(pool)
        raise
    else:
        pool.shutdown(wait=True)
    finally:
        with contextlib.suppress(Exception):
            q.close()


def _pool_init_gpu(q: Any, modules: Sequence[str], counter: Any) -> None:
    with counter.get_lock():
        i = counter.value
        counter.value += 1
    os.environ["CUDA_VISIBLE_DEVICES"] = str(i)
    _pool_init(q, modules)


def _stop_pool(pool: Any) -> None:
    """Stop a ProcessPoolExecutor now: its running cells are lost (their checkpoints stay), queued ones cancelled."""
    terminate = getattr(pool, "terminate_workers", None)  # Python >= 3.14
    if terminate is not None:  # pragma: no cover
        terminate()
        return
    procs = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with contextlib.suppress(Exception):
            p.terminate()
    for p in procs:
        with contextlib.suppress(Exception):
            p.join(5)


def gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # pragma: no cover
        return 0
