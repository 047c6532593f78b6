"""The synthetic SPLADE claims on hand-made raw numbers: editing a number (never a word) changes the verdict."""

from __future__ import annotations

import copy
import math

import pytest

from initlab.evidence import rules
from initlab.synthetic.splade import claims as sc
from initlab.evidence.rules import INCONCLUSIVE, NOT, NOT_RUN, PARTLY, REPRODUCED

TH = sc.SPLADEThresholds()
SEEDS = (0, 1, 2, 3)
KS = (1.0, 4.0, 16.0, 64.0)
B = 32


def _row(family, k, seed, test, select=None, mode="tied", init=2.0, final=1.0):
    return {"family": family, "mode": mode, "s": 1.0, "k": k, "seed": seed, "ndcg_select": test if select is None else select,
            "ndcg_test": test, "init_infonce": init, "final_infonce": final, "collapsed": False, "failed": False}


def _raw(high_k1=0.50, normal_far=0.30, out_far=0.85, jitter=(0.0, 0.01, -0.01, 0.005)):
    """modernbert (high-norm): k = 1 at ``high_k1``, best at k = 16 (0.85); bert (normal-norm): flat 0.85 up to
    k = 16, ``normal_far`` at k = 64 tied and ``out_far`` output-only. Per-seed ``jitter`` on every value."""
    rows, insp = [], []
    for seed, j in zip(SEEDS, jitter):
        for k in KS:
            hv = {1.0: high_k1, 4.0: 0.75, 16.0: 0.85, 64.0: 0.80}[k] + j
            rows.append(_row("modernbert", k, seed, hv, init=30.0 if k == 1.0 else 3.0, final=2.0 if k == 1.0 else 1.0))
            nv = (0.85 if k < 64 else normal_far) + j
            rows.append(_row("bert", k, seed, nv))
        rows.append(_row("bert", 1.0, seed, 0.85 + j, mode="k_output"))
        rows.append(_row("bert", 64.0, seed, out_far + j, mode="k_output"))
        thr = math.sqrt(2 * math.log(B))
        insp.append({"family": "modernbert", "s": 1.0, "seed": seed, "recommended_k": 16.0,
                     "table": [{"k": k, "score_sd": 60 * thr / k ** 2} for k in KS]})
        insp.append({"family": "bert", "s": 1.0, "seed": seed, "recommended_k": 4.0,
                     "table": [{"k": k, "score_sd": 5 * thr / k ** 2} for k in KS]})
    return {"rows": rows, "inspect": insp, "batch": B}


def test_a_clear_design_reproduces_every_claim():
    raw = _raw()
    v = sc.evaluate_all(raw, TH)
    assert v["high_norm_degrades"].word == REPRODUCED
    assert [sc.part_label(p) for p in v["high_norm_degrades"].parts] == [
        "modernbert: nDCG@10 best k − k = 1", "modernbert: initial InfoNCE − ln B", "modernbert: final InfoNCE k = 1 − best k",
        "control bert: nDCG@10 best k − k = 1 ≈ 0"]
    assert v["rescaling_fixes"].word == REPRODUCED
    assert v["over_rescaling"].word == REPRODUCED and v["over_rescaling"].estimate == pytest.approx(0.55)
    assert v["input_side"].word == REPRODUCED
    assert v["regret_inspect"].word == REPRODUCED  # the recommended k is the best k on every backbone here


def test_editing_raw_numbers_changes_the_verdicts():
    raw = _raw(high_k1=0.85)  # no degradation at k = 1 any more
    v = sc.high_norm_degrades(raw, TH)
    assert v.word in (PARTLY, NOT) and v.parts[0].word == NOT
    assert sc.rescaling_fixes(raw, TH).word == NOT
    assert sc.over_rescaling(_raw(normal_far=0.85), TH).word == NOT
    assert sc.input_side(_raw(out_far=0.30), TH).word == NOT
    # a gain of 0.05 +- seed noise: the interval holds the threshold
    noisy = _raw(normal_far=0.80, jitter=(0.0, 0.03, -0.03, 0.01))
    for r in noisy["rows"]:
        if r["family"] == "bert" and r["k"] == 64.0 and r["mode"] == "tied":
            r["ndcg_test"] += 0.04 * (-1) ** r["seed"]
    w = sc.over_rescaling(noisy, TH)
    assert w.word == INCONCLUSIVE and w.seeds_to_decide is None or w.seeds_to_decide > len(SEEDS)


