"""The README SPLADE rows of initlab.synthetic.splade.ood.claims: computed from raw per-seed numbers, never from words."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest

from initlab.config import to_dict
from initlab.evidence import rules
from initlab.synthetic.splade import claims as sc
from initlab.synthetic.splade.ood import claims as cs

ROOT = Path(__file__).resolve().parents[4]
SEEDS = [9101, 9102, 9103, 9104]
KS = (1.0, 4.0, 16.0, 64.0)


def _phase(high_k1=0.50, normal_far=0.30, out_far=0.85):
    rows, insp, natural = [], [], {}
    thr = math.sqrt(2 * math.log(32))
    for seed, j in zip(SEEDS, (0.0, 0.01, -0.01, 0.005)):
        for fam, norm in (("modernbert", 31.7), ("bert", 8.7)):
            natural[f"{fam}_seed={seed}"] = {"family": fam, "seed": seed, "head_frobenius": norm + j}
            for k in KS:
                if fam == "modernbert":
                    v, init, final = {1.0: high_k1, 4.0: 0.75, 16.0: 0.85, 64.0: 0.8}[k] + j, (30.0 if k == 1 else 3.0), (2.0 if k == 1 else 1.0)
                else:
                    v, init, final = (0.85 if k < 64 else normal_far) + j, 2.0, 1.0
                rows.append({"family": fam, "mode": "tied", "s": 1.0, "k": k, "seed": seed, "ndcg_select": v, "ndcg_test": v,
                             "init_infonce": init, "final_infonce": final, "collapsed": fam == "bert" and k == 64.0,
                             "failed": False})
            insp.append({"family": fam, "s": 1.0, "seed": seed, "recommended_k": 16.0 if fam == "modernbert" else 4.0,
                         "table": [{"k": k, "score_sd": (60 if fam == "modernbert" else 5) * thr / k ** 2} for k in KS]})
        for k, v in ((1.0, 0.85 + j), (64.0, out_far + j)):
            rows.append({"family": "bert", "mode": "k_output", "s": 1.0, "k": k, "seed": seed, "ndcg_select": v,
                         "ndcg_test": v, "init_infonce": 2.0, "final_infonce": 1.0, "collapsed": False, "failed": False})
    th = sc.SPLADEThresholds(high_norm=("modernbert",), normal_norm=("bert",))
    phase = {"config": {"seeds": SEEDS, "init_batch": 32, "claims": to_dict(th)}, "natural_scale": natural, "rows": rows,
             "inspect": insp}
    phase["verdicts"] = {k: v.to_dict() for k, v in sc.evaluate_all(sc.as_raw(phase), th).items()}
    return phase


def test_rows_state_the_run_and_the_verdicts_from_the_numbers():
    r = {cs.FULL: _phase()}
    deg = cs.degradation_row(r)
    assert deg.startswith("**reproduced** (interaction; synthetic, preset `full`, 4 seeds 9101-9104; ")
    assert "W_head Frobenius modernbert 31.7 ± 0.0, bert 8.7 ± 0.0" in deg
    assert "high-norm modernbert − normal-norm bert: nDCG@10 best k − k = 1: **reproduced**: +0.350 [" in deg
    assert "Per family: modernbert: nDCG@10 best k − k = 1: **reproduced**: +0.350 [" in deg and "(95 % t, uncorrected, 4 seeds)" in deg
    assert "Preregistered claim (high initial loss, poor minimum, controls not degraded): **reproduced**" in deg
    fix = cs.fix_row(r)
    assert fix.startswith("**reproduced** (synthetic, preset `full`") and "real backbones **not run**" in fix
    assert "within ± 0.03 nDCG@10: **reproduced**: +0.000 [+0.000, +0.000] (90 % TOST over 8 (family, seed) backbones; Holm-adjusted p" in fix
    assert "`mlmhead inspect` keeps its own rule (neither alternative beat it by the preregistered rule)" in fix
    assert "Against the landscape: k matters (best − worst nDCG@10 over k in 1..16 at least 3 × 0.03) on 4 of 8 " \
           "backbones (modernbert 4); elsewhere k does not matter here." in fix
    over = cs.over_rescaling_row(r)
    assert over.startswith("hurts: **reproduced**") and "collapse flagged in 4 of 4 of those cells" in over
    assert "Input side of the tie" in over and "output-only − tied at k = 64: **reproduced**" in over


def test_editing_raw_numbers_changes_the_cells_and_a_stale_record_is_refused():
    flat = _phase(high_k1=0.85, normal_far=0.85)  # recomputed record: nothing degrades
    r = {cs.FULL: flat}
    assert cs.degradation_row(r).startswith("**partly**") or cs.degradation_row(r).startswith("**not reproduced**")
    assert cs.over_rescaling_row(r).startswith("hurts: **not reproduced**")
    stale = copy.deepcopy(_phase())
    for row in stale["rows"]:  # numbers edited after the record was written
        if row["family"] == "bert" and row["k"] == 64.0 and row["mode"] == "tied":
            row["ndcg_test"] = row["ndcg_select"] = 0.85
    with pytest.raises(rules.VerdictRecordError, match="over_rescaling"):
        cs.over_rescaling_row({cs.FULL: stale})
    with pytest.raises(KeyError):
        cs.fix_row({})


def test_committed_confirmatory_results_give_every_row():
    path = ROOT / "docs" / "results" / cs.FULL
    if not path.is_file():
        pytest.skip("the confirmatory run's phase.json is not committed yet")
    from initlab.app.docgen.claims import load_results

    r = load_results(ROOT / "docs" / "results", [cs.FULL])
    for fn in cs.ROWS.values():
        text = fn(r)
        assert "preset `full`" in text and "9101-9105" in text and "**" in text


def test_claims_missing_from_the_saved_record_are_labelled_post_hoc():
    phase = _phase()
    for c in sc.POSTHOC_SINCE_FULL:  # a record written before these claims existed (the preregistered full run's)
        del phase["verdicts"][c]
    r = {cs.FULL: phase}
    assert cs.degradation_row(r).startswith("**reproduced** (interaction, a post-hoc analysis: not preregistered "
                                            "for this run; synthetic, preset `full`")
    assert "Against the landscape, a post-hoc analysis: not preregistered for this run: k matters" in cs.fix_row(r)
    flat = _phase(high_k1=0.85)  # the landscape is flat on every backbone (bert's k = 64 lies outside 1..16)
    for row in flat["rows"]:
        if row["family"] == "modernbert" and row["k"] == 4.0:
            row["ndcg_test"] = row["ndcg_select"] = 0.85 + (row["ndcg_test"] - 0.75)
    flat["verdicts"] = {k: v.to_dict() for k, v in sc.evaluate_all(sc.as_raw(flat), sc.SPLADEThresholds(
        high_norm=("modernbert",), normal_norm=("bert",))).items()}
    assert cs.fix_row({cs.FULL: flat}).endswith("on 0 of 8 backbones (none); everywhere else, and so for every "
                                                "regret verdict: k does not matter here")


def test_the_seeds_named_are_those_of_the_records():
    """A row names the seeds its per-cell records hold, not the config's list."""
    phase = _phase()
    phase["rows"] = [row for row in phase["rows"] if row["seed"] != 9104]
    phase["inspect"] = [x for x in phase["inspect"] if x["seed"] != 9104]
    th = sc.SPLADEThresholds(high_norm=("modernbert",), normal_norm=("bert",))
    phase["verdicts"] = {k: v.to_dict() for k, v in sc.evaluate_all(sc.as_raw(phase), th).items()}
    deg = cs.degradation_row({cs.FULL: phase})
    assert "3 seeds 9101-9103;" in deg and "(95 % t, uncorrected, 3 seeds)" in deg
    del phase["verdicts"]
    with pytest.raises(rules.VerdictRecordError):  # a record without its verdicts is an error here too
        cs.degradation_row({cs.FULL: phase})


