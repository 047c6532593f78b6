"""T1, T2, T3, T5 (initlab.theory.attention.gradient): property tests, pinned values, bad input."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from initlab.theory.attention import case as ac
from initlab.theory.attention import gradient as ag
from initlab.theory.subspace import blind_component, blind_fraction

F64 = torch.float64


pytestmark = pytest.mark.usefixtures("one_thread")


def draw_case(data, T=None, **over):
    T = data.draw(st.integers(2, 128), label="T") if T is None else T
    kw = dict(
        d=data.draw(st.integers(1, 6), label="d"),
        heads=data.draw(st.integers(1, 3), label="heads"),
        e=data.draw(st.integers(1, 4), label="e"),
        use_W_O=data.draw(st.booleans(), label="W_O"),
        f=data.draw(st.sampled_from(ac.POSITIONWISE_MAPS), label="f"),
        loss=data.draw(st.sampled_from(ac.LOSSES), label="loss"),
    )
    kw.update(over)
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1), label="seed"))
    return ac.random_case(gen, T, **kw), gen


def floor(case) -> float:
    """Round-off magnitude of a score gradient, 1e-4 max|dL/dO| max|V| (guards G = 0 up to round-off)."""
    R, V = ac.output_gradient(case)
    return 1e-4 * float(R.abs().max()) * float(V.abs().max()) + 1e-300


# ------------------------------------------------------------------------------------------ T1
@given(data=st.data())
def test_attention_t1_rank_one_equal_rows_closed_form(data):
    case, gen = draw_case(data)
    G = ac.score_gradient(case)
    g = ag.t1_closed_form(case)
    scale = float(G.abs().max()) + floor(case)
    assert torch.allclose(G, g[:, None, :].expand_as(G), rtol=0, atol=1e-10 * scale)
    assert torch.allclose(G, G[:, :1, :].expand_as(G), rtol=0, atol=1e-12 * scale)  # every query row equal
    assert float(g.sum(-1).abs().max()) <= 1e-12 * (float(g.abs().sum()) + floor(case))  # g ⟂ 1
    assert float(blind_component(G).abs().max()) <= 1e-12 * scale
    # central difference along a random direction (the slow, obvious reference)
    E = torch.randn(G.shape, generator=gen, dtype=F64)
    fd = ac.directional_central_difference(case, E)
    L = float(ac.case_loss(case))  # central-difference round-off is about 1e-16 |L| / h
    assert fd == pytest.approx(float((G * E).sum()), abs=1e-7 * float(G.norm() * E.norm()) + 1e-9 * (1 + abs(L)))


@pytest.mark.parametrize("f,loss", [("tanh", "mse"), ("mlp", "cross_entropy"), ("identity", "logistic"), ("softplus", "log_cosh")])
def test_attention_autograd_matches_entrywise_central_difference(f, loss):
    gen = torch.Generator().manual_seed(7)
    case = ac.random_case(gen, 4, d=3, heads=2, e=2, f=f, loss=loss)
    G = ac.score_gradient(case)
    fd = ac.score_gradient_central_difference(case)
    assert G.abs().max() > 1e-4  # a real, non-trivial gradient
    assert torch.allclose(G, fd, rtol=0, atol=1e-8)


def test_attention_t1_pinned_regression():
    # Produced once with: gen = torch.Generator().manual_seed(1234);
    # random_case(gen, 5, d=3, heads=2, e=2, use_W_O=True, f="tanh", loss="mse"); t1_closed_form(case)
    gen = torch.Generator().manual_seed(1234)
    case = ac.random_case(gen, 5, d=3, heads=2, e=2, use_W_O=True, f="tanh", loss="mse")
    expected = torch.tensor(
        [
            [0.009757496093823566, -0.014467966692893939, 0.002988744142748213, 0.014898975883201316, -0.013177249426879156],
            [-0.0062869683949494356, 0.0007439656421674896, -0.0007091476583854682, 0.012742288500751417, -0.006490138089584005],
        ],
        dtype=F64,
    )
    assert torch.allclose(ag.t1_closed_form(case), expected, rtol=1e-10, atol=1e-14)
    assert torch.allclose(ac.score_gradient(case)[:, 2, :], expected, rtol=1e-9, atol=1e-14)


# ------------------------------------------------------------------------------------------ T2
@given(data=st.data())
def test_attention_t2_blind_patterns_and_band_bound(data):
    case, gen = draw_case(data, heads=1)
    T = case.T
    G = ac.score_gradient(case)[0]
    nG = float(G.norm()) + floor(case)
    w = data.draw(st.integers(1, max(1, T // 2)), label="w")
    perm = torch.randperm(T, generator=gen)
    for P in (torch.eye(T, dtype=F64), ag.permutation_pattern(perm), ag.circulant_band_pattern(T, w)):
        assert abs(float((G * P).sum())) <= 1e-12 * nG * float(P.norm()) + 1e-300
        assert torch.allclose(P.sum(0), P.sum(0)[:1].expand(T))  # constant column sums
    band = ag.band_pattern(T, w)
    inner = float((G * band).sum())
    g = G[0]
    d = ag.band_edge_deficit(T, w)
    assert torch.equal(d, (2 * w + 1) - band.sum(0))
    assert inner == pytest.approx(-float((g * d).sum()), abs=1e-12 * nG * float(band.norm()) + 1e-300)
    assert abs(inner) <= ag.band_edge_bound(g, w) * (1 + 1e-9) + 1e-12 * nG * float(band.norm())
    assert abs(inner) / (nG + 1e-300) <= ag.band_relative_bound(T, w) * (1 + 1e-9) + 1e-12


def test_attention_t2_band_derivative_is_not_zero_and_bound_shrinks():
    gen = torch.Generator().manual_seed(3)
    case = ac.random_case(gen, 9, d=3, heads=1, e=2, f="tanh", loss="mse")
    G = ac.score_gradient(case)[0]
    assert abs(float((G * ag.band_pattern(9, 2)).sum())) > 1e-6 * float(G.norm())  # the ordinary band is seen
    for w in (1, 2, 5):
        vals = [ag.band_relative_bound(T, w) for T in (2 * w + 2, 50, 200, 800)]
        assert all(b < a for a, b in zip(vals, vals[1:]))
        T = 400
        assert ag.band_relative_bound(T, w) == pytest.approx(math.sqrt(w * (w + 1) * (2 * w + 1) / (3 * T)))


def test_attention_band_pinned_regression():
    # sqrt(w(w+1)(2w+1)/(3T)) at T = 100, w = 2 is sqrt(10)/10; at T = 3 < 2w every column has deficit 2.
    assert ag.band_relative_bound(100, 2) == pytest.approx(0.31622776601683794, rel=1e-14)
    assert ag.band_relative_bound(3, 2) == pytest.approx(2.0, rel=1e-14)
    assert ag.band_edge_deficit(6, 2).tolist() == [2.0, 1.0, 0.0, 0.0, 1.0, 2.0]


# ------------------------------------------------------------------------------------------ T3
@given(data=st.data())
def test_attention_t3_bilinear_gradient_rank_one(data):
    d = data.draw(st.integers(2, 6), label="d_model")
    case, gen = draw_case(data, d=d, row_shift=False)
    H = case.H
    dk = data.draw(st.integers(2, 5), label="d_k")
    W_Q = torch.randn(H, d, dk, generator=gen, dtype=F64)
    W_K = torch.randn(H, d, dk, generator=gen, dtype=F64)
    W_Q[..., : dk // 2] = 0  # W_Q W_K^T = 0 while both factors are non-zero
    W_K[..., dk // 2 :] = 0
    gM, gQ, gK = ac.bilinear_score_gradient(case, W_Q, W_K)
    cM, xbar, b = ag.t3_closed_form(case)
    cQ, cK = ag.qk_closed_form(case, W_Q, W_K)
    fl = floor(case) * float(case.X.abs().max()) ** 2 * case.T * (1 + float(W_Q.abs().max()) + float(W_K.abs().max()))
    for got, ref in ((gM, cM), (gQ, cQ), (gK, cK)):
        assert torch.allclose(got, ref, rtol=0, atol=1e-10 * (float(got.abs().max()) + fl))
    sv = torch.linalg.svdvals(gM)
    assert float(sv[:, 1].max()) <= 1e-10 * (float(sv[:, 0].max()) + fl)
    # the first-order change of the scores, X grad_M X^T, is rank one too (never a band)
    dS = torch.einsum("id,hde,je->hij", case.X, gM, case.X)
    svS = torch.linalg.svdvals(dS)
    assert float(svS[:, 1].max()) <= 1e-9 * (float(svS[:, 0].max()) + fl * float(case.X.abs().max()) ** 2)
    # the query side moves only along xbar: every column of grad_WQ is parallel to xbar
    resid = gQ - xbar[None, :, None] * (xbar @ gQ)[:, None, :] / float(xbar @ xbar)
    if float(xbar.norm()) > 1e-6:
        assert float(resid.abs().max()) <= 1e-10 * (float(gQ.abs().max()) + fl)


def test_attention_t3_centred_tokens_give_zero_gradient_and_pinned_values():
    gen = torch.Generator().manual_seed(99)
    case = ac.random_case(gen, 6, d=3, heads=1, e=2, use_W_O=False, f="gelu", loss="logistic", row_shift=False)
    # Produced once with the call above and t3_closed_form(case)[0][0].
    expected = torch.tensor(
        [
            [0.07040936807425145, -0.19091643235475408, 0.04716644651361782],
            [0.037370041854737336, -0.10132962790307135, 0.025033772189154348],
            [-0.03877457683451969, 0.10513805304295787, -0.02597465442986055],
        ],
        dtype=F64,
    )
    assert torch.allclose(ag.t3_closed_form(case)[0][0], expected, rtol=1e-10)
    W_Q = torch.zeros(1, 3, 2, dtype=F64)
    W_K = torch.randn(1, 3, 2, generator=gen, dtype=F64)
    assert torch.allclose(ac.bilinear_score_gradient(case, W_Q, W_K)[0][0], expected, rtol=1e-9)
    case.X = case.X - case.X.mean(0)  # centred tokens: xbar = 0
    gM, gQ, _ = ac.bilinear_score_gradient(case, W_Q, W_K)
    assert float(gM.abs().max()) < 1e-14 and float(gQ.abs().max()) < 1e-14


# ------------------------------------------------------------------------------------------ T5
@given(data=st.data())
def test_attention_t5_cls_pooling_blind_fraction(data):
    case, gen = draw_case(data, pooling="cls")
    G = ac.score_gradient(case)
    R, V = ac.output_gradient(case)
    assert torch.allclose(blind_component(G), ag.blind_component_closed_form(R, V), rtol=0, atol=1e-10 * (float(G.abs().max()) + floor(case)))
    keep = G.flatten(1).norm(dim=1) > 1e-10
    if keep.any():
        assert torch.allclose(blind_fraction(G[keep]), torch.full((int(keep.sum()),), ag.cls_blind_fraction(case.T), dtype=F64), rtol=1e-9)


@given(data=st.data())
def test_attention_t5_residual_breaks_t1_only_for_nonlinear_f(data):
    f = data.draw(st.sampled_from(["tanh", "gelu", "softplus", "mlp"]), label="nonlinear f")
    T = data.draw(st.integers(2, 128), label="T")
    case, gen = draw_case(data, T=T, residual=True, f=f, loss="mse")
    G = ac.score_gradient(case)
    R, V = ac.output_gradient(case)
    B = blind_component(G)
    assert torch.allclose(B, ag.blind_component_closed_form(R, V), rtol=0, atol=1e-10 * (float(G.abs().max()) + floor(case)))
    assert float(blind_fraction(G).min()) > 1e-6  # generic data: T1 fails
    lin, _ = draw_case(data, T=T, residual=True, f="linear")
    Gl = ac.score_gradient(lin)
    assert float(blind_component(Gl).abs().max()) <= 1e-12 * (float(Gl.abs().max()) + floor(lin))  # affine f: T1 holds


@given(data=st.data())
def test_attention_t5_nonuniform_first_order(data):
    T = data.draw(st.integers(3, 64), label="T")
    case, gen = draw_case(data, T=T, f=data.draw(st.sampled_from(["identity", "linear"])), row_shift=False)
    S1 = torch.randn(case.H, T, T, generator=gen, dtype=F64)
    first = ag.nonuniform_first_order(case, S1)
    g0 = float(ac.score_gradient(case).abs().max())
    h = 1e-4
    case.S = h * S1
    Gp = blind_component(ac.score_gradient(case))
    case.S = -h * S1
    Gm = blind_component(ac.score_gradient(case))
    assert torch.allclose((Gp - Gm) / (2 * h), first, rtol=0, atol=1e-6 * (float(first.abs().max()) + g0))
    assert float(first.abs().max()) > 1e-6 * g0  # first order in eps, non-zero


def test_attention_t5_nonuniform_first_order_vanishes_at_T2():
    gen = torch.Generator().manual_seed(5)
    case = ac.random_case(gen, 2, f="identity", row_shift=False)
    assert float(ag.nonuniform_first_order(case, torch.randn(case.H, 2, 2, generator=gen, dtype=F64)).abs().max()) < 1e-15


# ------------------------------------------------------------------------------------------ item 6
def _case():
    return ac.random_case(torch.Generator().manual_seed(0), 4, d=3, heads=2, e=2)


@pytest.mark.parametrize(
    "S,match",
    [
        (torch.zeros(2, 4, 3, dtype=F64), "S: expected a square"),
        (torch.zeros(4, dtype=F64), "S: expected a square"),
        (torch.zeros(2, 1, 1, dtype=F64), "S: expected T >= 2"),
        (torch.full((2, 4, 4), float("nan"), dtype=F64), "S: expected finite"),
        (torch.full((2, 4, 4), float("inf"), dtype=F64), "S: expected finite"),
    ],
)
def test_attention_bad_scores_are_named(S, match):
    c = _case()
    with pytest.raises(ValueError, match=match):
        ac.layer_forward(S, c.X, c.W_V, c.W_O)


def test_attention_bad_shapes_are_named():
    c = _case()
    with pytest.raises(ValueError, match=r"X: expected shape \(T, d\)"):
        ac.layer_forward(c.S, c.X[:3], c.W_V, c.W_O)
    with pytest.raises(ValueError, match="W_V: expected shape"):
        ac.layer_forward(c.S, c.X, c.W_V[:1], c.W_O)
    with pytest.raises(ValueError, match="W_O: expected shape"):
        ac.layer_forward(c.S, c.X, c.W_V, c.W_O[:1])
    bad = c.X.clone()
    bad[0, 0] = float("inf")
    with pytest.raises(ValueError, match="X: expected finite"):
        ac.layer_forward(c.S, bad, c.W_V, c.W_O)
    with pytest.raises(ValueError, match="T: expected T >= 2"):
        ac.random_case(torch.Generator(), 1)
    with pytest.raises(ValueError, match="S: T1 needs uniform attention"):
        ag.t1_closed_form(ac.random_case(torch.Generator().manual_seed(1), 4, score_scale=1.0))
    with pytest.raises(ValueError, match="f: expected one of"):
        ac.make_positionwise_map("relu6", 3, torch.Generator())
    with pytest.raises(TypeError, match="S: expected a torch.Tensor"):
        ac.check_scores([[0.0, 0.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match=r"g: expected shape \(T,\)"):
        ag.band_edge_bound(torch.zeros(3, 3, dtype=F64), 1)


def test_attention_t2_bound_is_attained_up_to_centering():
    """A layer whose values are the edge deficits attains the exact supremum ||Pi d||/sqrt(T) <= ||d||/sqrt(T)."""
    for T, w in ((6, 1), (9, 2), (40, 3), (301, 5)):
        d = ag.band_edge_deficit(T, w)
        case = ac.AttentionCase(d[:, None].clone(), torch.zeros(1, T, T, dtype=F64), torch.ones(1, 1, 1, dtype=F64), None, lambda y: y, lambda p: p.sum())
        G = ac.score_gradient(case)[0]
        ratio = abs(float((G * ag.band_pattern(T, w)).sum())) / float(G.norm())
        sharp = ag.band_sharp_relative_bound(T, w)
        assert ratio == pytest.approx(sharp, rel=1e-10)
        assert sharp <= ag.band_relative_bound(T, w)
        # closed form ||Pi d||^2 = w(w+1)(2w+1)/3 - w^2 (w+1)^2 / T  (T >= 2w)
        assert sharp**2 * T == pytest.approx(w * (w + 1) * (2 * w + 1) / 3 - w**2 * (w + 1) ** 2 / T, rel=1e-10)
        # the first inequality |<G, band>| <= ||g_E|| ||d|| is attained by g_E proportional to d_E
        g = d.clone()
        inner_mask = d == 0
        g[inner_mask] = -d.sum() / int(inner_mask.sum())
        assert abs(float((g * d).sum())) == pytest.approx(ag.band_edge_bound(g, w), rel=1e-12)


def test_attention_new_bad_input_is_named():
    c = _case()
    with pytest.raises(ValueError, match=r"V: expected shape \(H, T, e\)"):
        ag.uniform_score_gradient_from_R(torch.zeros(2, 4, 3, dtype=F64), torch.zeros(2, 5, 3, dtype=F64))
    with pytest.raises(ValueError, match="R: expected finite"):
        ag.blind_component_closed_form(torch.full((2, 4, 3), float("nan"), dtype=F64), torch.zeros(2, 4, 3, dtype=F64))
    with pytest.raises(ValueError, match="R: expected shape .* T >= 2"):
        ag.uniform_score_gradient_from_R(torch.zeros(2, 1, 3, dtype=F64), torch.zeros(2, 1, 3, dtype=F64))
    with pytest.raises(ValueError, match="W_Q: expected shape"):
        ag.qk_closed_form(c, torch.zeros(2, 5, 2, dtype=F64), torch.zeros(2, 3, 2, dtype=F64))
    with pytest.raises(ValueError, match="W_Q, W_K: .* W_Q\\[h\\] W_K\\[h\\]\\^T = 0"):
        ag.qk_closed_form(c, torch.ones(2, 3, 2, dtype=F64), torch.ones(2, 3, 2, dtype=F64))
    lin = ac.random_case(torch.Generator().manual_seed(2), 4, heads=2, f="identity", row_shift=False)
    with pytest.raises(ValueError, match=r"S1: expected shape \(H, T, T\) = \(2, 4, 4\)"):
        ag.nonuniform_first_order(lin, torch.zeros(2, 5, 5, dtype=F64))
    with pytest.raises(ValueError, match="case.f: expected an affine"):
        ag.nonuniform_first_order(ac.random_case(torch.Generator(), 4, heads=2, f="tanh", row_shift=False), torch.zeros(2, 4, 4, dtype=F64))
    with pytest.raises(ValueError, match="case.S: expected uniform"):
        ag.nonuniform_first_order(ac.random_case(torch.Generator(), 4, heads=2, f="identity", score_scale=1.0), torch.zeros(2, 4, 4, dtype=F64))
    for fn in (ag.t3_closed_form, ag.mean_pool_row_gradient):
        with pytest.raises(ValueError, match="case: .* needs mean pooling"):
            fn(ac.random_case(torch.Generator(), 4, pooling="cls"))
    with pytest.raises(ValueError, match="perm: expected a \\(T,\\) integer permutation"):
        ag.permutation_pattern(torch.tensor([0, 0, 1]))
    for fn in (ag.band_edge_deficit, ag.band_relative_bound, ag.band_sharp_relative_bound, ag.band_pattern, ag.circulant_band_pattern):
        with pytest.raises(ValueError, match="T, w: expected integers"):
            fn(1, 1)
        with pytest.raises(ValueError, match="T, w: expected integers"):
            fn(5, -1)
