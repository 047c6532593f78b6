"""The SPLADE head engine of the synthetic SPLADE cells: the fused cell trains like the dense one (float64), and the
engine enters the configs and cell keys only when fused, so every saved result keeps its record and keys."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from initlab.config import derive, from_dict, to_dict
from initlab.synthetic.splade.config import TrainingRecipe
from initlab.synthetic.splade.data import CorpusConfig, make_corpus
from initlab.synthetic.splade.families import FamilyConfig, build_family_model, family_tokenizer
from initlab.synthetic.splade.ood import config as oc
from initlab.synthetic.splade.phase import config as phc
from initlab.synthetic.splade.train import load_encoder, train_cell

ROOT = Path(__file__).resolve().parents[3]
TINY_BB = FamilyConfig(d=16, layers=1, heads=2, ffn=32, albert_embedding=8, max_len=16)


@pytest.mark.parametrize("family", ["bert", "modernbert"])
def test_a_fused_cell_trains_like_the_dense_cell_in_float64(family, tmp_path):
    """The cell's own training loop (train_cell: SparseEncoderTrainer, SpladeLoss with the FLOPS warm-up), three steps
    in float64 from the same backbone: the logged losses of the fused engine are the dense engine's."""
    corpus = make_corpus(CorpusConfig(n_topics=3, topic_words=4, n_background=6, n_entities=20, n_docs=16, doc_len=8,
                                      n_train_queries=24, n_dev_queries=4))
    build_family_model(family, len(corpus.vocab), TINY_BB, seed=0).save_pretrained(tmp_path / "bb")
    family_tokenizer(family, corpus.vocab).save_pretrained(tmp_path / "bb")
    recipe = TrainingRecipe(steps=3, batch_size=4, log_every=1, doc_max_len=14, query_max_len=8, lr=1e-3)
    curves, heads = {}, {}
    for engine in ("dense", "fused"):
        model = load_encoder(tmp_path / "bb", recipe.doc_max_len, seed=0, engine=engine).double()
        curves[engine] = train_cell(model, corpus, recipe, seed=0, work_dir=tmp_path / f"work_{engine}")
        heads[engine] = model[0].auto_model.get_output_embeddings().weight.detach().clone()
    assert [r["step"] for r in curves["fused"]] == [1, 2, 3]
    for a, b in zip(curves["fused"], curves["dense"]):
        for key in ("loss", "ranking", "flops_q", "flops_d"):
            assert math.isclose(a[key], b[key], rel_tol=1e-9, abs_tol=1e-12), (key, a, b)
    torch.testing.assert_close(heads["fused"], heads["dense"], rtol=1e-9, atol=1e-12)


def test_load_encoder_refuses_an_unknown_engine(tmp_path):
    with pytest.raises(ValueError, match="engine"):
        load_encoder(tmp_path, 12, seed=0, engine="sparse")


def test_the_engine_is_in_the_keys_only_when_fused():
    spec = phc.cell_spec("bert", "tied", 1.0, 4.0, 0)
    full = phc.PRESETS["full"]
    assert full.engine == "dense" and "engine" not in to_dict(full) and "engine" not in phc.cell_key(full, spec)["recipe"]
    fused_key = phc.cell_key(derive(full, engine="fused"), spec)
    assert fused_key["recipe"].pop("engine") == "fused" and fused_key == phc.cell_key(full, spec)

    c = oc.PRESETS["confirm-v2k"]
    f = derive(c, engine="fused")
    assert "engine" not in oc.config_record(c) and "engine" not in oc.train_key(c, "bert", 1.0, 9201)["recipe"]
    assert oc.train_key(f, "bert", 1.0, 9201)["recipe"]["engine"] == "fused"
    assert oc.pretrain_key(f, "bert", 9201) == oc.pretrain_key(c, "bert", 9201)  # the same backbone
    assert oc.bm25_key(f, 9201) == oc.bm25_key(c, 9201)  # BM25 has no SPLADE head
    for bad in (lambda: derive(full, engine="sparse"), lambda: derive(c, engine="sparse")):
        with pytest.raises(ValueError, match="engine"):
            bad()
    with pytest.raises(ValueError, match="engine"):
        phc.check_config(phc.PhaseConfig(engine="sparse"))
    with pytest.raises(ValueError, match="engine"):
        oc.check_config(oc.OODConfig(engine="sparse"))


def test_smoke_presets_are_fused_and_presets_with_saved_results_dense():
    assert phc.PRESETS["quick"].engine == "fused"
    assert oc.PRESETS["tiny"].engine == "fused" and oc.PRESETS["v30k"].engine == "fused"
    saved = {"default", "explore", "full", "imposed-s", "imposed-s-confirm", "imposed-s-confirm-input"}
    assert {n for n, p in phc.PRESETS.items() if p.engine == "dense"} >= saved
    assert {n for n, p in oc.PRESETS.items() if p.engine == "dense"} >= {
        "map-v2k", "map-v8k", "map-v2k-shift", "map-v2k-long", "confirm-v2k", "map-v2k-fam4"}


def _saved_configs():
    for path in sorted((ROOT / "docs" / "results").glob("synthetic_splade*/*.json")):
        rec = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(rec, dict) and isinstance(rec.get("config"), dict):
            yield path, rec["config"]


def test_every_saved_synthetic_splade_config_reads_back_dense_and_keeps_its_keys():
    """Each saved run's config that today's config class reads (the older phase runs hold fields since removed, and
    are read as saved records only) keeps the keys it was made with: a run made before the engine field (or on the
    dense engine) names no engine in its record or cell keys and reads back dense; a run made on the fused head
    records ``"engine": "fused"`` (the field is written only off its default) and reads back fused."""
    read, fused = [], []
    for path, conf in _saved_configs():
        cls = oc.OODConfig if "ood" in path.parent.name else phc.PhaseConfig
        try:
            cfg = from_dict(cls, conf)
        except ValueError as err:
            assert "unknown config key" in str(err) and cls is phc.PhaseConfig, (path, err)
            continue
        if "engine" in conf:
            assert conf["engine"] == "fused" and cfg.engine == "fused" and to_dict(cfg)["engine"] == "fused", path
            fused.append(path.name)
            continue
        assert cfg.engine == "dense" and "engine" not in to_dict(cfg), path
        if cls is oc.OODConfig:
            assert "engine" not in oc.config_record(cfg), path
            assert all("engine" not in oc.train_key(cfg, f, k, s)["recipe"] for f in cfg.families for k in cfg.ks
                       for s in cfg.seeds), path
        else:
            assert all("engine" not in phc.cell_key(cfg, phc.cell_spec(p["family"], p["mode"], p["s"], p["k"], p["seed"]))["recipe"]
                       for p in phc.grid(cfg)), path
        read.append(path.parent.name)
    assert read.count("synthetic_splade_ood_map_axes") == 4 and "synthetic_splade_full" in read, read
    assert "results_explore-v8k-one.json" in fused and "results_explore-v2k-q600.json" not in fused, fused