# ------------------------------------------------------------------------------------------------
# the OOD confirmation: rows from it when present, the full run kept beside it
# ------------------------------------------------------------------------------------------------
CSEEDS = [9201, 9202, 9203]


def _confirm(ood_k1=0.10, id_k1=0.20, seeds=CSEEDS, partial_seed=9204):
    """A results.json of the OOD runner: bert / modernbert x k in {1, 4, 16}, OOD and in-domain nDCG@10 per half;
    ``partial_seed`` has only its k = 1 cells (a run cut short)."""
    th = sc.SPLADEThresholds(high_norm=("roberta", "modernbert"), normal_norm=("bert", "albert"), k_far=16.0)
    thr = math.sqrt(2 * math.log(32))
    rows, insp, natural = [], [], {}
    for seed, j, jj in zip(list(seeds) + [partial_seed], (0.0, 0.01, -0.01, 0.005), (0.0, 0.02, -0.02, 0.0)):
        for fam, norm in (("bert", 19.4), ("modernbert", 55.1)):
            natural[f"pretrain_{fam}_seed={seed}"] = {"family": fam, "seed": seed, "head_frobenius": norm + j}
            insp.append({"family": fam, "s": 1.0, "seed": seed, "recommended_k": 4.0 if fam == "modernbert" else 1.0,
                         "table": [{"k": k, "score_sd": (30 if fam == "modernbert" else 2) * thr / k ** 2}
                                   for k in (1.0, 4.0, 16.0)]})
            for k in ((1.0,) if seed == partial_seed else (1.0, 4.0, 16.0)):
                if fam == "modernbert":
                    ood = {1.0: ood_k1 + jj, 4.0: 0.14, 16.0: 0.13}[k] + j  # k = 1 varies by seed: an interval
                    idd = {1.0: id_k1 + jj, 4.0: 0.37, 16.0: 0.35}[k] + j
                else:
                    ood, idd = {1.0: 0.11, 4.0: 0.11, 16.0: 0.05}[k] + j, {1.0: 0.10, 4.0: 0.14, 16.0: 0.05}[k] + j
                rows.append({"family": fam, "mode": "tied", "s": 1.0, "k": k, "seed": seed, "ndcg_select": ood,
                             "ndcg_test": ood, "id_select": idd, "id_test": idd,
                             "init_infonce": 41.0 if (fam == "modernbert" and k == 1) else 3.0,
                             "final_infonce": 2.5 if (fam == "modernbert" and k == 1) else 1.5, "collapsed": False,
                             "failed": False})
    complete = sc.complete_seeds(rows, ("bert", "modernbert"), (1.0, 4.0, 16.0))
    rep = {"config": {"init_batch": 32, "claims": to_dict(th), "corpus": {"vocab_size": 2048, "n_heldout": 2}},
           "natural_scale": natural, "rows": rows, "inspect": insp, "complete_seeds": complete}
    raw = sc.on_seeds(sc.as_raw(rep), complete)
    raw_id = sc.on_seeds(sc.as_raw({**rep, "rows": [dict(x, ndcg_select=x["id_select"], ndcg_test=x["id_test"])
                                                    for x in rows]}), complete)
    rep["verdicts"] = {k: v.to_dict() for k, v in sc.evaluate_all(raw, th).items()}
    rep["verdicts_in_domain"] = {k: v.to_dict() for k, v in sc.evaluate_all(raw_id, th).items()}
    return rep


