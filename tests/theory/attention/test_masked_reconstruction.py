"""T4 (initlab.theory.attention.masked_reconstruction): masked reconstruction sees the blind subspace."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from initlab.theory.attention import gradient as ag
from initlab.theory.attention import masked_reconstruction as am
from initlab.theory.subspace import blind_component, blind_fraction

F64 = torch.float64


pytestmark = pytest.mark.usefixtures("one_thread")


def psi_reference(T, w, p, q):
    """Slow, obvious Psi for the off-diagonal band, with plain Python loops."""
    total = 0.0
    for i in range(T):
        row = [1.0 if 1 <= abs(i - j) <= w else 0.0 for j in range(T)]
        mean = sum(row) / T
        for j in range(T):
            if j != i:
                total += p ** abs(i - j) * (row[j] - mean)
    return q * (1 - q) / T**2 * total


@given(
    T=st.integers(2, 128),
    K=st.integers(2, 9),
    d=st.integers(1, 6),
    H=st.integers(1, 3),
    frac=st.floats(0.05, 0.95),
    seed=st.integers(0, 2**31 - 1),
)
def test_attention_t4_generic_data_rows_differ_and_blind_component_nonzero(T, K, d, H, frac, seed):
    gen = torch.Generator().manual_seed(seed)
    E = torch.randn(K + 1, d, generator=gen, dtype=F64)
    W_V = torch.randn(H, d, 3, generator=gen, dtype=F64)
    W_O = torch.randn(3 * H, 4, generator=gen, dtype=F64)
    W_D = torch.randn(4, K, generator=gen, dtype=F64)
    x = torch.randint(K, (T,), generator=gen)
    mask = torch.rand(T, generator=gen) < frac
    mask[0] = True
    S0 = torch.zeros(H, T, T, dtype=F64)
    S = S0.clone().requires_grad_(True)
    (G,) = torch.autograd.grad(am.generic_masked_loss(S, E, W_V, W_O, W_D, x, mask), S)
    L, O, V = am.generic_masked_loss(S0, E, W_V, W_O, W_D, x, mask, return_O=True)
    (R,) = torch.autograd.grad(L, O)
    # round-off floor: all-masked or one-token sequences give G = 0 up to ~1e-16 |R| |V|
    scale = float(G.abs().max()) + 1e-4 * float(R.abs().max()) * float(V.abs().max())
    assert torch.allclose(G, ag.uniform_score_gradient_from_R(R, V.detach()), rtol=0, atol=1e-10 * scale)
    assert torch.allclose(blind_component(G), ag.blind_component_closed_form(R, V.detach()), rtol=0, atol=1e-10 * scale)
    Dir = torch.randn(H, T, T, generator=gen, dtype=F64)
    h = 1e-5
    with torch.no_grad():
        fd = (am.generic_masked_loss(S0 + h * Dir, E, W_V, W_O, W_D, x, mask) - am.generic_masked_loss(S0 - h * Dir, E, W_V, W_O, W_D, x, mask)) / (2 * h)
    # central-difference round-off is about 1e-16 |L| / h
    assert float(fd) == pytest.approx(float((G * Dir).sum()), abs=1e-7 * float(G.norm() * Dir.norm()) + 1e-9 * (1 + abs(float(L.detach()))))
    if len(set(x.tolist())) > 1 and int(mask.sum()) < T:
        assert float(blind_fraction(G).min()) > 1e-8


@given(T=st.integers(2, 128), w=st.integers(1, 10), p=st.floats(0.0, 1.0), q=st.floats(0.0, 1.0))
def test_attention_t4_psi_matches_loops_and_sign(T, w, p, q):
    P = ag.band_pattern(T, w, diagonal=False)
    val = am.psi(P, p, q)
    assert val == pytest.approx(psi_reference(T, w, p, q), rel=1e-10, abs=1e-15)
    if p > 1e-6 and 0 < q < 1 and q * (1 - q) > 1e-6:
        assert val > 0  # proximity-favouring for every p in (0, 1]
    if p == 0.0:
        assert val == 0.0


@pytest.mark.parametrize("p", [0.0, 0.5, 0.9])
def test_attention_t4_markov_pair_probability(p):
    gen = torch.Generator().manual_seed(11)
    x = am.markov_tokens(40000, 6, 3, p, gen)
    for n in (1, 3):
        emp = float((x[:, 0] == x[:, n]).double().mean())
        assert emp == pytest.approx(am.pair_equal_probability(n, 3, p), abs=5 * 0.5 / 200)
    assert float((x[:, 5] == 0).double().mean()) == pytest.approx(1 / 3, abs=0.015)  # stationary uniform


@pytest.mark.parametrize("path", ["copy", "random"])
def test_attention_t4_closed_form_matches_monte_carlo(path):
    gen = torch.Generator().manual_seed(2024)
    T, K, p, q = 10, 3, 0.7, 0.25
    P = ag.band_pattern(T, 2, diagonal=False)
    C = torch.eye(K, dtype=F64) if path == "copy" else torch.randn(K, K, generator=gen, dtype=F64)
    exact = am.expected_projection(P, p, q, C)
    est, se = am.monte_carlo_projection(P, p, q, C, 20000, gen, loss="linear")
    assert abs(est - exact) < 5 * se
    if path == "copy":
        assert exact > 0 and est > 5 * se  # the descent direction raises nearby keys' scores
        # cross-entropy at small beta: first order in the path scale (beta = 0.05)
        ce, ce_se = am.monte_carlo_projection(P, p, q, 0.05 * C, 20000, gen, loss="ce")
        assert abs(ce - 0.05 * exact) < 5 * ce_se + 0.05 * abs(0.05 * exact)


def test_attention_t4_pinned_regression():
    # Produced once: psi(band_pattern(8, 2, diagonal=False), 0.6, 0.2), kappa(I_3) = 2/3.
    P = ag.band_pattern(8, 2, diagonal=False)
    assert am.psi(P, 0.6, 0.2) == pytest.approx(0.014108808000000004, rel=1e-12)
    assert am.expected_projection(P, 0.6, 0.2, torch.eye(3, dtype=F64)) == pytest.approx(0.009405872000000003, rel=1e-12)
    assert am.kappa(torch.eye(3, dtype=F64)) == pytest.approx(2 / 3)


def test_attention_t4_random_init_expected_projection_vanishes():
    gen = torch.Generator().manual_seed(8)
    K = 4
    # average over initialisations: kappa(W_V W_D) has mean 0 (and a symmetric law)
    kap = torch.tensor([am.kappa(torch.randn(K, 6, generator=gen, dtype=F64) @ torch.randn(6, K, generator=gen, dtype=F64)) for _ in range(4000)])
    assert abs(float(kap.mean())) < 5 * float(kap.std()) / 4000**0.5
    assert 0.4 < float((kap > 0).double().mean()) < 0.6
    # a path with kappa = 0: expected projection zero, per-sequence blind component non-zero
    C = torch.randn(K, K, generator=gen, dtype=F64)
    C0 = C - am.kappa(C) * K / (K - 1) * torch.eye(K, dtype=F64)
    assert abs(am.kappa(C0)) < 1e-14
    T, p, q = 12, 0.8, 0.3
    P = ag.band_pattern(T, 2, diagonal=False)
    est, se = am.monte_carlo_projection(P, p, q, C0, 20000, gen, loss="linear")
    assert abs(est) < 5 * se
    x = am.markov_tokens(32, T, K, p, gen)
    m = torch.rand(32, T, generator=gen) < q
    G = am.masked_score_gradient(x, m, C0, "linear")
    nz = G.flatten(1).norm(dim=1) > 0
    assert float(blind_fraction(G[nz]).median()) > 1e-3


def test_attention_t4_bad_input_is_named():
    with pytest.raises(ValueError, match="p: expected a repeat probability"):
        am.markov_tokens(2, 5, 3, 1.5, torch.Generator())
    with pytest.raises(ValueError, match="T, K"):
        am.markov_tokens(2, 1, 3, 0.5, torch.Generator())
    with pytest.raises(ValueError, match=r"P: expected a square \(T, T\)"):
        am.psi(torch.zeros(3, 4, dtype=F64), 0.5, 0.5)
    with pytest.raises(ValueError, match="P: expected finite"):
        am.psi(torch.full((3, 3), float("nan"), dtype=F64), 0.5, 0.5)
    with pytest.raises(ValueError, match=r"C: expected a square \(K, K\)"):
        am.kappa(torch.zeros(3, 2, dtype=F64))
    with pytest.raises(ValueError, match=r"S: expected shape \(N, T, T\)"):
        am.masked_reconstruction_loss(torch.zeros(2, 3, 4), torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3, dtype=torch.bool), torch.eye(3))
    with pytest.raises(ValueError, match="tokens: expected integers in"):
        am.masked_reconstruction_loss(torch.zeros(1, 3, 3), torch.full((1, 3), 7), torch.zeros(1, 3, dtype=torch.bool), torch.eye(3))


def test_attention_t4_expected_descent_matrix_and_diagonal_sign():
    """E D_ij = kappa q(1-q)/T^2 (h_ij - mean_k h_ik) with h_ii = 0: nearby keys up, the diagonal down."""
    gen = torch.Generator().manual_seed(31)
    T, K, p, q, n = 7, 3, 0.7, 0.3, 60000
    x = am.markov_tokens(n, T, K, p, gen)
    m = torch.rand(n, T, generator=gen) < q
    Ds = -am.masked_score_gradient(x, m, torch.eye(K, dtype=F64), "linear")
    mean, se = Ds.mean(0), Ds.std(0) / n**0.5
    i = torch.arange(T)
    dist = (i[:, None] - i[None, :]).abs().to(F64)
    h = torch.where(dist > 0, p**dist, torch.zeros_like(dist))
    pred = (1 - 1 / K) * q * (1 - q) / T**2 * (h - h.mean(-1, keepdim=True))
    assert bool(((mean - pred).abs() <= 5 * se + 1e-12).all())
    assert bool((pred.diagonal() < 0).all()) and bool((mean.diagonal() < -5 * se.diagonal()).all())


def test_attention_t4_new_bad_input_is_named():
    S, tok, C = torch.zeros(1, 3, 3, dtype=F64), torch.zeros(1, 3, dtype=torch.long), torch.eye(2, dtype=F64)
    with pytest.raises(ValueError, match="mask: expected a bool tensor"):
        am.masked_reconstruction_loss(S, tok, torch.tensor([[1, 0, 0]]), C)
    with pytest.raises(ValueError, match="tokens: expected an integer tensor"):
        am.masked_reconstruction_loss(S, tok.double(), torch.zeros(1, 3, dtype=torch.bool), C)
    with pytest.raises(ValueError, match="S: expected finite"):
        am.masked_reconstruction_loss(torch.full((1, 3, 3), float("nan"), dtype=F64), tok, torch.zeros(1, 3, dtype=torch.bool), C)
    with pytest.raises(ValueError, match=r"C: expected a square \(K, K\)"):
        am.masked_reconstruction_loss(S, tok, torch.zeros(1, 3, dtype=torch.bool), torch.zeros(2, 3, dtype=F64))
    with pytest.raises(ValueError, match=r"tokens: expected shape \(N, T\)"):
        am.masked_score_gradient(torch.zeros(3, dtype=torch.long), torch.zeros(3, dtype=torch.bool), C)
    E, W_V, W_O, W_D = torch.zeros(3, 4, dtype=F64), torch.zeros(1, 4, 3, dtype=F64), torch.zeros(3, 5, dtype=F64), torch.zeros(5, 2, dtype=F64)
    x, msk = torch.tensor([0, 1, 0]), torch.tensor([True, False, False])
    assert am.generic_masked_loss(torch.zeros(1, 3, 3, dtype=F64), E, W_V, W_O, W_D, x, msk).shape == ()
    with pytest.raises(ValueError, match="S: expected finite"):
        am.generic_masked_loss(torch.full((1, 3, 3), float("nan"), dtype=F64), E, W_V, W_O, W_D, x, msk)
    with pytest.raises(ValueError, match=r"W_D: expected shape \(m, K\)"):
        am.generic_masked_loss(torch.zeros(1, 3, 3, dtype=F64), E, W_V, W_O, W_D[:, :1], x, msk)
    with pytest.raises(ValueError, match=r"mask: expected shape \(3,\)"):
        am.generic_masked_loss(torch.zeros(1, 3, 3, dtype=F64), E, W_V, W_O, W_D, x, msk[:2])
    with pytest.raises(ValueError, match="K: expected a vocabulary size"):
        am.pair_equal_probability(1, 0, 0.5)


def test_t4_small_p_lowers_distance_two_keys():
    """T4 entry-wise: at p = 0.1 only the nearest keys rise; the |i - j| = 2 keys are lowered (copy path)."""
    C = torch.eye(4, dtype=F64)
    for T in (8, 16):
        D = am.expected_descent(T, 0.1, 0.5, C)
        P1 = ag.band_pattern(T, 1, diagonal=False)
        P2 = ag.band_pattern(T, 2, diagonal=False) - P1
        assert float((D * P1).sum()) > 0 > float((D * P2).sum())
        assert float((D * P2).sum()) == pytest.approx(am.expected_projection(P2, 0.1, 0.5, C), rel=1e-12)
    assert float((am.expected_descent(8, 0.1, 0.5, C) * (ag.band_pattern(8, 2, False) - ag.band_pattern(8, 1, False))).sum()) == pytest.approx(-5.336734130859376e-04, rel=1e-12)
    gen = torch.Generator().manual_seed(0)
    P2 = ag.band_pattern(8, 2, diagonal=False) - ag.band_pattern(8, 1, diagonal=False)
    est, se = am.monte_carlo_projection(P2, 0.1, 0.5, C, 20000, gen)
    assert est < -3 * se
