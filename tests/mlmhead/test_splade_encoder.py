"""The fused SPLADE engine of a SparseEncoder against sentence-transformers' own path (float64), training, save/load."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
import torch

from initlab.mlmhead import head_projection, is_tied, rescale_mlm_head, tiny_masked_lm, tiny_tokenizer
from initlab.mlmhead.splade_encoder import engine_of, fuse_splade, use_engine

FAMILIES = ["bert", "distilbert", "albert", "roberta", "modernbert"]
TEXTS = ["the cat sat on the mat", "a dog", "the quick brown fox jumps over the lazy dog again", "hello world",
         "water boils at one hundred degrees", "x"]


def _encoder(folder: Path, family: str, *, tied: bool = True, dtype=torch.float64):
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    tok = tiny_tokenizer(folder)
    tiny_masked_lm(family, tok.vocab_size, hidden=16, layers=1, seed=1).save_pretrained(folder)
    tok.save_pretrained(folder)
    tr = Transformer(str(folder), transformer_task="fill-mask", max_seq_length=16)
    model = SparseEncoder(modules=[tr, SpladePooling("max")], device="cpu").to(dtype)
    if not tied:
        rescale_mlm_head(model[0].auto_model, 1.0, untie=True)
    assert is_tied(model[0].auto_model) == tied
    return model


def _forward_backward(model, feats, seed: int):
    """The pooled vectors ``(B, V)`` and every parameter's gradient of a loss that reaches every entry."""
    model.train()
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)  # the same dropout masks in both engines (the encoder runs the same operations)
    emb = model({k: v for k, v in feats.items()})["sentence_embedding"]
    r = torch.linspace(0.5, 1.5, emb.shape[1], dtype=emb.dtype)
    scores = emb[:3] @ emb[3:].T
    loss = torch.nn.functional.cross_entropy(scores, torch.arange(3)) + 1e-2 * ((emb * r).mean(0) ** 2).sum()
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return emb.detach(), float(loss.detach()), grads


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("family", FAMILIES)
def test_fused_engine_equals_sentence_transformers_in_float64(family, tied, tmp_path):
    dense = _encoder(tmp_path, family, tied=tied)
    fused = fuse_splade(copy.deepcopy(dense))
    assert (engine_of(dense), engine_of(fused)) == ("dense", "fused")
    assert is_tied(fused[0].auto_model) == tied
    feats = dense.preprocess(TEXTS)
    assert not bool(feats["attention_mask"].all())  # padding present: masked tokens must never win the max
    with torch.no_grad():
        dense.eval(), fused.eval()
        v_dense = dense(dict(feats))["sentence_embedding"]
        v_fused = fused(dict(feats))["sentence_embedding"]
    assert v_fused.dtype == torch.float64 and v_fused.shape == v_dense.shape == (len(TEXTS), head_projection(dense[0].auto_model).shape[0])
    assert int((v_dense > 0).sum()) > 0
    torch.testing.assert_close(v_fused, v_dense, rtol=1e-12, atol=1e-12)

    a_d, loss_d, g_d = _forward_backward(dense, feats, seed=7)
    a_f, loss_f, g_f = _forward_backward(fused, feats, seed=7)
    torch.testing.assert_close(a_f, a_d, rtol=1e-12, atol=1e-12)
    assert math.isclose(loss_f, loss_d, rel_tol=1e-12)
    # every parameter the forward uses (an untied BERT head leaves its old, unused cls.predictions.bias without one)
    assert set(g_f) == set(g_d) and len(g_d) >= len(list(dense.parameters())) - 1
    # 1e-10 relative per parameter; a gradient that is zero in exact arithmetic (an attention key bias: the softmax
    # ignores it) is float64 noise of about 1e-21 in both engines, judged against the largest gradient instead
    top = max(float(g.abs().max()) for g in g_d.values())
    for name in g_d:
        scale = float(g_d[name].abs().max())
        err = float((g_f[name] - g_d[name]).abs().max())
        assert err <= 1e-10 * scale + 1e-15 * top, (name, err, scale, top)
    W = head_projection(fused[0].auto_model)
    assert W.grad is not None and float(W.grad.abs().sum()) > 0  # the head (tied: the input embeddings too) learns


