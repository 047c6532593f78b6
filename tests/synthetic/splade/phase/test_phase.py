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
from initlab.synthetic.splade import claims as sc
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
    log_every=1, init_batch=8, query_max_len=8, doc_max_len=12, inspect_texts=6, posthoc_ks=(16.0,),
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


def test_presets_and_bad_grids():
    full = phc.PRESETS["imposed-s-full"]
    assert full.head_scales[0] == 0.25 and full.head_scales[-1] == 64.0 and set(full.modes) == set(phc.MODES)
    for name in ("quick", "default", "explore", "full"):  # the natural-norm presets: no imposed head scale
        cfg = phc.PRESETS[name]
        assert cfg.head_scales == (1.0,) and "modernbert" in cfg.family_backbones
        assert phc.backbone_for(cfg, "bert") == cfg.backbone
    nat = phc.PRESETS["full"]
    assert phc.backbone_for(nat, "modernbert").mlm_steps > phc.backbone_for(nat, "bert").mlm_steps
    assert not phc.backbone_for(nat, "modernbert").decay_embeddings and phc.backbone_for(nat, "bert").decay_embeddings
    for bad in (dict(ks=(1.0, 3.0)), dict(families=("gpt2",)), dict(modes=("both",)), dict(posthoc_ks=(0.0,))):
        with pytest.raises(ValueError):
            phc.check_config(derive(TINY, **bad))
    with pytest.raises(ValueError, match="family_backbones"):
        derive(TINY, family_backbones={"gpt2": phc.STANDARD_RECIPE})


def test_cell_key_holds_only_its_own_family_backbone():
    spec = phc.cell_spec("bert", "tied", 1.0, 4.0, 0)
    a, b = phc.PRESETS["default"], phc.PRESETS["full"]
    assert phc.cell_key(a, spec) == phc.cell_key(b, spec)  # default's cells are full's (same recipe)
    changed = derive(b, family_backbones={**b.family_backbones, "bert": derive(b.backbone, mlm_steps=7)})
    assert phc.cell_key(changed, spec) != phc.cell_key(b, spec)
    assert phc.cell_key(derive(b, family_backbones={}), phc.cell_spec("bert", "tied", 1.0, 4.0, 0)) == phc.cell_key(b, spec)


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
def _rows(ndcg: dict[float, float | None], family="bert", s=1.0, mode="tied", seed=0):
    return [{"family": family, "mode": mode, "s": s, "k": k, "seed": seed, "ndcg@10": v, "ndcg_select": v, "ndcg_test": v}
            for k, v in ndcg.items()]


def _inspect(rec_k, score_sd: dict[float, float], family="bert", s=1.0, seed=0):
    return {"family": family, "s": s, "seed": seed, "recommended": {"k": rec_k, "rule": "test"},
            "head": {"frobenius": 1.0}, "table": [{"k": k, "score_sd": v} for k, v in score_sd.items()]}


def test_recommended_table_regrets_per_rule_and_failed_cells_count_as_zero():
    cfg = derive(TINY, families=("bert", "albert"), head_scales=(1.0,), ks=(1.0, 4.0, 16.0))
    rows = _rows({1.0: 0.50, 4.0: 0.70, 16.0: None}) + _rows({1.0: 0.40, 4.0: 0.30, 16.0: 0.395}, "albert")
    thr = math.sqrt(2 * math.log(cfg.init_batch))
    inspects = [_inspect(16.0, {1.0: 40 * thr, 4.0: 1.2 * thr, 16.0: 0.01 * thr}),
                _inspect(1.0, {1.0: 0.9 * thr, 4.0: 0.05 * thr, 16.0: 0.001 * thr}, "albert")]
    bert, albert = rep.recommended_table(rows, inspects, cfg)
    assert bert["best_k"] == 4.0 and bert["ndcg_inspect"] == 0.0  # failed cell: nDCG 0
    assert bert["regret_inspect"] == pytest.approx(0.70)
    assert bert["k_edge"] == 4.0 and bert["regret_edge"] == 0.0  # 1.2 thr is closest to the edge in log scale
    assert bert["k_bert"] == 1.0  # bert itself is the BERT scale
    assert albert["regret_inspect"] == 0.0 and albert["k_edge"] == 1.0
    # albert's k = 1 sd 0.9 thr against bert's 40 thr: the BERT-scale rule picks albert's k = 1 (closest from below)
    assert albert["k_bert"] == 1.0


