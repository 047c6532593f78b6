"""PLACEHOLDER cell executor (a minimal stand-in for the contract; replaced by the executor branch).

Cells run in order, in-process (workers == 1) or in a spawn process pool, respecting ``needs``.
"""

from __future__ import annotations

import importlib
import os
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

__all__ = ["Cell", "Progress", "default_workers", "estimate", "run_cells", "ExecutionReport"]


@dataclass(frozen=True)
class Cell:
    name: str
    fn: str
    args: Mapping[str, Any]
    key: Any
    needs: tuple[str, ...] = ()
    units: float = 1.0
    max_units: float | None = None
    unit_seconds: float = 1.0


class Progress:
    def __init__(self, bar=None):
        self.bar = bar

    def start(self, done: float, total: float | None = None) -> None:
        pass

    def advance(self, n: float = 1.0) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def set_total(self, total: float) -> None:
        pass


@dataclass
class ExecutionReport:
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    cell_seconds: dict[str, float] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        return os.cpu_count() or 1


def estimate(cells: Sequence[Cell], workers: int) -> tuple[float, float]:
    exp = sum(c.units * c.unit_seconds for c in cells) / max(workers, 1)
    mx = sum((c.max_units or c.units) * c.unit_seconds for c in cells) / max(workers, 1)
    return exp, mx


def _call(fn: str, root: str, name: str, args: Mapping[str, Any], key: Any, threads: int = 1) -> tuple[str, float]:
    import torch

    from initlab.runs import RunDir

    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    mod, func = fn.split(":")
    c0 = time.process_time()
    result = getattr(importlib.import_module(mod), func)(root, name, dict(args), Progress())
    RunDir(root, resume=True).save_cell(name, result, key=key)
    return name, time.process_time() - c0


def run_cells(rd, cells: Sequence[Cell], *, workers: int | None = None, scheduler: str | None = None,
              progress: bool = True, desc: str = "", on_error: str = "raise") -> ExecutionReport:
    t0 = time.perf_counter()
    rep = ExecutionReport()
    todo = [c for c in cells if not rd.has_cell(c.name, key=c.key)]
    workers = workers or default_workers()
    if workers <= 1:
        for c in todo:
            _, cpu = _call(c.fn, str(rd.root), c.name, c.args, c.key)
            rep.cpu_seconds += cpu
        rep.wall_seconds = time.perf_counter() - t0
        return rep
    import multiprocessing as mp

    pending = list(todo)
    waiting = {c.name for c in todo}
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
        running: dict[Any, str] = {}
        while pending or running:
            for c in list(pending):
                if len(running) >= workers:
                    break
                if any(n in waiting for n in c.needs):
                    continue
                running[pool.submit(_call, c.fn, str(rd.root), c.name, c.args, c.key)] = c.name
                pending.remove(c)
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for f in done:
                name, cpu = f.result()
                rep.cpu_seconds += cpu
                waiting.discard(running.pop(f))
    rep.wall_seconds = time.perf_counter() - t0
    return rep
