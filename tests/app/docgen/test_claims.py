"""The README's claims table is generated from docs/results/ and is not stale; each row's verdict is
recomputed from the saved raw numbers (editing numbers changes it; a saved record that disagrees is refused);
bad result files give errors naming them."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from initlab.app.docgen import claims
from initlab.realdata.lra import claims as lra_rows
from initlab.synthetic.spt import claims as spt_rows
from initlab.theorycheck.verify import claims as theory_rows

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
RESULTS = ROOT / "docs" / "results"


# ------------------------------------------------------------------------------------------------
# the committed table
# ------------------------------------------------------------------------------------------------
def _block(text: str) -> str:
    return claims.BEGIN_MARK + text.split(claims.BEGIN_MARK)[1].split(claims.END_MARK)[0] + claims.END_MARK


def test_readme_claims_block_is_generated_from_docs_results():
    assert _block(README.read_text(encoding="utf-8")) == claims.claims_table(RESULTS), (
        "README claims table is stale: run python -m initlab.app.docgen.claims")


def test_claims_page_is_generated_from_docs_results():
    assert (ROOT / "docs" / "claims.md").read_text(encoding="utf-8") == claims.claims_page(RESULTS), (
        "docs/claims.md is stale: run python -m initlab.app.docgen.claims")


def test_readme_has_one_short_line_per_claim_and_the_page_the_full_cells():
    block = _block(README.read_text(encoding="utf-8"))
    rows = [line for line in block.splitlines() if line.startswith("| ") and not line.startswith(("| seed claim", "| ---"))]
    assert len(rows) == len(claims.all_claims())
    for row, claim in zip(rows, claims.all_claims()):
        cells = row.split(" | ")
        assert cells[0] == f"| {claim.claim}" and len(cells) == 5, row
        assert len(cells[2].split()) <= 12, f"verdict word cell too long: {cells[2]!r}"
        assert len(row.split()) <= 120, f"README claims row of {len(row.split())} words: {claim.claim!r}"
    page = claims.claims_page(RESULTS)
    assert "about 25 seeds would decide it" in page and "about 25 seeds" not in block  # the detail lives in the page


def test_every_file_the_rows_read_is_committed_and_listed():
    listing = (RESULTS / "README.md").read_text(encoding="utf-8")
    for name in sorted({f for c in claims.all_claims() for f in c.files}):
        assert (RESULTS / name).is_file(), name
        assert f"`{name}`" in listing, f"docs/results/README.md does not name {name}"


def test_cli_check_detects_a_stale_readme(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n" + claims.claims_table(RESULTS).replace("**reproduced**", "**typed**", 1) + "\nend\n")
    page = ["--page", str(tmp_path / "claims.md")]
    assert claims.main(["--results", str(RESULTS), "--readme", str(readme), "--check"] + page) == 1
    assert claims.main(["--results", str(RESULTS), "--readme", str(readme)] + page) == 0
    assert claims.main(["--results", str(RESULTS), "--readme", str(readme), "--check"] + page) == 0
    assert readme.read_text().startswith("intro\n") and readme.read_text().endswith("\nend\n")
    (tmp_path / "claims.md").write_text((tmp_path / "claims.md").read_text().replace("**reproduced**", "**typed**", 1))
    assert claims.main(["--results", str(RESULTS), "--readme", str(readme), "--check"] + page) == 1  # a stale page
    assert "claims.md" in capsys.readouterr().err


def test_a_rendering_is_reused_only_for_the_same_file_contents(tmp_path):
    """claims_table and claims_page render once per content of the results folder: an edited file renders anew."""
    res = _copy_results(tmp_path)
    calls = []

    def render(results):
        calls.append(1)
        return str(sorted(results))

    assert claims.cached_render("test", res, render) == claims.cached_render("test", res, render) and len(calls) == 1
    data = json.loads((res / lra_rows.LRA).read_text())
    data["note"] = "edited"
    (res / lra_rows.LRA).write_text(json.dumps(data))
    claims.cached_render("test", res, render)
    assert len(calls) == 2


# ------------------------------------------------------------------------------------------------
# hand-made result files
# ------------------------------------------------------------------------------------------------
def spec(residual: bool, ffn: bool, layernorm: bool, later: str) -> dict:
    return {"residual": residual, "ffn": ffn, "layernorm": layernorm, "later_attention": later}


def theory(fail: tuple[str, ...] = (), no_sympy: bool = False) -> dict:
    names = ["T1", "T2", "T3", "T4", "T5", "T6", "T7"]
    measured = {"T6": {"dropout_mc": {"per_mask_median_blind_fraction": [0.2, 0.3, 0.9]}},
                "T7": {"table": [{"spec": spec(False, True, True, "random"), "min": 1e-16, "max": 3e-16},
                                 {"spec": spec(True, False, False, "uniform"), "min": 1e-16, "max": 2e-16},
                                 {"spec": spec(True, True, False, "uniform"), "min": 0.25, "max": 0.5},
                                 {"spec": spec(True, False, False, "random"), "min": 0.4, "max": 0.9}]}}
    checks = {"sympy derivation holds": {}, "autograd = 1 g^T": {}, "central difference = autograd": {}}
    return {"config": {"symbolic": True, "cases": 20},
            "statements": [{"statement": n, "verdict": "FAIL" if n in fail else "PASS", "measured": measured.get(n, {}),
                            "checks": dict(checks) if n != "T5" or not no_sympy else {"autograd = 1 g^T": {}}}
                           for n in names]}


def spt_summary(gain: float = 0.35, partial: bool = False, record: bool = True) -> dict:
    """A saved SPT summary with per-seed raw numbers (5 seeds): SPT ``gain`` points above scratch on average."""
    from initlab.synthetic.spt import claims as spt_claims

    seeds = [8101, 8102, 8103, 8104, 8105]
    jitter = [0.00, 0.01, -0.01, 0.02, -0.02]
    base = [0.50, 0.52, 0.49, 0.51, 0.50]

    def recs(accs, prox_start=0.05, prox_end=0.05):
        return [{"seed": s, "test_acc": a, "prox_start": prox_start + j / 10, "prox_end": prox_end + j / 20}
                for s, a, j in zip(seeds, accs, jitter)]

    per_seed = {"scratch": recs(base), "spt": recs([b + gain + j for b, j in zip(base, jitter)], 0.6, 0.45),
                "scratch_matched": recs([b + 0.005 for b in base]),
                "hybrid_qkvo": recs([b + 0.6 * gain + j for b, j in zip(base, jitter)], 0.3),
                "hybrid_qk": recs([b + 0.3 * gain + j / 2 for b, j in zip(base, jitter)], 0.3),
                "frozen_attn": recs([b + j / 4 for b, j in zip(base, jitter)]), "spt_e10": recs(base),
                "hybrid_ffn": recs([b - j / 4 for b, j in zip(base, jitter)])}
    conds = [{"condition": "spt_e10", "diff_mean": 0.0, "diff_sd": 0.001}]
    cfg = {"seeds": seeds, "task": {"T": 100}, "proximity_w": 2, "thresholds": {}}
    out = {"partial": partial, "preregistration": "abc1234", "config": cfg,
           "summary": {"per_seed": per_seed, "conditions": conds, "uniform_proximity": 0.049}}
    if record:
        vs = spt_claims.evaluate_all(spt_claims.as_raw(per_seed), spt_claims.SPTThresholds())
        out["verdicts"] = {k: v.to_dict() for k, v in vs.items()}
    return out


def lra(spt_accs=(0.39, 0.35, 0.38), seeds=(10, 11, 12)) -> dict:
    """A saved ListOps summary whose stored means are those of its per-seed records (as the experiment writes it)."""
    import statistics as st

    scratch = (0.37, 0.36, 0.35)[:len(seeds)]
    prox = (0.29, 0.31, 0.33)[:len(seeds)]
    per = [{"seed": sd, "spt_test_acc": a, "scratch_test_acc": b, "prox_init_spt": p, "prox_init_scratch": 0.274 - 0.001 * i,
            "uniform_proximity": 0.274} for i, (sd, a, b, p) in enumerate(zip(seeds, spt_accs, scratch, prox))]
    return {"verdict": "no difference detected", "preset": "cpu-listops-plateau", "seeds": list(seeds),
            "spt_mean": st.mean(spt_accs), "scratch_mean": st.mean(scratch),
            "mean_diff_points": 100 * (st.mean(spt_accs) - st.mean(scratch)), "per_seed": per,
            "proximity_verdict": "no proximity bias at fine-tuning start",
            "prox_init_spt_mean": st.mean(prox), "prox_init_scratch_mean": st.mean(x["prox_init_scratch"] for x in per),
            "uniform_proximity_mean": 0.274}


# ------------------------------------------------------------------------------------------------
# rows: every verdict word reachable, and taken from the saved fields
# ------------------------------------------------------------------------------------------------
def _theory_report(fail: tuple[str, ...] = (), no_sympy: bool = False) -> dict:
    """The hand-made theory report with raw check errors: a failing statement has an error above its tolerance."""
    t = theory(fail, no_sympy)
    for st in t["statements"]:
        st["checks"] = copy.deepcopy(st["checks"])  # the helper shares one dict per check name
        st["cases"] = 20
        for c in st["checks"].values():
            c.update(max_rel_error=1e-12 if st["statement"] not in fail else 1.0, tolerance_rel=1e-9, n=20)
    return t


@pytest.mark.parametrize("fail,word", [((), "reproduced"), (("T3",), "partly"), (("T1",), "not reproduced"),
                                       (("T4", "T5"), "not reproduced")])
def test_theory_verdict_is_recomputed_from_the_errors(fail, word):
    cell = theory_rows.theory_row({theory_rows.THEORY: _theory_report(fail)})
    assert cell.startswith(f"**{word}**")
    assert ("failed" in cell) == bool(fail)
    if not fail:
        assert "median blind fraction 0.30" in cell and "residual stacks with FFN or random later attention are not (0.25-0.90)" in cell and "all 7 statements (T1-T7)" in cell
        assert "pass sympy derivations, float64 autograd identities and finite differences (20 random" in cell
        assert "1000x inside its tolerance" in cell


def test_theory_row_refuses_a_saved_word_its_errors_contradict():
    t = _theory_report()
    t["statements"][2]["checks"]["autograd = 1 g^T"]["max_rel_error"] = 1.0  # error above tolerance, word PASS
    with pytest.raises(ValueError, match="T3: saved PASS"):
        theory_rows.theory_row({theory_rows.THEORY: t})


def test_theory_row_names_only_the_checks_every_statement_ran():
    cell = theory_rows.theory_row({theory_rows.THEORY: _theory_report(no_sympy=True)})
    assert "pass float64 autograd identities (20 random cases each);" in cell and "sympy" not in cell


_FULL, _DEFAULT, _CAUSAL = (dict(spt_rows.SPT_RUNS)[p] for p in ("full", "default", "causal"))


def _spt(s: dict, name: str = _FULL) -> dict:
    return {name: s}


def test_spt_rows_follow_the_raw_numbers():
    r = _spt(spt_summary(0.35))
    gain = spt_rows.spt_gain_row(r)
    assert gain.startswith("`full` (seeds 8101-8105, preregistered in `abc1234`): SPT − scratch **reproduced**: +35.0 [")
    assert "against compute-matched scratch **reproduced**" in gain
    assert "W_Q/W_K/W_V/W_O share **reproduced**: 0.60" in spt_rows.attention_weights_row(r)
    assert "W_Q, W_K alone share **partly**: 0.30" in spt_rows.attention_weights_row(r)
    assert "frozen attention − scratch **reproduced**" in spt_rows.frozen_ffn_row(r) and "±3 points" in spt_rows.frozen_ffn_row(r)
    assert "**reproduced**: SPT − scratch first-layer proximity mass" in spt_rows.proximity_row(r)
    few = spt_rows.few_epochs_other_data_row(r)
    assert "few epochs (10): share **not reproduced**" in few and "10: +0.0 ± 0.0" in few  # from the records
    none = _spt(spt_summary(0.0))  # SPT no better than scratch, in the raw numbers: every share is unjudgeable
    assert "SPT − scratch **not reproduced**" in spt_rows.spt_gain_row(none)
    assert "share **inconclusive**" in spt_rows.attention_weights_row(none)


def test_spt_rows_refuse_a_record_that_disagrees_with_the_numbers():
    s = spt_summary(0.35, record=True)
    spt_rows.spt_gain_row(_spt(s))  # the record matches
    s["verdicts"]["spt_gain"]["word"] = "not reproduced"
    with pytest.raises(ValueError, match="spt_gain: saved 'not reproduced', recomputed 'reproduced'"):
        spt_rows.spt_gain_row(_spt(s))


def test_spt_rows_without_runs_and_with_a_partial_run():
    assert spt_rows.spt_gain_row({}) == "**not run**"
    cell = spt_rows.spt_gain_row(_spt(spt_summary(0.35, partial=True)))
    assert "partial run" in cell
    both = {**_spt(spt_summary(0.35)), _DEFAULT: spt_summary(0.30)}
    cell = spt_rows.spt_gain_row(both)
    assert cell.index("`full`") < cell.index("`default`")


def test_spt_rows_show_every_run_that_tested_the_claim_and_headline_the_first():
    """The causal round's run tests the gain (and the causal arms) but no hybrid: a row shows the runs that tested its
    claim, the causal run first, and the README's short cell comes from the first of them."""
    causal = spt_summary(0.40)
    causal["summary"]["per_seed"] = {c: recs for c, recs in causal["summary"]["per_seed"].items()
                                     if c in ("scratch", "spt")}
    causal["summary"]["conditions"] = [c for c in causal["summary"]["conditions"] if c["condition"] in ("scratch", "spt")]
    from initlab.synthetic.spt import claims as spt_claims

    raw = spt_claims.as_raw(causal["summary"]["per_seed"])
    causal["verdicts"] = {k: v.to_dict() for k, v in spt_claims.evaluate_all(raw, spt_claims.SPTThresholds()).items()}
    both = {**_spt(causal, _CAUSAL), **_spt(spt_summary(0.35))}
    gain = spt_rows.spt_gain_row(both)
    assert gain.index("`causal`") < gain.index("`full`") and "+40.0 [" in gain and "+35.0 [" in gain
    assert "+40.0 [" in spt_rows.spt_gain_headline(both).estimate  # the first run that tested it
    qk = spt_rows.attention_weights_row(both)
    assert "`causal`" not in qk and qk.startswith("`full`")  # the causal run has no hybrid: not shown as "not run"
    assert "0.30" in spt_rows.attention_weights_headline(both).estimate
    assert spt_rows.causal_row(both) == "**not run**"  # neither run has a causal arm


