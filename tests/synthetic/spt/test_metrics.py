"""Tests of initlab.nn.attention_metrics (the attention measures the SPT experiment reports) and of
initlab.synthetic.spt.metrics (the init-gradient link to the theorem)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from initlab.nn.attention_metrics import (
    attention_entropy,
    proximity_mass,
    relative_position_score,
    toeplitz_part,
    toeplitz_part_reference,
    uniform_proximity_mass,
)
from initlab.synthetic.spt.metrics import score_gradients_at_init
from initlab.nn.encoder import ModelConfig, SequenceTransformer
from initlab.nn.masking import mask_tokens
from initlab.synthetic.spt.tasks import MASK_ID, TaskConfig, make_task


@given(st.integers(2, 12), st.integers(1, 3), st.integers(0, 2**16))
def test_toeplitz_fast_equals_reference_float64(T, B, seed):
    g = torch.Generator().manual_seed(seed)
    S = torch.randn(B, T, T, generator=g, dtype=torch.float64)
    P = toeplitz_part(S)
    torch.testing.assert_close(P, toeplitz_part_reference(S), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(toeplitz_part(P), P, rtol=1e-12, atol=1e-12)  # a projection
    assert abs(float(((S - P) * P).sum())) < 1e-9  # orthogonal


def _relpos_reference(S: torch.Tensor) -> float:
    """Slow reference: explicit least squares per matrix with a dense design (rows + diagonals)."""
    T = S.shape[-1]
    cols = []
    for k in range(-(T - 1), T):
        cols.append(torch.diag(torch.ones(T - abs(k), dtype=torch.float64), k).reshape(-1))
    for r in range(T):
        M = torch.zeros(T, T, dtype=torch.float64)
        M[r] = 1.0
        cols.append(M.reshape(-1))
    D = torch.stack(cols, 1)
    num = den = 0.0
    for M in S.reshape(-1, T, T):
        fit = D @ torch.linalg.lstsq(D, M.reshape(-1, 1), driver="gelsd").solution
        row = M.mean(-1, keepdim=True).expand(T, T).reshape(-1, 1)
        num += float(fit.pow(2).sum() - row.pow(2).sum())
        den += float((M.reshape(-1, 1) - row).pow(2).sum())
    return num / den


@given(st.integers(3, 7), st.integers(0, 2**16))
def test_relative_position_score_equals_reference(T, seed):
    g = torch.Generator().manual_seed(seed)
    i = torch.arange(T, dtype=torch.float64)
    S = torch.randn(2, T, T, generator=g, dtype=torch.float64) + 3 * torch.cos(i[:, None] - i[None, :])
    assert relative_position_score(S) == pytest.approx(_relpos_reference(S), rel=1e-8, abs=1e-10)


def test_relative_position_score():
    T = 30
    i = torch.arange(T, dtype=torch.float64)
    toeplitz = -(i[:, None] - i[None, :]).abs() + torch.randn(T, 1, dtype=torch.float64)  # ALiBi-like + row offsets
    assert relative_position_score(toeplitz) == pytest.approx(1.0)
    assert relative_position_score(torch.randn(T, dtype=torch.float64)[:, None].expand(T, T)) == 0.0
    rand = relative_position_score(torch.randn(20, T, T, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    assert 0.0 < rand < 0.15  # about 2/T for generic matrices


def test_proximity_mass_and_entropy():
    T = 50
    eye = torch.eye(T)
    assert proximity_mass(eye, 0) == pytest.approx(1.0)
    uni = torch.full((T, T), 1.0 / T)
    idx = torch.arange(T)
    expect = float(((idx[:, None] - idx[None, :]).abs() <= 2).float().sum(1).mean()) / T
    assert proximity_mass(uni, 2) == pytest.approx(expect)
    assert uniform_proximity_mass(T, 2) == pytest.approx(expect)
    far = torch.zeros(T, T)
    far[:, -1] = 1.0
    far[-5:, 0] = 1.0
    far[-5:, -1] = 0.0
    assert proximity_mass(far, 2) < 0.1
    assert attention_entropy(uni) == pytest.approx(math.log(T), rel=1e-5)
    assert attention_entropy(eye) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="attn"):
        proximity_mass(torch.zeros(3, 4), 1)
    with pytest.raises(ValueError, match="w"):
        proximity_mass(eye, -1)


def _theorem_model(seed: int) -> SequenceTransformer:
    torch.manual_seed(seed)
    m = SequenceTransformer(ModelConfig(vocab_size=18, max_len=40, d_model=16, d_ff=16, use_ffn=False, use_layernorm=False)).double()
    with torch.no_grad():
        for lin in (m.blocks[0].attn.W_Q, m.blocks[0].attn.W_K):
            lin.weight.zero_()
            lin.bias.zero_()
    return m


@pytest.mark.parametrize("seed", [0, 1])
def test_score_gradients_match_the_theorem(seed):
    """At uniform attention with mean pooling straight after attention the label gradient has no blind
    component (T1-T2), while masked reconstruction's does (T4)."""
    x, y = make_task("local", 16, seed, TaskConfig(T=40))
    inp, masked = mask_tokens(x, 0.15, torch.Generator().manual_seed(seed), mask_id=MASK_ID, at_least_one=True)
    g = score_gradients_at_init(_theorem_model(seed), x, y, inp, masked)
    assert g["label_grad_norm"] > 0 and g["mlm_grad_norm"] > 0
    assert g["label_blind_frac"] < 1e-10
    assert g["mlm_blind_frac"] > 0.1


def test_score_gradient_equals_autograd_through_attention():
    """The retained score gradient matches a direct autograd of the same loss w.r.t. a leaf S."""
    m = _theorem_model(3)
    x, y = make_task("local", 4, 3, TaskConfig(T=40))
    H, _ = m.encode(x, return_attn=True)
    S = m.blocks[0].attn.last_scores
    S.retain_grad()
    loss = torch.nn.functional.cross_entropy(m.cls_head(m.pool(H)), y)
    loss.backward()
    # same loss with S as a leaf: recompute the layer by hand
    att = m.blocks[0].attn
    with torch.no_grad():
        X = m.tok_emb(x) + m.pos[:40]
        v = att.W_V(X)
    S_leaf = S.detach().clone().requires_grad_(True)
    A = torch.softmax(S_leaf, -1)[:, 0]
    out = X + att.W_O(A @ v)
    loss2 = torch.nn.functional.cross_entropy(m.cls_head(out.mean(1)), y)
    loss2.backward()
    torch.testing.assert_close(S.grad, S_leaf.grad, rtol=1e-10, atol=1e-14)
