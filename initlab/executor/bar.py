"""The one progress bar of a sweep (:class:`SweepBar`) over work units, and the line bar of a log file.

Part of the executor (:mod:`initlab.executor.core` describes it as a whole).
"""

from __future__ import annotations

import sys
import time
from typing import Any, Sequence

from initlab.executor.cells import Cell, dependency_order
from initlab.executor.cost import format_seconds, makespan

__all__ = ['LOG_INTERVAL', 'is_terminal', 'progress_bar', 'SweepBar']


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
        return makespan(pending, self.workers, lambda c: self.total[c.name] * c.unit_seconds * f, busy=busy, ends=ends)

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
