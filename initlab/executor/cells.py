"""A sweep's cells (:class:`Cell`: one condition and seed, one grid point) and their :class:`Progress`.

Part of the executor (:mod:`initlab.executor.core` describes it as a whole).
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from initlab.runs import RunDir, cell_file

__all__ = ['Cell', 'set_worker_queue', 'Progress', 'remaining_cells', 'dependency_order']


@dataclass(frozen=True)
class Cell:
    """One independent piece of a sweep.

    Attributes:
        name: unique in the run; the RunDir cell name (``cells/<name>.json``).
        fn: the cell function, a module-level function (or its name ``"package.module:function"``), importable by
            name in any worker; called as ``fn(root, name, args, progress)`` and returning the JSON-able result.
        args: the arguments of the cell, picklable (plain data and frozen config objects; they travel to the worker).
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
        receives: pairs ``(argument, cell)``: the executor hands the saved result of ``cell`` (one of :attr:`needs`)
            to this cell as ``args[argument]`` (:meth:`call_args`), so a cell gets what an earlier cell computed in
            its arguments, never by reading a file that cell wrote. Not part of :attr:`key`: the result handed over
            is the finished cell's, which its own key already guards.
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
    receives: tuple[tuple[str, str], ...] = ()

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
        receives = tuple((str(a), str(n)) for a, n in (self.receives.items() if isinstance(self.receives, Mapping)
                                                        else self.receives))
        bad = [n for _, n in receives if n not in self.needs] + [a for a, _ in receives if a in self.args]
        if bad or len({a for a, _ in receives}) != len(receives):
            raise ValueError(f"Cell {self.name}: receives: expected (argument, cell) pairs naming cells of needs "
                             f"{list(self.needs)}, each argument once and not already in args; got {list(receives)}")
        object.__setattr__(self, "receives", receives)

    def call_args(self, root: str) -> Mapping[str, Any]:
        """The arguments the cell function is called with: :attr:`args` plus, for each pair of :attr:`receives`, the
        saved result of that finished cell of the run folder ``root``.

        Raises:
            FileNotFoundError: a cell of :attr:`receives` has no saved result (it must be finished first).
        """
        if not self.receives:
            return self.args
        rd = RunDir(root, resume=True)
        return {**self.args, **{arg: rd.load_cell(cell) for arg, cell in self.receives}}

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


def remaining_cells(out_dir: Any, cells: Sequence[Cell]) -> list[Cell]:
    """The cells of ``cells`` without a saved result in the run folder ``out_dir`` (none when it is finished:
    ``DONE``); nothing is created or checked, so it is safe before a run, for :func:`estimate`."""
    from pathlib import Path

    if (Path(out_dir) / "DONE").exists():
        return []
    return [c for c in cells if not cell_file(out_dir, c.name).exists()]


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
