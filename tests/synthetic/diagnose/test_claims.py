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


def test_the_listops_example_is_judged_from_the_saved_numbers_outside_the_preregistered_claim():
    """docs/diagnose.md's ListOps example predicts "helps"; its row is computed from the saved diagnosis and the CPU
    ListOps run's per-seed accuracies by the claim's own 5-point rule, never typed."""
    from initlab.synthetic.diagnose import claims

    diag = {"prediction": {"spt_helps": True}}
    undecided = {"per_seed": [{"seed": 10, "spt_test_acc": 0.390, "scratch_test_acc": 0.370},
                              {"seed": 11, "spt_test_acc": 0.351, "scratch_test_acc": 0.365},
                              {"seed": 12, "spt_test_acc": 0.386, "scratch_test_acc": 0.353}]}
    v = claims.listops_part(diag, undecided)
    assert v.word == "inconclusive" and v.estimate == pytest.approx(0.013, abs=1e-9)
    gained = {"per_seed": [{"seed": s, "spt_test_acc": 0.5 + d, "scratch_test_acc": 0.3}
                           for s, d in ((1, 0.00), (2, 0.01), (3, 0.02))]}
    assert claims.listops_part(diag, gained).word == "reproduced"  # the prediction right: a 20-point gain
    assert claims.listops_part({"prediction": {"spt_helps": False}}, gained).word == "not reproduced"
    no_gain = {"per_seed": [{"seed": s, "spt_test_acc": 0.3 + d, "scratch_test_acc": 0.3}
                            for s, d in ((1, 0.000), (2, 0.001), (3, -0.001))]}
    assert claims.listops_part(diag, no_gain).word == "not reproduced"


def test_the_diagnosis_row_reads_the_listops_example_from_the_saved_files():
    from pathlib import Path

    from initlab.synthetic.diagnose import claims
    from initlab.textio import read_json

    res = Path(__file__).resolve().parents[3] / "docs" / "results"
    r = {f: read_json(res / f) for f in (claims.DIAGNOSE, claims.LISTOPS_DIAGNOSIS, claims.LISTOPS_RUN)}
    assert r[claims.LISTOPS_DIAGNOSIS]["prediction"]["spt_helps"] is True
    row = claims.diagnose_row(r)
    assert "the ListOps example of docs/diagnose.md (predicted helps)" in row and "+1.3 [-4.7, +7.3]" in row
    assert "the prediction is undecided" in row
