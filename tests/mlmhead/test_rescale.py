"""Tests of ``rescale_mlm_head`` / ``save_rescaled`` / ``initlab mlmhead rescale`` on tiny in-process models."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers

from initlab.app.commands.mlmhead import rescale_main
from initlab.mlmhead import (K_ATTR, head_bias, head_projection, is_tied, rescale_mlm_head, rescaled, tiny_masked_lm,
                             tiny_tokenizer, untie_head)

FAMILIES = ["bert", "distilbert", "albert", "roberta", "modernbert"]


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tok")
    tiny_tokenizer(d)
    return d


def _tok(tok_dir):
    return tiny_tokenizer(tok_dir)


def _save_tiny(family, tok_dir, folder, head_scale=1.0):
    tok = _tok(tok_dir)
    model = tiny_masked_lm(family, tok.vocab_size, hidden=16, layers=1, seed=1, head_scale=head_scale)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return model


@pytest.mark.parametrize("family", FAMILIES)
def test_mlm_head_rescale_tied_in_place(family, tok_dir):
    model = tiny_masked_lm(family, _tok(tok_dir).vocab_size, hidden=16, layers=1)
    assert is_tied(model)
    W0 = head_projection(model).detach().clone()
    b0 = None if head_bias(model) is None else head_bias(model).detach().clone()
    out = rescale_mlm_head(model, 4.0)
    assert out is model
    W = head_projection(model)
    assert torch.allclose(W, W0 / 4.0)  # divided exactly once
    assert W.data_ptr() == model.get_input_embeddings().weight.data_ptr()  # still one tensor
    if b0 is not None:
        assert torch.equal(head_bias(model), b0)  # bias untouched
    assert getattr(model.config, K_ATTR) == 4.0
    rescale_mlm_head(model, 2.0)
    assert getattr(model.config, K_ATTR) == 8.0
    assert torch.allclose(head_projection(model), W0 / 8.0)


def test_mlm_head_rescale_logits_formula_float64(tok_dir):
    """z(k) = H W^T / k + b: logits after rescaling equal the hand-computed formula (untied, so H is unchanged)."""
    model = tiny_masked_lm("bert", _tok(tok_dir).vocab_size, hidden=16, layers=1).double()
    ids = torch.randint(5, 60, (2, 7))
    captured = {}
    hook = model.get_output_embeddings().register_forward_hook(lambda m, i, o: captured.__setitem__("H", i[0]))
    with torch.no_grad():
        z1 = model(input_ids=ids).logits
    W, b = head_projection(model).detach().clone(), head_bias(model).detach().clone()
    rescale_mlm_head(model, 8.0, untie=True)
    with torch.no_grad():
        z8 = model(input_ids=ids).logits
    hook.remove()
    H = captured["H"]
    assert torch.allclose(z8, H @ W.T / 8.0 + b, atol=1e-12)
    assert torch.allclose(z8 - b, (z1 - b) / 8.0, atol=1e-12)


@pytest.mark.parametrize("family", ["bert", "modernbert"])
def test_mlm_head_rescale_untie(family, tok_dir):
    model = tiny_masked_lm(family, _tok(tok_dir).vocab_size, hidden=16, layers=1)
    E0 = model.get_input_embeddings().weight.detach().clone()
    rescale_mlm_head(model, 4.0, untie=True)
    assert not is_tied(model)
    assert model.config.tie_word_embeddings is False
    assert torch.equal(model.get_input_embeddings().weight, E0)  # embeddings untouched
    assert torch.allclose(head_projection(model), E0 / 4.0)


@pytest.mark.parametrize("family", FAMILIES)
def test_untie_head_copies_weight_and_bias_and_changes_no_value(family, tok_dir):
    model = tiny_masked_lm(family, _tok(tok_dir).vocab_size, hidden=16, layers=1)
    before = {n: p.detach().clone() for n, p in model.state_dict().items()}
    bias0 = head_bias(model)
    assert untie_head(model) is model and not is_tied(model) and model.config.tie_word_embeddings is False
    assert all(torch.equal(model.state_dict()[n], v) for n, v in before.items())
    if bias0 is not None:  # its own bias copy, so the bias survives a save/reload of the untied head
        assert head_bias(model) is not bias0 and torch.equal(head_bias(model), bias0)
    W = head_projection(model)
    untie_head(model)  # already untied: left alone
    assert head_projection(model) is W


@pytest.mark.parametrize("family", ["bert", "albert"])
@pytest.mark.parametrize("untie", [False, True])
def test_rescaled_block_divides_then_restores_weights_and_recorded_k(family, untie, tok_dir):
    model = tiny_masked_lm(family, _tok(tok_dir).vocab_size, hidden=16, layers=1)
    if untie:
        untie_head(model)
    E0 = model.get_input_embeddings().weight.detach().clone()
    W0 = head_projection(model).detach().clone()
    with rescaled(model, 3.0) as m:
        assert m is model and getattr(model.config, K_ATTR) == 3.0
        assert torch.equal(head_projection(model), W0 / 3.0)  # the same division as rescale_mlm_head
        assert torch.equal(model.get_input_embeddings().weight, E0 if untie else W0 / 3.0)
    assert torch.equal(head_projection(model), W0) and torch.equal(model.get_input_embeddings().weight, E0)
    assert not hasattr(model.config, K_ATTR) and is_tied(model) is not untie
    rescale_mlm_head(model, 2.0)
    W2 = head_projection(model).detach().clone()
    with pytest.raises(RuntimeError, match="inside"):
        with rescaled(model, 4.0):
            raise RuntimeError("inside")
    assert torch.equal(head_projection(model), W2) and getattr(model.config, K_ATTR) == 2.0  # an earlier k kept
    with pytest.raises(ValueError, match="k"):
        with rescaled(model, 0.0):
            pass
    assert torch.equal(head_projection(model), W2) and getattr(model.config, K_ATTR) == 2.0


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), -float("inf"), 1e-300, 1e300])
def test_mlm_head_rescale_bad_k(bad, tok_dir):
    model = tiny_masked_lm("bert", _tok(tok_dir).vocab_size, hidden=16, layers=1)
    W0 = head_projection(model).detach().clone()
    with pytest.raises(ValueError, match="k"):
        rescale_mlm_head(model, bad)
    assert torch.equal(head_projection(model), W0)
    assert getattr(model.config, K_ATTR, None) is None
    with pytest.raises(TypeError, match="k"):
        rescale_mlm_head(model, "2")


def test_mlm_head_rescale_no_head_and_unknown_family():
    cfg = transformers.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    with pytest.raises(ValueError, match="no MLM head"):
        rescale_mlm_head(transformers.BertModel(cfg), 2.0)
    gcfg = transformers.GPT2Config(vocab_size=40, n_embd=16, n_layer=1, n_head=2)
    with pytest.raises(ValueError, match="unknown model family"):
        rescale_mlm_head(transformers.GPT2LMHeadModel(gcfg), 2.0)


@pytest.mark.parametrize("family", FAMILIES)
def test_mlm_head_rescale_cli_roundtrip(family, tok_dir, tmp_path, capsys):
    src = tmp_path / "src"
    model = _save_tiny(family, tok_dir, src)
    W0 = head_projection(model).detach().clone()
    out = tmp_path / "out"
    assert rescale_main([str(src), "--k", "4", "--out", str(out)]) == 0
    assert "saved to" in capsys.readouterr().out
    r = transformers.AutoModelForMaskedLM.from_pretrained(out)
    Wr = head_projection(r)
    assert Wr.data_ptr() == r.get_input_embeddings().weight.data_ptr()  # one shared tensor after reload
    assert torch.allclose(Wr, W0 / 4.0)
    assert getattr(r.config, K_ATTR) == 4.0
    assert (out / "tokenizer_config.json").is_file()
    assert transformers.AutoTokenizer.from_pretrained(out)("the cat")["input_ids"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp folder left


def test_mlm_head_rescale_cli_untie_roundtrip(tok_dir, tmp_path):
    src = tmp_path / "src"
    model = _save_tiny("roberta", tok_dir, src)
    E0 = model.get_input_embeddings().weight.detach().clone()
    out = tmp_path / "out"
    assert rescale_main([str(src), "--k", "2", "--out", str(out), "--untie"]) == 0
    r = transformers.AutoModelForMaskedLM.from_pretrained(out)
    assert not is_tied(r)
    assert torch.allclose(r.get_input_embeddings().weight, E0)
    assert torch.allclose(head_projection(r), E0 / 2.0)
    assert torch.equal(head_bias(r), head_bias(model))


def test_mlm_head_rescale_loads_in_sparse_encoder(tok_dir, tmp_path):
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling

    src = tmp_path / "src"
    _save_tiny("bert", tok_dir, src, head_scale=20.0)
    out = tmp_path / "out"
    assert rescale_main([str(src), "--k", "16", "--out", str(out)]) == 0
    mlm = MLMTransformer(str(out))
    enc = SparseEncoder(modules=[mlm, SpladePooling(pooling_strategy="max")], device="cpu")
    vec = enc.encode(["the cat sleeps", "a train leaves"], convert_to_tensor=True).to_dense()
    assert vec.shape == (2, _tok(tok_dir).vocab_size)
    assert torch.isfinite(vec).all() and (vec >= 0).all()
    # the SparseEncoder's head is the rescaled one
    W = head_projection(mlm.auto_model)
    ref = transformers.AutoModelForMaskedLM.from_pretrained(out)
    assert torch.allclose(W, head_projection(ref))
    enc2 = SparseEncoder(str(out), device="cpu")  # plain path: sentence-transformers builds MLM + SPLADE pooling
    assert enc2.encode(["the cat"], convert_to_tensor=True).shape[-1] == _tok(tok_dir).vocab_size


@pytest.mark.parametrize(
    "args,match",
    [
        (["--k", "0"], "k"),
        (["--k", "-2"], "k"),
        (["--k", "nan"], "k"),
        (["--k", "inf"], "k"),
    ],
)
def test_mlm_head_rescale_cli_bad_k_writes_nothing(args, match, tok_dir, tmp_path, capsys):
    src = tmp_path / "src"
    _save_tiny("bert", tok_dir, src)
    out = tmp_path / "out"
    assert rescale_main([str(src), *args, "--out", str(out)]) == 2
    assert match in capsys.readouterr().err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_mlm_head_rescale_cli_errors(tok_dir, tmp_path, capsys):
    # no MLM head: a saved BertModel
    tok = _tok(tok_dir)
    bare = tmp_path / "bare"
    cfg = transformers.BertConfig(vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    transformers.BertModel(cfg).save_pretrained(bare)
    tok.save_pretrained(bare)
    assert rescale_main([str(bare), "--k", "2", "--out", str(tmp_path / "o1")]) == 2
    assert "no MLM head" in capsys.readouterr().err
    # unknown family: a GPT-2 checkpoint
    gpt = tmp_path / "gpt"
    transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=40, n_embd=16, n_layer=1, n_head=2)).save_pretrained(gpt)
    assert rescale_main([str(gpt), "--k", "2", "--out", str(tmp_path / "o2")]) == 2
    assert "unknown model family" in capsys.readouterr().err
    # missing folder / folder without config
    assert rescale_main([str(tmp_path / "nope"), "--k", "2", "--out", str(tmp_path / "o3")]) == 2
    assert "no such folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert rescale_main([str(tmp_path / "empty"), "--k", "2", "--out", str(tmp_path / "o4")]) == 2
    assert "config.json" in capsys.readouterr().err
    # a model folder without tokenizer files
    notok = tmp_path / "notok"
    tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1).save_pretrained(notok)
    assert rescale_main([str(notok), "--k", "2", "--out", str(tmp_path / "o5")]) == 2
    assert "tokenizer" in capsys.readouterr().err
    assert not any((tmp_path / f"o{i}").exists() for i in range(1, 6))
    # existing non-empty --out: refused and untouched; --overwrite replaces it
    src = tmp_path / "src"
    _save_tiny("bert", tok_dir, src)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert rescale_main([str(src), "--k", "2", "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    assert rescale_main([str(src), "--k", "2", "--out", str(out), "--overwrite"]) == 0
    assert not (out / "keep.txt").exists() and (out / "config.json").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("out.old-")]
    assert len(aside) == 1 and (aside[0] / "keep.txt").read_text() == "mine"  # moved aside, never deleted
    assert "moved aside" in capsys.readouterr().out
    # rescaling a checkpoint in place (--out = the input) keeps the original next to it
    w0 = head_projection(transformers.AutoModelForMaskedLM.from_pretrained(src)).detach().clone()
    assert rescale_main([str(src), "--k", "4", "--out", str(src), "--overwrite"]) == 0
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("src.old-")]
    assert len(kept) == 1
    assert torch.equal(head_projection(transformers.AutoModelForMaskedLM.from_pretrained(kept[0])).detach(), w0)
    assert torch.allclose(head_projection(transformers.AutoModelForMaskedLM.from_pretrained(src)).detach(), w0 / 4)


def test_mlm_head_rescale_remote_code_refused_by_default(tmp_path, capsys):
    """A GTE-MLM config (model_type 'new', auto_map to hub code) is refused without --trust-remote-code."""
    import json

    folder = tmp_path / "gte"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "new", "architectures": ["NewForMaskedLM"],
        "auto_map": {"AutoConfig": "Alibaba-NLP/new-impl--configuration.NewConfig",
                     "AutoModelForMaskedLM": "Alibaba-NLP/new-impl--modeling.NewForMaskedLM"},
    }))
    assert rescale_main([str(folder), "--k", "2", "--out", str(tmp_path / "o")]) == 2
    assert "--trust-remote-code" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("family, says", [("bert", True), ("roberta", True), ("albert", True), ("modernbert", False)])
def test_rescale_of_a_tied_model_says_when_hidden_states_change(family, says, tok_dir, tmp_path, capsys):
    # a tied head shares its tensor with the input embeddings; where position embeddings are summed before the
    # embedding LayerNorm (BERT, RoBERTa, ALBERT) dividing it changes the encoder: the closing message says so
    src = tmp_path / "src"
    _save_tiny(family, tok_dir, src)
    assert rescale_main([str(src), "--k", "16", "--out", str(tmp_path / "tied")]) == 0
    out = capsys.readouterr().out
    assert ("hidden states changed" in out and "--untie" in out) == says
    assert rescale_main([str(src), "--k", "16", "--out", str(tmp_path / "untied"), "--untie"]) == 0
    assert "hidden states changed" not in capsys.readouterr().out


def test_rescaled_folder_gets_the_permissions_of_a_normal_mkdir(tok_dir, tmp_path):
    import os
    import stat

    src = tmp_path / "src"
    _save_tiny("bert", tok_dir, src)
    old = os.umask(0o022)
    try:
        assert rescale_main([str(src), "--k", "2", "--out", str(tmp_path / "out")]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o755  # mkdtemp alone gave 0o700


def test_rescale_of_a_bf16_checkpoint_computes_in_float32_and_saves_bf16(tok_dir, tmp_path, capsys):
    """A checkpoint stored in bfloat16: loaded in float32 (load_masked_lm's default), divided there, saved in
    bfloat16 again (same dtype and size); the saved head is the float32 quotient rounded once to bfloat16."""
    from initlab.mlmhead import load_masked_lm

    src = tmp_path / "bf16"
    model = _save_tiny("bert", tok_dir, src)
    model.to(torch.bfloat16).save_pretrained(src)
    loaded, _ = load_masked_lm(src)
    assert loaded.dtype == torch.float32 and loaded.initlab_stored_dtype == torch.bfloat16
    W = head_projection(loaded).detach().clone()
    assert rescale_main([str(src), "--k", "3", "--out", str(tmp_path / "k3")]) == 0
    assert "computed in float32, saved in bfloat16 as stored" in capsys.readouterr().out
    cfg = transformers.AutoConfig.from_pretrained(tmp_path / "k3")
    assert cfg.dtype == torch.bfloat16 and getattr(cfg, K_ATTR) == 3.0
    saved, _ = load_masked_lm(tmp_path / "k3", dtype=None)  # the stored dtype
    assert saved.dtype == torch.bfloat16
    assert torch.equal(head_projection(saved).detach(), (W / 3).to(torch.bfloat16))