def test_lra_row_recomputes_the_interval_verdict():
    cell = lra_rows.lra_row({lra_rows.LRA: lra()})
    assert cell.startswith("**not run** at LRA scale") and "SPT − scratch **inconclusive**" in cell
    assert "own rule" not in cell and "no proximity bias" not in cell  # saved words are never shown
    assert "test accuracy SPT 0.373 vs scratch 0.360 (seed means)" in cell
    assert ("proximity mass at fine-tuning start, SPT − scratch +0.037 [" in cell and "(95 % t, 3 seeds; an interval only"
            in cell and "SPT 0.310, scratch 0.273, uniform attention 0.274 (seed means)" in cell)
    cell = lra_rows.lra_row({lra_rows.LRA: lra((0.47, 0.46, 0.451))})
    assert "SPT − scratch **reproduced**" in cell
    empty = lra()
    empty["per_seed"], empty["seeds"] = [], []
    assert lra_rows.lra_row({lra_rows.LRA: empty}).endswith("CPU ListOps: **not run**")


def test_lra_row_prints_what_the_records_give_and_refuses_a_stale_summary():
    """Regression: an edited seed left the stored mean (0.376) printed beside the recomputed verdict, and a dropped
    seed left "seeds 10-12" beside a 2-seed interval."""
    from initlab.evidence.rules import SummaryRecordError, VerdictRecordError

    edited = lra()
    edited["per_seed"][0]["spt_test_acc"] = 0.49  # one seed edited, the stored means not
    with pytest.raises(SummaryRecordError, match=r"lra_listops_summary.json: the stored summary disagrees .*spt_mean"):
        lra_rows.lra_row({lra_rows.LRA: edited})
    cell = lra_rows.lra_row({lra_rows.LRA: lra((0.49, 0.35, 0.38))})  # a consistent file: the records' mean is printed
    assert "test accuracy SPT 0.407 vs scratch 0.360" in cell
    two = lra((0.39, 0.35), seeds=(10, 11))
    cell = lra_rows.lra_row({lra_rows.LRA: two})
    assert "seeds 10, 11)" in cell and "(95 % t, 2 seeds)" in cell and "10-12" not in cell
    dropped = lra()
    dropped["per_seed"] = dropped["per_seed"][:2]  # a seed dropped, the stored seed list and means not
    with pytest.raises(SummaryRecordError, match="seeds: stored"):
        lra_rows.lra_row({lra_rows.LRA: dropped})
    no_verdict = lra()
    del no_verdict["verdict"]
    with pytest.raises(VerdictRecordError, match="no saved verdict"):
        lra_rows.lra_row({lra_rows.LRA: no_verdict})


