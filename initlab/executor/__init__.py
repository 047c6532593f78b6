"""The cell executor: run the independent cells of a sweep in this process, in local worker processes or on a
Dask cluster (:func:`run_cells`), resumably, with one progress bar and a cost-model estimate.

Three rooms: :mod:`initlab.executor.core` (cells, progress, the cost model, what runs in a worker, the report, the
bar; its docstring describes the executor), :mod:`initlab.executor.local` (this process or a local pool) and
:mod:`initlab.executor.cluster` (the Dask bridge). The public names are imported here.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import time
from typing import Iterator, Sequence

from initlab.executor.cluster import (SCHEDULER_TIMEOUT, NoWorkersError, SchedulerUnreachableError, probe_scheduler,
                                     run_dask)
from initlab.executor.core import (LOG_INTERVAL, REFERENCE_SPEED_SECONDS, Cell, ExecutionReport, Progress, SweepBar,
                                   announce_report, dependency_order, check_scheduler, default_workers, estimate,
                                   format_seconds, is_terminal, measure_speed, progress_bar, remaining_cells,
                                   track_reports, worker_setup)
from initlab.executor.local import gpu_count, run_inline, run_pool
from initlab.runs import RunDir

__all__ = ["Cell", "Progress", "ExecutionReport", "default_workers", "check_scheduler", "probe_scheduler",
           "SchedulerUnreachableError", "NoWorkersError", "SCHEDULER_TIMEOUT", "estimate", "remaining_cells",
           "run_cells", "measure_speed", "REFERENCE_SPEED_SECONDS", "format_seconds", "worker_setup", "track_reports",
           "progress_bar", "is_terminal", "LOG_INTERVAL", "machine_speed",
           "current_machine_speed"]

#: the machine speed a caller measured once for every :func:`run_cells` inside it (:func:`machine_speed`)
_SPEED: contextvars.ContextVar[float | None] = contextvars.ContextVar("initlab_executor_speed", default=None)


@contextlib.contextmanager
def machine_speed(speed: float) -> Iterator[float]:
    """Within the block, every :func:`run_cells` not given its own ``speed`` starts its estimate from ``speed``
    (:func:`measure_speed`'s factor) instead of measuring again, so that a caller that prints one plan over many
    sweeps (``initlab reproduce``) and the sweeps' own plan lines agree: each fresh measurement of a shared
    machine differs by its load at that second.

    Raises:
        ValueError: ``speed`` not a positive finite number.
    """
    if not (isinstance(speed, (int, float)) and 0 < float(speed) < float("inf")):
        raise ValueError(f"speed: expected a positive finite time factor, got {speed!r}")
    token = _SPEED.set(float(speed))
    try:
        yield float(speed)
    finally:
        _SPEED.reset(token)


def current_machine_speed() -> float | None:
    """The speed factor of the innermost enclosing :func:`machine_speed` block, or None outside every such block
    (what :func:`run_cells` starts its estimate from when not given its own ``speed``)."""
    return _SPEED.get()


def run_cells(rd: RunDir, cells: Sequence[Cell], *, workers: int | None = None, scheduler: str | None = None,
              progress: bool = True, desc: str = "", on_error: str = "raise", preload: Sequence[str] = (),
              speed: float | None = None, gpus: bool = False, startup: float = 0.0) -> ExecutionReport:
    """Run the cells of ``cells`` not yet finished in ``rd``, respecting ``needs``; returns an :class:`ExecutionReport`.

    Finished cells (``rd.has_cell(name, key=cell.key)``) are skipped, except one whose :attr:`Cell.artifact` is
    missing while a cell still to run needs it (it runs again); a finished cell saved under another
    key raises :class:`initlab.runs.ConfigMismatchError` before anything runs. Each result is saved by the
    executor, in the worker, as ``rd.save_cell(name, result, key=cell.key)``.

    Args:
        workers: worker processes (None: :func:`default_workers`); 1 runs the cells in this process.
            With ``scheduler``, the Dask workers are the cluster's and ``workers`` only sizes the estimate.
        scheduler: None (local), a Dask scheduler address (``tcp://host:8786``; the run folder must be
            on a filesystem the workers share, under the same path), or ``local:N`` (an in-process
            ``LocalCluster`` of N single-threaded worker processes).
        progress: show one bar over the work units (stderr) and the expected duration before it.
        desc: the bar's label.
        on_error: what a cell whose training diverged (:class:`NonFiniteError`) does: ``"raise"`` stops the
            run and re-raises it with its fields; ``"record"`` lists the cell in ``report.failed`` and
            ``report.nonfinite`` (not saved, so a rerun retries it), fails the cells that need it and goes
            on. Any other exception of a cell stops the run (running cells are stopped) and is re-raised
            as itself, with a note naming the cell.
        preload: modules each local worker imports when it starts (the cells' own modules always are).
        speed: :func:`measure_speed`'s factor for the first estimate (before any unit is measured); None: the
            enclosing :func:`machine_speed`'s, else measured here (1 s) when ``progress``, else 1.
        startup: reference seconds a local worker needs to start (its imports): for the first estimate, and
            the cells run in this process when a pool would not finish sooner than one process.
        gpus: local pool only: worker i sees only GPU i (``CUDA_VISIBLE_DEVICES``); ``workers`` defaults to the GPU
            count, and a larger ``workers`` is refused (never cut to it).

    Raises:
        ValueError: duplicate cell names, ``needs`` naming no cell (neither in ``cells`` nor finished),
            a cycle, ``workers < 1`` (or more than the GPUs with ``gpus``), a bad ``scheduler`` or ``on_error``.
        KeyboardInterrupt: Ctrl-C; the bar is closed first, the workers are stopped, finished cells are kept.
        ImportError: ``scheduler`` given and dask distributed is not installed.
    """
    if on_error not in ("raise", "record"):
        raise ValueError(f"on_error: expected 'raise' or 'record', got {on_error!r}")
    chosen = workers is not None
    workers = default_workers() if workers is None else int(workers)
    if workers < 1:
        raise ValueError(f"workers (--workers): expected >= 1, got {workers}")
    if gpus and scheduler is None and chosen and workers > max(1, gpu_count()):
        raise ValueError(f"workers (--workers) {workers}: this machine has {gpu_count()} GPU(s) and each local worker "
                         f"takes one; choose at most {max(1, gpu_count())} (or omit --workers: one per GPU)")
    if scheduler is not None:
        check_scheduler(scheduler)
    names = [c.name for c in cells]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"cells: duplicate names {dup}")
    t0 = time.perf_counter()
    rep = ExecutionReport(workers=workers, scheduler=scheduler)
    finished = {c.name for c in cells if rd.has_cell(c.name, key=c.key)}  # ConfigMismatchError before any work
    # a finished cell whose artifact (a checkpoint, never committed) is missing runs again while a cell still to run
    # needs it: a run resumed on a fresh clone of a repository holding its cell results rebuilds only what it uses
    by_name = {c.name: c for c in cells}
    needed = {n for c in cells if c.name not in finished for n in c.needs}
    rebuild = sorted(n for n in needed & finished
                     if by_name[n].artifact and not (rd.root / by_name[n].artifact).exists())
    finished -= set(rebuild)
    todo = [c for c in cells if c.name not in finished]
    known = set(names)
    for c in todo:
        bad = [n for n in c.needs if n not in known and not rd.has_cell(n)]
        if bad:
            raise ValueError(f"cell {c.name}: needs {bad}, which are neither cells of this run nor finished")
    dependency_order(todo)  # a cycle: ValueError before any work
    rep.skipped = [n for n in names if n in finished]
    announce_report(rep)
    if not todo:
        rep.wall_seconds = time.perf_counter() - t0
        return rep
    if scheduler is not None and scheduler.startswith("local:"):
        workers = int(scheduler.split(":", 1)[1])
        rep.workers = workers
    if gpus and scheduler is None:
        workers = min(workers, max(1, gpu_count()))
        rep.workers = workers
    if scheduler is None and workers > 1 and startup > 0:  # a pool only where it pays for its start-up
        serial = sum(c.expected_seconds for c in todo)
        if estimate(todo, workers, startup=startup)[0] >= serial:
            workers = rep.workers = 1
    if speed is None:
        speed = current_machine_speed()
    if speed is None:
        speed = measure_speed(1.0) if progress else 1.0
    done_before = sum(float(c.units) for c in cells if c.name in finished)
    if progress:  # the plan first, then the bar below it: its count of units is the bar's
        exp, most = estimate(todo, workers, speed=speed, startup=startup if scheduler is None else 0.0)
        where = f"Dask scheduler {scheduler}" if scheduler else ("this process" if workers == 1 else f"{workers} worker processes")
        units = sum(float(c.units) for c in todo)
        print(f"{desc or 'cells'}: {len(todo)} cells ({units:g} units) to run"
              + (f" ({len(finished)} cells, {done_before:g} units, finished earlier, skipped)" if finished else "")
              + f" in {where}: about {format_seconds(exp)} expected, at most {format_seconds(most)} (cost model x "
              f"machine speed {speed:.2f})", file=sys.stderr, flush=True)
    bar = SweepBar(todo, done_before, workers, speed, desc, progress)
    root = str(rd.root.resolve())
    try:
        if scheduler is not None:
            run_dask(root, todo, scheduler, bar, rep, on_error)
        elif workers == 1:
            run_inline(root, todo, bar, rep, on_error)
        else:
            modules = sorted({c.target.split(":", 1)[0] for c in todo} | set(preload))
            run_pool(root, todo, workers, modules, bar, rep, on_error, gpus)
    finally:
        bar.close()  # before any interruption message: no stale bar is redrawn after it
        rep.wall_seconds = time.perf_counter() - t0
    return rep
