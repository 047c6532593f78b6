"""The cell executor's core: cells, progress, the cost model, what runs in a worker, the report and the bar.

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
as a string; ``args``: the cell's JSON-able arguments; ``progress``: a :class:`Progress`; ``result``:
JSON-able). A cell holds its function itself (a module-level function: a reader or a tool follows it from the
plan to its code); what travels to a worker is its name, ``"package.module:function"`` (:attr:`Cell.target`), which
the worker imports, so the local pool and Dask pickle only strings.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

from initlab.runs import DivergenceError, NonFiniteError, RunDir, cell_file
from initlab.textio import read_text

__all__ = ["Cell", "Progress", "ExecutionReport", "default_workers", "check_scheduler", "estimate", "resolve_target", "remaining_cells",
           "measure_speed", "REFERENCE_SPEED_SECONDS", "format_seconds", "worker_setup", "track_reports",
           "sigint_ignored_in_children"]


# ------------------------------------------------------------------------------------------------
# cells
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One independent piece of a sweep.

    Attributes:
        name: unique in the run; the RunDir cell name (``cells/<name>.json``).
        fn: the cell function, a module-level function (or its name ``"package.module:function"``), importable by
            name in any worker; called as ``fn(root, name, args, progress)`` and returning the JSON-able result.
        args: the JSON-able arguments of the cell (they travel to the worker).
        key: the config the result depends on (:meth:`initlab.runs.RunDir.save_cell`'s key guard).
        needs: names of cells that must be finished first (e.g. the pretraining a fine-tuning loads).
        units: expected work units (epochs, training steps) for progress and time estimates.
        max_units: upper bound on the units (early stopping may end sooner); None = ``units``.
        unit_seconds: the cost model: expected seconds per unit on one idle core of the reference machine
            (scaled by :func:`measure_speed`'s factor for this machine).
        artifact: a path under the run folder that the cell writes beside its result and the cells that need it
            read (a checkpoint: kept out of a repository, where the results are committed); "" for none. A finished
            cell whose artifact is missing runs again when a cell still to run needs it
            (:func:`initlab.executor.run_cells`), so a run resumed on a fresh clone rebuilds only what it still uses.
    """

    name: str
    fn: Callable[..., Any] | str
    args: Mapping[str, Any]
    key: Any
    needs: tuple[str, ...] = ()
    units: float = 1.0
    max_units: float | None = None
    unit_seconds: float = 1.0
    artifact: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("Cell.name: expected a non-empty name")
        target = self.target
        if ":" not in target or not all(target.split(":", 1)):
            raise ValueError(f"Cell {self.name}: fn: expected 'package.module:function', got {self.fn!r}")
        if not (self.units >= 0 and self.unit_seconds >= 0):
            raise ValueError(f"Cell {self.name}: units and unit_seconds: expected >= 0, got {self.units}, {self.unit_seconds}")
        if self.max_units is not None and self.max_units < self.units:
            raise ValueError(f"Cell {self.name}: max_units ({self.max_units}) < units ({self.units})")
        object.__setattr__(self, "needs", tuple(self.needs))

    @property
    def target(self) -> str:
        """``"package.module:function"``: the name a worker imports :attr:`fn` by.

        Raises:
            ValueError: ``fn`` is a function that cannot be imported by that name (a nested function, a lambda,
                a function of ``__main__``).
        """
        if isinstance(self.fn, str):
            return self.fn
        module, qualname = getattr(self.fn, "__module__", None), getattr(self.fn, "__qualname__", "")
        if not module or module == "__main__" or getattr(sys.modules.get(module), qualname, None) is not self.fn:
            raise ValueError(f"Cell {self.name}: fn: expected a module-level function importable by name, got {self.fn!r}")
        return f"{module}:{qualname}"

    @property
    def expected_seconds(self) -> float:
        return self.units * self.unit_seconds

    @property
    def max_seconds(self) -> float:
        return (self.units if self.max_units is None else self.max_units) * self.unit_seconds


# ------------------------------------------------------------------------------------------------
# progress
# ------------------------------------------------------------------------------------------------
_WORKER_QUEUE: Any = None  # the local pool's progress queue, set in each worker by set_worker_queue


def set_worker_queue(q: Any) -> None:
    """Make ``q`` (a ``multiprocessing`` queue, or None) this worker process's progress queue: every
    :class:`Progress` event of a cell run here is put on it (the local pool's workers call this when they start)."""
    global _WORKER_QUEUE
    _WORKER_QUEUE = q


