"""Shared timing for the benchmark scripts: every side of a comparison timed in the same run, interleaved.

A shared 2-core machine changes speed from second to second, so timing ours once and the reference
once afterwards measures the load as much as the code. :func:`interleaved` instead runs the cases in
rounds, one call of each case per round, and reports for every case its time divided by the baseline's
time *within each round* (so both sides of a ratio ran seconds apart, under nearly the same load), then
the median and spread (quartiles, range) of those per-round ratios. The order inside a round is rotated from round to round
(A B, B A, A B, ... for two cases), so no side is always first after the other's caches or after a pause.

Also here: :func:`load_average` (the 1/5/15-minute load averages, as ``/proc/loadavg`` gives them) and
:class:`Burners` (CPU-burning processes that make the load of a run reproducible from its command).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable


def load_average() -> list[float]:
    """The 1, 5 and 15-minute load averages (``os.getloadavg``: ``/proc/loadavg`` on Linux)."""
    return [round(x, 2) for x in os.getloadavg()]


def quantiles(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    if len(xs) == 1:
        q1 = q3 = xs[0]
    else:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return {"median": statistics.median(xs), "q1": q1, "q3": q3, "min": xs[0], "max": xs[-1]}


@dataclass
class Comparison:
    """Times of an :func:`interleaved` run.

    ``seconds[name]`` holds one time per round (round order), ``ratios[name]`` the per-round ratio
    ``seconds[name][r] / seconds[baseline][r]`` (> 1: ``name`` took longer than the baseline; with ours as
    the baseline, the ratio of a peer is ours' speed-up over it)."""

    baseline: str
    seconds: dict[str, list[float]]
    order: list[list[str]]
    load_start: list[float]
    load_end: list[float]
    results: dict[str, Any] = field(default_factory=dict)

    @property
    def ratios(self) -> dict[str, list[float]]:
        base = self.seconds[self.baseline]
        return {n: [t / b for b, t in zip(base, ts)] for n, ts in self.seconds.items()}

    def summary(self) -> dict[str, dict]:
        """Per case: median and quartiles of its seconds and of its per-round ratio to the baseline."""
        ratios = self.ratios
        return {n: {"seconds": quantiles(ts), f"ratio_to_{self.baseline}": quantiles(ratios[n])}
                for n, ts in self.seconds.items()}

    def to_json(self) -> dict:
        return {"baseline": self.baseline, "rounds": len(self.order), "order": self.order,
                "seconds": self.seconds, "ratios": self.ratios, "summary": self.summary(),
                "loadavg_start": self.load_start, "loadavg_end": self.load_end}

    def table(self, per: float | None = None, unit: str = "s") -> str:
        """A text table: median time (or ``per / time``, e.g. queries/s) and the ratio's median, quartiles
        and range for every case."""
        lines = []
        ratios = self.ratios
        for n, ts in self.seconds.items():
            t = statistics.median(ts)
            r = quantiles(ratios[n])
            val = f"{per / t:10.1f} {unit}" if per is not None else f"{t:10.3f} {unit}"
            lines.append(f"  {n:<34} {val}   time / {self.baseline}'s: {r['median']:.2f} "
                         f"[IQR {r['q1']:.2f}-{r['q3']:.2f}, range {r['min']:.2f}-{r['max']:.2f}]")
        return "\n".join(lines)


def interleaved(cases: dict[str, Callable[[], Any]], *, baseline: str, repeats: int, warmup: int = 1,
                clock: Callable[[], float] = time.perf_counter) -> Comparison:
    """Time every case of ``cases`` ``repeats`` times, interleaved in rounds (see the module docstring).

    Args:
        cases: name -> callable without arguments; insertion order is the order of the first round.
        baseline: the case every ratio is taken against.
        repeats: number of rounds (>= 1).
        warmup: untimed rounds before the timed ones.
        clock: seconds as a float (a fake clock in tests).
    Returns:
        a :class:`Comparison`; ``results[name]`` is what the case's last call returned.
    Raises:
        ValueError: ``baseline`` is not a case, ``repeats < 1`` or ``warmup < 0``.
    """
    if baseline not in cases:
        raise ValueError(f"baseline: {baseline!r} is not one of the cases {list(cases)}")
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats >= 1 and warmup >= 0 expected, got repeats={repeats}, warmup={warmup}")
    names = list(cases)
    results: dict[str, Any] = {}
    for _ in range(warmup):
        for n in names:
            results[n] = cases[n]()
    load_start = load_average()
    seconds: dict[str, list[float]] = {n: [] for n in names}
    order: list[list[str]] = []
    for r in range(repeats):
        rnd = names[r % len(names):] + names[: r % len(names)]
        order.append(rnd)
        for n in rnd:
            t0 = clock()
            results[n] = cases[n]()
            seconds[n].append(clock() - t0)
    return Comparison(baseline, seconds, order, load_start, load_average(), results)


class Burners:
    """``count`` CPU-burning child processes (``python -c "while 1: pass"``) at niceness ``nice``, for the
    life of a ``with`` block: a reproducible extra load (``count = 1`` on 2 cores: the other core busy).
    Each child is ended by its own process id on exit."""

    def __init__(self, count: int = 0, nice: int = 0):
        if count < 0 or not (0 <= nice <= 19):
            raise ValueError(f"burners: count >= 0 and nice in 0..19 expected, got count={count}, nice={nice}")
        self.count, self.nice = count, nice
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> "Burners":
        for _ in range(self.count):
            self.procs.append(subprocess.Popen([sys.executable, "-c", f"import os; os.nice({self.nice})\nwhile 1: pass"]))
        if self.count:
            time.sleep(1.0)  # let them start spinning
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []

    def describe(self) -> str:
        return f"{self.count} CPU burner(s) at nice {self.nice}" if self.count else "no burners"
