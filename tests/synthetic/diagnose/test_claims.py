"""initlab.synthetic.diagnose.claims on hand-made records."""

from __future__ import annotations

import math

import pytest

from initlab.synthetic.diagnose import claims as dc


def _rec(pred, share, pairs):
    return {"predicted_helps": pred, "blind_share": share,
            "seeds": {str(i): {"scratch": a, "spt": b} for i, (a, b) in enumerate(pairs)}}


def test_right_wrong_undecided_and_not_run():
    recs = {"settings": {
        "helps_right": _rec(True, 0.9, [(0.5, 0.9), (0.52, 0.93), (0.5, 0.95)]),
        "not_right": _rec(False, 0.2, [(0.9, 0.9), (0.95, 0.94), (0.97, 0.96)]),
        "helps_wrong": _rec(True, 0.95, [(0.97, 0.96), (0.99, 0.99), (0.98, 0.97)]),
        "noisy": _rec(True, 0.9, [(0.5, 0.9), (0.5, 0.5), (0.5, 0.7)]),
        "one_seed": _rec(False, 0.1, [(0.5, 0.6)]),
    }}
    words = {n: dc.part(n, r).word for n, r in recs["settings"].items()}
    assert words == {"helps_right": "reproduced", "not_right": "reproduced", "helps_wrong": "not reproduced",
                     "noisy": "inconclusive", "one_seed": "not run"}
    c = dc.confusion(recs)
    assert c["table"][("helps", "helps")] == ["helps_right"] and c["table"][("does not help", "does not help")] == ["not_right"]
    assert c["table"][("helps", "does not help")] == ["helps_wrong"]
    assert c["undecided"] == ["noisy"] and c["not_run"] == ["one_seed"]
    v = dc.predicts_gain(recs)
    assert v.word in ("partly", "inconclusive") and "one_seed" in v.reason
    right = {"settings": {k: recs["settings"][k] for k in ("helps_right", "not_right")}}
    assert dc.predicts_gain(right).word == "reproduced"
    r = dc.correlation(recs, n_resamples=199)
    assert r["n"] == 4 and -1 <= r["pearson_lo"] <= r["pearson"] <= r["pearson_hi"] <= 1
    assert not math.isnan(r["spearman_lo"])


def test_ceiling_forced_names_decided_settings_whose_scratch_left_no_room():
    recs = {"settings": {
        "helps": _rec(True, 0.9, [(0.5, 0.9), (0.52, 0.93), (0.5, 0.95)]),
        "at_ceiling": _rec(False, 0.9, [(0.96, 0.96), (0.97, 0.96), (0.95, 0.95)]),
        "below_ceiling": _rec(False, 0.2, [(0.90, 0.89), (0.93, 0.92), (0.92, 0.92)]),
        "undecided_at_ceiling": _rec(False, 0.2, [(0.96, 0.80), (0.97, 0.99), (0.99, 0.90)]),
    }}
    assert dc.CEILING == pytest.approx(1 - dc.MIN_GAIN)
    assert dc.scratch_mean(recs["settings"]["at_ceiling"]) == pytest.approx(0.96)
    assert dc.ceiling_forced(recs) == ["at_ceiling"]  # decided and at the ceiling; undecided ones are not "forced"
    assert dc.part("at_ceiling", recs["settings"]["at_ceiling"]).word == "reproduced"  # the preregistered word stays
    assert math.isnan(dc.scratch_mean({"seeds": {}}))


def test_spearman_interval_equals_the_slow_reference_bootstrap():
    """The vectorised Spearman rho of the bootstrap gives the interval of ``scipy.stats.spearmanr`` called on each
    resample in turn (the slow, obvious reference), ties and constant resamples included."""
    import numpy as np
    from scipy import stats as ss

    pairs = [(0.5, 0.9), (0.52, 0.93), (0.5, 0.95)]
    recs = {"settings": {f"s{i}": _rec(True, share, [(a, b + 0.01 * i * j) for j, (a, b) in enumerate(pairs)])
                         for i, share in enumerate([0.9, 0.2, 0.95, 0.9, 0.4, 0.4, 0.7])}}
    fast = dc.correlation(recs, n_resamples=499, seed=3)
    xs = np.array([r["blind_share"] for r in recs["settings"].values()])
    ys = np.array([100.0 * float(np.mean(dc.gains(r))) for r in recs["settings"].values()])

    def rho(x, y):
        return 0.0 if np.ptp(x) == 0 or np.ptp(y) == 0 else ss.spearmanr(x, y).statistic

    slow = ss.bootstrap((xs, ys), rho, paired=True, vectorized=False, n_resamples=499, method="percentile",
                        random_state=np.random.default_rng(3)).confidence_interval
    assert fast["spearman_lo"] == pytest.approx(slow.low, abs=1e-12) and fast["spearman_hi"] == pytest.approx(slow.high, abs=1e-12)
    assert fast["spearman"] == pytest.approx(ss.spearmanr(xs, ys).statistic, abs=1e-12)
