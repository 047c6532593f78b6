"""What runs in a worker: its setup, the cell's function found by name, the cell run and its result.

Part of the executor (:mod:`initlab.executor.core` describes it as a whole).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import socket
import sys
import time
from typing import Any, Callable, Iterator, Mapping

from initlab.executor.cells import Progress
from initlab.runs import DivergenceError, NonFiniteError, RunDir

__all__ = ['worker_setup', 'resolve_target', 'error_fields', 'error_from_fields', 'execute_cell', 'sigint_ignored_in_children']


def worker_setup() -> None:
    """A worker's settings, idempotent: one intra-op thread (``OMP_NUM_THREADS=1`` for torch imported later,
    ``torch.set_num_threads(1)`` once it is), ``torch.use_deterministic_algorithms(True, warn_only=True)``,
    no inner progress bars (``TQDM_DISABLE``) and no tokenizer threads."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ["TQDM_DISABLE"] = "1"  # a cell's inner bars (Trainer, weight loading) would fight the sweep's bar
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"
    if "torch" in sys.modules:
        import torch

        torch.set_num_threads(1)
        torch.use_deterministic_algorithms(True, warn_only=True)


def resolve_target(fn: str) -> Callable[..., Any]:
    """The function a cell target ``"package.module:function"`` names, imported (what a worker runs).

    Raises:
        ValueError: ``fn`` has no ``:``.
        ImportError: the module cannot be imported; AttributeError: it has no such function.
    """
    module, func = fn.split(":", 1)
    return getattr(importlib.import_module(module), func)


def error_fields(err: NonFiniteError) -> dict[str, Any]:
    """The fields of a :class:`NonFiniteError` (or :class:`DivergenceError`), JSON-able, to cross processes."""
    fields = {"where": err.where, "step": err.step, "what": err.what, "value": err.value,
              "last_checkpoint": err.last_checkpoint}
    if isinstance(err, DivergenceError):
        fields.update(diverged=True, early=err.early, factor=err.factor)
    return fields


def error_from_fields(fields: Mapping[str, Any]) -> NonFiniteError:
    """The error :func:`error_fields` describes (a :class:`DivergenceError` keeps its own message)."""
    f = dict(fields)
    if f.pop("diverged", False):
        return DivergenceError(f["where"], f["step"], f["value"], f.pop("early"), f.pop("factor"), f["last_checkpoint"])
    return NonFiniteError(**f)


def execute_cell(root: str, name: str, fn: str, args: Mapping[str, Any], key: Any, progress: Progress,
                 in_worker: bool = True) -> dict[str, Any]:
    """Run one cell and save its result (``cells/<name>.json`` + key); returns result, timings, worker.

    A :class:`NonFiniteError` comes back as its fields (``"nonfinite"``), so it keeps them across processes.
    """
    t0, c0 = time.perf_counter(), time.process_time()
    func = resolve_target(fn)  # a Dask worker's first cell imports its modules here: not part of the measured speed
    if in_worker:
        worker_setup()  # again: the cell's module may have imported torch just now
    progress._send(("begin", 0.0, None))
    try:
        result = func(root, name, args, progress)
    except NonFiniteError as err:
        return {"nonfinite": error_fields(err),
                "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0}
    progress._flush()
    if int(os.environ.get("RANK", "0")) == 0:  # under torchrun/accelerate only the main process records the cell
        RunDir(root, resume=True).save_cell(name, result, key=key)
    return {"result": result, "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
            "worker": f"{socket.gethostname()}:{os.getpid()}"}


@contextlib.contextmanager
def sigint_ignored_in_children() -> Iterator[None]:
    """Processes started inside the block inherit SIGINT ignored (Python keeps an ignored SIGINT at start-up),
    so a Ctrl-C to the terminal's process group reaches only this process, which stops the workers."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