def test_spt_rows_need_a_verdict_record_and_a_summary_its_records_give():
    from initlab.evidence.rules import SummaryRecordError, VerdictRecordError

    s = spt_summary(0.35, record=False)
    with pytest.raises(VerdictRecordError, match="no saved verdict record"):  # was skipped silently
        spt_rows.spt_gain_row(_spt(s))
    s = spt_summary(0.35)
    s["summary"]["conditions"][0]["diff_mean"] = 0.05  # the stored SPT-epoch gain, its records say 0
    with pytest.raises(SummaryRecordError, match=r"spt_e10.diff_mean: stored 0.05"):
        spt_rows.few_epochs_other_data_row(_spt(s))
    s = spt_summary(0.35)
    for recs in s["summary"]["per_seed"].values():
        del recs[-1]  # seed 8105 dropped from every record (config still lists it)
    from initlab.synthetic.spt import claims as spt_claims

    vs = spt_claims.evaluate_all(spt_claims.as_raw(s["summary"]["per_seed"]), spt_claims.SPTThresholds())
    s["verdicts"] = {k: v.to_dict() for k, v in vs.items()}
    cell = spt_rows.spt_gain_row(_spt(s))
    assert cell.startswith("`full` (seeds 8101-8104,") and "(95 % t, uncorrected, 4 seeds)" in cell


