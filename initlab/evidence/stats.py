"""Interval statistics behind every verdict: paired t-intervals, Fieller ratio intervals, TOST, seed counts.

Imported as ``initlab.evidence.stats``. Every function takes raw per-seed numbers (no saved summaries) and
is deterministic (no resampling), so a verdict recomputed from the same numbers on another machine agrees
to the last few bits; the verdict rules (:mod:`initlab.evidence.rules`) then compare with a stated
tolerance, so those bits cannot flip a word.

Letters: ``n`` seeds; ``d_i`` a per-seed paired difference; ``a_i, b_i`` per-seed numerator and
denominator of a ratio; ``t_q(df)`` the ``q`` quantile of Student's t with ``df`` degrees of freedom.

* :func:`t_interval` -- ``mean(d) ± t_{1-α/2}(n-1) · sd(d) / sqrt(n)`` (Student 1908), the interval of a
  paired difference.
* :func:`fieller_interval` -- the Fieller (1954) interval of ``mean(a) / mean(b)`` for paired samples:
  every ρ with ``(ā - ρ b̄)² <= t² (s_aa - 2ρ s_ab + ρ² s_bb) / n``. Bounded only when ``b̄`` is itself
  significantly non-zero at the same level; otherwise the set is unbounded and returned as
  ``(-inf, inf)``.
* :func:`tost_interval` -- the two one-sided tests of equivalence (Schuirmann 1987) at level α are the
  ``1 - 2α`` two-sided t-interval lying inside ``(-Δ, Δ)``; this returns that interval (90 % for α = 0.05).
* :func:`seeds_for_gain`, :func:`seeds_for_equivalence` -- the smallest number of seeds at which an
  interval rule decides with the requested power, if the true mean and sd were the observed ones
  (noncentral t; the equivalence power uses the Bonferroni bound ``P(A ∩ B) >= P(A) + P(B) - 1``, so the
  count is conservative).

References: Student, "The probable error of a mean", Biometrika 6 (1908); E. C. Fieller, "Some problems in
interval estimation", JRSS B 16 (1954) 175-185; D. J. Schuirmann, "A comparison of the two one-sided tests
procedure and the power approach for assessing the equivalence of average bioavailability",
J. Pharmacokinet. Biopharm. 15 (1987) 657-680.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["Interval", "t_quantile", "as_samples", "t_interval", "fieller_interval", "tost_interval", "power_one_sided",
           "seeds_for_gain", "seeds_for_equivalence", "MAX_SEEDS", "t_sf", "p_above", "p_below", "fieller_p"]

#: seed counts are searched up to this many; beyond it a claim is reported as "more than MAX_SEEDS seeds"
MAX_SEEDS = 200


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided interval at ``level`` over ``n`` seeds.

    ``sd`` is the per-seed standard deviation the interval was built from (NaN for one seed); ``lo``/``hi``
    are ``-inf``/``inf`` when nothing can be concluded (one seed, or an unbounded Fieller set).
    """

    estimate: float
    lo: float
    hi: float
    level: float
    n: int
    sd: float

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.lo) and math.isfinite(self.hi)

    def to_dict(self) -> dict[str, float]:
        return {"estimate": self.estimate, "lo": self.lo, "hi": self.hi, "level": self.level, "n": self.n, "sd": self.sd}


@functools.lru_cache(maxsize=65536)
def t_quantile(q: float, df: int) -> float:
    """``t_q(df)``, the ``q`` quantile of Student's t (scipy). Cached: a pure function, called thousands of times by
    the seed-count searches."""
    from scipy.stats import t

    return float(t.ppf(q, df))


def as_samples(values: Sequence[float], name: str) -> np.ndarray:
    """``values`` as a float64 vector ``(n,)``.

    Raises:
        ValueError: naming ``name``, for an empty, non-1-D or non-finite input.
    """
    a = np.asarray(values, dtype=np.float64)
    if a.ndim != 1 or len(a) == 0:
        raise ValueError(f"{name}: expected a non-empty list of per-seed numbers, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name}: expected finite per-seed numbers, got {a.tolist()}")
    return a


def _check_level(level: float) -> None:
    if not (isinstance(level, (int, float)) and 0.5 <= level < 1):
        raise ValueError(f"level: expected a float in [0.5, 1), got {level!r}")


