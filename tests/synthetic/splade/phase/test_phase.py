"""Synthetic SPLADE phase diagram: grid mapping, collapse flag, regret, verdict rules, guarded resume, NaN stop, end to end."""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch

import initlab.synthetic.splade.phase.runner as ph
import initlab.synthetic.splade.phase.cell as phcell
import initlab.synthetic.splade.phase.config as phc
import initlab.synthetic.splade.phase.report as rep
from initlab.config import derive
from initlab.runs import ConfigMismatchError, NonFiniteError, RunDir, RunExistsError
from initlab.synthetic.splade.data import CorpusConfig
from initlab.synthetic.splade.families import FamilyConfig

TINY = derive(
    phc.BASE,
    corpus=CorpusConfig(n_topics=3, topic_words=4, n_background=5, n_entities=20, n_docs=18, doc_len=8,
                        entities_per_doc=2, n_train_queries=48, n_dev_queries=6),
    backbone=FamilyConfig(d=16, layers=1, heads=2, ffn=32, albert_embedding=8, max_len=16, mlm_steps=3, mlm_batch=8),
    families=("bert",), head_scales=(1.0, 16.0), ks=(1.0, 16.0), output_ks=(16.0,), steps=3, batch_size=8,
    log_every=1, init_batch=8, query_max_len=8, doc_max_len=12, inspect_texts=6,
)


# ------------------------------------------------------------------------------------------------
# grid
# ------------------------------------------------------------------------------------------------
def test_cell_spec_of_each_mode():
    assert phc.cell_spec("bert", "tied", 16.0, 4.0, 0) == phc.CellSpec("bert", True, 4.0, 4.0, 0)
    assert phc.cell_spec("bert", "k_output", 16.0, 4.0, 0) == phc.CellSpec("bert", False, 16.0, 4.0, 0)
    assert phc.cell_spec("bert", "k_output", 16.0, 1.0, 0) == phc.CellSpec("bert", True, 16.0, 16.0, 0)  # k = 1: no untie
    assert phc.cell_spec("bert", "s_output", 16.0, 4.0, 0) == phc.CellSpec("bert", False, 1.0, 4.0, 0)
    with pytest.raises(ValueError, match="mode"):
        phc.cell_spec("bert", "both", 1.0, 1.0, 0)


def test_grid_shares_cells_with_equal_weights():
    points = phc.grid(TINY)
    assert len(points) == 2 * 2 + 2 * 2  # tied s x k, k_output s x (1, 16)
    cells = {p["cell"] for p in points}
    # tied: s/k in {1, 1/16, 16}; k_output adds untied (1, 1/16) and (16, 1)
    assert len(cells) == 5
    by = {(p["mode"], p["s"], p["k"]): p["cell"] for p in points}
    assert by[("tied", 1.0, 1.0)] == by[("tied", 16.0, 16.0)] == by[("k_output", 1.0, 1.0)]
    assert by[("k_output", 16.0, 16.0)] != by[("tied", 16.0, 16.0)]  # untied, input embeddings stay x16


def test_full_preset_grid_and_bad_grids():
    full = phc.PRESETS["full"]
    assert full.head_scales[0] == 0.25 and full.head_scales[-1] == 64.0 and set(full.modes) == set(phc.MODES)
    for bad in (dict(ks=(1.0, 3.0)), dict(families=("gpt2",)), dict(modes=("both",))):
        with pytest.raises(ValueError):
            phc.check_config(derive(TINY, **bad))


# ------------------------------------------------------------------------------------------------
# collapse flag on hand-made vectors
# ------------------------------------------------------------------------------------------------
def _flag(d, q=None, curve=()):
    q = d[:4] if q is None else q
    return phcell.collapse_verdict(list(curve), q, d, q.double() @ d.double().T, d.shape[1], True, TINY)


def test_collapse_flag_on_hand_made_vectors():
    g = torch.Generator().manual_seed(0)
    healthy = torch.rand(12, 50, generator=g) * (torch.rand(12, 50, generator=g) < 0.2)
    healthy[:, 0] = 0.1  # every document active somewhere
    assert not _flag(healthy).collapsed
    empty = _flag(torch.zeros(12, 50))
    assert empty.collapsed and any("empty" in r for r in empty.reasons)
    same = torch.zeros(12, 50)
    same[:, :5] = torch.tensor([1.0, 2.0, 0.5, 0.3, 0.2])  # every document the same vector
    near = _flag(same + 1e-4 * torch.rand(12, 50, generator=g).mul(same > 0))
    assert near.collapsed and any("near-constant" in r for r in near.reasons)
    assert near.stats["mean_doc_cosine"] > 0.99
    dense = _flag(torch.rand(12, 50, generator=g) + 0.01)
    assert any("dense" in r for r in dense.reasons)
    nan_curve = _flag(healthy, curve=[{"step": 1, "loss": 1.0}, {"step": 2, "loss": float("nan")}])
    assert any("non-finite loss at step 2" in r for r in nan_curve.reasons)