# ------------------------------------------------------------------------------------------------
# bad files
# ------------------------------------------------------------------------------------------------
def _copy_results(tmp_path: Path) -> Path:
    import shutil

    dest = tmp_path / "results"
    shutil.copytree(RESULTS, dest)
    return dest


def test_missing_results_file_is_named(tmp_path):
    res = _copy_results(tmp_path)
    (res / lra_rows.LRA).unlink()
    with pytest.raises(claims.ResultsFileError, match=r"lra_listops_summary\.json: saved result file not found"):
        claims.claims_table(res)


def test_malformed_results_file_is_named(tmp_path):
    res = _copy_results(tmp_path)
    (res / theory_rows.THEORY).write_text("{not json")
    with pytest.raises(claims.ResultsFileError, match=r"theory_verify\.json: not valid JSON"):
        claims.claims_table(res)
    (res / theory_rows.THEORY).write_text("[1, 2]")
    with pytest.raises(claims.ResultsFileError, match=r"theory_verify\.json: expected a JSON object"):
        claims.claims_table(res)


def test_results_file_without_a_needed_field_is_named(tmp_path, capsys):
    res = _copy_results(tmp_path)
    name = _FULL
    (res / name).parent.mkdir(exist_ok=True)
    data = spt_summary()
    del data["summary"]["per_seed"]
    (res / name).write_text(json.dumps(data))
    with pytest.raises(claims.ResultsFileError, match=r"synthetic_spt_full/summary\.json.*: missing or malformed.*per_seed"):
        claims.claims_table(res)
    readme = tmp_path / "README.md"
    readme.write_text(f"{claims.BEGIN_MARK}\n{claims.END_MARK}\n")
    assert claims.main(["--results", str(res), "--readme", str(readme)]) == 2
    assert "summary.json" in capsys.readouterr().err and readme.read_text() == f"{claims.BEGIN_MARK}\n{claims.END_MARK}\n"


