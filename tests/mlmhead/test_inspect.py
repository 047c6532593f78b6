"""Tests of ``inspect_model`` / ``initlab mlmhead inspect`` on tiny in-process checkpoints."""

from __future__ import annotations

import json
import math

import pytest
import torch

from initlab.app.cli import main as cli_main
from initlab.mlmhead import K_GRID, head_bias, head_projection, inspect_model, recommend_k, rescale_mlm_head, tiny_masked_lm, tiny_tokenizer
from initlab.nn.pooling import splade_pool as splade_from_logits


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return tiny_tokenizer(tmp_path_factory.mktemp("tok"))


def test_mlm_head_inspect_splade_vs_slow_reference_float64():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(3, 5, 7, generator=g, dtype=torch.float64) * 3
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]], dtype=torch.float64)
    ref = torch.zeros(3, 7, dtype=torch.float64)
    for b in range(3):
        for j in range(7):
            ref[b, j] = max(math.log1p(max(z[b, t, j].item(), 0.0)) for t in range(5) if mask[b, t] > 0)
    assert torch.allclose(splade_from_logits(z, mask), ref, atol=1e-14)
    with pytest.raises(ValueError, match="mask"):
        splade_from_logits(z, mask[:, :3])


def test_mlm_head_inspect_quantities_and_restore(tok):
    model = tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1, head_scale=30.0)
    W0 = head_projection(model).detach().clone()
    rep = inspect_model(model, tok)
    assert torch.equal(head_projection(model), W0)  # weights restored bit-exactly
    assert rep["family"] == "BERT" and rep["tied"] is True and rep["vocab"] == tok.vocab_size
    assert rep["head"]["frobenius"] == pytest.approx(W0.double().norm().item(), rel=1e-9)
    assert rep["head"]["row_norm_max"] == pytest.approx(W0.double().norm(dim=1).max().item(), rel=1e-9)
    assert [r["k"] for r in rep["table"]] == list(K_GRID)
    t = {r["k"]: r for r in rep["table"]}
    assert t[1.0]["hidden_rel_change"] == 0.0
    for r in rep["table"]:
        assert 0 <= r["active_fraction_logits"] <= 1 and 0 <= r["active_dims_per_text"] <= tok.vocab_size
        assert -1 <= r["mean_pairwise_cosine"] <= 1 + 1e-9
        assert r["flops_reg"] >= 0 and r["score_sd"] >= 0
    # dividing the head shrinks scores and FLOPS monotonically
    assert t[1.0]["score_mean"] > t[4.0]["score_mean"] > t[32.0]["score_mean"]
    assert t[1.0]["flops_reg"] > t[32.0]["flops_reg"]
    assert rep["recommended"]["k"] in K_GRID


def test_mlm_head_inspect_hidden_state_change_depends_on_family(tok):
    """BERT adds position embeddings before its embedding LayerNorm, so dividing the tied matrix changes
    the hidden states; ModernBERT normalises the token embeddings alone (RoPE positions), so it barely does."""
    bert = inspect_model(tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1), tok, ks=(1.0, 32.0))
    mb = inspect_model(tiny_masked_lm("modernbert", tok.vocab_size, hidden=16, layers=1), tok, ks=(1.0, 32.0))
    assert bert["table"][1]["hidden_rel_change"] > 0.1
    assert mb["table"][1]["hidden_rel_change"] < 0.05
    # untied: the encoder input is untouched, hidden states identical for any k
    m = tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1)
    rescale_mlm_head(m, 1.0, untie=True)
    un = inspect_model(m, tok, ks=(1.0, 8.0))
    assert un["tied"] is False and un["table"][1]["hidden_rel_change"] == 0.0


def test_mlm_head_inspect_recommendation_tracks_head_scale(tok):
    small = inspect_model(tiny_masked_lm("roberta", tok.vocab_size, hidden=16, layers=1), tok)
    big = inspect_model(tiny_masked_lm("roberta", tok.vocab_size, hidden=16, layers=1, head_scale=200.0), tok)
    assert small["recommended"]["k"] == 1.0
    assert big["table"][0]["score_sd"] > big["recommended"]["threshold_score_sd"]
    assert big["recommended"]["k"] > 1.0


