"""T6 (padding masks, dropout), initlab.theory.attention.padding_dropout, and masked projections."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from initlab.theory.attention import case as ac
from initlab.theory.attention import padding_dropout as a6
from initlab.theory.subspace import blind_component, blind_fraction, query_independent_component

F64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_thread")


@given(T=st.integers(3, 64), frac=st.floats(0.0, 1.0), f=st.sampled_from(ac.POSITIONWISE_MAPS), loss=st.sampled_from(ac.LOSSES), seed=st.integers(0, 2**31 - 1))
def test_t6_padding_closed_form_and_masked_projection(T, frac, f, loss, seed):
    gen = torch.Generator().manual_seed(seed)
    case = ac.random_case(gen, T, d=3, heads=2, e=2, f=f, loss=loss)
    Lv = max(2, round(frac * T))
    pad = torch.arange(T) >= Lv
    G = a6.padded_score_gradient(case, pad)
    g = a6.padded_closed_form(case, pad)
    blk = (~pad).to(F64)
    sc = float(G.abs().max()) + 1e-12
    assert torch.allclose(G, blk[:, None] * g[:, None, :], rtol=0, atol=1e-10 * sc)
    assert float(blind_fraction(G, key_padding_mask=pad).max()) < 1e-9
    keep = G.flatten(1).norm(dim=1) > 1e-10
    if keep.any():
        assert torch.allclose(blind_fraction(G[keep]), torch.full((int(keep.sum()),), a6.unmasked_padding_blind_fraction(T, Lv), dtype=F64), rtol=1e-9, atol=1e-12)


@given(T=st.integers(2, 12), seed=st.integers(0, 2**31 - 1))
def test_masked_projections_are_orthogonal_on_the_valid_block(T, seed):
    gen = torch.Generator().manual_seed(seed)
    G = torch.randn(3, T, T, generator=gen, dtype=F64)
    pad = torch.rand(3, T, generator=gen) < 0.4
    pad[:, 0] = False
    Q, B = query_independent_component(G, pad), blind_component(G, pad)
    v = (~pad).to(F64)
    blk = v[:, :, None] * v[:, None, :]
    assert torch.allclose(Q + B, G * blk)
    assert abs(float((Q * B).sum())) < 1e-10 * float((G * G).sum())
    assert torch.allclose(blind_component(B, pad), B, atol=1e-12)
    cs = B.sum(-2)  # constant column sums on valid columns
    for b in range(3):
        c = cs[b][~pad[b]]
        assert torch.allclose(c, c[:1].expand_as(c), atol=1e-9)


def test_t6_dropout_exact_expectation_is_blind():
    for kind, T in (("attention", 3), ("output", 3)):
        gen = torch.Generator().manual_seed(4)
        case = ac.random_case(gen, T, d=2, heads=1, e=2, use_W_O=False, f="tanh", loss="cross_entropy")
        EG = a6.exact_dropout_expectation(case, 0.2, kind)
        assert float(EG.abs().max()) > 1e-4
        assert float(blind_component(EG).abs().max()) < 1e-13 * (1 + float(EG.abs().max()) * 1e3)
        m = (1, T, T) if kind == "attention" else (T, 2)
        keep = torch.rand(16, *m, generator=gen) >= 0.2
        G = a6.dropout_score_gradient(case, keep, 0.2, kind)
        assert torch.allclose(G, a6.dropout_gradient_from_R(case, keep, 0.2, kind), rtol=0, atol=1e-14)
        assert float(blind_fraction(G.flatten(0, 1)).max()) > 0.05  # one mask: not blind


def test_t6_dropout_monte_carlo_rate():
    gen = torch.Generator().manual_seed(0)
    case = ac.random_case(gen, 6, d=3, heads=1, e=2, f="tanh", loss="mse")
    rows = a6.dropout_blind_fraction_curve(case, 0.1, (100, 1600), gen, reps=2)
    ratio = rows[0]["blind_fraction"] / rows[1]["blind_fraction"]
    assert 2.0 < ratio < 8.0  # n^{-1/2}: 16x the masks -> about 4x smaller
    assert rows[0]["per_mask_median"] > 0.05


def test_t6_bad_input():
    case = ac.random_case(torch.Generator().manual_seed(0), 4, d=3, heads=1, e=2)
    with pytest.raises(ValueError, match="pad: expected at least 2 valid"):
        a6.padded_closed_form(case, torch.tensor([False, True, True, True]))
    with pytest.raises(ValueError, match="pad: expected a bool tensor"):
        a6.padded_score_gradient(case, torch.zeros(4))
    with pytest.raises(ValueError, match="key_padding_mask: a sequence has only padding"):
        blind_fraction(torch.zeros(4, 4), key_padding_mask=torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="key_padding_mask: expected a bool"):
        blind_component(torch.zeros(4, 4), torch.zeros(4))
    with pytest.raises(ValueError, match="key_padding_mask: expected shape"):
        blind_component(torch.zeros(4, 4), torch.zeros(5, dtype=torch.bool))
    with pytest.raises(ValueError, match="p: expected a dropout probability"):
        a6.dropout_score_gradient(case, torch.ones(2, 1, 4, 4, dtype=torch.bool), 1.0)
    with pytest.raises(ValueError, match="keep: expected shape"):
        a6.dropout_score_gradient(case, torch.ones(2, 1, 3, 4, dtype=torch.bool), 0.1)
    with pytest.raises(ValueError, match="L, T"):
        a6.unmasked_padding_blind_fraction(3, 4)


def test_t6_padding_central_difference():
    gen = torch.Generator().manual_seed(9)
    case = ac.random_case(gen, 7, d=3, heads=2, e=2, f="gelu", loss="logistic")
    pad = torch.tensor([False, False, True, False, False, True, True])
    G = a6.padded_score_gradient(case, pad)
    E = torch.randn(G.shape, generator=gen, dtype=F64)
    h = 1e-5
    with torch.no_grad():
        fd = float((a6.padded_case_loss(case, pad, case.S + h * E) - a6.padded_case_loss(case, pad, case.S - h * E)) / (2 * h))
    assert fd == pytest.approx(float((G * E).sum()), abs=1e-9)
    assert float(G[:, :, pad].abs().max()) == 0 and float(G[:, pad, :].abs().max()) == 0  # outside the valid block
