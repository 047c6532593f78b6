"""The machine and the cost model: how many workers, how long a plan takes (:func:`estimate`).

Part of the executor (:mod:`initlab.executor.core` describes it as a whole).
"""

from __future__ import annotations

import math
import os
import time
from typing import Callable, Mapping, Sequence

from initlab.executor.cells import Cell, dependency_order
from initlab.textio import read_text

__all__ = ['default_workers', 'estimate', 'makespan', 'REFERENCE_SPEED_SECONDS', 'measure_speed', 'format_seconds']


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


def estimate(cells: Sequence[Cell], workers: int, *, speed: float = 1.0, startup: float = 0.0) -> tuple[float, float]:
    """``(expected, at most)`` seconds of wall time to run ``cells`` on ``workers`` single-threaded workers.

    The executor's own order (:func:`makespan`): whenever a worker is free it takes the first cell, in the given order,
    whose ``needs`` (among ``cells``; others count as finished) have ended; its duration is
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
    return (makespan(order, workers, lambda c: c.expected_seconds * speed, busy=busy),
            makespan(order, workers, lambda c: c.max_seconds * speed, busy=busy))


def makespan(order: Sequence[Cell], workers: int, seconds: Callable[[Cell], float],
             busy: Sequence[float] = (), ends: Mapping[str, float] | None = None) -> float:
    """Seconds until every cell of ``order`` has ended, handed out as the executor hands them (the local pool of
    :mod:`initlab.executor.local`: one cell per free worker, the first in plan order whose needs have ended): whenever
    a worker is free, it takes the first cell of ``order`` whose ``needs`` have ended by then, so a cell still waiting
    for its needs does not hold a worker that a later, ready cell can use; a worker with no ready cell waits for the
    next one. ``order`` is dependency-ordered (:func:`initlab.executor.cells.dependency_order`); a cell's duration is
    ``seconds(cell)``. ``busy``: seconds until each worker already busy is free (more entries than ``workers``:
    more running cells, all counted); ``ends``: the end times of cells already started or finished, which their
    dependants wait for; a need in neither ``order`` nor ``ends`` counts as finished."""
    free = sorted(list(busy) + [0.0] * max(0, workers - len(busy)))[:max(workers, len(busy))]
    end: dict[str, float] = dict(ends or {})
    todo = {c.name for c in order}
    pending = list(order)
    span = max(free, default=0.0) if busy else 0.0

    def ready_at(c: Cell) -> float | None:  # None: a need in ``order`` not handed out yet
        if any(n in todo and n not in end for n in c.needs):
            return None
        return max((end[n] for n in c.needs if n in end), default=0.0)

    while pending:
        i = min(range(len(free)), key=lambda j: free[j])
        first, soonest = None, math.inf
        for k, c in enumerate(pending):
            r = ready_at(c)
            if r is not None and r <= free[i]:
                first = k
                break
            if r is not None:
                soonest = min(soonest, r)
        if first is None:  # nothing ready: this worker waits for the first cell to become ready (the first pending
            free[i] = soonest  # cell's needs are all handed out, so some cell becomes ready)
            continue
        c = pending.pop(first)
        end[c.name] = free[i] = free[i] + seconds(c)
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