def test_roughness_and_steps_to_threshold():
    line = [{"step": i, "ranking": 3.0 - 0.1 * i} for i in range(1, 11)]
    assert rep.roughness(line) == pytest.approx(0.0, abs=1e-12)
    zigzag = [{"step": i, "ranking": 2.0 + (0.5 if i % 2 else -0.5)} for i in range(1, 11)]
    assert rep.roughness(zigzag) == pytest.approx(2.0)  # second differences +-2
    assert rep.roughness(line[:2]) is None
    assert rep.steps_to_threshold(line, 2.5) == 5 and rep.steps_to_threshold(line, 0.5) is None


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
    from initlab.paper_figs.synthetic_splade_phase_figures import draw_phase

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
    assert len(report["recommended"]) == 2 and set(report["verdicts"]) == {c.id for c in sc.CLAIMS}
    # the saved record is what the numbers give
    assert sc.check_record(report["verdicts"], sc.as_raw(report), TINY.claims, "phase.json")
    assert (out / "recommended_k.csv").read_text().count("\n") == 3
    assert {p["k"] for p in report["posthoc"]} == {16.0} and len(report["posthoc"]) == 5
    for r in report["rows"]:
        assert r["failed"] or (0 <= r["ndcg_select"] <= 1 and 0 <= r["ndcg_test"] <= 1)
    assert len(json.loads((out / "theory.json").read_text())["rows"]) == 5
    for name in ("splade_phase_bert.png", "splade_init_vs_final_loss.png", "splade_recommended_vs_best_k.png",
                 "splade_theory_vs_measured.png"):
        assert (out / name).stat().st_size > 5000, name
    assert "### bert, s = 16: nDCG@10" in (out / "summary.md").read_text()


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
    from initlab.synthetic.splade.phase import command as synthetic_cmd
    from initlab.synthetic.splade.phase import stage

    with pytest.raises(RunExistsError):
        ph.run_phase(phase_run, TINY, progress=False, workers=1)
    monkeypatch.setitem(phc.PRESETS, "quick", TINY)
    md = stage.splade(phase_run, "quick", overwrite=False)  # DONE: nothing is rerun
    assert "### bert: nDCG@10" in md and "splade_phase_bert.png" in md
    with pytest.raises(ValueError, match="preset"):
        stage.splade(phase_run, "huge", overwrite=False)
    with pytest.raises(SystemExit):
        synthetic_cmd.splade_main(["--preset", "quick", "--out", str(phase_run)])  # finished run, no --overwrite
    assert "already holds a finished run" in capsys.readouterr().err


def test_reproduce_stage_runs_every_preset_on_the_fused_head():
    from initlab.experiment.stage import PRESETS as STAGE_PRESETS
    from initlab.synthetic.splade.phase import stage

    for preset in STAGE_PRESETS:
        cfg = stage.stage_config(preset)
        assert cfg.engine == "fused" and cfg == derive(phc.PRESETS[preset], engine="fused"), preset
        specs = {p["cell"]: p for p in phc.grid(cfg)}
        assert specs and all(phc.cell_key(cfg, phc.cell_spec(p["family"], p["mode"], p["s"], p["k"], p["seed"]))
                             ["recipe"]["engine"] == "fused" for p in specs.values()), preset
    # the presets keep their engine: `initlab synthetic splade --preset default` still makes the saved full run's cells
    assert phc.PRESETS["default"].engine == "dense"


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
    """A saved file's text without its timing lines (``"seconds": ...``, ``"cpu_seconds...": ...``)."""
    return [ln for ln in path.read_text().splitlines() if not ln.strip().startswith(('"seconds":', '"cpu_seconds'))]


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
    assert sc.best_k({1.0: row}) == 1.0 and row["ndcg_test"] is None  # scored as nDCG 0 by the claims