def test_best_k_is_chosen_on_the_select_queries_not_the_test_ones():
    raw = _raw()
    for r in raw["rows"]:  # on the test queries k = 4 looks best, on the select queries k = 16 still is
        if r["family"] == "modernbert" and r["k"] == 4.0:
            r["ndcg_test"] = 0.99
    cells = {r["k"]: r for r in raw["rows"] if r["family"] == "modernbert" and r["seed"] == 0 and r["mode"] == "tied"}
    assert sc.best_k(cells) == 16.0
    d = sc.high_norm_degrades(raw, TH).parts[0]
    assert d.estimate == pytest.approx(0.35, abs=1e-9)  # 0.85 - 0.50 on the test queries at the select-chosen k


def test_best_k_ties_go_to_the_smaller_k_and_failed_cells_count_as_zero():
    cells = {1.0: {"ndcg_select": 0.5}, 2.0: {"ndcg_select": 0.6}, 4.0: {"ndcg_select": 0.6}, 8.0: {"ndcg_select": None}}
    assert sc.best_k(cells) == 2.0
    with pytest.raises(ValueError):
        sc.best_k({})


def test_rules_for_k():
    raw = _raw()
    assert sc.rule_k(raw, "inspect", "modernbert", 0) == 16.0
    # edge: score sd 60 thr / k^2 closest to thr in log scale at k = 8 (not in the grid): 4 (3.75 thr) vs 16 (0.23 thr)
    assert sc.rule_k(raw, "edge", "modernbert", 0) == 4.0
    # BERT scale: bert's k = 1 score sd is 5 thr; modernbert's 60 thr / k^2 closest at k = 4 (3.75 thr)
    assert sc.rule_k(raw, "bert", "modernbert", 0) == 4.0 and sc.rule_k(raw, "bert", "bert", 0) == 1.0
    assert sc.rule_k(raw, "inspect", "albert", 0) is None
    with pytest.raises(ValueError, match="rule"):
        sc.rule_k(raw, "oracle", "bert", 0)
    reg = sc.regrets(raw, "bert")
    assert reg[("modernbert", 0)] == pytest.approx(0.10) and reg[("bert", 0)] == pytest.approx(0.0)
    diff = sc.rule_difference(raw, TH, "inspect", "bert")  # inspect's regret 0 everywhere; BERT-scale's 0.10, 0
    assert diff.n == 8 and diff.estimate == pytest.approx(0.05) and diff.lo > 0 and diff.word == INCONCLUSIVE
    assert sc.shipped_rule(raw, TH) == "inspect"  # no alternative beats it
    # inspect's rule picks k = 1 for modernbert (regret 0.35 on every seed), the edge rule k = 4 (0.10); the
    # BERT-scale rule is made to pick k = 1 too (bert's k = 1 score sd set to modernbert's)
    mb = {**raw, "rows": [r for r in raw["rows"] if r["family"] == "modernbert"]}
    for i in mb["inspect"]:
        if i["family"] == "modernbert":
            i["recommended_k"] = 1.0
        else:
            i["table"] = [dict(t, score_sd=60 * math.sqrt(2 * math.log(B)) / t["k"] ** 2) for t in i["table"]]
    assert sc.rule_difference(mb, TH, "edge", "inspect").word == REPRODUCED
    assert sc.rule_difference(mb, TH, "bert", "inspect").word == NOT
    assert sc.shipped_rule(mb, TH) == "edge"