class Progress:
    """What a cell reports while it runs; picklable (it travels to local workers and Dask workers).

    Units are the cell's :attr:`Cell.units` (epochs, steps). Messages are sent at most every 0.25 s
    (advances in between are added up) and flushed when the cell returns.
    """

    def __init__(self, cell: str, channel: Any = None):
        self.cell = cell
        self._channel = channel  # None | ("pool",) | ("dask", topic) | a callable (in-process)
        self._pending = 0.0
        self._last = 0.0

    def __getstate__(self) -> dict[str, Any]:
        if callable(self._channel):
            raise TypeError("an in-process Progress does not travel to another process")
        return {"cell": self.cell, "_channel": self._channel, "_pending": 0.0, "_last": 0.0}

    def start(self, done: float, total: float | None = None) -> None:
        """``done`` units are already done (resumed from a checkpoint: not counted as speed); ``total``:
        the cell's revised total units (None keeps :attr:`Cell.units`)."""
        self._flush()
        self._send(("start", float(done), None if total is None else float(total)))

    def advance(self, n: float = 1.0) -> None:
        """``n`` more units done in this invocation."""
        self._pending += float(n)
        if time.monotonic() - self._last >= 0.25:
            self._flush()

    def set_total(self, total: float) -> None:
        """The cell's revised total units (e.g. early stopping: fewer than planned)."""
        self._flush()
        self._send(("total", float(total), None))

    def _flush(self) -> None:
        if self._pending:
            n, self._pending = self._pending, 0.0
            self._send(("advance", n, None))

    def _send(self, msg: tuple[str, float, float | None]) -> None:
        self._last = time.monotonic()
        ch = self._channel
        if ch is None:
            return
        event = (self.cell, *msg)
        if callable(ch):
            ch(event)
        elif ch[0] == "pool":
            if _WORKER_QUEUE is not None:
                _WORKER_QUEUE.put(event)
        elif ch[0] == "dask":
            from distributed import get_worker

            with contextlib.suppress(Exception):  # progress never fails a cell
                get_worker().log_event(ch[1], event)