def test_mlm_head_inspect_recommend_rule():
    rows = [{"k": k, "score_sd": sd, "active_dims_per_text": 50.0} for k, sd in [(1, 90.0), (2, 20.0), (4, 2.0), (8, 0.5)]]
    rec = recommend_k(rows, batch=32)
    assert rec["k"] == 4 and rec["threshold_score_sd"] == pytest.approx(math.sqrt(2 * math.log(32)))
    rec = recommend_k([{"k": 1, "score_sd": 100.0, "active_dims_per_text": 9.0}, {"k": 2, "score_sd": 50.0, "active_dims_per_text": 0.5}])
    assert rec["k"] == 2 and "WARNING" in rec["rule"] and "no k" in rec["rule"]


def test_mlm_head_inspect_cli_new_user(tok, tmp_path, capsys):
    """As a new user would: save a tiny checkpoint, inspect it, rescale it, inspect the result."""
    src = tmp_path / "tiny"
    model = tiny_masked_lm("modernbert", tok.vocab_size, hidden=16, layers=1, head_scale=50.0)
    model.save_pretrained(src)
    tok.save_pretrained(src)
    texts = tmp_path / "texts.txt"
    texts.write_text("# my texts\nthe cat sleeps\n\na train leaves the airport\nbees dance\n")
    out_json = tmp_path / "rep.json"
    assert cli_main(["mlmhead", "inspect", str(src), "--texts", str(texts), "--json", str(out_json)]) == 0
    printed = capsys.readouterr().out
    assert "recommended k" in printed and "ModernBERT" in printed
    rep = json.loads(out_json.read_text())
    assert rep["n_texts"] == 4 and len(rep["table"]) == 6  # every non-blank line, '# my texts' too
    k = rep["recommended"]["k"]
    assert cli_main(["mlmhead", "rescale", str(src), "--k", str(k), "--out", str(tmp_path / "resc")]) == 0
    capsys.readouterr()
    assert cli_main(["mlmhead", "inspect", str(tmp_path / "resc"), "--texts", str(texts)]) == 0
    assert f"recorded k = {k:g}" in capsys.readouterr().out


