"""The SPLADE head engine of real-data training and evaluation: fused by default, dense on request, checked on
probe texts against the dense path, and a short training run that follows the dense path's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from initlab.mlmhead.splade_encoder import engine_of
from initlab.realdata.splade.command import train_main
from initlab.realdata.splade.modeling import PROBE_TEXTS, build_splade, build_tiny_backbone, check_engine, load_splade

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "splade"
TRAIN_ARGS = ["--preset", "quick", "--backbone", "tiny", "--k", "2", "--no-progress",
              "--train-source", str(FIX / "msmarco" / "triples.train.small.tsv"), "--data-root", str(FIX),
              "--set", "max_steps=3", "--set", "save_steps=3"]


@pytest.fixture(scope="module")
def backbone(tmp_path_factory) -> str:
    return str(build_tiny_backbone(tmp_path_factory.mktemp("bb") / "tiny", list(PROBE_TEXTS) + ["river dog fox"]))


def test_build_is_fused_by_default_and_dense_on_request(backbone):
    fused = build_splade(backbone, k=4.0)
    dense = build_splade(backbone, k=4.0, engine="dense")
    assert engine_of(fused) == "fused" and engine_of(dense) == "dense"
    with torch.no_grad():
        a = fused.encode_document(list(PROBE_TEXTS), convert_to_tensor=True).to_dense()
        b = dense.encode_document(list(PROBE_TEXTS), convert_to_tensor=True).to_dense()
    assert bool((b > 0).any())
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="engine"):
        build_splade(backbone, engine="sparse")


def test_a_fused_head_that_disagrees_is_refused_with_the_fix(backbone, monkeypatch):
    import initlab.mlmhead.fused as fused_mod

    real = fused_mod.splade_max_pool
    monkeypatch.setattr(fused_mod, "splade_max_pool", lambda h, w, b, m, **kw: real(h, w, b, m, **kw) * 1.01)
    model = build_splade(backbone, engine="dense")
    with pytest.raises(ValueError, match="differ from the dense path.*head_engine=dense"):
        check_engine(model, "fused", what="backbone tiny")
    assert engine_of(model) == "dense"  # left on the path that works

    def broken(*a, **kw):
        raise AttributeError("'Head' object has no attribute 'transform'")

    monkeypatch.setattr(fused_mod, "splade_max_pool", broken)
    with pytest.raises(ValueError, match="cannot run this model's MLM head.*--head-engine dense"):
        check_engine(model, "fused")


def test_training_on_the_fused_head_follows_the_dense_one(tmp_path):
    """Three AdamW steps of the quick preset: the fused and the dense engine end at the same weights (float32
    rounding apart), and each run records its engine; the saved model loads on either engine."""
    runs = {}
    for engine in ("fused", "dense"):
        out = tmp_path / engine
        assert train_main(TRAIN_ARGS + ["--out", str(out), "--set", f"head_engine={engine}"]) == 0
        res = json.loads((out / "train_results.json").read_text())
        assert res["head_engine"] == engine and res["config"]["head_engine"] == engine
        runs[engine] = load_file(str(out / "model" / "model.safetensors"))
    assert runs["fused"].keys() == runs["dense"].keys()
    start = load_file(str(tmp_path / "fused" / "tiny_backbone" / "model.safetensors"))
    moved = 0
    for name, w in runs["dense"].items():
        torch.testing.assert_close(runs["fused"][name], w, rtol=1e-4, atol=1e-5, msg=name)
        if ".encoder." in name:  # not touched by the rescaling of the (tied) head: moved by training only
            moved += int(not torch.equal(start[name], w))
    assert moved > 0  # the runs trained (encoder weights left their start)
    model = load_splade(tmp_path / "fused" / "model")
    assert engine_of(model) == "fused" and engine_of(load_splade(tmp_path / "fused" / "model", engine="dense")) == "dense"


def test_evaluation_records_its_engine_and_both_engines_score_alike(tmp_path, capsys):
    from initlab.realdata.splade.command import eval_main

    out = tmp_path / "run"
    assert train_main(TRAIN_ARGS + ["--out", str(out)]) == 0
    res = {}
    for engine in ("fused", "dense"):
        ev = tmp_path / f"eval-{engine}"
        assert eval_main(["--model", str(out / "model"), "--sets", "msmarco-dev", "--data-root", str(FIX),
                          "--top-k", "10", "--out", str(ev), "--head-engine", engine]) == 0
        res[engine] = json.loads((ev / "results.json").read_text())
        assert res[engine]["head_engine"] == engine
    capsys.readouterr()
    f, d = res["fused"]["sets"][0], res["dense"]["sets"][0]
    for key in ("nDCG@10", "RR@10", "q_active", "d_active", "flops"):
        assert f[key] == pytest.approx(d[key], rel=1e-4, abs=1e-9), key
