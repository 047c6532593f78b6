"""Claim-by-claim verdicts of the synthetic SPT experiments, computed from per-seed accuracies.

Every claim compares a condition with its control on the same seeds (same data, same init), so the
statistic is the *paired* difference ``d_s = acc(condition, s) - acc(control, s)`` over seeds s, with
its mean and a two-sided 95 % Student-t interval ``mean ± t_{0.975, n-1} · sd / sqrt(n)``.

Verdict rules (thresholds in :class:`VerdictThresholds`, fixed in the run's config before the run):

* **gain** ("condition beats control"): *reproduced* if the interval's lower end is > 0 and the mean is
  ≥ ``min_gain``; *partly* if the mean is > 0 and one of the two holds; *not* otherwise.
* **equivalence** ("condition ≈ control"): *reproduced* if the whole interval lies inside
  ``[-margin, margin]``; *partly* if only the mean does; *not* otherwise.
* **share** ("condition recovers most of SPT's gain"): ``share = mean(cond - scratch) / mean(spt -
  scratch)``; requires the SPT gain itself to be *reproduced*, else *not* (the share is not judged);
  *reproduced* if ``share >= min_share`` and the condition's own gain over scratch has a lower interval
  end > 0; *partly* if the condition's gain has a lower end > 0 but ``share < min_share``; *not*
  otherwise.
* **all-of** (several gains, e.g. every depth): *reproduced* if every part is reproduced; *partly* if
  at least one part is reproduced or partly; *not* otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["VerdictThresholds", "paired", "gain_verdict", "equivalence_verdict", "share_verdict", "all_of",
           "REPRODUCED", "PARTLY", "NOT"]

REPRODUCED, PARTLY, NOT = "reproduced", "partly", "not reproduced"


@dataclass(frozen=True)
class VerdictThresholds:
    """Thresholds of the verdict rules, as accuracy fractions (0.05 = 5 points)."""

    min_gain: float = 0.05  # a gain claim needs a mean paired gain of at least this
    margin: float = 0.03  # an equivalence claim needs the 95 % interval inside ± margin
    min_share: float = 0.5  # "most of the gain" = at least this share of the spt - scratch gap

    def __post_init__(self) -> None:
        for name in ("min_gain", "margin", "min_share"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0 < v <= 1):
                raise ValueError(f"VerdictThresholds.{name}: expected a float in (0, 1], got {v!r}")


def _t975(df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, df))


def paired(cond: Sequence[float], control: Sequence[float]) -> dict[str, float]:
    """Paired difference ``cond - control`` over seeds: mean, sd, n, 95 % t-interval (lo, hi).

    With one seed the interval is ``(-inf, inf)`` (nothing can be concluded).

    Raises:
        ValueError: different lengths or no seeds.
    """
    a, b = np.asarray(cond, dtype=float), np.asarray(control, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError(f"cond/control: expected equal-length non-empty per-seed lists, got {a.shape} and {b.shape}")
    d = a - b
    n, mean = len(d), float(d.mean())
    if n == 1:
        return {"mean": mean, "sd": float("nan"), "n": 1, "lo": -math.inf, "hi": math.inf}
    sd = float(d.std(ddof=1))
    half = _t975(n - 1) * sd / math.sqrt(n)
    return {"mean": mean, "sd": sd, "n": n, "lo": mean - half, "hi": mean + half}


def gain_verdict(p: dict[str, float], th: VerdictThresholds) -> str:
    """Verdict of "condition beats control" from a :func:`paired` result."""
    sig, big = p["lo"] > 0, p["mean"] >= th.min_gain
    if sig and big:
        return REPRODUCED
    if p["mean"] > 0 and (sig or big):
        return PARTLY
    return NOT


def equivalence_verdict(p: dict[str, float], th: VerdictThresholds) -> str:
    """Verdict of "condition ≈ control" from a :func:`paired` result."""
    if -th.margin <= p["lo"] and p["hi"] <= th.margin:
        return REPRODUCED
    if abs(p["mean"]) <= th.margin:
        return PARTLY
    return NOT


def share_verdict(cond_gain: dict[str, float], spt_gain: dict[str, float], th: VerdictThresholds) -> tuple[str, float]:
    """Verdict of "condition recovers most of SPT's gain"; returns ``(verdict, share)`` (share NaN if
    SPT's own gain is not reproduced)."""
    if gain_verdict(spt_gain, th) != REPRODUCED:
        return NOT, float("nan")
    share = cond_gain["mean"] / spt_gain["mean"]
    if cond_gain["lo"] > 0 and share >= th.min_share:
        return REPRODUCED, share
    if cond_gain["lo"] > 0:
        return PARTLY, share
    return NOT, share


def all_of(verdicts: Sequence[str]) -> str:
    """Combine part verdicts: all reproduced -> reproduced; any reproduced/partly -> partly; else not."""
    if not verdicts:
        raise ValueError("verdicts: expected at least one part")
    if all(v == REPRODUCED for v in verdicts):
        return REPRODUCED
    if any(v in (REPRODUCED, PARTLY) for v in verdicts):
        return PARTLY
    return NOT
