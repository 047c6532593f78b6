"""The blind subspace of attention-score gradients under mean pooling.

At uniform attention the label loss's gradient with respect to the scores is ``grad_S L = 1 g^T`` with
``g^T 1 = 0`` (theorem T1, :mod:`initlab.theory.attention_gradient`): every query row receives the
same gradient. Such matrices span

    Q = { 1 v^T : v^T 1 = 0 }            ("query-independent" directions, dim T - 1),

and their orthogonal complement in R^{T x T} is

    B = Q^perp = { P : P^T 1 = c 1 for some c }   (patterns with constant column sums).

``B`` is the *blind subspace*: every pattern in it (the identity, any permutation, any circulant
proximity band) has zero inner product with the label gradient at uniform attention. This module
gives the two orthogonal projections; the synthetic experiments use :func:`blind_component` to
measure how much of a loss's score gradient lies in ``B``.

Source: the self-pretraining analysis summarised in ``shared/seeds`` (mean-pooled supervised loss vs
masked reconstruction at uniform initialisation); Amos et al., ICLR 2024, for the phenomenon.
"""

from __future__ import annotations

import torch

__all__ = ["query_independent_component", "blind_component", "blind_fraction"]


def _check_square(G: torch.Tensor, name: str = "G") -> None:
    if not isinstance(G, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor of shape (..., T, T), got {type(G).__name__}")
    if G.dim() < 2 or G.shape[-1] != G.shape[-2]:
        raise ValueError(f"{name}: expected shape (..., T, T) with square last two dims, got {tuple(G.shape)}")
    if G.shape[-1] < 2:
        raise ValueError(f"{name}: expected T >= 2, got T = {G.shape[-1]}")
    if not torch.isfinite(G).all():
        raise ValueError(f"{name}: contains NaN or inf entries")


def query_independent_component(G: torch.Tensor) -> torch.Tensor:
    """Orthogonal projection of ``G`` onto ``Q = {1 v^T : v ⟂ 1}``.

    ``P_Q(G) = 1 (m - mean(m) 1)^T`` with ``m_j = (1/T) sum_i G_ij`` (column means).

    Args:
        G: ``(..., T, T)`` matrices (rows = queries i, columns = keys j), T >= 2, finite.
    Returns:
        ``(..., T, T)``, every row equal, each row summing to zero.
    Raises:
        ValueError: non-square last two dims, T < 2, or non-finite entries (naming ``G``).
    """
    _check_square(G)
    m = G.mean(dim=-2, keepdim=True)  # (..., 1, T)
    m = m - m.mean(dim=-1, keepdim=True)
    return m.expand_as(G).clone()


def blind_component(G: torch.Tensor) -> torch.Tensor:
    """Orthogonal projection of ``G`` onto the blind subspace ``B`` (constant column sums).

    ``P_B(G) = G - P_Q(G)``. For the mean-pooled label loss at uniform attention ``P_B(grad_S L) = 0``
    exactly (T1-T2); for masked reconstruction it is non-zero for generic data (T4).

    Args:
        G: ``(..., T, T)``, T >= 2, finite.
    Returns:
        ``(..., T, T)`` with equal column sums.
    Raises:
        ValueError: as :func:`query_independent_component`.
    """
    return G - query_independent_component(G)


def blind_fraction(G: torch.Tensor, eps: float = 1e-30) -> torch.Tensor:
    """``||P_B(G)||_F / ||G||_F`` per matrix, shape ``(...)``; 0 where ``G`` is 0.

    A dimensionless number in [0, 1]: the share of a score gradient that can move query-dependent
    patterns (proximity, permutations) at all. ``G : (..., T, T)``, returns ``(...)``.

    Raises:
        ValueError: as :func:`query_independent_component`.
    """
    Gb = blind_component(G)
    num = Gb.flatten(-2).norm(dim=-1)
    den = G.flatten(-2).norm(dim=-1)
    return torch.where(den > eps, num / den.clamp_min(eps), torch.zeros_like(den))