# ------------------------------------------------------------------------------------------------
# analysis on hand-made rows
# ------------------------------------------------------------------------------------------------
def _rows(ndcg: dict[float, float | None], family="bert", s=1.0, mode="tied"):
    return [{"family": family, "mode": mode, "s": s, "k": k, "seed": 0, "ndcg@10": v} for k, v in ndcg.items()]


def _inspect(rec_k, score_sd: dict[float, float], family="bert", s=1.0):
    return {"family": family, "s": s, "recommended": {"k": rec_k, "rule": "test"},
            "table": [{"k": k, "score_sd": v} for k, v in score_sd.items()]}


def test_regret_hit_rate_and_failed_cells_count_as_zero():
    cfg = derive(TINY, families=("bert", "albert"), head_scales=(1.0,), ks=(1.0, 4.0, 16.0))
    rows = _rows({1.0: 0.50, 4.0: 0.70, 16.0: None}) + _rows({1.0: 0.40, 4.0: 0.30, 16.0: 0.395}, "albert")
    thr = math.sqrt(2 * math.log(cfg.batch_size))
    inspects = [_inspect(16.0, {1.0: 40 * thr, 4.0: 1.2 * thr, 16.0: 0.01 * thr}),
                _inspect(1.0, {1.0: 0.9 * thr, 4.0: 0.05 * thr, 16.0: 0.001 * thr}, "albert")]
    table = rep.recommended_table(rows, inspects, cfg)
    bert, albert = table
    assert bert["best_k"] == 4.0 and bert["ndcg_recommended"] == 0.0  # failed cell: nDCG 0
    assert bert["regret"] == pytest.approx(0.70) and not bert["hit"]
    assert bert["edge_k"] == 4.0 and bert["regret_edge"] == 0.0  # 1.2 thr is closest to the edge in log scale
    assert albert["hit"] and albert["regret"] == 0.0 and albert["edge_k"] == 1.0
    summ = rep.regret_summary(table, tolerance=0.01)
    assert summ == {"rows": 2, "hit_rate": 0.5, "near_hit_rate": 0.5, "mean_regret": pytest.approx(0.35),
                    "max_regret": pytest.approx(0.70)}
    assert rep.regret_summary(table, rule="edge")["hit_rate"] == 1.0


def test_best_k_ties_go_to_the_smaller_k():
    assert rep._best_k(_rows({1.0: 0.5, 2.0: 0.6, 4.0: 0.6}), "bert", "tied", 1.0) == (2.0, 0.6)


def test_roughness_and_steps_to_threshold():
    line = [{"step": i, "ranking": 3.0 - 0.1 * i} for i in range(1, 11)]
    assert rep.roughness(line) == pytest.approx(0.0, abs=1e-12)
    zigzag = [{"step": i, "ranking": 2.0 + (0.5 if i % 2 else -0.5)} for i in range(1, 11)]
    assert rep.roughness(zigzag) == pytest.approx(2.0)  # second differences +-2
    assert rep.roughness(line[:2]) is None
    assert rep.steps_to_threshold(line, 2.5) == 5 and rep.steps_to_threshold(line, 0.5) is None


def test_input_side_verdicts():
    rows = _rows({1.0: 0.8, 16.0: 0.5}) + _rows({16.0: 0.78}, mode="k_output")
    assert rep._input_side(rows, "bert", 1.0, 16.0, 0.05)["verdict"] == "explains"
    rows = _rows({1.0: 0.8, 16.0: 0.5}) + _rows({16.0: 0.5}, mode="k_output")
    assert rep._input_side(rows, "bert", 1.0, 16.0, 0.05)["verdict"] == "does not"
    rows = _rows({1.0: 0.8, 16.0: 0.79}) + _rows({16.0: 0.5}, mode="k_output")
    assert rep._input_side(rows, "bert", 1.0, 16.0, 0.05)["verdict"] == "no harm to explain"


def test_predicted_infonce_limits():
    assert rep.predicted_infonce(0.0, 32) == pytest.approx(math.log(32))
    big = rep.predicted_infonce(50.0, 32)
    assert big > 2 * math.log(32)  # saturated: about the largest gap, far above ln B