def test_use_engine_switches_back_and_refuses_bad_input(tmp_path):
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    model = _encoder(tmp_path, "bert")
    feats = model.preprocess(TEXTS[:2])
    model.eval()
    with torch.no_grad():
        ref = model(dict(feats))["sentence_embedding"]
        use_engine(model, "fused")
        assert "token_embeddings" not in model(dict(feats))  # the logits are never built
        use_engine(model, "dense")
        assert engine_of(model) == "dense"
        out = model(dict(feats))
    assert out["token_embeddings"].shape[-1] == ref.shape[-1]
    assert torch.equal(out["sentence_embedding"], ref)
    with pytest.raises(ValueError, match="engine"):
        use_engine(model, "sparse")
    with pytest.raises(TypeError, match="SparseEncoder"):
        use_engine(model[0].auto_model, "fused")
    summing = SparseEncoder(modules=[model[0], SpladePooling("sum")], device="cpu")
    with pytest.raises(ValueError, match="pooling_strategy='sum'"):
        use_engine(summing, "fused")


def test_sparse_encoder_trainer_runs_on_the_fused_engine_like_the_dense_one(tmp_path):
    """Two SparseEncoderTrainer steps with SpladeLoss (float64): the fused engine logs the dense engine's losses."""
    from datasets import Dataset
    from sentence_transformers.sparse_encoder import SparseEncoderTrainer, SparseEncoderTrainingArguments
    from sentence_transformers.sparse_encoder.losses import SparseMultipleNegativesRankingLoss, SpladeLoss

    base = _encoder(tmp_path / "m", "bert")
    ds = Dataset.from_dict({"query": TEXTS[:4], "document": TEXTS[2:]})
    logged = {}
    for engine in ("dense", "fused"):
        model = use_engine(copy.deepcopy(base), engine)
        loss = SpladeLoss(model, SparseMultipleNegativesRankingLoss(model), document_regularizer_weight=3e-2,
                          query_regularizer_weight=5e-2)
        args = SparseEncoderTrainingArguments(output_dir=str(tmp_path / engine), max_steps=2, per_device_train_batch_size=2,
                                              learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to="none",
                                              use_cpu=True, seed=0, data_seed=0, disable_tqdm=True)
        trainer = SparseEncoderTrainer(model=model, args=args, train_dataset=ds, loss=loss)
        trainer.train()
        logged[engine] = [r["loss"] for r in trainer.state.log_history if "loss" in r]
        assert engine_of(model) == engine
        assert not torch.equal(head_projection(model[0].auto_model), head_projection(base[0].auto_model))
    assert len(logged["fused"]) == 2 and all(math.isfinite(v) for v in logged["fused"])
    for a, b in zip(logged["fused"], logged["dense"]):
        assert math.isclose(a, b, rel_tol=1e-9), logged


def test_a_fused_model_saves_the_standard_modules_and_loads_in_plain_sentence_transformers(tmp_path):
    from sentence_transformers.sparse_encoder import SparseEncoder

    model = fuse_splade(_encoder(tmp_path / "m", "roberta", dtype=torch.float32))
    model.save(str(tmp_path / "saved"))
    types = [m["type"] for m in json.loads((tmp_path / "saved" / "modules.json").read_text())]
    assert types == ["sentence_transformers.base.modules.transformer.Transformer",
                     "sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling"]
    plain = SparseEncoder(str(tmp_path / "saved"), device="cpu")
    assert engine_of(plain) == "dense" and engine_of(model) == "fused"
    a = model.encode(TEXTS, convert_to_tensor=True, convert_to_sparse_tensor=False)
    b = plain.encode(TEXTS, convert_to_tensor=True, convert_to_sparse_tensor=False)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert int((b > 0).sum()) > 0
