"""initlab.diagnose.measure: the blind share against its slow reference and against T1, in float64."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from initlab.diagnose.data import make_batch
from initlab.diagnose.measure import blind_share, blind_share_reference, entropy_gap, measure, score_gradients
from initlab.diagnose.models import backend_from_model, capture_scores
from initlab.nn.encoder import ModelConfig, SequenceTransformer
from initlab.theory.subspace import blind_fraction


def _real(lengths, T):
    return torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]


@st.composite
def grads(draw):
    B, H, T = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(2, 7))
    lengths = [draw(st.integers(2, T)) for _ in range(B)]
    seed = draw(st.integers(0, 2**31 - 1))
    G = torch.randn(B, H, T, T, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return G, _real(lengths, T)


@given(grads())
def test_fast_blind_share_equals_slow_reference(case):
    G, real = case
    assert torch.allclose(blind_share(G, real), blind_share_reference(G, real), rtol=1e-12, atol=1e-14)


@given(grads(), st.floats(0.01, 100.0))
def test_blind_share_properties(case, scale):
    G, real = case
    b = blind_share(G, real)
    assert ((b >= 0) & (b <= 1 + 1e-12)).all()
    assert torch.allclose(blind_share(scale * G, real), b, rtol=1e-10)  # scale invariant
    # a query-independent gradient 1 g^T (g ⟂ 1 on the valid block) has share exactly 1 ...
    B, H, T, _ = G.shape
    v = real.double()
    g = torch.randn(B, H, T, dtype=torch.float64) * v[:, None, :]
    g = g - (g.sum(-1, keepdim=True) / v.sum(-1)[:, None, None]) * v[:, None, :]
    one_g = v[:, None, :, None] * g[:, :, None, :]
    assert torch.allclose(blind_share(one_g, real), torch.ones(H, dtype=torch.float64), atol=1e-12)
    # ... and share^2 + the theory's blind fraction^2 = 1 for one sequence and head
    f = blind_fraction(G[:1, :1], key_padding_mask=~real[:1, None, :])
    assert math.isclose(float(blind_share(G[:1, :1], real[:1])[0]) ** 2 + float(f) ** 2, 1.0, rel_tol=1e-10)


def test_entropy_gap_uniform_is_zero_and_peaked_is_large():
    real = _real([5, 3], 5)
    A = real[:, None, None, :].double().expand(2, 1, 5, 5)
    A = A / A.sum(-1, keepdim=True)
    assert float(entropy_gap(A, real)[0]) == pytest.approx(0.0, abs=1e-12)
    peaked = torch.softmax(10 * torch.eye(5, dtype=torch.float64), -1)[None, None].expand(2, 1, 5, 5).clone()
    peaked[1, :, :, 3:] = 0
    peaked = peaked / peaked.sum(-1, keepdim=True)
    assert float(entropy_gap(peaked, real)[0]) > 0.5


def _t1_model(n_layers=1, residual=False):
    """The T1 setting: attention (W_Q = W_K = 0, so uniform), no residual, position-wise rest, mean pooling."""
    torch.manual_seed(3)
    m = SequenceTransformer(ModelConfig(vocab_size=12, max_len=16, d_model=8, n_heads=2, n_layers=n_layers, d_ff=16,
                                        use_residual=residual)).double()
    with torch.no_grad():
        for blk in m.blocks:
            for lin in (blk.attn.W_Q, blk.attn.W_K):
                lin.weight.zero_()
                lin.bias.zero_()
    return m


def _batch(lengths, T=10, n_classes=3, seed=0):
    g = np.random.default_rng(seed)
    ids = [g.integers(2, 12, size=L) for L in lengths]
    labels = [str(i % n_classes) for i in range(len(lengths))]
    return ids, labels


def test_t1_setting_label_share_is_one_to_float64_precision():
    """1 layer, uniform attention, mean pooling, no residual (with padding): the label loss's blind share is 1."""
    ids, labels = _batch([10, 7, 4, 9, 2, 10])
    b = make_batch(ids, labels, pad_id=0, n=6, seed=0)
    be = backend_from_model(_t1_model(), "t1")
    m = measure(be, b, pooling="mean", micro=4)
    assert m["layers"][0]["label_share"] == pytest.approx(1.0, abs=1e-12)
    assert all(h == pytest.approx(1.0, abs=1e-12) for h in m["layers"][0]["label_share_heads"])
    assert m["layers"][0]["entropy_gap"] == pytest.approx(0.0, abs=1e-12)
    # masked reconstruction is not blind (T4): its share stays clearly below 1
    assert m["layers"][0]["mlm_share"] < 0.9


def test_cls_pooling_and_residual_break_t1():
    ids, labels = _batch([10] * 6)
    b = make_batch(ids, labels, pad_id=0, n=6, seed=0)
    cls = measure(backend_from_model(_t1_model(), "t1"), b, pooling="cls")
    assert cls["layers"][0]["label_share"] < 0.5  # only the CLS row has a gradient: share about 1/sqrt(T)
    res = measure(backend_from_model(_t1_model(residual=True), "t1r"), b, pooling="mean")
    assert res["layers"][0]["label_share"] < 1 - 1e-6


def test_micro_batches_give_the_full_batch_gradient():
    ids, labels = _batch([10, 7, 4, 9, 3, 10, 8, 6])
    b = make_batch(ids, labels, pad_id=0, n=8, seed=0)
    torch.manual_seed(1)
    be = backend_from_model(SequenceTransformer(ModelConfig(vocab_size=12, max_len=16, d_model=8, n_heads=2,
                                                            n_layers=2, d_ff=16)).double(), "m")
    for loss in ("label", "mlm"):
        one = score_gradients(be, b, loss, micro=8, train=False, keep=True)
        many = score_gradients(be, b, loss, micro=3, train=False, keep=True)
        for a, c in zip(one["q"] + one["g"], many["q"] + many["g"]):
            assert torch.allclose(a, c, rtol=1e-10)


def test_capture_scores_gradient_matches_the_softmax_jacobian_route():
    """HF eager attention: the captured dL/dS equals A ⊙ (dL/dA − rowsum(A ⊙ dL/dA)) from the returned maps."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=32)
    model = transformers.AutoModelForMaskedLM.from_config(cfg, attn_implementation="eager").double().eval()
    ids = torch.randint(5, 30, (2, 6))
    with capture_scores() as got:
        out = model(input_ids=ids, output_attentions=True)
    for a in out.attentions:
        a.retain_grad()
    out.logits.pow(2).mean().backward()
    assert len(got) == 2
    for (S, _), A in zip(got, out.attentions):
        dA = A.grad
        ref = A * (dA - (A * dA).sum(-1, keepdim=True))
        assert torch.allclose(S.grad, ref, atol=1e-12)
