"""The cell executor's core: cells, progress, the cost model, what runs in a worker, the report and the bar.

One idea per module, every name re-exported here: :mod:`~initlab.executor.cells` (cells, progress, their order),
:mod:`~initlab.executor.cost` (the machine, the cost model), :mod:`~initlab.executor.worker` (what runs in a
worker), :mod:`~initlab.executor.bar` (the progress bar), :mod:`~initlab.executor.report` (the execution report,
results and failures).

The two ways of running cells build on it: :mod:`initlab.executor.local` (this process, or a pool of local
worker processes) and :mod:`initlab.executor.cluster` (the Dask bridge); :func:`initlab.executor.run_cells`
chooses between them. What follows describes the executor as a whole.

Run the independent cells of a sweep in local worker processes or on a Dask cluster.

A sweep (``initlab synthetic splade``, ``initlab lra sweep``, ``initlab splade sweep``, ``initlab synthetic
spt``) is a list of :class:`Cell` objects: one condition and seed, one grid point. :func:`run_cells` runs the
cells of a :class:`initlab.runs.RunDir` that are not finished yet and saves each result as
``cells/<name>.json`` with its key (the config guard of :meth:`initlab.runs.RunDir.save_cell`), so the same
run folder resumes whether it was run locally or on a cluster:

* ``workers == 1``: in this process, in order;
* ``workers > 1``: a persistent pool of ``spawn`` worker processes (each imports torch and the cells'
  modules once, not per cell);
* ``scheduler="tcp://host:8786"``: a Dask distributed cluster (``distributed.Client``); the run folder
  must be on a filesystem every Dask worker sees under the same path (docs/cluster.md);
  ``scheduler="local:N"``: an in-process ``distributed.LocalCluster`` of N single-threaded worker processes
  (what the tests use).

Every worker runs a cell with ONE torch intra-op thread and ``torch.use_deterministic_algorithms(True,
warn_only=True)``, so a cell's result does not depend on where it ran. Progress is one bar over work units
(epochs, steps: :attr:`Cell.units`), its time left estimated from the work done in this invocation only
(units resumed from a checkpoint or cells finished earlier never count as speed), and closed before
the interruption message on Ctrl-C.

Cell functions have the signature ``fn(root, name, args, progress) -> result`` (``root``: the run folder
as a string; ``args``: the cell's picklable arguments, plain data and frozen config objects; ``progress``: a :class:`Progress`; ``result``:
JSON-able). A cell holds its function itself (a module-level function: a reader or a tool follows it from the
plan to its code); what travels to a worker is its name, ``"package.module:function"`` (:attr:`Cell.target`), which
the worker imports, and its arguments, pickled.
"""

from __future__ import annotations

from initlab.executor.cells import Cell, Progress, dependency_order, remaining_cells, set_worker_queue
from initlab.executor.cost import REFERENCE_SPEED_SECONDS, default_workers, estimate, format_seconds, measure_speed
from initlab.executor.worker import execute_cell, resolve_target, sigint_ignored_in_children, worker_setup
from initlab.executor.bar import LOG_INTERVAL, SweepBar, is_terminal, progress_bar
from initlab.executor.report import (ExecutionReport, announce_report, check_scheduler, handle_failure, record_result,
                                     take_result, track_reports)

__all__ = ["Cell", "Progress", "ExecutionReport", "default_workers", "check_scheduler", "estimate", "resolve_target",
           "remaining_cells", "measure_speed", "REFERENCE_SPEED_SECONDS", "format_seconds", "worker_setup", "track_reports",
           "sigint_ignored_in_children", "dependency_order", "set_worker_queue", "execute_cell", "LOG_INTERVAL", "SweepBar",
           "is_terminal", "progress_bar", "announce_report", "handle_failure", "record_result", "take_result"]
