"""Synthetic SPLADE end to end on a tiny grid: cells, determinism, resume, collapse, figures, CLI."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from initlab.paper_figs import synthetic_splade_figures
import initlab.synthetic.splade.inflation as sp
import initlab.synthetic.splade.config as spc
import initlab.synthetic.splade.measure as spm
import initlab.synthetic.splade.train as spt
from initlab.config import derive
from initlab.runs import RunExistsError
from initlab.synthetic.splade.data import CorpusConfig, make_corpus
from initlab.synthetic.splade.model import BackboneConfig, prepare_backbone

TINY = derive(
    spc.BASE,
    corpus=CorpusConfig(n_topics=3, topic_words=4, n_background=5, n_entities=20, n_docs=18, doc_len=8,
                        entities_per_doc=2, n_train_queries=64, n_dev_queries=6),
    backbone=BackboneConfig(d=16, layers=1, heads=2, ffn=32, max_len=16, mlm_steps=4, mlm_batch=8),
    inflations=(1.0, 8.0), ks=(1.0, 8.0), seeds=(0,), steps=4, batch_size=8, log_every=1, init_batch=8,
    query_max_len=8, doc_max_len=12,
)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("splade") / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # tiny cells may legitimately count as collapsed
        sp.run_sweep(out, TINY, progress=False, draw=synthetic_splade_figures.draw_all)
    return out


def test_sweep_writes_cells_metrics_config_and_figures(tiny_run):
    assert (tiny_run / "DONE").exists()
    cfg = json.loads((tiny_run / "config.json").read_text())
    assert cfg["config_class"] == "SpladeSweepConfig" and cfg["config"]["ks"] == [1.0, 8.0]
    cells = sorted(p.stem for p in (tiny_run / "cells").glob("*.json"))
    assert cells == sorted(spc.cell_name(i, k, 0) for i in (1.0, 8.0) for k in (1.0, 8.0))
    rows = json.loads((tiny_run / "metrics.json").read_text())["table"]
    assert len(rows) == 4 and (tiny_run / "metrics.csv").read_text().count("\n") == 5
    for r in rows:
        assert 0 <= r["ndcg@10"] <= 1 and 0 <= r["mrr@10"] <= 1 and r["flops"] >= 0
    cell = json.loads((tiny_run / "cells" / f"{spc.cell_name(8.0, 1.0, 0)}.json").read_text())
    assert [row["step"] for row in cell["loss_curve"]] == [1, 2, 3, 4]
    assert cell["loss_curve"][0]["lambda_q"] == 0.0  # quadratic warm-up starts at 0
    # the head norm at init is the pretrained norm times inflation / k (tied, one shared tensor)
    init = {(c["inflation"], c["k"]): c["init"]["head_norm"] for c in json.loads((tiny_run / "metrics.json").read_text())["cells"]}
    assert init[(8.0, 1.0)] == pytest.approx(8 * init[(1.0, 1.0)], rel=1e-5)
    assert init[(8.0, 8.0)] == pytest.approx(init[(1.0, 1.0)], rel=1e-5)
    assert init[(1.0, 8.0)] == pytest.approx(init[(1.0, 1.0)] / 8, rel=1e-5)
    for name in ("splade_effectiveness_flops.png", "splade_loss_curves.png", "splade_init_scale.png"):
        assert (tiny_run / name).stat().st_size > 5000
    assert "| 8 | 8 |" in (tiny_run / "summary.md").read_text()


def test_resumed_cell_under_a_changed_recipe_is_refused(tiny_run, tmp_path):
    import shutil

    from initlab.runs import ConfigMismatchError, RunDir

    unfinished = tmp_path / "unfinished"
    shutil.copytree(tiny_run / "cells", unfinished / "cells")
    shutil.copy(tiny_run / "config.json", unfinished / "config.json")
    changed = derive(TINY, lr=1e-3)
    with pytest.raises(ConfigMismatchError):
        sp.run_sweep(unfinished, changed, progress=False)
    name = spc.cell_name(1.0, 1.0, 0)
    rd = RunDir(unfinished)
    assert rd.has_cell(name, key=sp.sweep_cell_key(TINY, 1.0, 1.0, 0))
    with pytest.raises(ConfigMismatchError):
        rd.has_cell(name, key=sp.sweep_cell_key(changed, 1.0, 1.0, 0))


def test_backbone_is_deterministic_by_seed(tiny_run, tmp_path):
    """Bitwise equal for the same seed at the same thread count (the sweep runs with ``torch_threads``)."""
    corpus = make_corpus(TINY.corpus)
    threads = torch.get_num_threads()
    torch.set_num_threads(TINY.torch_threads)
    try:
        again = prepare_backbone(tmp_path / "bb", corpus, TINY.backbone, 0)  # rebuilt from scratch
        other = prepare_backbone(tmp_path / "bb1", corpus, TINY.backbone, 1)
    finally:
        torch.set_num_threads(threads)
    saved = tiny_run / "backbone" / "seed=0"
    assert (again / "model.safetensors").read_bytes() == (saved / "model.safetensors").read_bytes()
    assert (again / "mlm_losses.json").read_text() == (saved / "mlm_losses.json").read_text()
    assert (other / "mlm_losses.json").read_text() != (saved / "mlm_losses.json").read_text()


def test_resume_redoes_only_missing_cells_and_finished_run_is_guarded(tiny_run, monkeypatch):
    with pytest.raises(RunExistsError):
        sp.run_sweep(tiny_run, TINY, progress=False)
    missing = tiny_run / "cells" / f"{spc.cell_name(1.0, 8.0, 0)}.json"
    saved = json.loads(missing.read_text())
    missing.unlink()
    (tiny_run / "DONE").unlink()
    calls = []
    real = sp.run_cell

    def counting(backbone, corpus, cfg, inflation, k, seed, work):
        calls.append((inflation, k, seed))
        return real(backbone, corpus, cfg, inflation, k, seed, work)

    monkeypatch.setattr(sp, "run_cell", counting)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sp.run_sweep(tiny_run, TINY, progress=False)
    assert calls == [(1.0, 8.0, 0)]
    redone = json.loads(missing.read_text())  # determinism: the recomputed cell equals the first run's
    for key in ("ndcg@10", "mrr@10", "q_active_dims", "d_active_dims", "flops", "init", "collapse"):
        assert redone[key] == saved[key], key
    assert redone["loss_curve"] == saved["loss_curve"]
    with pytest.raises(ValueError, match="different config"):
        (tiny_run / "DONE").unlink()
        sp.run_sweep(tiny_run, derive(TINY, steps=5), progress=False)
    sp.RunDir(tiny_run).mark_done()


def test_collapse_detection_on_constructed_cases():
    ok = [{"step": 1, "loss": 1.0, "ranking": 1.0, "flops_q": 0.1, "flops_d": 0.1}]
    assert spm.detect_collapse(ok, 5.0, 20.0, vocab_size=100) == []
    nan = ok + [{"step": 2, "loss": float("nan"), "ranking": float("nan"), "flops_q": 0.0, "flops_d": 0.0}]
    assert spm.detect_collapse(nan, 5.0, 20.0, 100) == ["non-finite loss at step 2"]
    assert any("documents empty" in r for r in spm.detect_collapse(ok, 5.0, 0.0, 100))
    assert any("queries: non-finite" in r for r in spm.detect_collapse(ok, float("nan"), 20.0, 100))
    assert any("queries empty" in r for r in spm.detect_collapse(ok, 0.5, 20.0, 100))
    assert any("dense" in r for r in spm.detect_collapse(ok, 5.0, 95.0, 100))
    assert "non-finite weights" in spm.detect_collapse(ok, 5.0, 20.0, 100, finite_weights=False)


def test_collapsed_model_is_recorded_not_raised(tiny_run):
    """A head with a large negative bias gives empty vectors; a NaN head gives NaN scores: both evaluate."""
    from initlab.mlmhead import head_bias, head_projection

    corpus = make_corpus(TINY.corpus)
    model = spt.load_encoder(tiny_run / "backbone" / "seed=0", 1.0, 1.0, TINY, 0)
    hf = model[0].auto_model
    with torch.no_grad():
        head_bias(hf).fill_(-1e4)
    m = spm.evaluate(model, corpus, TINY)
    assert m["d_active_dims"] == 0 and m["q_active_dims"] == 0
    assert m["ndcg@10"] == 0.0 and m["mrr@10"] == 0.0  # empty vectors retrieve nothing (no tie-order credit)
    assert any("empty" in r for r in spm.detect_collapse([], m["q_active_dims"], m["d_active_dims"], len(corpus.vocab)))
    with torch.no_grad():
        head_projection(hf).fill_(float("nan"))
    m = spm.evaluate(model, corpus, TINY)
    assert m["finite_vectors"] is False and m["ndcg@10"] == 0.0 and m["mrr@10"] == 0.0


def test_figure_script_reads_saved_results(tiny_run, tmp_path):

    assert synthetic_splade_figures.main([str(tiny_run), "--out", str(tmp_path), "--no-theory"]) == 0
    assert (tmp_path / "splade_loss_curves.png").exists()
    with pytest.raises(SystemExit):
        synthetic_splade_figures.main([str(tmp_path / "nothing")])