def test_replace_block_needs_one_pair_of_markers():
    block = f"{claims.BEGIN_MARK}\nnew\n{claims.END_MARK}"
    assert claims.replace_block(f"a\n{claims.BEGIN_MARK}\nold\n{claims.END_MARK}\nb", block) == f"a\n{block}\nb"
    begin, end = claims.BEGIN_MARK, claims.END_MARK
    for bad in ("no markers", f"{end}{begin}", f"{begin}{begin}{end}"):
        with pytest.raises(ValueError, match="README.md: expected one"):
            claims.replace_block(bad, block)


# ------------------------------------------------------------------------------------------------
# collecting the SPT summary from a run folder
# ------------------------------------------------------------------------------------------------
def test_collect_spt_partial_and_finished(tmp_path):
    run = tmp_path / "run"
    (run / "partial").mkdir(parents=True)
    body = {"config": {"seeds": [1]}, "summary": {"per_seed": {}}, "cells": {"big": list(range(100))}}
    (run / "partial" / "metrics.json").write_text(json.dumps(body))
    (run / "partial" / "verdicts.json").write_text("{}")
    (run / "partial" / "missing.json").write_text('["ft_depth4_spt__seed1"]')
    out = json.loads(claims.collect_spt(run, tmp_path / "a" / "summary.json").read_text())
    assert out["partial"] is True and out["missing"] == ["ft_depth4_spt__seed1"] and "cells" not in out
    (run / "metrics.json").write_text(json.dumps(body))
    (run / "verdicts.json").write_text('{"spt_gain": {"word": "reproduced"}}')
    (run / "DONE").write_text("")
    out = json.loads(claims.collect_spt(run, tmp_path / "a" / "summary.json", "abc1234").read_text())
    assert out["partial"] is False and out["missing"] == [] and out["source"] == "metrics.json"
    assert out["summary"] == body["summary"] and out["config"] == body["config"] and out["preregistration"] == "abc1234"
    assert out["verdicts"] == {"spt_gain": {"word": "reproduced"}}