def test_rows_come_from_the_confirmation_with_the_full_run_beside_it():
    r = {cs.FULL: _phase(), cs.CONFIRM: _confirm()}
    deg = cs.degradation_row(r)
    assert deg.startswith("**inconclusive** (interaction, the preregistered headline; preregistered confirmation out "
                          "of domain, preset `confirm-v2k`, 3 complete seeds 9201-9203, 2048 ids, nDCG@10 on 2 held-out "
                          "domains;")
    assert "high-norm modernbert − normal-norm bert: nDCG@10 best k − k = 1: **inconclusive**: +0.040 [" in deg
    assert "(95 % t, uncorrected, 3 seeds)" in deg and "9204" not in deg  # the cut-short seed is not judged
    assert "In domain (secondary; Holm within one secondary family): interaction **" in deg
    assert "high-norm modernbert − normal-norm bert" in deg.split("In domain (secondary")[1]
    assert "Earlier run, kept beside it: " + cs.full_degradation({cs.FULL: _phase()}) in deg
    fix = cs.fix_row(r)
    assert fix.startswith("**inconclusive** (preregistered confirmation out of domain")
    assert "Earlier run, kept beside it: **reproduced** (synthetic, preset `full`" in fix
    assert "on 0 of 6 backbones (none); everywhere else, and so for every regret verdict: k does not matter here" in fix
    assert "k matters (best − worst nDCG@10 over k in 1..16 at least 3 × 0.03) on 6 of 6 backbones (bert 3, modernbert 3)" in fix
    over = cs.over_rescaling_row(r)
    assert over.startswith("hurts: **reproduced** (preregistered confirmation out of domain") and "tied k = 16" in over
    assert "Earlier run, kept beside it: hurts: **reproduced** (synthetic, preset `full`" in over
    h = cs.degradation_headline(r)
    assert h.word == "**inconclusive** (interaction, OOD confirmation; seed 9203 after the deadline)"
    assert h.estimate.startswith("high-norm − normal-norm +0.040 [") and "earlier `full` run: **reproduced**" in h.estimate
    assert cs.over_rescaling_headline(r).word == "**reproduced** (OOD confirmation; seed 9203 after the deadline)"


def test_with_fewer_than_two_complete_seeds_the_rows_stay_on_the_full_run():
    r = {cs.FULL: _phase(), cs.CONFIRM: _confirm(seeds=[9201])}
    assert r[cs.CONFIRM]["complete_seeds"] == [9201] and cs.load_confirm(r) is None
    for fn in cs.ROWS.values():
        assert fn(r) == fn({cs.FULL: _phase()})
    assert cs.fix_headline(r) == cs.fix_headline({cs.FULL: _phase()})


def test_a_stale_confirmation_record_is_refused():
    rep = _confirm()
    for x in rep["rows"]:  # numbers edited after the record: modernbert no longer loses at k = 1 in domain
        if x["family"] == "modernbert" and x["k"] == 1.0:
            x["id_select"] = x["id_test"] = 0.37
    with pytest.raises(rules.VerdictRecordError, match="verdicts_in_domain"):
        cs.degradation_row({cs.FULL: _phase(), cs.CONFIRM: rep})


def test_the_ood_record_holds_the_rows_and_its_families_after_the_phase_diagrams():
    from initlab.app.docgen import claims as docgen
    from initlab.synthetic.splade import ood, phase

    assert ood.EXPERIMENT.claims is cs and ood.EXPERIMENT.families == (("splade_ood", cs.SPLADE_OOD_FAMILIES),)
    assert phase.EXPERIMENT.claims is sc and phase.EXPERIMENT.claim_rows() == []
    assert [row.verdict for row in cs.CLAIM_ROWS] == list(cs.ROWS.values())
    names = [e.name for e in docgen.EXPERIMENTS]
    assert names.index("synthetic_splade_ood") == names.index("synthetic_splade") + 1
    assert docgen.legend().index("SPLADE primary: ") < docgen.legend().index("SPLADE_OOD primary: interaction")
