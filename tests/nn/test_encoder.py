"""Tests of initlab.nn.encoder: shapes, padding masks, fast path == reference path, groups."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from initlab.config import from_dict
from initlab.nn.encoder import (
    Attention,
    ModelConfig,
    SequenceTransformer,
    freeze,
    load_partial,
    param_groups,
    sinusoidal_table,
)


def _model(**kw) -> SequenceTransformer:
    torch.manual_seed(0)
    base = dict(vocab_size=11, max_len=20, d_model=16, n_heads=2, n_layers=2, d_ff=24)
    base.update(kw)
    return SequenceTransformer(ModelConfig(**base))


def test_shapes_and_attention_maps():
    m = _model()
    tok = torch.randint(0, 11, (3, 20))
    H, maps = m.encode(tok, return_attn=True)
    assert H.shape == (3, 20, 16)
    assert len(maps) == 2 and all(a.shape == (3, 2, 20, 20) for a in maps)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(3, 2, 20))
    assert m.classify(tok).shape == (3, 2)
    assert m.reconstruct(tok).shape == (3, 20, 11)
    assert m.encode(tok).shape == (3, 20, 16)


@pytest.mark.parametrize("pre_norm", [True, False])
@pytest.mark.parametrize("use_ffn,use_layernorm,use_residual", [(True, True, True), (False, False, False), (True, False, True)])
def test_fast_path_equals_reference_float64(pre_norm, use_ffn, use_layernorm, use_residual):
    m = _model(pre_norm=pre_norm, use_ffn=use_ffn, use_layernorm=use_layernorm, use_residual=use_residual).double()
    g = torch.Generator().manual_seed(1)
    tok = torch.randint(0, 11, (4, 17), generator=g)
    lengths = torch.tensor([17, 9, 3, 12])
    mask = torch.arange(17)[None, :] < lengths[:, None]
    fast = m.encode(tok, mask)
    ref, _ = m.encode(tok, mask, return_attn=True)
    torch.testing.assert_close(fast, ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("proximity_bias", [0.0, 0.4, 3.0])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_training_path_equals_explicit_with_gradients_float64(proximity_bias, causal):
    """The training path (SDPA, the ALiBi bias and padding as one additive ``attn_mask``) and the explicit
    softmax path give the same loss and the same gradient on every parameter, in float64."""
    m = _model(proximity_bias=proximity_bias).double()
    twin = _model(proximity_bias=proximity_bias).double()
    twin.load_state_dict(m.state_dict())
    g = torch.Generator().manual_seed(2)
    tok = torch.randint(0, 11, (4, 19), generator=g)
    mask = torch.arange(19)[None, :] < torch.tensor([19, 11, 4, 16])[:, None]
    y = torch.tensor([0, 1, 1, 0])
    fast = torch.nn.functional.cross_entropy(m.cls_head(m.pool(m.encode(tok, mask, causal=causal), mask)), y)
    H, maps = twin.encode(tok, mask, return_attn=True, causal=causal)
    ref = torch.nn.functional.cross_entropy(twin.cls_head(twin.pool(H, mask)), y)
    fast.backward()
    ref.backward()
    torch.testing.assert_close(fast, ref, rtol=1e-12, atol=0)
    grads = dict(twin.named_parameters())
    for name, p in m.named_parameters():
        if name.startswith("mlm_head"):  # not on the classification path
            continue
        torch.testing.assert_close(p.grad, grads[name].grad, rtol=1e-10, atol=1e-12, msg=name)
    if proximity_bias:  # the bias acts: the maps put more mass near the diagonal than without it
        d = (torch.arange(19)[:, None] - torch.arange(19)[None, :]).abs()
        plain = _model().double()
        plain.load_state_dict(m.state_dict())
        _, plain_maps = plain.encode(tok, mask, return_attn=True, causal=causal)
        near = lambda a: (a[0] * (d <= 1)).sum(-1).mean()  # noqa: E731
        assert near(maps[0]) > near(plain_maps[0])


@given(st.integers(1, 4), st.integers(2, 12), st.integers(0, 2**16))
def test_attention_fast_vs_reference_hypothesis(B, T, seed):
    torch.manual_seed(seed)
    att = Attention(8, 2).double()
    x = torch.randn(B, T, 8, dtype=torch.float64)
    kpm = torch.rand(B, T) < 0.3
    kpm[:, 0] = False
    y1, a1 = att(x, kpm)
    y2, a2 = att(x, kpm, return_attn=True)
    assert a1 is None and a2.shape == (B, 2, T, T)
    torch.testing.assert_close(y1, y2, rtol=1e-10, atol=1e-10)
    assert torch.all(a2.masked_select(kpm[:, None, None, :].expand_as(a2)) == 0)


def test_padding_does_not_change_real_outputs():
    """Appending padding leaves the real positions' encodings and the pooled logits unchanged."""
    m = _model().double()
    tok = torch.randint(1, 11, (2, 10))
    padded = torch.cat([tok, torch.zeros(2, 6, dtype=torch.long)], dim=1)
    mask = torch.cat([torch.ones(2, 10, dtype=torch.bool), torch.zeros(2, 6, dtype=torch.bool)], dim=1)
    torch.testing.assert_close(m.encode(padded, mask)[:, :10], m.encode(tok), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(m.classify(padded, mask), m.classify(tok), rtol=1e-10, atol=1e-10)


def test_pool_is_length_aware():
    H = torch.arange(12.0).view(1, 4, 3).repeat(2, 1, 1)
    mask = torch.tensor([[True, True, False, False], [True, True, True, True]])
    out = SequenceTransformer.pool(H, mask)
    torch.testing.assert_close(out[0], H[0, :2].mean(0))
    torch.testing.assert_close(out[1], H[1].mean(0))


def test_reference_path_keeps_scores_for_gradients():
    m = _model(n_layers=1)
    tok = torch.randint(0, 11, (2, 20))
    H, maps = m.encode(tok, return_attn=True)
    S = m.blocks[0].attn.last_scores
    S.retain_grad()
    m.cls_head(m.pool(H)).sum().backward()
    assert S.grad is not None and S.grad.shape == (2, 2, 20, 20)


def test_sinusoidal_table():
    P = sinusoidal_table(50, 8)
    assert P.shape == (50, 8)
    torch.testing.assert_close(P[0], torch.tensor([0.0, 1.0] * 4))
    torch.testing.assert_close(P[7, 0], torch.sin(torch.tensor(7.0)))
    m = _model(pos_encoding="none")
    assert torch.all(m.pos == 0)


def test_bad_inputs_raise():
    m = _model()
    with pytest.raises(ValueError, match="tokens"):
        m.encode(torch.zeros(2, 5))  # float
    with pytest.raises(ValueError, match="max_len"):
        m.encode(torch.zeros(2, 21, dtype=torch.long))
    with pytest.raises(ValueError, match="tokens"):
        m.encode(torch.full((2, 5), 11, dtype=torch.long))
    with pytest.raises(ValueError, match="pad_mask"):
        m.encode(torch.zeros(2, 5, dtype=torch.long), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="pad_mask"):
        m.encode(torch.zeros(2, 5, dtype=torch.long), torch.zeros(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="n_heads"):
        ModelConfig(vocab_size=5, max_len=5, d_model=10, n_heads=3)
    with pytest.raises(ValueError, match="unknown config key"):
        from_dict(ModelConfig, {"vocab_size": 5, "max_len": 5, "width": 3})
    with pytest.raises(TypeError):
        SequenceTransformer({"vocab_size": 5})


def test_param_groups_load_partial_freeze():
    m = _model()
    g = param_groups(m)
    assert set(g) >= {"qk", "qkvo", "ffn", "attention", "embeddings", "heads"}
    assert len(g["qk"]) == 2 * 2 * 2  # 2 layers x (W_Q, W_K) x (weight, bias)
    assert len(g["qkvo"]) == 16 and g["attention"] == g["qkvo"]
    assert all("ffn" in n for n in g["ffn"]) and len(g["ffn"]) == 2 * 4
    assert g["embeddings"] == ["tok_emb.weight"]
    donor = _model()
    with torch.no_grad():
        for p in donor.parameters():
            p.add_(1.0)
    before = {n: p.clone() for n, p in m.named_parameters()}
    copied = load_partial(m, donor.state_dict(), ["qk"])
    assert copied == g["qk"]
    dsd = donor.state_dict()
    for n, p in m.named_parameters():
        expect = dsd[n] if n in copied else before[n]
        torch.testing.assert_close(p, expect)
    frozen = freeze(m, ["ffn"])
    assert all(not p.requires_grad for n, p in m.named_parameters() if n in frozen)
    assert all(p.requires_grad for n, p in m.named_parameters() if n not in frozen)
    with pytest.raises(ValueError, match="unknown group"):
        freeze(m, ["nope"])
    bad = dict(dsd)
    bad["blocks.0.attn.W_Q.weight"] = torch.zeros(3, 3)
    with pytest.raises(ValueError, match="shape"):
        load_partial(m, bad, ["qk"])
