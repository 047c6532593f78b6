"""SPLADE evaluation and training with what the tokenizer and the length limits do to the text:
truncation counted and warned per set; a tokenizer with ids beyond the model's rows refused in one line;
a vocabulary padded beyond the tokenizer accepted, its unreached rows never part of the sparse vectors."""

from __future__ import annotations

import warnings

import pytest
import torch

from initlab.mlmhead import tiny_masked_lm, tiny_tokenizer
from initlab.realdata.splade.evalset import RetrievalSet
from initlab.realdata.splade.evaluate import evaluate_set
from initlab.realdata.splade.modeling import build_splade, build_tiny_backbone

TEXTS = ["cat sofa dog rain sun tree house car boat river hill stone"]


def _sparse_encoder(folder, q_len=64, d_len=64):
    """A SPLADE SparseEncoder over ``folder`` exactly as saved (no vocabulary cut, unlike build_splade)."""
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling, Transformer

    tr = Transformer(str(folder), transformer_task="fill-mask", max_seq_length=d_len, query_length=q_len,
                     document_length=d_len)
    return SparseEncoder(modules=[tr, SpladePooling(pooling_strategy="max")], device="cpu")


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return build_tiny_backbone(tmp_path_factory.mktemp("bert"), TEXTS)


@pytest.fixture(scope="module")
def short_model(tiny_bert):
    """One SPLADE encoder with 8-token query and document limits, shared by the truncation tests (no training)."""
    return build_splade(str(tiny_bert), query_max_length=8, doc_max_length=8)


def test_truncated_documents_are_counted_in_the_row_and_warned(short_model):
    model = short_model
    long_doc = "cat sofa dog rain sun tree house car boat river"  # 10 words + [CLS] [SEP]: 4 tokens cut at 8
    ds = RetrievalSet("cut", {"d1": long_doc, "d2": "cat"}, {"q1": "river"}, {"q1": {"d1": 1}})
    with pytest.warns(RuntimeWarning, match=r"cut documents: 1 of 2 texts are longer than 8 tokens"):
        row = evaluate_set(model, ds, top_k=10)
    docs = row["truncation"]["documents"]
    assert docs["truncated_texts"] == 1 and docs["tokens_cut"] == 4 and docs["tokens"] == 12 + 3
    assert docs["tokens_cut_share"] == pytest.approx(4 / 15)
    assert row["truncation"]["queries"]["truncated_texts"] == 0


def test_training_texts_are_counted_and_warned(short_model):
    from initlab.realdata.splade.train import training_truncation

    model = short_model
    cols = {"query": ["cat"], "positive": ["cat sofa dog rain sun tree house car boat river"], "negative": ["dog"]}
    with pytest.warns(RuntimeWarning, match="training documents: 1 of 2 texts"):
        got = training_truncation(model, cols)
    assert got["documents"]["tokens_cut"] == 4 and got["queries"]["truncated_texts"] == 0


def test_a_token_added_without_resizing_is_one_line_in_train_and_eval(tmp_path):
    from transformers import AutoTokenizer

    folder = build_tiny_backbone(tmp_path / "b", TEXTS)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.add_tokens(["newword"])
    tok.save_pretrained(folder)
    with pytest.raises(ValueError, match=r"tokenizer has (\d+) tokens .* rows.*resize_token_embeddings") as err:
        build_splade(str(folder))
    assert "\n" not in str(err.value)
    model = _sparse_encoder(folder)
    ds = RetrievalSet("s", {"d1": "cat"}, {"q1": "newword cat"}, {"q1": {"d1": 1}})
    with pytest.raises(ValueError, match="resize_token_embeddings"):
        evaluate_set(model, ds, top_k=10)


def test_a_padded_vocabulary_is_accepted_and_its_unreached_rows_are_not_terms(tmp_path):
    folder = tmp_path / "mb"
    tok = tiny_tokenizer(folder)
    n = len(tok)
    model = tiny_masked_lm("modernbert", 384, hidden=16, layers=1, head_scale=30.0)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    corpus = {"d1": "the cat sat on the sofa", "d2": "a dog in the rain", "d3": "sun over the tree"}
    ds = RetrievalSet("pad", corpus, {"q1": "cat sofa", "q2": "rain dog"}, {"q1": {"d1": 1}, "q2": {"d2": 1}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        padded = evaluate_set(_sparse_encoder(folder), ds, top_k=10)
        cut_model = _sparse_encoder(folder)
        cut_model[0].auto_model.resize_token_embeddings(n)
        cut = evaluate_set(cut_model, ds, top_k=10)
    assert padded["unreached_rows"] == 384 - n and padded["d_active_unreached"] > 0  # they would have counted
    for key in ("nDCG@10", "RR@10", "flops", "q_active", "d_active"):
        assert padded[key] == pytest.approx(cut[key], rel=1e-6), key
    assert padded["d_active"] <= n
    # training: build_splade cuts the padding rows, so the trained vectors never hold them
    trained = build_splade(str(folder))
    assert trained[0].auto_model.get_output_embeddings().weight.shape[0] == n
    emb = trained.encode_document(["the cat sat"], convert_to_tensor=True)
    assert emb.shape[-1] == n
