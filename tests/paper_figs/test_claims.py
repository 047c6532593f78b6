"""The README's claims table is generated from docs/results/ and is not stale; each row's verdict comes
from the saved verdict fields (every verdict word reachable); bad result files give errors naming them."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from initlab.paper_figs import claims
from initlab.paper_figs import claims_rows as rows

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
RESULTS = ROOT / "docs" / "results"


# ------------------------------------------------------------------------------------------------
# the committed table
# ------------------------------------------------------------------------------------------------
def _block(text: str) -> str:
    return claims.BEGIN_MARK + text.split(claims.BEGIN_MARK)[1].split(claims.END_MARK)[0] + claims.END_MARK


def test_readme_claims_block_is_generated_from_docs_results():
    assert _block(README.read_text(encoding="utf-8")) == claims.claims_table(RESULTS), (
        "README claims table is stale: run python -m initlab.paper_figs.claims")


def test_every_file_the_rows_read_is_committed_and_listed():
    listing = (RESULTS / "README.md").read_text(encoding="utf-8")
    for name in sorted({f for c in claims.CLAIMS for f in c.files}):
        assert (RESULTS / name).is_file(), name
        assert f"`{name}`" in listing, f"docs/results/README.md does not name {name}"


def test_cli_check_detects_a_stale_readme(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n" + claims.claims_table(RESULTS).replace("**reproduced**", "**typed**", 1) + "\nend\n")
    assert claims.main(["--results", str(RESULTS), "--readme", str(readme), "--check"]) == 1
    assert claims.main(["--results", str(RESULTS), "--readme", str(readme)]) == 0
    assert claims.main(["--results", str(RESULTS), "--readme", str(readme), "--check"]) == 0
    assert readme.read_text().startswith("intro\n") and readme.read_text().endswith("\nend\n")


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


def cond(name: str, acc: float, prox_start: float = 0.05, prox_end: float = 0.05, diff: float | None = None,
         depth: int = 1) -> dict:
    c = {"condition": name, "depth": depth, "test_acc_mean": acc, "test_acc_ci": 0.02, "prox_start_mean": prox_start,
         "prox_end_mean": prox_end}
    if diff is not None:
        c.update(diff_mean=diff, diff_lo=diff - 0.05, diff_hi=diff + 0.05)
    return c


def paired(verdict: str, mean: float = 0.2, **extra) -> dict:
    return {"verdict": verdict, "mean": mean, "lo": mean - 0.1, "hi": mean + 0.1, **extra}


def spt(word: str = "reproduced", partial: bool = False) -> dict:
    v = [{"id": "spt_gain", **paired(word, 0.35)},
         {"id": "few_epochs", "cond": "spt_e10", **paired(word, 0.0, share=0.0)},
         {"id": "frozen_attn", **paired(word, -0.02)}, {"id": "ffn", **paired(word, -0.01)},
         {"id": "qkvo", **paired(word, share=0.55)}, {"id": "qk", **paired(word, share=float("nan"))},
         {"id": "depth", "verdict": "not run", "missing": ["depth4_scratch", "depth4_spt"]},
         {"id": "cross_data", "verdict": word, "parts": [paired("reproduced", 0.4, cond="cross_count"),
                                                         paired("not reproduced", -0.01, cond="cross_iid")]},
         {"id": "mech_hybrid_qk_ln", **paired("reproduced", share=0.62)}]
    c = [cond("scratch", 0.51), cond("spt", 0.86, 0.62, 0.47, 0.35), cond("spt_e1", 0.5, diff=-0.017),
         cond("spt_e10", 0.51, diff=-0.001), cond("depth2_spt", 0.9, diff=0.418, depth=2)]
    return {"partial": partial, "config": {"seeds": [7301, 7302, 7303], "task": {"T": 100}, "proximity_w": 2,
                                           "thresholds": {"margin": 0.03}},
            "summary": {"conditions": c, "verdicts": v}}


def lra(verdict: str) -> dict:
    return {"verdict": verdict, "preset": "cpu-listops-plateau", "seeds": [10, 11, 12], "spt_mean": 0.376,
            "scratch_mean": 0.363, "mean_diff_points": 1.3,
            "per_seed": [{"spt_test_acc": 0.39, "scratch_test_acc": 0.37}, {"spt_test_acc": 0.35, "scratch_test_acc": 0.36}],
            "proximity_verdict": "no proximity bias at fine-tuning start", "prox_init_spt_mean": 0.31,
            "uniform_proximity_mean": 0.274}


FAMS = ("bert", "roberta", "albert", "modernbert")


def phase(yes: dict[str, tuple[str, ...]] | None = None, overall: str = "reproduces") -> dict:
    keys = ("high_norm_fixed_by_rescaling", "non_monotone_optimum", "over_rescaling_collapse", "small_norm_harm",
            "high_initial_loss_and_poor_minimum")
    yes = yes or {}
    verdicts = {k: {"overall": overall, "per_family": {f: f in yes.get(k, FAMS) for f in FAMS}} for k in keys}
    verdicts["input_side"] = {f: {"s=0.25,k=16": {"verdict": "explains" if f != "albert" else "does not",
                                                   "harm_tied": 0.3 + 0.1 * i, "harm_output": 0.0}} for i, f in enumerate(FAMS)}
    verdicts["input_side"]["modernbert"]["s=0.25,k=16"] = {"verdict": "no harm to explain", "harm_tied": 0.01, "harm_output": 0.0}
    stab = [{"family": f, "s": 16.0, "ndcg@10_best": 0.8, "ndcg@10_k1": 0.8 - 0.1 * (i + 1), "init_infonce_k1": 26.0 + i,
             "final_infonce_k1": 2.0 + i, "final_infonce_best": 1.0} for i, f in enumerate(FAMS)]
    return {"config": {"families": list(FAMS), "head_scales": [0.25, 1.0, 16.0], "batch_size": 32, "seeds": [1],
                       "harm_margin": 0.05},
            "verdicts": verdicts, "stability": stab, "regret": {"hit_rate": 0.5, "mean_regret": 0.02}}


def splade(p0: dict | None = None, p1: dict | None = None) -> dict:
    return {rows.SPLADE[0]: p0 or phase(), rows.SPLADE[1]: p1 or phase(), rows.SPLADE_INPUT: phase()}


# ------------------------------------------------------------------------------------------------
# rows: every verdict word reachable, and taken from the saved fields
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fail,word", [((), "reproduced"), (("T3",), "partly"), (("T1",), "not reproduced"),
                                       (("T4", "T5"), "not reproduced")])
def test_theory_rule(fail, word):
    cell = rows.theory_row({rows.THEORY: theory(fail)})
    assert cell.startswith(f"**{word}**")
    assert ("fail" in cell) == bool(fail)
    if not fail:
        assert "median blind fraction 0.30" in cell and "residual stacks with FFN or random later attention are not (0.25-0.90)" in cell and "all 7 statements (T1-T7)" in cell
        assert "pass sympy derivations, float64 autograd identities and finite differences (20 random" in cell


def test_theory_row_names_only_the_checks_every_statement_ran():
    cell = rows.theory_row({rows.THEORY: theory(no_sympy=True)})
    assert "pass float64 autograd identities (20 random cases each)." in cell and "sympy" not in cell


@pytest.mark.parametrize("spt_start,scratch_end,word", [(0.62, 0.05, "reproduced"), (0.62, 0.3, "partly"),
                                                        (0.09, 0.05, "not reproduced")])
def test_proximity_rule(spt_start, scratch_end, word):
    r = spt()
    conds = r["summary"]["conditions"]
    conds[1]["prox_start_mean"], conds[0]["prox_end_mean"] = spt_start, scratch_end
    cell = rows.proximity_row({rows.SPT: r})
    assert cell.startswith(f"**{word}**") and "seeds 7301-7303" in cell and "uniform 0.049" in cell


@pytest.mark.parametrize("word", ["reproduced", "partly", "not reproduced"])
def test_spt_rows_use_the_saved_verdicts(word):
    r = {rows.SPT: spt(word)}
    assert rows.spt_gain_row(r).startswith(f"**{word}**")
    assert f"W_Q/W_K/W_V/W_O: **{word}** (share 0.55" in rows.attention_weights_row(r)
    assert "no SPT gain to share" in rows.attention_weights_row(r) and "LayerNorms 0.62" in rows.attention_weights_row(r)
    few = rows.few_epochs_other_data_row(r)
    assert few.startswith(f"few epochs: **{word}**") and f"other data: **{word}**" in few and "1 epoch: -1.7" in few
    assert rows.frozen_ffn_row(r).count(f"**{word}**") == 2 and "±3 points" in rows.frozen_ffn_row(r)


def test_spt_rows_say_not_run_and_name_the_partial_run():
    r = spt("not run", partial=True)
    gain = rows.spt_gain_row({rows.SPT: r})
    assert gain == "**not run** (partial run)"
    r = spt("reproduced", partial=True)
    gain = rows.spt_gain_row({rows.SPT: r})
    assert "depth 2: +41.8" in gain and gain.endswith("depth 4 **not run** (partial run)")
    done = spt("reproduced")
    done["summary"]["verdicts"][6] = {"id": "depth", "verdict": "partly",
                                      "parts": [paired("reproduced", cond="spt"), paired("reproduced", 0.4, cond="depth2_spt"),
                                                paired("not reproduced", 0.01, cond="depth4_spt")]}
    gain = rows.spt_gain_row({rows.SPT: done})
    assert "depth 4: +1.0" in gain and gain.endswith("every depth: **partly**") and "partial" not in gain


@pytest.mark.parametrize("verdict,word", [("SPT gain", "reproduced"), ("no difference detected", "not reproduced"),
                                          ("SPT loss", "not reproduced"), ("no paired seeds finished", "not run")])
def test_lra_row_words_the_saved_verdict(verdict, word):
    cell = rows.lra_row({rows.LRA: lra(verdict)})
    assert cell.startswith("**not run** at LRA scale") and f"**{word}** ({verdict})" in cell
    if word != "not run":
        assert "ahead on 1 of 2 seeds" in cell and "no proximity bias" in cell


def test_lra_row_refuses_an_unknown_verdict():
    with pytest.raises(KeyError):
        rows.lra_row({rows.LRA: lra("maybe")})


@pytest.mark.parametrize("overall,word", [("reproduces", "reproduced"), ("partly", "partly"), ("not", "not reproduced")])
def test_splade_rows_word_the_saved_verdicts(overall, word):
    yes = {"partly": ("albert",), "not": ()}.get(overall, FAMS)
    p = phase({k: yes for k in ("high_norm_fixed_by_rescaling", "high_initial_loss_and_poor_minimum")}, overall)
    r = splade(p, copy.deepcopy(p))
    expect = f"**{word}** (seeds 0, 1" + (": albert)" if overall == "partly" else ")")
    assert rows.splade_degradation_row(r).startswith(expect)
    assert rows.splade_fix_row(r).startswith(expect)


def test_splade_rows_show_each_seed_when_they_differ():
    r = splade(phase(), phase({"non_monotone_optimum": ("albert",)}, "partly"))
    cell = rows.splade_over_rescaling_row(r)
    assert "non-monotone optimum **reproduced** (seed 0), **partly** (seed 1: albert)" in cell
    assert cell.endswith("explains in bert, roberta; does not in albert; no harm to explain in modernbert")
    assert "s/k = 1/64 costs 0.30-0.50 nDCG@10 in bert, roberta, albert" in cell
    deg = rows.splade_degradation_row(r)
    assert "0.10 (bert) to 0.40 (modernbert)" in deg and "26-29 nats (ln B = 3.47)" in deg and "1.00-4.00 nats" in deg
    assert "hit rate 0.50 / 0.50" in rows.splade_fix_row(r)


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
    (res / rows.LRA).unlink()
    with pytest.raises(claims.ResultsFileError, match=r"lra_listops_summary\.json: saved result file not found"):
        claims.claims_table(res)


def test_malformed_results_file_is_named(tmp_path):
    res = _copy_results(tmp_path)
    (res / rows.THEORY).write_text("{not json")
    with pytest.raises(claims.ResultsFileError, match=r"theory_verify\.json: not valid JSON"):
        claims.claims_table(res)
    (res / rows.THEORY).write_text("[1, 2]")
    with pytest.raises(claims.ResultsFileError, match=r"theory_verify\.json: expected a JSON object"):
        claims.claims_table(res)


def test_results_file_without_a_needed_field_is_named(tmp_path, capsys):
    res = _copy_results(tmp_path)
    data = json.loads((res / rows.SPT).read_text())
    del data["summary"]["verdicts"]
    (res / rows.SPT).write_text(json.dumps(data))
    with pytest.raises(claims.ResultsFileError, match=r"synthetic_spt_default/summary\.json: missing or malformed.*verdicts"):
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
    body = {"config": {"seeds": [1]}, "summary": {"verdicts": []}, "cells": {"big": list(range(100))}}
    (run / "partial" / "metrics.json").write_text(json.dumps({**body, "missing": ["ft_depth4_spt"]}))
    out = json.loads(claims.collect_spt(run, tmp_path / "a" / "summary.json").read_text())
    assert out["partial"] is True and out["missing"] == ["ft_depth4_spt"] and "cells" not in out
    (run / "metrics.json").write_text(json.dumps(body))
    (run / "DONE").write_text("")
    out = json.loads(claims.collect_spt(run, tmp_path / "a" / "summary.json").read_text())
    assert out["partial"] is False and out["missing"] == [] and out["source"] == "metrics.json"
    assert out["summary"] == body["summary"] and out["config"] == body["config"]


def test_collect_spt_refuses_a_folder_without_metrics(tmp_path):
    with pytest.raises(claims.ResultsFileError, match=r"partial/metrics\.json: saved result file not found \(expected"):
        claims.collect_spt(tmp_path, tmp_path / "summary.json")
    (tmp_path / "partial").mkdir()
    (tmp_path / "partial" / "metrics.json").write_text('{"config": {}}')
    with pytest.raises(claims.ResultsFileError, match="'config' and 'summary'"):
        claims.collect_spt(tmp_path, tmp_path / "summary.json")
