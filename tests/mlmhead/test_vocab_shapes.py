"""Tokenizer and model vocabularies that differ, and an MLM-head bias of the wrong size:
a one-line error naming both sizes (or the parameter and both shapes) and the fix, never a traceback; a model
vocabulary padded beyond the tokenizer is accepted, with the rows no token id reaches left out of the statistics."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from initlab.app.commands.mlmhead import inspect_main, rescale_main
from initlab.mlmhead import head_projection, inspect_model, rescale_mlm_head, tiny_masked_lm, tiny_tokenizer
from initlab.mlmhead.heads import check_vocab, reachable_rows


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Three saved tiny checkpoints: a token added to the tokenizer only; a bias of 3 more entries than the head's
    rows; a ModernBERT vocabulary padded to a multiple of 64 beyond its tokenizer."""
    from safetensors.torch import load_file, save_file

    root = tmp_path_factory.mktemp("vocab")
    out = {}
    tok = tiny_tokenizer(root / "added")
    model = tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1)
    tok.add_tokens(["newword"])
    model.save_pretrained(root / "added")
    tok.save_pretrained(root / "added")
    out["added"] = root / "added"

    tok = tiny_tokenizer(root / "bias")
    model = tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1)
    model.save_pretrained(root / "bias")
    tok.save_pretrained(root / "bias")
    sd = load_file(root / "bias" / "model.safetensors")
    sd["cls.predictions.bias"] = torch.cat([sd["cls.predictions.bias"], torch.zeros(3)])
    save_file(sd, root / "bias" / "model.safetensors", metadata={"format": "pt"})
    out["bias"] = root / "bias"

    tok = tiny_tokenizer(root / "padded")
    padded = -(-tok.vocab_size // 64) * 64
    model = tiny_masked_lm("modernbert", padded, hidden=16, layers=1, head_scale=30.0)
    model.save_pretrained(root / "padded")
    tok.save_pretrained(root / "padded")
    out["padded"] = root / "padded"
    return out


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_a_token_added_without_resizing_is_one_line_naming_both_sizes(folders, capsys):
    assert inspect_main([str(folders["added"])]) == 2
    err = _one_line_error(capsys)
    assert "356" in err and "355" in err and "resize_token_embeddings" in err


def test_a_bias_of_the_wrong_size_is_one_line_naming_the_parameter(folders, capsys, tmp_path):
    for main, args in ((inspect_main, []), (rescale_main, ["--k", "2", "--out", str(tmp_path / "r")])):
        assert main([str(folders["bias"]), *args]) == 2
        err = _one_line_error(capsys)
        assert "cls.predictions.bias" in err and "(358,)" in err and "(355,)" in err, err
        assert "resize_token_embeddings" in err and "above report" not in err
    assert not (tmp_path / "r").exists()


def test_a_bias_of_the_wrong_size_in_process_is_refused_by_inspect_and_rescale(tmp_path):
    tok = tiny_tokenizer(tmp_path)
    model = tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1)
    model.cls.predictions.decoder.bias = torch.nn.Parameter(torch.zeros(tok.vocab_size + 2))
    with pytest.raises(ValueError, match=r"bias .*\(357,\).*\(355,\).*resize_token_embeddings"):
        inspect_model(model, tok)
    with pytest.raises(ValueError, match=r"bias .*\(357,\).*\(355,\)"):
        rescale_mlm_head(model, 2.0)


def test_check_vocab_accepts_padding_and_names_the_unreached_rows(tmp_path):
    tok = tiny_tokenizer(tmp_path)
    model = tiny_masked_lm("modernbert", 384, hidden=16, layers=1)
    rows = reachable_rows(tok, 384)
    assert rows.dtype == torch.bool and int(rows.sum()) == len(tok) and not rows[len(tok):].any()
    assert check_vocab(model, tok)["unreached_rows"] == 384 - len(tok)
    small = tiny_masked_lm("bert", len(tok) - 1, hidden=16, layers=1)
    with pytest.raises(ValueError, match=rf"tokenizer has {len(tok)} .* {len(tok) - 1} rows.*resize_token_embeddings"):
        check_vocab(small, tok)


def test_rows_no_token_reaches_are_left_out_of_every_sparse_statistic(folders, tmp_path):
    """A ModernBERT padded to a multiple of 64: the padding rows' logits are as large as the others at random
    init, so counted they would add active dimensions, FLOPS and score; inspect reports them apart."""
    from initlab.mlmhead.checkpoint import load_masked_lm

    model, tok = load_masked_lm(folders["padded"])
    V, n = head_projection(model).shape[0], len(tok)
    assert V > n
    rep = inspect_model(model, tok)
    assert rep["vocab"] == V and rep["vocab_reached"] == n and rep["unreached_rows"] == V - n
    for r in rep["table"]:
        assert r["active_dims_per_text"] <= n
        assert r["unreached_active_dims_per_text"] > 0  # at random init they would have counted
    # the same model cut to the tokenizer's rows gives the same statistics (the unreached rows play no part)
    cut, _ = load_masked_lm(folders["padded"])
    cut.resize_token_embeddings(n)
    rep_cut = inspect_model(cut, tok)
    for a, b in zip(rep["table"], rep_cut["table"]):
        for key in ("active_dims_per_text", "flops_reg", "score_mean", "score_sd", "mean_pairwise_cosine"):
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-9), key


def test_inspect_counts_and_warns_about_texts_cut_at_max_length(tmp_path):
    """inspect: texts longer than --max-length are counted, printed and warned about."""
    from initlab.mlmhead import format_inspect

    tok = tiny_tokenizer(tmp_path)
    model = tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1)
    texts = ["the cat sat on the sofa in the sun", "a dog ran in the rain", "sun"]
    lengths = [len(tok(t)["input_ids"]) for t in texts]  # with [CLS] and [SEP]
    assert lengths[0] > 5 and lengths[1] > 5 and lengths[2] <= 5
    with pytest.warns(RuntimeWarning, match=r"mlmhead inspect texts: 2 of 3 texts are longer than 5 tokens"):
        rep = inspect_model(model, tok, texts, ks=(1.0, 2.0), max_length=5)
    cut = rep["truncation"]
    assert cut["truncated_texts"] == 2 and cut["tokens_cut"] == lengths[0] + lengths[1] - 10 and cut["texts"] == 3
    assert cut["tokens"] == sum(lengths)
    assert "truncation: 2 of 3 texts cut at --max-length 5" in format_inspect(rep)
