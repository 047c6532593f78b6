"""T1' (row-identical attention) and T3' (Q/K biases), initlab.theory.attention.rowidentical."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from initlab.theory.attention import case as ac
from initlab.theory.attention import gradient as ag
from initlab.theory.attention import rowidentical as ar
from initlab.theory.subspace import blind_component, blind_fraction

F64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_thread")


def draw(data, T=None, **over):
    T = data.draw(st.integers(2, 64), label="T") if T is None else T
    kw = dict(d=data.draw(st.integers(2, 6), label="d"), heads=data.draw(st.integers(1, 3), label="heads"),
              e=data.draw(st.integers(1, 4), label="e"), use_W_O=data.draw(st.booleans(), label="W_O"),
              f=data.draw(st.sampled_from(ac.POSITIONWISE_MAPS), label="f"), loss=data.draw(st.sampled_from(ac.LOSSES), label="loss"),
              row_shift=False)
    kw.update(over)
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1), label="seed"))
    case = ac.random_case(gen, T, **kw)
    H, d = case.H, case.X.shape[1]
    dk = data.draw(st.integers(2, 5), label="d_k")
    W_Q, W_K = torch.randn(H, d, dk, generator=gen, dtype=F64), torch.randn(H, d, dk, generator=gen, dtype=F64)
    W_Q[..., : dk // 2] = 0  # W_Q W_K^T = 0, both factors non-zero
    W_K[..., dk // 2:] = 0
    return case, gen, W_Q, torch.randn(H, dk, generator=gen, dtype=F64), W_K, torch.randn(H, dk, generator=gen, dtype=F64)


def floor(case):
    R, V = ac.output_gradient(case)
    return 1e-4 * float(R.abs().max()) * float(V.abs().max()) + 1e-300


@given(data=st.data())
def test_t1p_row_identical_closed_form_blind(data):
    case, gen, W_Q, b_Q, W_K, b_K = draw(data)
    case.S = ar.biased_scores(case.X, W_Q, b_Q, W_K, b_K)
    G = ac.score_gradient(case)
    g = ar.t1p_closed_form(case)
    sc = float(G.abs().max()) + floor(case)
    assert torch.allclose(G, g[:, None, :].expand_as(G), rtol=0, atol=1e-10 * sc)
    assert float(g.sum(-1).abs().max()) <= 1e-12 * (float(g.abs().sum()) + floor(case))
    assert float(blind_component(G).abs().max()) <= 1e-11 * sc
    E = torch.randn(G.shape, generator=gen, dtype=F64)
    fd = ac.directional_central_difference(case, E)
    L = float(ac.case_loss(case))
    assert fd == pytest.approx(float((G * E).sum()), abs=1e-7 * float(G.norm() * E.norm()) + 1e-9 * (1 + abs(L)))


def test_t1p_uniform_special_case_and_t1_formula_is_wrong_off_uniform():
    gen = torch.Generator().manual_seed(3)
    case = ac.random_case(gen, 9, d=4, heads=2, e=3, f="tanh", loss="mse", row_shift=False)
    assert torch.allclose(ar.t1p_closed_form(case), ag.t1_closed_form(case), rtol=0, atol=1e-15)  # a = 1/T
    case.S = torch.randn(2, 1, 9, generator=gen, dtype=F64).expand(2, 9, 9).clone()  # identical rows, non-uniform
    G = ac.score_gradient(case)[:, 0]
    g1 = ag.t1_closed_form(ac.AttentionCase(case.X, torch.zeros_like(case.S), case.W_V, case.W_O, case.f, case.loss))
    assert float(((g1 - G).norm(dim=-1) / G.norm(dim=-1)).min()) > 0.05  # T1's uniform g is wrong here
    assert torch.allclose(ar.t1p_closed_form(case), G, rtol=0, atol=1e-14)


@given(data=st.data())
def test_t3p_bias_gradients_closed_form(data):
    case, gen, W_Q, b_Q, W_K, b_K = draw(data)
    auto = ar.qk_bias_gradient(case, W_Q, b_Q, W_K, b_K)
    closed = ar.qk_bias_closed_form(case, W_Q, b_Q, W_K, b_K)
    top = max(float(t.abs().max()) for t in auto.values()) + floor(case) * (1 + float(case.X.abs().max())) ** 2 * case.T * 10
    for k in auto:
        assert torch.allclose(auto[k], closed[k], rtol=0, atol=1e-10 * top), k
    assert float(auto["b_K"].abs().max()) <= 1e-12 * top


def test_t3p_centred_tokens_and_query_independent_step():
    gen = torch.Generator().manual_seed(11)
    case = ac.random_case(gen, 10, d=4, heads=2, e=3, f="gelu", loss="logistic", row_shift=False)
    case.X = case.X - case.X.mean(0)
    Z = torch.zeros(2, 4, 3, dtype=F64)
    b_Q, b_K = torch.randn(2, 3, generator=gen, dtype=F64), torch.randn(2, 3, generator=gen, dtype=F64)
    W_K = torch.randn(2, 4, 3, generator=gen, dtype=F64)
    auto = ar.qk_bias_gradient(case, Z, b_Q, Z, b_K)
    assert float(auto["W_Q"].abs().max()) < 1e-15
    C = case.X.T @ case.X / case.T
    r = ag.mean_pool_row_gradient(case)
    expect = case.T / math.sqrt(3) * torch.einsum("de,hef,hf->hd", C, case.W_V, r)[:, :, None] * b_Q[:, None, :]
    assert torch.allclose(auto["W_K"], expect, rtol=1e-10) and float(auto["W_K"].norm()) > 1e-3  # T3 said 0
    for WK in (Z, W_K):  # W_Q = 0 and centred tokens: the row-centred step is query-independent
        g = ar.qk_bias_gradient(case, Z, b_Q, WK, b_K)
        assert float(blind_fraction(ar.first_order_score_step(case.X, Z, b_Q, WK, b_K, g)).max()) < 1e-12
    case.X = case.X + 1.0  # uncentred tokens, W_K != 0: the step has a blind component
    g = ar.qk_bias_gradient(case, Z, b_Q, W_K, b_K)
    assert float(blind_fraction(ar.first_order_score_step(case.X, Z, b_Q, W_K, b_K, g)).min()) > 1e-3


def test_t3_rank2_scores_concentrate_near_diagonal():
    """T3's band sentence is about band-shaped S: the rank-2 S_ij = beta (2ij - j^2) concentrates attention."""
    T, beta = 30, 0.5
    i = torch.arange(T, dtype=F64)
    S = beta * (2 * i[:, None] * i[None, :] - i[None, :] ** 2)
    assert int(torch.linalg.matrix_rank(S)) == 2
    A = torch.softmax(S, -1)
    mass = float((A * ag.band_pattern(T, 2)).sum() / T)
    assert mass > 0.99  # pinned: 0.99 of the attention on |i - j| <= 2