# ------------------------------------------------------------------------------------------------
# guarded resume, non-finite stop, end to end
# ------------------------------------------------------------------------------------------------
def test_changed_config_resume_raises(tmp_path):
    spec = phc.cell_spec("bert", "tied", 1.0, 1.0, 0)
    rd = RunDir(tmp_path / "run", config=TINY)
    rd.save_cell(spec.name, {"ndcg@10": 0.5}, key=phc.cell_key(TINY, spec))
    changed = derive(TINY, lr=1e-3)
    with pytest.raises(ConfigMismatchError):
        ph.run_phase(tmp_path / "run", changed, progress=False, workers=1)
    with pytest.raises(ConfigMismatchError):  # the cell key alone also refuses reuse
        RunDir(tmp_path / "run").has_cell(spec.name, key=phc.cell_key(changed, spec))
    assert RunDir(tmp_path / "run").has_cell(spec.name, key=phc.cell_key(TINY, spec))


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    from initlab.synthetic.splade.data import make_corpus
    from initlab.synthetic.splade.families import prepare_family_backbone

    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("bb") / "bert"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return prepare_family_backbone(folder, "bert", make_corpus(TINY.corpus), TINY.backbone, 0)


def test_non_finite_gradient_stops_the_cell_and_records_it_as_failed(backbone, tmp_path, monkeypatch):
    real = phcell.scale_backbone

    def poisoned(model, e, h, tied):
        real(model, e, h, tied)
        with torch.no_grad():
            model.get_output_embeddings().bias[0] = float("nan")  # NaN logits for one vocabulary entry

    monkeypatch.setattr(phcell, "scale_backbone", poisoned)
    rec = phcell.run_phase_cell(str(backbone), TINY, phc.cell_spec("bert", "tied", 1.0, 1.0, 0), str(tmp_path / "w"))
    assert rec["failed"] and "step 1" in rec["failed"] and rec["collapse"] == [rec["failed"]]
    assert rec["ndcg@10"] is None and rec["loss_curve"] == []
    from initlab.synthetic.splade import train as splade_train

    assert issubclass(NonFiniteError, FloatingPointError) and callable(splade_train.finite_guard_callback)


@pytest.fixture(scope="module")
def phase_run(tmp_path_factory):
    from initlab.paper_figs.synthetic_splade_figures import draw_phase

    out = tmp_path_factory.mktemp("phase") / "run"
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ph.run_phase(out, TINY, progress=False, draw=draw_phase, workers=1)
    return out


def test_phase_end_to_end_tables_and_figures(phase_run):
    out = phase_run
    assert (out / "DONE").exists()
    report = json.loads((out / "phase.json").read_text())
    assert report["distinct_cells"] == 5 and report["grid_points"] == 8 and len(report["rows"]) == 8
    for r in report["rows"]:
        assert r["failed"] or 0 <= r["ndcg@10"] <= 1
        assert r["tied_after"] == r["tied"]  # training kept the tie (or the untie)
    cells = {r["cell"]: r for r in report["rows"]}
    untied = cells[phc.cell_spec("bert", "k_output", 1.0, 16.0, 0).name]
    assert untied["hidden_rel_change"] == 0.0  # output-only rescale: hidden states untouched
    tied = cells[phc.cell_spec("bert", "tied", 1.0, 16.0, 0).name]
    assert tied["hidden_rel_change"] > 0.0
    assert len(report["recommended"]) == 2 and set(report["verdicts"]) >= {"high_norm_fixed_by_rescaling", "input_side"}
    assert (out / "recommended_k.csv").read_text().count("\n") == 3
    assert len(json.loads((out / "theory.json").read_text())["rows"]) == 5
    for name in ("splade_phase_bert.png", "splade_init_vs_final_loss.png", "splade_recommended_vs_best_k.png",
                 "splade_theory_vs_measured.png"):
        assert (out / name).stat().st_size > 5000, name
    assert "### bert, mode `tied`" in (out / "summary.md").read_text()


def test_theory_json_compares_each_cell_with_the_per_entry_model(phase_run):
    """Active fraction and FLOPS at initialisation are predicted by the per-entry Gaussian logit model at each cell's
    own logits; the i.i.d. model's values are kept beside them. Predictions are probabilities of the same texts'
    activity, so they are bounded like the measured values."""
    theory = json.loads((phase_run / "theory.json").read_text())
    for r in theory["rows"]:
        assert 0 < r["predicted_active_fraction"] <= 1 and 0 < r["iid_active_fraction"] <= 1
        assert r["predicted_flops"] > 0 and r["iid_flops"] > 0
    agree = theory["agreement"]
    assert agree["predicted_active_fraction"]["cells"] == len(theory["rows"]) == agree["iid_active_fraction"]["cells"]
    for key in ("predicted_infonce", "predicted_active_fraction", "iid_active_fraction", "predicted_flops", "iid_flops"):
        a = agree[key]
        assert a["min"] <= a["median"] <= a["max"]


