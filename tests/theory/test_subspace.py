"""Projections onto the query-independent and blind subspaces (initlab.theory.subspace)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from initlab.theory.subspace import blind_component, blind_fraction, query_independent_component


@given(T=st.integers(2, 40), seed=st.integers(0, 2**31 - 1))
def test_projections_are_orthogonal_complements(T, seed):
    g = torch.Generator().manual_seed(seed)
    G = torch.randn(3, T, T, generator=g, dtype=torch.float64)
    Q, B = query_independent_component(G), blind_component(G)
    assert torch.allclose(Q + B, G)
    assert abs(float((Q * B).sum())) < 1e-9 * float((G * G).sum())  # orthogonal
    assert torch.allclose(query_independent_component(Q), Q)  # idempotent
    assert torch.allclose(blind_component(B), B, atol=1e-12)
    colsums = B.sum(dim=-2)
    assert torch.allclose(colsums, colsums[..., :1].expand_as(colsums), atol=1e-9)  # constant column sums
    assert torch.allclose(Q.sum(dim=-1), torch.zeros(3, T, dtype=torch.float64), atol=1e-9)  # rows sum to 0


def test_rank_one_label_gradient_is_fully_query_independent():
    g = torch.tensor([1.0, -2.0, 0.5, 0.5], dtype=torch.float64)
    G = torch.ones(4, 1, dtype=torch.float64) @ g[None]
    assert float(blind_fraction(G)) == pytest.approx(0.0, abs=1e-15)
    eye = torch.eye(4, dtype=torch.float64)
    assert float(blind_fraction(eye)) == pytest.approx(1.0)  # the identity lies in B


@pytest.mark.parametrize("bad", [torch.zeros(3, 4), torch.zeros(1, 1), torch.tensor([[0.0, float("nan")], [0, 0]])])
def test_bad_input_is_named(bad):
    with pytest.raises(ValueError, match="G"):
        blind_component(bad)
