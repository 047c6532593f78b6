"""Timing of training steps on one device, shared by the GPU diagnostics.

Role: the one warm-up / synchronise / time loop behind :func:`initlab.realdata.gpu_smoke.splade_check` and
:func:`initlab.realdata.lra.gpu_check.measure`. What a step does and how its FLOPs are counted stays with
the caller.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

__all__ = ["TimedSteps", "time_steps"]


@dataclass(frozen=True)
class TimedSteps:
    """Outcome of :func:`time_steps`.

    Attributes:
        seconds: wall time of the timed steps (warm-up excluded), seconds.
        last: what the last timed ``step()`` returned (``None`` when ``steps`` is 0).
        peak_mem_gib: peak CUDA memory allocated during the timed steps, GiB; ``None`` off CUDA.
    """

    seconds: float
    last: Any
    peak_mem_gib: float | None


def time_steps(step: Callable[[], Any], steps: int, *, warmup: int, use_cuda: bool) -> TimedSteps:
    """Run ``warmup`` untimed calls of ``step``, then time ``steps`` calls.

    On CUDA the device is synchronised before the clock starts and after the last step, and the peak
    memory counter is reset after the warm-up, so the peak is that of the timed steps.
    """
    for _ in range(warmup):
        step()
    if use_cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    last = None
    for _ in range(steps):
        last = step()
    if use_cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() / 2**30 if use_cuda else None
    return TimedSteps(seconds, last, peak)