def test_missing_cells_read_not_run_never_a_guess():
    raw = _raw()
    raw["rows"] = [r for r in raw["rows"] if not (r["family"] == "bert" and r["k"] == 64.0)]
    assert sc.over_rescaling(raw, TH).word == NOT_RUN and sc.input_side(raw, TH).word == NOT_RUN
    only_bert = {**raw, "rows": [r for r in raw["rows"] if r["family"] == "bert"]}
    assert sc.high_norm_degrades(only_bert, TH).word == NOT_RUN
    assert "no high-norm family" in sc.high_norm_degrades(only_bert, TH).reason


def test_one_seed_is_inconclusive_with_no_interval():
    raw = _raw()
    raw["rows"] = [r for r in raw["rows"] if r["seed"] == 0]
    raw["inspect"] = [i for i in raw["inspect"] if i["seed"] == 0]
    v = sc.over_rescaling(raw, TH)
    assert v.word == INCONCLUSIVE and math.isinf(v.lo)
    assert "one seed gives no interval" in sc.describe_claim(v)


def test_saved_record_is_checked_against_the_numbers():
    raw = _raw()
    record = {k: v.to_dict() for k, v in sc.evaluate_all(raw, TH).items()}
    assert sc.check_record(record, raw, TH, "phase.json")["over_rescaling"].word == REPRODUCED
    edited = copy.deepcopy(raw)
    for r in edited["rows"]:
        if r["family"] == "bert" and r["k"] == 64.0 and r["mode"] == "tied":
            r["ndcg_test"] = 0.85  # numbers edited after the record was written
    with pytest.raises(rules.VerdictRecordError, match="over_rescaling"):
        sc.check_record(record, edited, TH, "phase.json")


def test_as_raw_reads_a_phase_json_and_thresholds_are_checked():
    phase = {"config": {"init_batch": 32}, "rows": [dict(r, extra=1) for r in _raw()["rows"]],
             "inspect": [dict(i, rule="x") for i in _raw()["inspect"]]}
    raw = sc.as_raw(phase)
    assert sc.evaluate_all(raw, TH)["over_rescaling"].word == REPRODUCED and "extra" not in raw["rows"][0]
    with pytest.raises(ValueError, match="min_gain"):
        sc.SPLADEThresholds(min_gain=0.0)
    with pytest.raises(ValueError, match="both"):
        sc.SPLADEThresholds(high_norm=("bert",), normal_norm=("bert",))


def test_describe_claim_names_parts_units_and_intervals():
    text = sc.describe_claim(sc.high_norm_degrades(_raw(), TH))
    assert text.startswith("**reproduced**: modernbert: nDCG@10 best k − k = 1: **reproduced**: +0.350 [")
    assert "initial InfoNCE − ln B: **reproduced**: +26.53 [" in text and "(95 % t, 4 seeds)" in text
    assert "(90 % TOST, 4 seeds)" in text


# ------------------------------------------------------------------------------------------------
# the interaction (headline) and the regrets judged against the landscape
# ------------------------------------------------------------------------------------------------
def _set(raw, family, k, value, mode="tied"):
    for r in raw["rows"]:
        if r["family"] == family and r["k"] == k and r["mode"] == mode:
            r["ndcg_test"] = r["ndcg_select"] = value + {0: 0.0, 1: 0.01, 2: -0.01, 3: 0.005}[r["seed"]]


def test_interaction_is_the_high_norm_gain_minus_the_controls():
    raw = _raw()  # modernbert gains 0.35 from k, bert nothing: the interaction is 0.35 on every seed
    v = sc.interaction(raw, TH)
    assert v.word == REPRODUCED and v.estimate == pytest.approx(0.35) and v.n == len(SEEDS)
    assert sc.part_label(v) == "high-norm modernbert − normal-norm bert: nDCG@10 best k − k = 1"
    gains = sc.family_gains(raw, TH)
    assert list(gains) == ["modernbert", "bert"] and gains["modernbert"].estimate == pytest.approx(0.35)
    # the control gains just as much from k (k = 1 edited down to 0.50 for bert too): the difference vanishes
    both = _raw()
    _set(both, "bert", 1.0, 0.50)
    w = sc.interaction(both, TH)
    assert w.estimate == pytest.approx(0.0, abs=1e-9) and w.word == NOT
    assert sc.family_gains(both, TH)["bert"].word == REPRODUCED  # the per-family row alone would have "reproduced"
    # a high-norm gain of 0.10 over a control gain of 0.07: real, under δ = 0.05 -> partly? 0.03 < δ with lo > 0
    part = _raw()
    _set(part, "modernbert", 1.0, 0.75)
    _set(part, "bert", 1.0, 0.78)
    assert sc.interaction(part, TH).word == PARTLY and sc.interaction(part, TH).estimate == pytest.approx(0.03)
    no_control = {**raw, "rows": [r for r in raw["rows"] if r["family"] == "modernbert"]}
    assert sc.interaction(no_control, TH).word == NOT_RUN


