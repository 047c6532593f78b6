"""Tiny backbone: tokenizer, head inflation vs rescaling, SPLADE pooling and FLOPS references (float64)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from initlab.nn.pooling import splade_pool
from initlab.synthetic.splade.measure import flops_pairs
from initlab.synthetic.splade.data import SPECIAL_TOKENS
from initlab.synthetic.splade.model import BackboneConfig, build_model, build_tokenizer, head_weight, inflate_head
from initlab.mlmhead import rescale_mlm_head

VOCAB = list(SPECIAL_TOKENS) + [f"w{i}" for i in range(20)]
TINY = BackboneConfig(d=16, layers=1, heads=2, ffn=32, max_len=16)


def test_tokenizer_is_word_level_with_cls_sep():
    tok = build_tokenizer(VOCAB)
    ids = tok("w3 w0 w19")["input_ids"]
    assert ids == [VOCAB.index("[CLS]"), VOCAB.index("w3"), VOCAB.index("w0"), VOCAB.index("w19"), VOCAB.index("[SEP]")]
    assert tok("zzz")["input_ids"][1] == VOCAB.index("[UNK]")
    with pytest.raises(ValueError, match="vocab"):
        build_tokenizer(["w0"] + VOCAB)


def test_inflation_multiplies_the_tied_head_and_rescaling_undoes_it():
    model = build_model(len(VOCAB), TINY, seed=0).double().eval()
    ids = torch.tensor([[2, 7, 9, 11, 3]])
    before = model(input_ids=ids).logits
    w0 = head_weight(model).detach().clone()
    inflate_head(model, 16.0)
    assert head_weight(model) is model.get_input_embeddings().weight  # tie kept: embeddings move too
    torch.testing.assert_close(head_weight(model), 16 * w0)
    inflated = model(input_ids=ids).logits
    assert inflated.std() > 4 * before.std()  # logits grow with the head (embedding LayerNorm absorbs part)
    rescale_mlm_head(model, 16.0)
    torch.testing.assert_close(model(input_ids=ids).logits, before, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("factor", [0, -1.0, float("nan"), float("inf"), "4", True])
def test_bad_inflation_factor(factor):
    model = build_model(len(VOCAB), TINY, seed=0)
    w0 = head_weight(model).detach().clone()
    with pytest.raises(ValueError, match="inflation factor"):
        inflate_head(model, factor)
    assert torch.equal(head_weight(model), w0)  # nothing half-done


def test_splade_pool_matches_sentence_transformers_float64():
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    g = torch.Generator().manual_seed(0)
    z = 3 * torch.randn(4, 7, 11, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1] * 7, [1] * 3 + [0] * 4, [1] * 5 + [0] * 2, [1] + [0] * 6])
    ref = torch.zeros(4, 11, dtype=torch.float64)  # slow obvious loop
    for b, j in itertools.product(range(4), range(11)):
        ref[b, j] = max(math.log1p(max(float(z[b, t, j]), 0.0)) for t in range(int(mask[b].sum())))
    torch.testing.assert_close(splade_pool(z, mask), ref)
    pool = SpladePooling("max").eval()
    st = pool({"token_embeddings": z.clone(), "attention_mask": mask})["sentence_embedding"]
    torch.testing.assert_close(st, ref)


def test_flops_is_expected_multiplications_per_pair():
    g = torch.Generator().manual_seed(1)
    q = torch.relu(torch.randn(5, 9, generator=g, dtype=torch.float64))
    d = torch.relu(torch.randn(6, 9, generator=g, dtype=torch.float64))
    brute = sum(int(((q[i] > 0) & (d[j] > 0)).sum()) for i in range(5) for j in range(6)) / 30
    assert flops_pairs(q, d) == pytest.approx(brute, rel=1e-12)
    with pytest.raises(ValueError, match="flops_pairs"):
        flops_pairs(q, d[:, :4])