def t_interval(d: Sequence[float], level: float = 0.95, name: str = "d") -> Interval:
    """Student-t interval of the mean of ``d (n,)`` (e.g. per-seed paired differences).

    One value gives ``(-inf, inf)``; ``n`` equal values give a zero-width interval.

    Raises:
        ValueError: empty or non-finite ``d``, or ``level`` outside [0.5, 1).
    """
    _check_level(level)
    a = as_samples(d, name)
    n, mean = len(a), float(a.mean())
    if n == 1:
        return Interval(mean, -math.inf, math.inf, level, 1, math.nan)
    sd = float(a.std(ddof=1))
    half = t_quantile(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, level, n, sd)


def tost_interval(d: Sequence[float], alpha: float = 0.05, name: str = "d") -> Interval:
    """The ``1 - 2 alpha`` t-interval whose inclusion in ``(-Δ, Δ)`` is the TOST of equivalence at ``alpha``.

    Raises:
        ValueError: as :func:`t_interval`, or ``alpha`` outside (0, 0.25].
    """
    if not (isinstance(alpha, (int, float)) and 0 < alpha <= 0.25):
        raise ValueError(f"alpha: expected a float in (0, 0.25], got {alpha!r}")
    return t_interval(d, 1 - 2 * alpha, name)


def fieller_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Interval:
    """Fieller interval of ``mean(a) / mean(b)`` for paired per-seed samples ``a (n,)``, ``b (n,)``.

    With ``t = t_{(1+level)/2}(n-1)`` and the sample (co)variances ``s_aa, s_bb, s_ab`` (ddof 1), the set is
    ``{ρ : A ρ² - 2 B ρ + C <= 0}`` with ``A = b̄² - t² s_bb / n``, ``B = ā b̄ - t² s_ab / n``,
    ``C = ā² - t² s_aa / n`` (Fieller 1954). For ``A > 0`` (``b̄`` significantly non-zero) it is the
    bounded interval between the roots; otherwise it is unbounded and returned as ``(-inf, inf)``.
    ``sd`` of the result is the delta-method per-seed sd of the ratio,
    ``sqrt(s_aa - 2 r s_ab + r² s_bb) / |b̄|`` (NaN if ``b̄ = 0``).

    Raises:
        ValueError: different lengths, fewer than one seed, non-finite values, bad ``level``.
    """
    _check_level(level)
    x, y = as_samples(a, "a"), as_samples(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"a/b: expected paired per-seed lists of equal length, got {len(x)} and {len(y)}")
    n, ma, mb = len(x), float(x.mean()), float(y.mean())
    r = ma / mb if mb != 0 else math.nan
    if n == 1:
        return Interval(r, -math.inf, math.inf, level, 1, math.nan)
    c = np.cov(np.stack([x, y]), ddof=1)
    saa, sbb, sab = float(c[0, 0]), float(c[1, 1]), float(c[0, 1])
    sd = math.sqrt(max(saa - 2 * r * sab + r * r * sbb, 0.0)) / abs(mb) if mb != 0 else math.nan
    t2 = t_quantile(0.5 + level / 2, n - 1) ** 2
    A, B, C = mb * mb - t2 * sbb / n, ma * mb - t2 * sab / n, ma * ma - t2 * saa / n
    if A <= 0:
        return Interval(r, -math.inf, math.inf, level, n, sd)
    disc = max(B * B - A * C, 0.0)  # >= 0 whenever A > 0 (the estimate itself lies in the set)
    root = math.sqrt(disc)
    return Interval(r, (B - root) / A, (B + root) / A, level, n, sd)


def t_sf(t: float, df: int) -> float:
    """``P(T > t)`` for Student's t with ``df`` degrees of freedom (scipy)."""
    from scipy.stats import t as student

    return float(student.sf(t, df))


def _t_stat(d: Sequence[float], threshold: float) -> tuple[float, int]:
    a = as_samples(d, "d")
    n = len(a)
    if n < 2:
        return math.nan, n
    se = float(a.std(ddof=1)) / math.sqrt(n)
    diff = float(a.mean()) - threshold
    if se == 0:
        return (math.inf if diff > 0 else -math.inf if diff < 0 else math.nan), n
    return diff / se, n


def p_above(d: Sequence[float], threshold: float) -> float:
    """One-sided p-value of ``H0: mean(d) <= threshold`` against ``mean(d) > threshold`` (Student's t on the
    per-seed values ``d (n,)``); 1 for one seed (no test). The two-sided ``1 - α`` t-interval's lower end lies
    above ``threshold`` exactly when this p-value is below ``α / 2``."""
    t, n = _t_stat(d, threshold)
    if math.isnan(t):
        return 1.0
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    return t_sf(t, n - 1)