def test_landscape_range_decides_where_regret_equivalence_is_judged():
    raw = _raw()
    rows = {(r["family"], r["seed"]): r for r in sc.landscape(raw, TH)}
    mb = rows[("modernbert", 0)]  # k in 1..16: 0.50, 0.75, 0.85 -> range 0.35, best at 16, worst at 1
    assert mb["range"] == pytest.approx(0.35) and (mb["k_best_test"], mb["k_worst_test"]) == (16.0, 1.0) and mb["matters"]
    assert mb["regret_inspect"] == pytest.approx(0.0) and mb["regret_none"] == pytest.approx(0.35)
    assert mb["k_fixed"] == 4.0 and mb["regret_fixed"] == pytest.approx(0.10)
    bert = rows[("bert", 0)]  # flat 0.85 over 1..16 (k = 64 is outside the landscape's range)
    assert bert["range"] == pytest.approx(0.0) and not bert["matters"]
    v = sc.landscape_regret(raw, TH, "inspect")
    assert v.word == REPRODUCED and v.n == len(SEEDS)  # judged on the 4 modernbert backbones only
    assert "over the 4 of 8 family-seed backbones where k matters" in v.reason
    assert sc.landscape_regret(raw, TH, "fixed").word == NOT  # 0.10 on every backbone where k matters
    assert sc.landscape_rule_difference(raw, TH, "inspect", "fixed").word == REPRODUCED
    assert sc.landscape_rule_difference(raw, TH, "edge", "inspect").word == NOT
    # a flat landscape everywhere: no regret verdict, it says k does not matter here
    flat = _raw(high_k1=0.85)
    _set(flat, "modernbert", 4.0, 0.85)
    assert all(not r["matters"] for r in sc.landscape(flat, TH))
    for v in (sc.landscape_regret(flat, TH, "inspect"), sc.landscape_rule_difference(flat, TH)):
        assert v.word == NOT_RUN and "k does not matter here" in v.reason
    # the range just below / at 3 x the margin (0.09): edit one number across the line
    edge = _raw(high_k1=0.85)
    _set(edge, "modernbert", 4.0, 0.85)
    _set(edge, "modernbert", 1.0, 0.85 - 0.089)
    assert not any(r["matters"] for r in sc.landscape(edge, TH))
    _set(edge, "modernbert", 1.0, 0.85 - 0.0905)
    assert [r["matters"] for r in sc.landscape(edge, TH) if r["family"] == "modernbert"] == [True] * 4
    table = sc.landscape_markdown(flat, TH)
    assert "| bert | 0 | 0.000 (1 / 1) | no: k does not matter here |" in table and "inspect k: regret" in table


def test_claims_added_later_are_posthoc_on_an_older_record_and_checked_on_a_newer_one():
    raw = _raw()
    full = {k: v.to_dict() for k, v in sc.evaluate_all(raw, TH).items()}
    older = {k: v for k, v in full.items() if k not in sc.POSTHOC_SINCE_FULL}
    assert sc.posthoc_claims(older) == list(sc.POSTHOC_SINCE_FULL) and sc.posthoc_claims(full) == []
    assert sc.check_record(older, raw, TH, "phase.json")["interaction"].word == REPRODUCED  # recomputed, not required
    stale = dict(full, interaction=dict(full["interaction"], word=NOT))
    with pytest.raises(rules.VerdictRecordError, match="interaction"):
        sc.check_record(stale, raw, TH, "phase.json")