def test_mlm_head_inspect_cli_errors(tok, tmp_path, capsys, monkeypatch):
    src = tmp_path / "tiny"
    tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1).save_pretrained(src)
    tok.save_pretrained(src)
    assert cli_main(["mlmhead", "inspect", str(src), "--texts", str(tmp_path / "none.txt")]) == 2
    assert "no such file" in capsys.readouterr().err
    one = tmp_path / "one.txt"
    one.write_text("only one text\n")
    assert cli_main(["mlmhead", "inspect", str(src), "--texts", str(one)]) == 2
    assert "at least 2" in capsys.readouterr().err
    assert cli_main(["mlmhead", "inspect", str(tmp_path / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err
    # a bare name that is neither a folder nor a reachable hub id (tests never download): clear error
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)  # read at import; no network try
    monkeypatch.chdir(tmp_path)
    assert cli_main(["mlmhead", "inspect", "no-such-model-dir"]) == 2
    assert "no-such-model-dir" in capsys.readouterr().err
    out = tmp_path / "r.json"
    assert not out.exists()


def test_inspect_texts_file_with_bom_or_bad_bytes(tok, tmp_path, capsys):
    """--texts read by initlab.textio: a byte-order mark before a leading comment line no longer turns that comment
    into a text under --skip-comments ('\ufeff# my texts' does not start with '#'); a non-UTF-8 file is a one-line
    error naming it."""
    src = tmp_path / "tiny"
    tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1).save_pretrained(src)
    tok.save_pretrained(src)
    texts, out = tmp_path / "texts.txt", tmp_path / "r.json"
    texts.write_bytes(b"\xef\xbb\xbf# my texts\nthe cat sleeps\na train leaves the airport\nbees dance\n")
    assert cli_main(["mlmhead", "inspect", str(src), "--texts", str(texts), "--skip-comments", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["n_texts"] == 3
    capsys.readouterr()
    texts.write_bytes(b"the cat sleeps\nbees dance caf\xe9\n")
    assert cli_main(["mlmhead", "inspect", str(src), "--texts", str(texts)]) == 2
    err = capsys.readouterr().err
    assert "texts.txt:2: not UTF-8 text" in err and "Traceback" not in err


def test_length_beyond_the_position_table_is_refused_before_writing(tok, tmp_path, capsys):
    src = tmp_path / "tiny"
    tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1).save_pretrained(src)  # 128 positions
    tok.save_pretrained(src)
    long = tmp_path / "long.txt"
    long.write_text(("the cat sleeps on the warm sofa " * 50 + "\n") * 3)  # ~300 words per line
    out = tmp_path / "r.json"
    assert cli_main(["mlmhead", "inspect", str(src), "--texts", str(long), "--max-length", "129", "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--max-length 129" in err and "usable length 128" in err and "Traceback" not in err
    assert not out.exists()
    assert cli_main(["mlmhead", "inspect", str(src), "--texts", str(long), "--max-length", "128", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["max_length"] == 128


@pytest.mark.parametrize("family, limit", [("bert", 128), ("distilbert", 128), ("albert", 128), ("roberta", 129),
                                           ("modernbert", 128)])
def test_usable_length_comes_from_each_family_position_table(tok, family, limit):
    from initlab.mlmhead.lengths import usable_length

    model = tiny_masked_lm(family, tok.vocab_size, hidden=16, layers=1)
    assert usable_length(model)[0] == limit
    with pytest.raises(ValueError, match=f"--max-length {limit + 1}.*usable length {limit}"):
        inspect_model(model, tok, ["a cat", "a dog"], ks=(1.0,), max_length=limit + 1)
    # a rotary model (ModernBERT) runs past its length without an error: only the check stops it
    if family == "modernbert":
        ids = torch.randint(5, tok.vocab_size, (1, limit + 20))
        assert torch.isfinite(model(input_ids=ids).logits).all()


def test_tokenizer_model_max_length_disagreeing_warns_and_the_model_wins(tok):
    from initlab.mlmhead.lengths import usable_length

    model = tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1)
    tok.model_max_length = 512
    try:
        with pytest.warns(UserWarning, match=r"model_max_length \(512\) differs.*\(128"):
            assert usable_length(model, tok)[0] == 128
    finally:
        tok.model_max_length = int(1e30)


def test_inspect_flags_near_constant_representations(tok, tmp_path, capsys):
    from initlab.mlmhead import head_bias
    from initlab.mlmhead.report import format_inspect

    model = tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1)
    with torch.no_grad():
        head_projection(model).mul_(1e-4)  # logits ~ the bias alone: every text gets the same vector
        head_bias(model).copy_(torch.rand(tok.vocab_size, generator=torch.Generator().manual_seed(0)) * 4)
    src, out = tmp_path / "flat", tmp_path / "flat.json"
    model.save_pretrained(src)
    tok.save_pretrained(src)
    from initlab.nn.collapse import detect_collapse

    rep = inspect_model(model, tok, ks=(1.0,), collapse=detect_collapse)
    row = rep["table"][0]
    assert row["collapsed"] and any("near-constant" in r for r in row["collapse_reasons"])
    assert "COLLAPSED at k = 1" in format_inspect(rep)
    # the command line passes the detector in and prints the verdict
    assert cli_main(["mlmhead", "inspect", str(src), "--json", str(out)]) == 0
    assert "COLLAPSED at k = " in capsys.readouterr().out
    assert json.loads(out.read_text())["table"][0]["collapsed"] is True
    # a random tiny BERT gives nearly the same dense vector to every text (mean cosine 0.95: flagged by the
    # calibrated detector); a large head with a negative bias makes text-specific sparse vectors, which pass
    diverse = tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1)
    with torch.no_grad():
        head_projection(diverse).mul_(50.0)
        head_bias(diverse).fill_(-10.0)
    healthy = inspect_model(diverse, tok, ks=(1.0,), collapse=detect_collapse)
    assert healthy["table"][0]["collapse_reasons"] == [] and healthy["table"][0]["mean_pairwise_cosine"] < 0.6


# ---------------------------------------------------------------------------------------------------------
# predicted active dimensions (the per-entry Gaussian logit model, initlab.theory.score_scale.per_entry)
# ---------------------------------------------------------------------------------------------------------
def _untied_bert_with_bias_spread(tok, seed=0):
    """An untied tiny BERT whose bias spreads over N(-1, 1): at large k most logits are the bias alone, so about
    16 % of the entries stay active (the i.i.d. model, fitted with the bias mean only, predicted almost none)."""
    from initlab.mlmhead import head_bias

    model = tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1, head_scale=20.0, seed=seed)
    rescale_mlm_head(model, 1.0, untie=True)
    with torch.no_grad():
        g = torch.Generator().manual_seed(seed)
        head_bias(model).copy_(torch.randn(tok.vocab_size, generator=g) - 1.0)
    model.config.mlm_head_rescale_k = None
    return model


def test_predicted_active_dims_hold_at_every_k_for_an_untied_head(tok):
    from initlab.mlmhead.report import PREDICTION_TOLERANCE

    rep = inspect_model(_untied_bert_with_bias_spread(tok), tok)
    assert rep["prediction"]["holds"] and rep["prediction"]["shown_at_k"] == list(K_GRID)
    for r in rep["table"]:
        assert r["hidden_rel_change"] == 0.0
        err = abs(r["predicted_active_dims_per_text"] - r["active_dims_per_text"]) / r["active_dims_per_text"]
        assert err <= PREDICTION_TOLERANCE, (r["k"], r["predicted_active_dims_per_text"], r["active_dims_per_text"])
    big_k = rep["table"][-1]
    assert big_k["active_dims_per_text"] > 0.1 * tok.vocab_size  # the positive-bias entries stay active at k = 32


def test_identical_weights_give_the_same_prediction_in_any_checkpoint(tok):
    """The original at k = 16 and a copy rescaled by 16 inspected at k = 1 hold the same weights (untied: the same
    hidden states), so measured and predicted active dims agree."""
    original = _untied_bert_with_bias_spread(tok)
    copy = _untied_bert_with_bias_spread(tok)
    rescale_mlm_head(copy, 16.0)
    a = {r["k"]: r for r in inspect_model(original, tok)["table"]}[16.0]
    b = {r["k"]: r for r in inspect_model(copy, tok)["table"]}[1.0]
    assert b["active_dims_per_text"] == pytest.approx(a["active_dims_per_text"], rel=1e-9)
    assert b["predicted_active_dims_per_text"] == pytest.approx(a["predicted_active_dims_per_text"], rel=1e-6)


def test_tied_head_hides_the_prediction_where_hidden_states_change_and_says_why(tok):
    from initlab.mlmhead.report import MAX_HIDDEN_CHANGE, format_inspect

    rep = inspect_model(tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1), tok)
    assert rep["tied"] and rep["prediction"]["holds"]
    for r in rep["table"]:
        assert (r["predicted_active_dims_per_text"] is None) == (r["hidden_rel_change"] > MAX_HIDDEN_CHANGE)
    assert rep["table"][-1]["predicted_active_dims_per_text"] is None  # BERT: dH/H ~ 0.5 at k = 32
    text = format_inspect(rep)
    assert "n/a" in text and "the hidden states change" in text


def test_prediction_is_not_shown_where_the_model_misses_k1(tok):
    """A head whose logits are far from Gaussian per entry: a few tokens carry huge logits for every entry (the
    max over tokens then comes from those outliers). The model is checked at k = 1 and withdrawn, with the reason."""
    from initlab.mlmhead.report import format_inspect

    model = _untied_bert_with_bias_spread(tok)
    with torch.no_grad():
        head_projection(model).mul_(0.0)  # logits = bias + 0: per-entry sd 0, so the model is exact ...
    rep = inspect_model(model, tok, ks=(1.0,))
    assert rep["prediction"]["holds"]
    assert rep["table"][0]["predicted_active_dims_per_text"] == pytest.approx(rep["table"][0]["active_dims_per_text"])
    # ... and a model of the wrong logits (moments of another head) is refused at k = 1
    from initlab.mlmhead import report as R

    fit = R.predict_active_dims
    try:
        R.predict_active_dims = lambda table, moments, buckets, bias: fit(table, _shifted(moments), buckets, bias)
        rep = inspect_model(model, tok, ks=(1.0, 2.0))
    finally:
        R.predict_active_dims = fit
    assert not rep["prediction"]["holds"] and all(r["predicted_active_dims_per_text"] is None for r in rep["table"])
    assert "not shown: the per-entry Gaussian model gives" in format_inspect(rep)


def _shifted(moments):
    """The fitted moments with every mean raised by 10 (all entries predicted active)."""
    fit = moments.fit

    def shifted():
        classes, mu, tau = fit()
        return classes, mu + 10.0, tau

    moments.fit = shifted
    return moments


def test_bf16_and_float32_copies_of_the_same_weights_give_the_same_report(tok, tmp_path):
    """inspect loads float32 whatever the checkpoint stores, so the dtype of the file changes nothing."""
    model = tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1, head_scale=10.0)
    model.to(torch.bfloat16).to(torch.float32)  # weights exactly representable in bfloat16
    for name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        model.to(dtype).save_pretrained(tmp_path / name)
        tok.save_pretrained(tmp_path / name)
    reps = {}
    for name in ("f32", "bf16"):
        assert cli_main(["mlmhead", "inspect", str(tmp_path / name), "--json", str(tmp_path / f"{name}.json")]) == 0
        reps[name] = json.loads((tmp_path / f"{name}.json").read_text())
    assert reps["bf16"]["dtype"] == {"measured": "float32", "stored": "bfloat16"}
    assert reps["f32"]["table"] == reps["bf16"]["table"]