def test_t1p_t3p_bad_input():
    case = ac.random_case(torch.Generator().manual_seed(0), 4, d=3, heads=2, e=2)
    with pytest.raises(ValueError, match="S: T1' needs row-identical"):
        ar.t1p_closed_form(case, torch.randn(2, 4, 4, dtype=F64))
    W = torch.ones(2, 3, 2, dtype=F64)
    b = torch.zeros(2, 2, dtype=F64)
    with pytest.raises(ValueError, match=r"W_Q\[h\] W_K\[h\]\^T = 0"):
        ar.qk_bias_closed_form(case, W, b, W, b)
    with pytest.raises(ValueError, match="b_Q: expected shape"):
        ar.qk_bias_gradient(case, W, torch.zeros(3, dtype=F64), W, b)
    with pytest.raises(ValueError, match="grads: expected keys"):
        ar.first_order_score_step(case.X, W, b, W, b, {"W_Q": W})


def test_t1p_pinned_regression():
    # Produced once with: gen = torch.Generator().manual_seed(2024);
    # random_case(gen, 5, d=3, heads=1, e=2, f="tanh", loss="mse", row_shift=False); S rows = (0.3, -0.2, 0.5, 0, 1)
    gen = torch.Generator().manual_seed(2024)
    case = ac.random_case(gen, 5, d=3, heads=1, e=2, f="tanh", loss="mse", row_shift=False)
    case.S = torch.tensor([[0.3, -0.2, 0.5, 0.0, 1.0]], dtype=F64)[:, None, :].expand(1, 5, 5).clone()
    expected = torch.tensor([[-0.011713493435832285, -0.020267003427780456, 0.02300584214161646, -0.0015477312038895382, 0.010522385925885827]], dtype=F64)
    assert torch.allclose(ar.t1p_closed_form(case), expected, rtol=1e-10, atol=1e-15)
    assert torch.allclose(ac.score_gradient(case)[:, 3, :], expected, rtol=1e-9, atol=1e-15)