def test_collect_spt_never_files_a_run_over_another(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"config": {"seeds": [8201, 8202]}, "summary": {"per_seed": {}}}))
    (run / "verdicts.json").write_text("{}")
    (run / "DONE").write_text("")
    dest = tmp_path / "full.json"
    dest.write_text(json.dumps({"config": {"seeds": [8201, 8202, 8203]}}))
    with pytest.raises(claims.ResultsFileError, match="holds a run of seeds"):
        claims.collect_spt(run, dest)
    assert json.loads(dest.read_text())["config"]["seeds"] == [8201, 8202, 8203]
    assert claims.main(["--collect-spt", str(run), "--results", str(tmp_path), "--readme", str(README)]) == 2
    assert "--preregistration" in capsys.readouterr().err  # --preset full needs its preregistration commit


def test_collect_spt_refuses_a_folder_without_metrics(tmp_path):
    with pytest.raises(claims.ResultsFileError, match=r"partial/metrics\.json: saved result file not found \(expected"):
        claims.collect_spt(tmp_path, tmp_path / "summary.json")
    (tmp_path / "partial").mkdir()
    (tmp_path / "partial" / "metrics.json").write_text('{"config": {}}')
    (tmp_path / "partial" / "verdicts.json").write_text('{}')
    with pytest.raises(claims.ResultsFileError, match="'config' and 'summary'"):
        claims.collect_spt(tmp_path, tmp_path / "summary.json")


