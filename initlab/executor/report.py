"""The report of a sweep's execution (:class:`ExecutionReport`): finished, failed and resumed cells.

Part of the executor (:mod:`initlab.executor.core` describes it as a whole).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from initlab.executor.bar import SweepBar
from initlab.executor.cells import Cell
from initlab.executor.worker import error_from_fields

__all__ = ['ExecutionReport', 'track_reports', 'announce_report', 'check_scheduler', 'record_result', 'take_result', 'handle_failure']


@dataclass
class ExecutionReport:
    """What :func:`run_cells` did.

    Attributes:
        wall_seconds: wall time of the call.
        cpu_seconds: CPU seconds of the cells (sum over cells of their worker process's CPU time while
            the cell ran; with one thread per worker about its wall time on an idle core).
        cell_seconds: wall seconds per cell run in this call; cell_cpu_seconds: its CPU seconds.
        skipped: cells finished by an earlier run (not redone).
        failed: cell -> error message (``on_error="record"``; cells needing a failed cell included).
        nonfinite: cell -> the fields of its :class:`initlab.runs.NonFiniteError` (a subset of ``failed``).
        workers: worker processes (or Dask workers) used; scheduler: the scheduler address or None.
    """

    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    cell_seconds: dict[str, float] = field(default_factory=dict)
    cell_cpu_seconds: dict[str, float] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    nonfinite: dict[str, dict[str, Any]] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    workers: int = 1
    scheduler: str | None = None

    @property
    def cores_used(self) -> float:
        """CPU seconds over wall seconds: how many cores the cells kept busy on average."""
        return self.cpu_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0


_TRACKERS: list[list[ExecutionReport]] = []


@contextlib.contextmanager
def track_reports() -> Iterator[list[ExecutionReport]]:
    """Collect the :class:`ExecutionReport` of every :func:`run_cells` call inside the block (the per-stage
    CPU use of ``initlab reproduce``)."""
    got: list[ExecutionReport] = []
    _TRACKERS.append(got)
    try:
        yield got
    finally:
        _TRACKERS.remove(got)


def announce_report(rep: ExecutionReport) -> None:
    """Hand ``rep`` to every open :func:`track_reports` block (called by :func:`initlab.executor.run_cells`)."""
    for got in _TRACKERS:
        got.append(rep)


def check_scheduler(scheduler: str) -> str:
    """``scheduler`` if it reads as a Dask scheduler address (``tcp://host:8786``, ``host:8786``) or
    ``local:N`` (N >= 1); else ValueError naming the expected forms. Nothing is contacted."""
    if scheduler.startswith("local:"):
        n = scheduler.split(":", 1)[1]
        if not n.isdigit() or int(n) < 1:
            raise ValueError(f"--scheduler {scheduler}: expected local:N with N >= 1 worker processes")
    elif "://" not in scheduler and not scheduler.count(":") == 1:
        raise ValueError(f"--scheduler {scheduler}: expected a Dask scheduler address such as tcp://host:8786, "
                         "or local:N for an in-process cluster of N workers")
    return scheduler


def record_result(rep: ExecutionReport, bar: SweepBar, cell: Cell, out: dict[str, Any]) -> None:
    """Enter the outcome ``out`` of :func:`execute_cell` for ``cell`` in ``rep`` (its seconds; its result unless its
    training was non-finite) and mark it finished on ``bar``."""
    rep.cell_seconds[cell.name] = out["seconds"]
    rep.cell_cpu_seconds[cell.name] = out["cpu_seconds"]
    rep.cpu_seconds += out["cpu_seconds"]
    if "nonfinite" in out:
        return
    rep.results[cell.name] = out["result"]
    bar.finish(cell.name)


def take_result(fut: Any, rep: ExecutionReport, bar: SweepBar, todo: Sequence[Cell], c: Cell, on_error: str, ended: set[str]) -> set[str]:
    """Record a finished future of cell ``c`` (pool or Dask): its result, or its failure (:func:`handle_failure`);
    returns the cells lost with it."""
    try:
        out = fut.result()
    except Exception as err:  # noqa: BLE001 - a cell's error, or its worker died
        return handle_failure(rep, todo, c, None, err, on_error)
    record_result(rep, bar, c, out)
    if "nonfinite" in out:
        return handle_failure(rep, todo, c, out, None, on_error)
    ended.add(c.name)
    return set()


def handle_failure(rep: ExecutionReport, cells: Sequence[Cell], cell: Cell, out: dict[str, Any] | None,
                   err: BaseException | None, on_error: str) -> set[str]:
    """Handle a failed cell: raise, or (``on_error="record"``, a non-finite training only) record it and the
    cells that need it; returns the names recorded."""
    nonfinite = out.get("nonfinite") if out else None
    if nonfinite is None:  # any other error stops the run, with the cell named
        assert err is not None
        with contextlib.suppress(Exception):
            err.add_note(f"(in cell {cell.name})")
        raise err
    if on_error == "raise":
        raise error_from_fields(nonfinite)
    rep.nonfinite[cell.name] = nonfinite
    rep.failed[cell.name] = str(error_from_fields(nonfinite))
    lost = {cell.name}
    changed = True
    while changed:
        changed = False
        for c in cells:
            if c.name not in lost and any(n in lost for n in c.needs):
                lost.add(c.name)
                rep.failed.setdefault(c.name, f"needs {', '.join(n for n in c.needs if n in lost)}, which failed")
                changed = True
    return lost
