"""initlab.evidence.rules: every word of every rule, tolerances at the thresholds, all-of combination."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from initlab.evidence import rules
from initlab.evidence.rules import INCONCLUSIVE, NOT, NOT_RUN, PARTLY, REPRODUCED, Verdict


def shifted(center: float, half: float, n: int = 5) -> np.ndarray:
    """Per-seed values whose 95 % t-interval is exactly ``center ± half``."""
    z = np.array([-1.0, 1.0, -0.5, 0.5, 0.0][:n])
    z = (z - z.mean()) / z.std(ddof=1)
    from initlab.evidence.stats import t_quantile

    sd = half * math.sqrt(n) / t_quantile(0.975, n - 1)
    return center + sd * z


@pytest.mark.parametrize("center,half,word", [
    (0.30, 0.10, REPRODUCED),  # [0.20, 0.40] above 0.05
    (0.03, 0.01, PARTLY),  # [0.02, 0.04]: real, smaller than 0.05
    (0.00, 0.03, NOT),  # [-0.03, 0.03]: the 5-point gain is excluded
    (0.05, 0.10, INCONCLUSIVE),  # contains 0.05
    (0.10, 0.06, INCONCLUSIVE),  # [0.04, 0.16] contains 0.05
])
def test_gain_words(center, half, word):
    v = rules.gain(shifted(center, half), min_gain=0.05, tol=0.002)
    assert v.word == word
    assert v.lo == pytest.approx(center - half) and v.hi == pytest.approx(center + half)
    if word == INCONCLUSIVE:
        assert v.margin < 0
    else:
        assert v.margin >= 0.002


def test_an_interval_end_within_tol_of_the_threshold_is_inconclusive():
    """lo = min_gain + tol / 2 would read 'reproduced' on a point rule; here it is inconclusive."""
    v = rules.gain(shifted(0.05 + 0.001 + 0.05, 0.05), min_gain=0.05, tol=0.002)
    assert v.lo == pytest.approx(0.051) and v.word == INCONCLUSIVE


@given(st.floats(-1e-9, 1e-9))
def test_float_noise_cannot_flip_a_word(eps):
    """The committed confirmatory-style numbers, perturbed by 1e-9: the word stays the same."""
    d = shifted(0.35, 0.16)
    assert rules.gain(d + eps, min_gain=0.05, tol=0.002).word == rules.gain(d, min_gain=0.05, tol=0.002).word == REPRODUCED


def test_one_seed_is_inconclusive_with_no_count():
    v = rules.gain([0.4], min_gain=0.05, tol=0.002)
    assert v.word == INCONCLUSIVE and v.seeds_to_decide is None and v.n == 1


def test_inconclusive_gain_names_a_seed_count_that_would_decide():
    v = rules.gain(shifted(0.10, 0.08, 3), min_gain=0.05, tol=0.002)
    assert v.word == INCONCLUSIVE and v.seeds_to_decide is not None and v.seeds_to_decide > 3


@pytest.mark.parametrize("center,half,word", [
    (0.0, 0.01, REPRODUCED),  # 90 % interval [-0.01, 0.01] inside ±0.03
    (0.06, 0.01, NOT),  # [0.05, 0.07] beyond +0.03
    (-0.06, 0.01, NOT),
    (-0.02, 0.03, INCONCLUSIVE),  # [-0.05, 0.01] crosses -0.03
])
def test_equivalence_words(center, half, word):
    from initlab.evidence.stats import t_quantile

    d = shifted(center, half * t_quantile(0.975, 4) / t_quantile(0.95, 4))  # 90 % half-width = half
    v = rules.equivalence(d, margin=0.03, tol=0.002)
    assert v.word == word and v.level == pytest.approx(0.90)
    assert v.lo == pytest.approx(center - half) and v.hi == pytest.approx(center + half)


def test_share_words():
    full = np.array([0.30, 0.40, 0.35, 0.45, 0.38])
    assert rules.share(0.8 * full, full, min_share=0.5, tol=0.01).word == REPRODUCED
    assert rules.share(0.2 * full + np.array([0, 0.01, -0.01, 0.0, 0.0]), full, min_share=0.5, tol=0.01).word == PARTLY
    assert rules.share(np.array([0.02, -0.03, 0.01, -0.02, 0.0]), full, min_share=0.5, tol=0.01).word == NOT
    noisy = np.array([0.3, 0.05, 0.25, 0.1, 0.2])
    v = rules.share(noisy, full, min_share=0.5, tol=0.01)
    assert v.word == INCONCLUSIVE and v.lo < 0.5 < v.hi


def test_share_without_a_significant_full_gain():
    v = rules.share([0.1, 0.0, 0.1, 0.0, 0.05], [0.2, -0.1, 0.3, -0.2, 0.05], min_share=0.5, tol=0.01)
    assert v.word == INCONCLUSIVE and "not significantly above 0" in v.reason
    v = rules.share([0.1, 0.0, 0.1, 0.0, 0.05], [-0.2, -0.3, -0.25, -0.3, -0.2], min_share=0.5, tol=0.01)
    assert v.word == NOT and "nothing to share" in v.reason


def V(word: str, n: int = 5, need: int | None = None) -> Verdict:
    return Verdict(word, "gain", n=n, seeds_to_decide=need)


@pytest.mark.parametrize("words,out", [
    ((REPRODUCED, REPRODUCED), REPRODUCED),
    ((REPRODUCED, NOT), PARTLY),
    ((NOT, NOT), NOT),
    ((PARTLY, NOT), PARTLY),
    ((REPRODUCED, INCONCLUSIVE), INCONCLUSIVE),  # all reproduced or partly: depends on the open part
    ((REPRODUCED, NOT, INCONCLUSIVE), PARTLY),  # partly whatever the open part turns out to be
    ((NOT, INCONCLUSIVE), INCONCLUSIVE),
    ((REPRODUCED, NOT_RUN), NOT_RUN),
])
def test_all_of(words, out):
    assert rules.all_of([V(w, need=9 if w == INCONCLUSIVE else None) for w in words]).word == out


def test_all_of_seed_count_is_the_largest_open_part():
    v = rules.all_of([V(INCONCLUSIVE, need=7), V(INCONCLUSIVE, need=12), V(REPRODUCED)])
    assert v.word == INCONCLUSIVE and v.seeds_to_decide == 12


def test_checks_and_bad_words():
    assert rules.checks({"T1": True, "T2": True}).word == REPRODUCED
    v = rules.checks({"T1": True, "T2": False})
    assert v.word == NOT and "T2" in v.reason
    with pytest.raises(ValueError, match="word"):
        Verdict("confirmed", "gain")
    with pytest.raises(ValueError, match="share their seeds"):
        rules.paired_differences({1: 0.5, 2: 0.6}, {1: 0.5, 3: 0.6}, "spt - scratch")


def test_planned_seeds_match_the_power_functions():
    from initlab.evidence import stats

    big = rules.gain(shifted(0.30, 0.10), min_gain=0.05, tol=0.002)
    assert rules.planned_seeds(big) == stats.seeds_for_gain(big.estimate, big.sd, 0.05, tol=0.002)
    small = rules.gain(shifted(0.03, 0.01), min_gain=0.05, tol=0.002)  # partly: off 0 and off 0.05
    assert rules.planned_seeds(small) == max(stats.seeds_for_gain(small.estimate, small.sd, t, tol=0.002) for t in (0.0, 0.05))
    eq = rules.equivalence(shifted(0.0, 0.01), margin=0.03, tol=0.002)
    assert rules.planned_seeds(eq) == stats.seeds_for_equivalence(0.0, eq.sd, 0.03, tol=0.002)
    on = rules.gain(shifted(0.05, 0.05), min_gain=0.05, tol=0.002)  # the estimate sits on the threshold
    assert rules.planned_seeds(on) is None
    both = rules.all_of([big, small])
    assert rules.planned_seeds(both) == max(rules.planned_seeds(big), rules.planned_seeds(small))


def test_a_condition_on_fewer_seeds_pairs_with_its_control_on_those_seeds():
    """``seed_counts`` runs a condition on the first n seeds only: it pairs with its control on those seeds;
    a share pairs both gains on the seeds they share."""
    from initlab.synthetic.spt import claims as sc

    assert rules.paired_differences({1: 0.6, 2: 0.7}, {1: 0.5, 2: 0.5, 3: 0.5}, "x") == pytest.approx([0.1, 0.2])
    raw = {"scratch": {s: {"test_acc": 0.5} for s in range(6)},
           "spt": {s: {"test_acc": 0.9 + 0.01 * s} for s in range(6)},
           "hybrid_qk": {s: {"test_acc": 0.7 + 0.01 * s} for s in range(3)}}
    th = sc.SPTThresholds()
    v = sc.qk(raw, th)
    assert v.n == 3 and v.estimate == pytest.approx(0.21 / 0.41)  # seeds 0-2 of spt only
    assert sc.spt_gain(raw, th).n == 6