def _numbers(rep):
    """Every number of an inspect report's table and prediction, flattened to (key, value) pairs."""
    out = []
    for r in rep["table"]:
        out += [(f"k={r['k']}:{key}", v) for key, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    out += [(f"prediction:{k}", v) for k, v in rep["prediction"]["model_by_k"].items()]
    return out


@pytest.mark.parametrize("family,vocab", [("bert", None), ("distilbert", None), ("albert", None), ("roberta", None),
                                          ("modernbert", None), ("modernbert", 384)])
def test_fused_and_dense_pooling_give_the_same_report_float64(tok, family, vocab):
    """The fused and the default (dense) path of inspect pool the same SPLADE vectors: every number of the report
    agrees to 1e-10 relative in float64, also with vocabulary rows no token id reaches (ModernBERT padded to 384)."""
    model = tiny_masked_lm(family, vocab or tok.vocab_size, hidden=16, layers=1, head_scale=20.0).double()
    bias = head_bias(model)
    if bias is not None:  # a trained head's bias is not 0: give it one, so the bias's path is compared too
        with torch.no_grad():
            bias.copy_(torch.randn(bias.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64))
    fused = inspect_model(model, tok, ks=(1.0, 4.0, 32.0), engine="fused")
    dense = inspect_model(model, tok, ks=(1.0, 4.0, 32.0))
    assert fused["head_engine"] == "fused" and dense["head_engine"] == "dense"
    assert fused["table"][0]["active_dims_per_text"] > 0  # the vectors compared are not all zero
    if vocab:
        assert fused["unreached_rows"] > 0 and fused["table"][0]["unreached_active_dims_per_text"] > 0
    nf, nd = _numbers(fused), _numbers(dense)
    assert [k for k, _ in nf] == [k for k, _ in nd]
    for (key, a), (_, b) in zip(nf, nd):
        assert a == pytest.approx(b, rel=1e-10, abs=1e-12), key
    assert fused["recommended"] == dense["recommended"]
    with pytest.raises(ValueError, match="engine"):
        inspect_model(model, tok, ks=(1.0,), engine="sparse")


def test_inspect_cli_head_option(tok, tmp_path, capsys):
    src = tmp_path / "tiny"
    tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1).save_pretrained(src)
    tok.save_pretrained(src)
    reps = {}
    for head in ("fused", "dense"):
        out = tmp_path / f"{head}.json"
        assert cli_main(["mlmhead", "inspect", str(src), "--head-engine", head, "--json", str(out)]) == 0
        reps[head] = json.loads(out.read_text())
    assert reps["fused"]["head_engine"] == "fused" and reps["dense"]["head_engine"] == "dense"
    for a, b in zip(reps["fused"]["table"], reps["dense"]["table"]):
        assert a["active_dims_per_text"] == pytest.approx(b["active_dims_per_text"], rel=1e-5)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        cli_main(["mlmhead", "inspect", str(src), "--head-engine", "sparse"])
    assert "--head-engine" in capsys.readouterr().err