def test_spt_comparison_table_recomputes_each_run_from_its_raw_numbers(tmp_path, capsys):
    table = spt_rows.spt_comparison_table([("new", spt_summary(0.35)), ("flat", spt_summary(0.0))])
    gain = [ln for ln in table.splitlines() if ln.startswith("| SPT gain at depth 1 |")][0]
    assert "| **reproduced**: +35.0 [" in gain and "| **not reproduced**: +0.0 [" in gain
    assert table.splitlines()[0] == "| claim | new (seeds 8101-8105) | flat (seeds 8101-8105) |"
    path = tmp_path / "s.json"
    path.write_text(json.dumps(spt_summary(0.35)))
    assert claims.main(["--compare-spt", f"new={path}"]) == 0 and "| SPT gain at depth 1 |" in capsys.readouterr().out
    assert claims.main(["--compare-spt", str(path)]) == 2 and "expected LABEL=PATH" in capsys.readouterr().err


def test_diagnose_row_names_ceiling_forced_settings_and_an_undecided_headline():
    """A decided "does not help" where scratch already reached 95 % was forced by the ceiling (no 5-point gain was
    possible), and the row says so by name; an undecided `local` setting is named as the headline's."""
    from initlab.synthetic.diagnose import claims as diag_rows

    def rec(pred, pairs):
        return {"predicted_helps": pred, "blind_share": 0.9,
                "seeds": {str(2901 + i): {"scratch": a, "spt": s} for i, (a, s) in enumerate(pairs)}}

    records = {"settings": {
        "local": rec(True, [(0.5, 0.9), (0.5, 0.5), (0.5, 0.7)]),
        "depth2": rec(True, [(0.5, 0.9), (0.52, 0.93), (0.5, 0.95)]),
        "bag": rec(False, [(1.0, 0.999), (1.0, 1.0), (1.0, 0.998)]),
    }}
    r = {diag_rows.DIAGNOSE: records}
    row = diag_rows.diagnose_row(r)
    assert "right on 2 (depth2, bag; bag forced by a ceiling: scratch already at 100.0 % (≥ 95 %)" in row
    assert "the headline setting `local`" in row and "is undecided" in row
    h = diag_rows.diagnose_headline(r)
    assert "(1 forced by a ceiling: scratch ≥ 95 %)" in h.estimate and "`local` among them" in h.estimate
    records["settings"]["local"] = rec(True, [(0.5, 0.9), (0.52, 0.93), (0.5, 0.95)])
    row = diag_rows.diagnose_row(r)
    assert "headline" not in row and "forced by a ceiling" in row


def test_the_readme_front_page_stays_short():
    """Above the command table the README stays under 1,200 words: a front page, with the numbers in docs/."""
    text = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    words = len(text[:text.index("<!-- BEGIN commands -->")].split())
    assert words < 1200, f"README above the commands table: {words} words (at most 1,199)"


def test_the_readme_defines_every_word_its_claims_table_uses():
    text = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    block = text[text.index("<!-- BEGIN claims -->"):text.index("<!-- END claims -->")]
    legend, table = block.split("\n|", 1)
    for word in ("reproduced", "partly", "not reproduced", "inconclusive"):
        if f"**{word}" in table:
            assert f"**{word}**:" in legend, word