def test_finished_run_is_guarded_and_stage_and_cli_return_saved_results(phase_run, monkeypatch, capsys):
    from initlab import stages
    from initlab.commands import synthetic as synthetic_cmd

    with pytest.raises(RunExistsError):
        ph.run_phase(phase_run, TINY, progress=False, workers=1)
    monkeypatch.setitem(phc.PRESETS, "quick", TINY)
    md = stages.splade(phase_run, "quick", overwrite=False)  # DONE: nothing is rerun
    assert "### bert, mode `tied`" in md and "splade_phase_bert.png" in md
    with pytest.raises(ValueError, match="preset"):
        stages.splade(phase_run, "huge", overwrite=False)
    with pytest.raises(SystemExit):
        synthetic_cmd.splade_main(["--preset", "quick", "--out", str(phase_run)])  # finished run, no --overwrite
    assert "already holds a finished run" in capsys.readouterr().err


def test_collapse_note_says_which_collapsed_cells_are_expected(tmp_path):
    cfg = derive(TINY, head_scales=(1.0,), ks=(1.0, 16.0), modes=("tied",))
    own, off = phc.cell_spec("bert", "tied", 1.0, 1.0, 0), phc.cell_spec("bert", "tied", 1.0, 16.0, 0)
    rd = RunDir(tmp_path / "run")
    rd.save_cell(own.name, {"collapse": [], "failed": None})
    rd.save_cell(off.name, {"collapse": ["documents empty (mean active dims 0)"], "failed": None})
    note = ph.collapse_note(rd.root, cfg)
    assert "1 of 2 cells collapsed" in note and "expected" in note and off.name in note and "WARNING" not in note
    rd.save_cell(own.name, {"collapse": ["documents dense (40 of 41 dims active)"], "failed": None})
    note = ph.collapse_note(rd.root, cfg)
    assert "WARNING: 1 cells collapsed or failed at the backbone's own scale" in note and own.name in note
    rd.save_cell(own.name, {"collapse": [], "failed": None})
    rd.save_cell(off.name, {"collapse": [], "failed": None})
    assert ph.collapse_note(rd.root, cfg) == ""


def _without_timing(path):
    """A saved file's text without its timing lines (``"seconds": ...``, ``"cpu_seconds": ...``)."""
    return [ln for ln in path.read_text().splitlines() if not ln.strip().startswith(('"seconds":', '"cpu_seconds":'))]


def test_a_dask_local_cluster_gives_the_same_cells_as_this_process(phase_run, tmp_path, capsys):
    """The sweep on a LocalCluster (2 single-threaded worker processes) writes the same cell files, byte for
    byte except timing lines, as the in-process run of the fixture; so does the backbone."""
    pytest.importorskip("distributed")
    out = tmp_path / "dask"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ph.run_phase(out, TINY, progress=False, scheduler="local:2")
    assert (out / "DONE").exists()
    names = sorted(p.name for p in (phase_run / "cells").iterdir())
    assert names == sorted(p.name for p in (out / "cells").iterdir()) and len(names) == 2 * (1 + 5 + 2)
    for name in names:
        assert _without_timing(out / "cells" / name) == _without_timing(phase_run / "cells" / name), name
    bb = "backbone/bert_seed=0"
    assert (out / bb / "model.safetensors").read_bytes() == (phase_run / bb / "model.safetensors").read_bytes()


def test_tables_of_a_failed_cell_hold_no_nan_numbers():
    """A cell stopped by a non-finite gradient: its saved "nan" strings become None, never numbers."""
    failed = {"family": "bert", "tied": True, "e": 1.0, "h": 1.0, "seed": 0, "failed": "non-finite gradient at step 1",
              "collapse": ["non-finite gradient at step 1"], "collapse_stats": {}, "loss_curve": [], "final": None,
              "hidden_rel_change": 0.0, "seconds": 1.0, "ndcg@10": None, "mrr@10": None, "flops": None,
              "q_active_dims": None, "d_active_dims": None,
              "init": {key: "nan" for key in ("ranking_loss", "logit_std", "head_norm", "active_fraction", "flops",
                                              "d_active_dims", "L_q", "L_d", "bias_mean", "logit_mean", "score_spread")}}
    point = {"family": "bert", "mode": "tied", "s": 1.0, "k": 1.0, "seed": 0, "cell": "c"}
    (row,) = rep.phase_rows([point], {"c": failed}, TINY)
    assert row["failed"] and row["collapsed"] and row["ndcg@10"] is None
    assert row["init_infonce"] is None and row["init_logit_std"] is None and row["roughness"] is None
    assert rep.theory_rows({"c": failed}, 42, TINY) == []
    assert rep._best_k([row], "bert", "tied", 1.0) == (1.0, 0.0)  # counts as nDCG 0
