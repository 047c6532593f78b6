"""The claim functions of initlab.evidence (SPT, theory, CPU ListOps) on hand-made raw numbers: editing the
numbers (never a saved word) changes the verdict."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from initlab.realdata.lra import claims as lra_claims
from initlab.synthetic.spt import claims as spt_claims
from initlab.theorycheck.verify import claims as theory_claims
from initlab.evidence.rules import INCONCLUSIVE, NOT, NOT_RUN, PARTLY, REPRODUCED

ROOT = Path(__file__).resolve().parents[3]
TH = spt_claims.SPTThresholds()


def raw(**conds):
    """``raw`` from per-condition lists of test accuracies (seeds 0..n-1; proximity 0.05 unless given)."""
    out = {}
    for name, accs in conds.items():
        out[name] = {s: {"test_acc": a, "prox_start": 0.05, "prox_end": 0.05} for s, a in enumerate(accs)}
    return out


SCRATCH = [0.50, 0.52, 0.49, 0.51, 0.50]


def test_spt_gain_words_follow_the_numbers():
    r = raw(scratch=SCRATCH, spt=[0.90, 0.85, 0.95, 0.88, 0.92])
    assert spt_claims.spt_gain(r, TH).word == REPRODUCED
    r["spt"] = copy.deepcopy(r["scratch"])  # SPT equal to scratch, seed by seed
    assert spt_claims.spt_gain(r, TH).word == NOT
    assert spt_claims.spt_gain(raw(scratch=SCRATCH), TH).word == NOT_RUN


def test_share_and_equivalence_claims():
    r = raw(scratch=SCRATCH, spt=[0.90, 0.85, 0.95, 0.88, 0.92], hybrid_qkvo=[0.80, 0.76, 0.84, 0.79, 0.82],
            hybrid_qk=[0.50, 0.53, 0.48, 0.51, 0.50], frozen_attn=[0.505, 0.515, 0.495, 0.505, 0.505])
    assert spt_claims.qkvo(r, TH).word == REPRODUCED
    assert spt_claims.qk(r, TH).word == NOT
    assert spt_claims.frozen_attn(r, TH).word == REPRODUCED
    r["frozen_attn"] = {s: {**v, "test_acc": v["test_acc"] - 0.10} for s, v in r["scratch"].items()}
    assert spt_claims.frozen_attn(r, TH).word == NOT


def test_proximity_needs_both_parts():
    r = raw(scratch=SCRATCH, spt=[0.9] * 5)
    for s, v in r["spt"].items():
        v["prox_start"] = 0.6 + 0.01 * s
    for s, v in r["scratch"].items():
        v["prox_end"] = 0.05 + 0.001 * s
    assert spt_claims.proximity(r, TH).word == REPRODUCED
    for s, v in r["scratch"].items():  # label training forms the pattern too
        v["prox_end"] = 0.4 + 0.01 * s
    assert spt_claims.proximity(r, TH).word == PARTLY


def test_claims_pair_only_shared_seeds():
    r = raw(scratch=SCRATCH[:3], spt=[0.9, 0.9, 0.9, 0.9, 0.9])  # seeds of the condition missing in the control
    with pytest.raises(ValueError, match="share their seeds"):
        spt_claims.spt_gain(r, TH)
    assert spt_claims.spt_gain(raw(scratch=SCRATCH, spt=[0.9, 0.9, 0.9]), TH).n == 3  # first 3 seeds of scratch


def test_every_claim_has_a_function_and_thresholds_are_checked():
    r = raw(scratch=SCRATCH, spt=[0.90, 0.85, 0.95, 0.88, 0.92])
    out = spt_claims.evaluate_all(r, TH)
    assert list(out) == [c.id for c in spt_claims.CLAIMS]
    assert out["depth"].word == NOT_RUN and out["cross_data"].word == NOT_RUN
    with pytest.raises(ValueError, match="min_gain"):
        spt_claims.SPTThresholds(min_gain=0.0)
    with pytest.raises(KeyError, match="unknown"):
        spt_claims.by_id("nope")


def test_theory_claim_is_recomputed_from_the_errors():
    report = json.loads((ROOT / "docs/results/theory_verify.json").read_text())
    assert theory_claims.theorem(report).word == REPRODUCED
    bad = copy.deepcopy(report)
    st = next(s for s in bad["statements"] if s["statement"] == "T2")
    check = next(c for c in st["checks"].values() if "tolerance_rel" in c)
    check["max_rel_error"] = 10 * check["tolerance_rel"]  # an error above its tolerance, word left PASS
    with pytest.raises(theory_claims.TheoryRecordError, match="T2: saved PASS"):
        theory_claims.theorem(bad)
    st["verdict"] = "FAIL"
    v = theory_claims.theorem(bad)
    assert v.word == PARTLY and "T2" in v.reason  # T1 and T4 still pass


def test_listops_claim():
    s = {"per_seed": [{"spt_test_acc": 0.39, "scratch_test_acc": 0.37}, {"spt_test_acc": 0.36, "scratch_test_acc": 0.37},
                      {"spt_test_acc": 0.38, "scratch_test_acc": 0.35}]}
    v = lra_claims.listops_gain(s)
    assert v.word == INCONCLUSIVE and v.seeds_to_decide is not None
    for row in s["per_seed"]:
        row["spt_test_acc"] = row["scratch_test_acc"] + 0.10 + 0.001 * row["scratch_test_acc"]
    assert lra_claims.listops_gain(s).word == REPRODUCED
    assert lra_claims.listops_gain({"per_seed": []}).word == NOT_RUN