# ------------------------------------------------------------------------------------------------
# machine, cost model
# ------------------------------------------------------------------------------------------------
def default_workers() -> int:
    """The cores this process may use: its CPU affinity (``os.sched_getaffinity``), else ``os.cpu_count()``,
    capped by a cgroup v2 CPU quota (``/sys/fs/cgroup/cpu.max``) where one is set; at least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - macOS, Windows
        n = os.cpu_count() or 1
    try:
        quota, period = read_text("/sys/fs/cgroup/cpu.max").split()[:2]
        if quota != "max":
            n = min(n, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def remaining_cells(out_dir: Any, cells: Sequence[Cell]) -> list[Cell]:
    """The cells of ``cells`` without a saved result in the run folder ``out_dir`` (none when it is finished:
    ``DONE``); nothing is created or checked, so it is safe before a run, for :func:`estimate`."""
    from pathlib import Path

    if (Path(out_dir) / "DONE").exists():
        return []
    return [c for c in cells if not cell_file(out_dir, c.name).exists()]


def estimate(cells: Sequence[Cell], workers: int, *, speed: float = 1.0, startup: float = 0.0) -> tuple[float, float]:
    """``(expected, at most)`` seconds of wall time to run ``cells`` on ``workers`` single-threaded workers.

    List scheduling in the given order: each cell starts on the worker that is free first, once the
    cells it ``needs`` (among ``cells``; others count as finished) have ended; its duration is
    ``units * unit_seconds * speed`` (at most: ``max_units * unit_seconds * speed``). Callers pass the
    cells still to run; nothing is skipped. ``speed``: the factor of :func:`measure_speed` (1 = the
    reference machine); ``startup``: reference seconds a worker process needs before its first cell
    (importing torch and the cells' libraries), added when ``workers > 1`` and there are cells.

    Raises:
        ValueError: ``workers < 1``, or a cycle in ``needs``.
    """
    if workers < 1:
        raise ValueError(f"workers: expected >= 1, got {workers}")
    order = dependency_order(cells)
    busy = [startup * speed] * min(workers, len(order)) if workers > 1 and order else []
    return (_makespan(order, workers, lambda c: c.expected_seconds * speed, busy=busy),
            _makespan(order, workers, lambda c: c.max_seconds * speed, busy=busy))


def dependency_order(cells: Sequence[Cell]) -> list[Cell]:
    """``cells`` in their order, each moved after the cells it needs (stable); ValueError on a cycle."""
    names = {c.name for c in cells}
    placed: set[str] = set()
    out: list[Cell] = []
    rest = list(cells)
    while rest:
        nxt = [c for c in rest if all(n in placed or n not in names for n in c.needs)]
        if not nxt:
            raise ValueError(f"cells: a cycle in needs among {sorted(c.name for c in rest)}")
        first = nxt[0]
        out.append(first)
        placed.add(first.name)
        rest.remove(first)
    return out


def _makespan(order: Sequence[Cell], workers: int, seconds: Callable[[Cell], float],
              busy: Sequence[float] = (), ends: Mapping[str, float] | None = None) -> float:
    free = sorted(list(busy) + [0.0] * max(0, workers - len(busy)))[:max(workers, len(busy))]
    end: dict[str, float] = dict(ends or {})
    span = max(free, default=0.0) if busy else 0.0
    for c in order:
        ready = max((end[n] for n in c.needs if n in end), default=0.0)
        i = min(range(len(free)), key=lambda j: free[j])
        start = max(free[i], ready)
        end[c.name] = free[i] = start + seconds(c)
        span = max(span, end[c.name])
    return span


#: seconds one repetition of :func:`measure_speed`'s workload takes on one undisturbed core of the reference
#: machine (the kind this project's CPU numbers come from: 2-core x86-64 with AVX-512, torch 2.13 CPU, one
#: thread): the fastest repetition over 5 calls of ``measure_speed(raw="fastest")`` (docs/cluster.md#cost-model).
REFERENCE_SPEED_SECONDS = 0.0160


def measure_speed(budget_s: float = 2.0, raw: bool | str = False) -> float:
    """This machine's speed now, as a time factor against the reference machine: 1 = as fast as one undisturbed
    reference core, > 1 = slower (an older CPU, or cores shared with other processes).

    Runs a fixed float32 workload shaped like one step of the repository's tiny transformers (a
    ``(8, 100, 64)`` batch through attention scores, softmax, a 64 -> 256 -> 64 GELU FFN, LayerNorm,
    forward and backward, 4 times per repetition) on one torch thread for about ``budget_s`` seconds,
    and divides the median repetition (what a worker gets on average now, load included) by
    :data:`REFERENCE_SPEED_SECONDS`. ``raw``: return the median repetition's seconds instead;
    ``raw="fastest"``: the fastest repetition's (how :data:`REFERENCE_SPEED_SECONDS` was measured).
    """
    import statistics

    import torch

    from initlab.runs import torch_threads

    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 100, 64, generator=g)
    w = [(torch.randn(64, 64, generator=g) * 0.1).requires_grad_() for _ in range(3)]
    f1 = (torch.randn(64, 256, generator=g) * 0.1).requires_grad_()
    f2 = (torch.randn(256, 64, generator=g) * 0.1).requires_grad_()

    def step() -> None:
        q, k, v = (x @ wi for wi in w)
        a = torch.softmax(q @ k.transpose(1, 2) / 8.0, dim=-1) @ v
        h = torch.nn.functional.layer_norm(x + a, (64,))
        out = torch.nn.functional.gelu(h @ f1) @ f2
        out.square().mean().backward()

    reps: list[float] = []
    with torch_threads(1):
        step()  # warm-up
        t_end = time.perf_counter() + budget_s
        while len(reps) < 5 or time.perf_counter() < t_end:
            t0 = time.perf_counter()
            for _ in range(4):
                step()
            reps.append(time.perf_counter() - t0)
    if raw == "fastest":
        return min(reps)
    med = statistics.median(reps)
    return med if raw else med / REFERENCE_SPEED_SECONDS


def format_seconds(s: float) -> str:
    """``s`` seconds as ``45 s``, ``12 min`` or ``1 h 35 min``."""
    if not math.isfinite(s):
        return "?"
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{int(s // 3600)} h {round((s % 3600) / 60):02d} min"


# ------------------------------------------------------------------------------------------------
# what runs in a worker
# ------------------------------------------------------------------------------------------------
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


def _error_fields(err: NonFiniteError) -> dict[str, Any]:
    """The fields of a :class:`NonFiniteError` (or :class:`DivergenceError`), JSON-able, to cross processes."""
    fields = {"where": err.where, "step": err.step, "what": err.what, "value": err.value,
              "last_checkpoint": err.last_checkpoint}
    if isinstance(err, DivergenceError):
        fields.update(diverged=True, early=err.early, factor=err.factor)
    return fields


def _error_from_fields(fields: Mapping[str, Any]) -> NonFiniteError:
    """The error :func:`_error_fields` describes (a :class:`DivergenceError` keeps its own message)."""
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
        return {"nonfinite": _error_fields(err),
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


# ------------------------------------------------------------------------------------------------
# the report
# ------------------------------------------------------------------------------------------------
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


# ------------------------------------------------------------------------------------------------
# the progress bar
# ------------------------------------------------------------------------------------------------
#: seconds between two progress lines when the output is not a terminal (a log file, a pipe, CI): there a
#: carriage-return redraw every second would leave thousands of partial lines in the log
LOG_INTERVAL = 30.0


def is_terminal(file: Any) -> bool:
    """Whether ``file`` is an interactive terminal (where a bar may redraw itself in place)."""
    try:
        return bool(file.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


def progress_bar(iterable: Any = None, *, file: Any = None, **kwargs: Any) -> Any:
    """A tqdm bar on ``file`` (default ``sys.stderr``): in place on a terminal (or in a notebook); elsewhere plain
    lines, one at most every :data:`LOG_INTERVAL` seconds plus the first and the last, never a carriage return.

    Every progress bar of initlab goes through here (the executor's bar, encoding, retrieval, training loops).
    ``kwargs`` are tqdm's (``total``, ``desc``, ``disable``, ``leave``, ...).
    """
    from tqdm import auto, std

    file = sys.stderr if file is None else file
    if is_terminal(file) or auto.tqdm is not std.tqdm and auto.tqdm.__module__.startswith("tqdm.notebook"):
        return auto.tqdm(iterable, file=file, **kwargs)
    kwargs.pop("dynamic_ncols", None)
    kwargs["mininterval"] = max(float(kwargs.get("mininterval") or 0.0), LOG_INTERVAL)
    kwargs["maxinterval"] = max(float(kwargs.get("maxinterval") or 0.0), LOG_INTERVAL)
    return _line_bar_class()(iterable, file=file, **kwargs)


_LINE_BAR: list[type] = []


def _line_bar_class() -> type:
    """tqdm with ``display`` writing one whole line per draw (no ``\\r``, no clearing)."""
    if not _LINE_BAR:
        from tqdm.std import tqdm

        class LineBar(tqdm):
            def display(self, msg: str | None = None, pos: int | None = None) -> bool:
                text = (self.__str__() if msg is None else msg).strip()
                if text:
                    self.fp.write(text + "\n")
                    self.fp.flush()
                return True

            def clear(self, nolock: bool = False) -> None:  # nothing drawn in place: nothing to clear
                return None

            def close(self) -> None:  # tqdm ends a bar with a bare "\\n" after its last draw: here a blank line
                fp = getattr(self, "fp", None)
                if self.disable or fp is None:  # a disabled bar never drew (and has no file)
                    return super().close()

                class _NoBareNewline:
                    def write(self, s: str) -> Any:
                        return None if s == "\n" else fp.write(s)

                    def flush(self) -> Any:
                        return fp.flush()

                self.fp = _NoBareNewline()
                try:
                    super().close()
                finally:
                    self.fp = fp

        _LINE_BAR.append(LineBar)
    return _LINE_BAR[0]


class SweepBar:
    """One bar over work units; time left from this invocation's measured speed (resumed work excluded)."""

    def __init__(self, cells: Sequence[Cell], done_before: float, workers: int, speed: float, desc: str, enabled: bool):
        self.cells = {c.name: c for c in cells}
        self.order = dependency_order(cells)
        self.total = {c.name: float(c.units) for c in cells}
        self.done = {c.name: 0.0 for c in cells}  # units this invocation
        self.resumed = {c.name: 0.0 for c in cells}  # units resumed from a checkpoint
        self.began: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self._ended: dict[str, float] = {}
        self.finished: set[str] = set()
        self.done_before, self.workers, self.speed = done_before, workers, speed
        self.t0 = self._drawn = time.monotonic()
        self.bar = None
        self.interval = 1.0 if is_terminal(sys.stderr) else LOG_INTERVAL  # seconds between two draws
        if enabled:
            self.bar = progress_bar(total=self._total(), initial=done_before, desc=desc or "cells", unit="unit",
                                    bar_format="{desc}: {percentage:3.0f}%|{bar}| {n:.0f}/{total:.0f} {unit}s "
                                               "[{elapsed} elapsed{postfix}]",
                                    file=sys.stderr, dynamic_ncols=True, mininterval=0.5)
            self.bar.set_postfix_str(self._left(), refresh=False)

    def _total(self) -> float:
        return self.done_before + sum(self.total.values())

    def _n(self) -> float:
        return self.done_before + sum(self.done[c] + self.resumed[c] for c in self.total)

    def _factor(self) -> float:
        """Measured seconds per unit over the cost model's, from the cells that advanced in this call (their
        time from start to their last advance or their end); before any: the ``speed`` given."""
        spent = model = 0.0
        for name, t in self.began.items():
            if self.done[name] > 0:
                spent += self._ended.get(name, self.last.get(name, t)) - t
                model += self.done[name] * self.cells[name].unit_seconds
        return spent / model if model > 0 and spent > 0 else self.speed

    def seconds_left(self) -> float:
        f = self._factor()
        running = [n for n in self.began if n not in self.finished]
        busy = [max(0.0, self.total[n] - self.done[n] - self.resumed[n]) * self.cells[n].unit_seconds * f for n in running]
        ends = {n: b for n, b in zip(running, busy)}
        ends.update({n: 0.0 for n in self.finished})
        pending = [c for c in self.order if c.name not in self.began]
        return _makespan(pending, self.workers, lambda c: self.total[c.name] * c.unit_seconds * f, busy=busy, ends=ends)

    def _left(self) -> str:
        measured = any(self.done[n] > 0 for n in self.began)
        return f"about {format_seconds(self.seconds_left())} left" + ("" if measured else " (cost model)")

    def event(self, cell: str, kind: str, a: float, b: float | None) -> None:
        if cell not in self.total or cell in self.finished:
            return  # a late message of a finished cell
        if kind == "begin":
            self.began.setdefault(cell, time.monotonic())
        elif kind == "start":
            self.began.setdefault(cell, time.monotonic())
            self.resumed[cell] = a
            if b is not None:
                self.total[cell] = max(b, a)
        elif kind == "advance":
            self.began.setdefault(cell, time.monotonic())
            self.done[cell] += a
            self.last[cell] = time.monotonic()
            # a cell past its planned units (more epochs than the cost model expected) grows the total: tqdm
            # cannot draw a bar whose count is above its total
            self.total[cell] = max(self.total[cell], self.done[cell] + self.resumed[cell])
        elif kind == "total":
            self.total[cell] = max(a, self.done[cell] + self.resumed[cell])
        self.refresh()

    def finish(self, cell: str) -> None:
        if cell in self.finished or cell not in self.total:
            return
        self.began.setdefault(cell, time.monotonic())
        self._ended[cell] = time.monotonic()
        left = self.total[cell] - self.done[cell] - self.resumed[cell]
        if left > 0 and self.done[cell] + self.resumed[cell] == 0:
            self.done[cell] = self.total[cell]  # a cell that reports no progress: all its units at once
        else:
            self.total[cell] = self.done[cell] + self.resumed[cell]  # ended sooner (or later) than planned
        self.finished.add(cell)
        self.refresh(force=True)

    def refresh(self, force: bool = False) -> None:
        if self.bar is None:
            return
        now = time.monotonic()
        if now - self._drawn < self.interval and (not force or self.interval > 1.0):  # a log: coarse lines only
            return
        self._drawn = now
        self.bar.n = self._n()
        self.bar.total = max(self._total(), self.bar.n)
        self.bar.set_postfix_str(self._left(), refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.n = self._n()  # the last line shows the final count even where a coarse draw was skipped
            self.bar.total = max(self._total(), self.bar.n)
            self.bar.set_postfix_str(self._left(), refresh=False)
            self.bar.close()
            self.bar = None


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
        raise _error_from_fields(nonfinite)
    rep.nonfinite[cell.name] = nonfinite
    rep.failed[cell.name] = str(_error_from_fields(nonfinite))
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