def p_below(d: Sequence[float], threshold: float) -> float:
    """One-sided p-value of ``H0: mean(d) >= threshold`` against ``mean(d) < threshold`` (as :func:`p_above`)."""
    return p_above([-x for x in d], -threshold)


def fieller_p(a: Sequence[float], b: Sequence[float], rho: float) -> float:
    """Two-sided p-value of ``H0: mean(a) / mean(b) = rho`` for paired samples by Fieller's pivot
    ``t = (ā - ρ b̄) / sqrt((s_aa - 2ρ s_ab + ρ² s_bb) / n)`` ~ t(n - 1) (Fieller 1954); the Fieller ``1 - α``
    set excludes ``rho`` exactly when this p-value is below ``α``. 1 for one seed."""
    x, y = as_samples(a, "a"), as_samples(b, "b")
    n = len(x)
    if n < 2:
        return 1.0
    c = np.cov(np.stack([x, y]), ddof=1)
    var = (float(c[0, 0]) - 2 * rho * float(c[0, 1]) + rho * rho * float(c[1, 1])) / n
    num = float(x.mean()) - rho * float(y.mean())
    if var <= 0:
        return 1.0 if num == 0 else 0.0
    return min(1.0, 2 * t_sf(abs(num) / math.sqrt(var), n - 1))


def power_one_sided(n: int | np.ndarray, effect: float, sd: float, level: float) -> float | np.ndarray:
    """P(the two-sided ``level`` t-interval excludes the threshold on the effect's side), true effect
    ``effect`` = mean - threshold (> 0) and per-seed sd ``sd``: ``1 - F_nct(t_c; n-1, effect sqrt(n) / sd)``.
    ``n`` a seed count (a float back) or an array of them (an array back, element by element the same numbers)."""
    from scipy.stats import nct, t

    ns = np.asarray(n)
    with np.errstate(all="ignore"):  # counts past the answer may overflow the noncentral t; they are never read
        p = nct.sf(t.ppf(0.5 + level / 2, ns - 1), ns - 1, effect * np.sqrt(ns) / sd)
    return float(p) if ns.ndim == 0 else np.asarray(p, dtype=float)


#: the seed counts the power searches try, in order
_COUNTS = np.arange(2, MAX_SEEDS + 1)


def _fewest(enough: np.ndarray) -> int | None:
    """The first count of :data:`_COUNTS` where ``enough`` holds, None where it never does."""
    hit = np.flatnonzero(enough)
    return int(_COUNTS[hit[0]]) if hit.size else None


@functools.lru_cache(maxsize=16384)
def seeds_for_gain(mean: float, sd: float, threshold: float, *, level: float = 0.95, power: float = 0.8,
                   tol: float = 0.0) -> int | None:
    """Seeds needed for the ``level`` interval of a mean to exclude ``threshold`` by more than ``tol`` with
    probability ``power``, if the true mean and per-seed sd were ``mean`` and ``sd``.

    Returns None when it cannot be decided at any count up to :data:`MAX_SEEDS`: the mean lies within
    ``tol`` of the threshold, or the sd is unknown (NaN, one seed). An sd of 0 needs 2 seeds.
    """
    effect = abs(mean - threshold) - tol
    if not math.isfinite(sd) or effect <= 0:
        return None
    if sd == 0:
        return 2
    return _fewest(power_one_sided(_COUNTS, effect, sd, level) >= power)  # every count at once: one scipy call


def seeds_for_equivalence(mean: float, sd: float, margin: float, *, alpha: float = 0.05, power: float = 0.8,
                          tol: float = 0.0) -> int | None:
    """Seeds needed for the TOST ``1 - 2 alpha`` interval to lie inside ``(-margin + tol, margin - tol)`` with
    probability ``power`` at true mean ``mean`` and sd ``sd`` (Bonferroni lower bound on the joint power:
    conservative). None if ``|mean| >= margin - tol`` (equivalence is not the likely outcome; use
    :func:`seeds_for_gain` against the margin instead) or the sd is unknown.
    """
    m = margin - tol
    if not math.isfinite(sd) or abs(mean) >= m:
        return None
    if sd == 0:
        return 2
    level = 1 - 2 * alpha
    return _fewest(power_one_sided(_COUNTS, m + mean, sd, level) + power_one_sided(_COUNTS, m - mean, sd, level) - 1 >= power)
