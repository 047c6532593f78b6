"""initlab.evidence.stats: intervals against scipy and closed forms, Fieller's special cases, seed counts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from initlab.evidence import stats

finite = st.floats(-1.0, 1.0, allow_nan=False, allow_infinity=False)
samples = st.lists(finite, min_size=2, max_size=12)


@given(samples)
def test_t_interval_matches_scipy(d):
    from scipy import stats as ss

    iv = stats.t_interval(d, 0.95)
    a = np.asarray(d)
    sem = a.std(ddof=1) / math.sqrt(len(a))
    if sem == 0:
        assert iv.lo == iv.hi == pytest.approx(a.mean())
        return
    lo, hi = ss.t.interval(0.95, len(a) - 1, loc=a.mean(), scale=sem)
    assert iv.lo == pytest.approx(lo, abs=1e-12) and iv.hi == pytest.approx(hi, abs=1e-12)
    assert iv.lo <= iv.estimate <= iv.hi


def test_one_seed_gives_no_interval():
    iv = stats.t_interval([0.3])
    assert (iv.lo, iv.hi, iv.n) == (-math.inf, math.inf, 1) and not iv.bounded


@given(samples)
def test_tost_interval_is_the_90_percent_t_interval(d):
    assert stats.tost_interval(d, 0.05) == stats.t_interval(d, 0.90)


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="d: expected a non-empty"):
        stats.t_interval([])
    with pytest.raises(ValueError, match="finite"):
        stats.t_interval([0.1, math.nan])
    with pytest.raises(ValueError, match="level"):
        stats.t_interval([0.1, 0.2], level=1.5)
    with pytest.raises(ValueError, match="equal length"):
        stats.fieller_interval([0.1, 0.2], [0.1, 0.2, 0.3])


@given(st.lists(st.floats(0.05, 1.0), min_size=3, max_size=10), st.floats(-2.0, 2.0))
def test_fieller_exact_proportion_is_a_point(b, c):
    """a = c b seed by seed: every (a, b) lies on the line, so the Fieller set is {c}."""
    b = np.asarray(b)
    if b.std() < 1e-3:  # a constant b makes the quadratic degenerate in a different way (tested below)
        return
    iv, tb = stats.fieller_interval(c * b, b), stats.t_interval(b)
    if tb.lo <= 0:  # the denominator is not significantly above 0: the set is unbounded
        assert not iv.bounded
        return
    assert iv.bounded and iv.lo == pytest.approx(c, abs=1e-6) and iv.hi == pytest.approx(c, abs=1e-6)


def test_fieller_constant_denominator_is_the_scaled_t_interval():
    a = np.array([0.1, 0.3, 0.25, 0.4, 0.2])
    b = np.full(5, 0.5)
    iv, t = stats.fieller_interval(a, b), stats.t_interval(a)
    assert iv.lo == pytest.approx(t.lo / 0.5) and iv.hi == pytest.approx(t.hi / 0.5)
    assert iv.estimate == pytest.approx(a.mean() / 0.5)


def test_fieller_unbounded_when_the_denominator_is_not_significant():
    b = np.array([0.2, -0.1, 0.3, -0.2, 0.05])  # mean 0.05, t-interval contains 0
    iv = stats.fieller_interval([0.1, 0.0, 0.2, 0.1, 0.0], b)
    assert not iv.bounded and stats.t_interval(b).lo < 0 < stats.t_interval(b).hi


def test_fieller_hand_computed():
    """A worked example: the roots of A r^2 - 2 B r + C computed by hand from the sample moments."""
    a, b = np.array([0.2, 0.1, 0.3, 0.25]), np.array([0.4, 0.35, 0.5, 0.45])
    n, t2 = 4, stats.t_quantile(0.975, 3) ** 2
    saa, sbb, sab = a.var(ddof=1), b.var(ddof=1), np.cov(a, b, ddof=1)[0, 1]
    A, B, C = b.mean() ** 2 - t2 * sbb / n, a.mean() * b.mean() - t2 * sab / n, a.mean() ** 2 - t2 * saa / n
    lo, hi = (B - math.sqrt(B * B - A * C)) / A, (B + math.sqrt(B * B - A * C)) / A
    iv = stats.fieller_interval(a, b)
    assert (iv.lo, iv.hi) == pytest.approx((lo, hi)) and lo < a.mean() / b.mean() < hi


@pytest.mark.slow
def test_fieller_coverage_by_simulation():
    """Nominal 95 % coverage of the true ratio for correlated normal pairs (n = 6), within Monte Carlo error."""
    rng = np.random.default_rng(0)
    hits, total = 0, 4000
    for _ in range(total):
        b = 0.35 + 0.1 * rng.standard_normal(6)
        a = 0.5 * b + 0.05 * rng.standard_normal(6)  # true ratio of the means: 0.5
        iv = stats.fieller_interval(a, b)
        hits += iv.lo <= 0.5 <= iv.hi
    assert abs(hits / total - 0.95) < 0.015


def test_seeds_for_gain_reaches_the_power_and_not_one_seed_earlier():
    n = stats.seeds_for_gain(0.35, 0.128, 0.05)
    assert n is not None
    assert stats.power_one_sided(n, 0.30, 0.128, 0.95) >= 0.8 > stats.power_one_sided(n - 1, 0.30, 0.128, 0.95) or n == 2


@given(st.floats(-0.5, 0.5), st.floats(0.0, 0.5), st.floats(-0.1, 0.1), st.floats(0.0, 0.02))
def test_seed_counts_equal_the_slow_reference_one_count_at_a_time(mean, sd, threshold, tol):
    """The power searches evaluate every count at once; the slow reference tries the counts one by one."""

    def first(enough):
        return next((n for n in range(2, stats.MAX_SEEDS + 1) if enough(n)), None)

    effect, margin = abs(mean - threshold) - tol, abs(threshold) + 0.05 - tol
    gain = None if effect <= 0 else 2 if sd == 0 else first(lambda n: stats.power_one_sided(n, effect, sd, 0.95) >= 0.8)
    assert stats.seeds_for_gain(mean, sd, threshold, tol=tol) == gain
    equiv = None if abs(mean) >= margin else 2 if sd == 0 else first(
        lambda n: stats.power_one_sided(n, margin + mean, sd, 0.9) + stats.power_one_sided(n, margin - mean, sd, 0.9) - 1 >= 0.8)
    assert stats.seeds_for_equivalence(mean, sd, abs(threshold) + 0.05, tol=tol) == equiv


@given(st.floats(0.01, 0.3), st.floats(0.01, 0.2))
def test_seeds_for_gain_falls_with_the_effect(effect, sd):
    small, big = stats.seeds_for_gain(effect, sd, 0.0), stats.seeds_for_gain(2 * effect, sd, 0.0)
    if small is not None:
        assert big is not None and big <= small


def test_seed_counts_that_cannot_be_decided():
    assert stats.seeds_for_gain(0.05, 0.02, 0.05) is None  # the mean sits on the threshold
    assert stats.seeds_for_gain(0.051, 0.02, 0.05, tol=0.002) is None  # within the tolerance
    assert stats.seeds_for_gain(0.3, math.nan, 0.05) is None  # sd unknown (one seed)
    assert stats.seeds_for_equivalence(0.04, 0.02, 0.03) is None  # outside the margin: not an equivalence
    assert stats.seeds_for_equivalence(0.0, 0.0, 0.03) == 2


def test_seeds_for_equivalence_is_conservative():
    """Simulated TOST power at the returned count is at least the requested 0.8 (the Bonferroni bound is low)."""
    mean, sd, margin = 0.005, 0.025, 0.03
    n = stats.seeds_for_equivalence(mean, sd, margin)
    rng = np.random.default_rng(1)
    ok = 0
    for _ in range(2000):
        iv = stats.tost_interval(mean + sd * rng.standard_normal(n))
        ok += -margin < iv.lo and iv.hi < margin
    assert ok / 2000 >= 0.78
