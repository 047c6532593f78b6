"""The blind subspace of attention-score gradients under mean pooling.

At uniform attention the label loss's gradient with respect to the scores is ``grad_S L = 1 g^T`` with
``g^T 1 = 0`` (theorem T1, :mod:`initlab.theory.attention.gradient`): every query row receives the
same gradient. Such matrices span

    Q = { 1 v^T : v^T 1 = 0 }            ("query-independent" directions, dim T - 1),

and their orthogonal complement in R^{T x T} is

    B = Q^perp = { P : P^T 1 = c 1 for some c }   (patterns with constant column sums).

``B`` is the *blind subspace*: every pattern in it (the identity, any permutation, any circulant
proximity band) has zero inner product with the label gradient at uniform attention. This module
gives the two orthogonal projections; the synthetic experiments use :func:`blind_component` to
measure how much of a loss's score gradient lies in ``B``.

Padded sequences (T6, :mod:`initlab.theory.attention.padding_dropout`). With a key-padding mask ``pad : (..., T)``
bool (True = padding, the torch convention) and length-aware pooling, only the valid block (valid
query rows x valid key columns, ``L`` of each) carries a score gradient. Every function here then
projects within that block, with ``T`` replaced by ``L`` (Q_L = {1_L v^T : v ⟂ 1_L} embedded in the
block), and sets the entries outside the block to 0; norms count the block only. Without the mask, a
gradient ``1_valid g^T`` (zero outside the block) would report a blind fraction of ``sqrt(1 - L/T)``,
an artefact of the padded rows (T6).

Source: the self-pretraining analysis (mean-pooled supervised loss vs masked reconstruction at
uniform initialisation) and Amos et al., "Never Train from Scratch", arXiv:2310.02980, for the
phenomenon. Statement texts: :mod:`initlab.theory.statements`.
"""

from __future__ import annotations

import torch

__all__ = ["query_independent_component", "blind_component", "blind_fraction", "valid_block"]


def _check_square(G: torch.Tensor, name: str = "G") -> None:
    if not isinstance(G, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor of shape (..., T, T), got {type(G).__name__}")
    if G.dim() < 2 or G.shape[-1] != G.shape[-2]:
        raise ValueError(f"{name}: expected shape (..., T, T) with square last two dims, got {tuple(G.shape)}")
    if G.shape[-1] < 2:
        raise ValueError(f"{name}: expected T >= 2, got T = {G.shape[-1]}")
    if not torch.isfinite(G).all():
        raise ValueError(f"{name}: contains NaN or inf entries")


def valid_block(G: torch.Tensor, key_padding_mask: torch.Tensor | None) -> torch.Tensor | None:
    """The ``(..., T, T)`` float indicator of the valid block (valid query row and valid key column),
    broadcast to ``G``'s shape; None without a mask.

    Args:
        G: ``(..., T, T)`` (only its shape and dtype are used).
        key_padding_mask: ``(..., T)`` bool, True = padding, broadcastable to ``G.shape[:-1]``; every
            sequence needs at least one valid position.
    Raises:
        TypeError: the mask is not a tensor.
        ValueError: the mask is not bool, has the wrong last size or batch shape, or a sequence is all padding.
    """
    if key_padding_mask is None:
        return None
    m = key_padding_mask
    T = G.shape[-1]
    if not isinstance(m, torch.Tensor):
        raise TypeError(f"key_padding_mask: expected a bool torch.Tensor of shape (..., T) = (..., {T}), got {type(m).__name__}")
    if m.dtype != torch.bool:
        raise ValueError(f"key_padding_mask: expected a bool tensor (True = padding), got dtype {m.dtype}")
    if m.dim() < 1 or m.shape[-1] != T:
        raise ValueError(f"key_padding_mask: expected shape (..., T) with T = {T}, got {tuple(m.shape)}")
    try:
        torch.broadcast_shapes(m.shape[:-1], G.shape[:-2])
    except RuntimeError:
        raise ValueError(f"key_padding_mask: batch shape {tuple(m.shape[:-1])} does not broadcast to G's {tuple(G.shape[:-2])}") from None
    if bool(m.all(-1).any()):
        raise ValueError("key_padding_mask: a sequence has only padding (expected at least one valid position)")
    v = (~m).to(G.dtype)
    return (v[..., :, None] * v[..., None, :]).expand(G.shape)


def query_independent_component(G: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Orthogonal projection of ``G`` onto ``Q = {1 v^T : v ⟂ 1}`` (on the valid block with a mask).

    ``P_Q(G) = 1 (m - mean(m) 1)^T`` with ``m_j = (1/T) sum_i G_ij`` (column means). With a mask, the
    means run over the L valid rows and columns and the result is 0 outside the valid block.

    Args:
        G: ``(..., T, T)`` matrices (rows = queries i, columns = keys j), T >= 2, finite.
        key_padding_mask: optional ``(..., T)`` bool, True = padding (see :func:`valid_block`).
    Returns:
        ``(..., T, T)``, every (valid) row equal, each row summing to zero.
    Raises:
        ValueError: non-square last two dims, T < 2, non-finite entries (naming ``G``), or a bad mask.
    """
    _check_square(G)
    blk = valid_block(G, key_padding_mask)
    if blk is None:
        m = G.mean(dim=-2, keepdim=True)  # (..., 1, T)
        m = m - m.mean(dim=-1, keepdim=True)
        return m.expand_as(G).clone()
    v = blk.diagonal(dim1=-2, dim2=-1)  # (..., T): 1 on valid positions
    n = v.sum(-1, keepdim=True)  # (..., 1) = L
    m = (G * blk).sum(-2) / n  # (..., T) column means over valid rows
    m = (m - (m * v).sum(-1, keepdim=True) / n) * v
    return m[..., None, :] * v[..., :, None]


def blind_component(G: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Orthogonal projection of ``G`` onto the blind subspace ``B`` (constant column sums).

    ``P_B(G) = G - P_Q(G)``; with a mask, ``(G - P_Q(G))`` restricted to the valid block (0 outside).
    For the mean-pooled label loss at uniform attention ``P_B(grad_S L) = 0`` exactly (T1-T2, T6);
    for masked reconstruction it is non-zero for generic data (T4).

    Args:
        G: ``(..., T, T)``, T >= 2, finite.
        key_padding_mask: optional ``(..., T)`` bool, True = padding.
    Returns:
        ``(..., T, T)`` with equal (valid) column sums.
    Raises:
        ValueError: as :func:`query_independent_component`.
    """
    Q = query_independent_component(G, key_padding_mask)
    blk = valid_block(G, key_padding_mask)
    return G - Q if blk is None else (G - Q) * blk


def blind_fraction(G: torch.Tensor, eps: float = 1e-30, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """``||P_B(G)||_F / ||G||_F`` per matrix, shape ``(...)``; 0 where ``G`` is 0.

    A dimensionless number in [0, 1]: the share of a score gradient that can move query-dependent
    patterns (proximity, permutations) at all. With ``key_padding_mask`` (``(..., T)`` bool, True =
    padding) both norms are taken over the valid block only.

    Raises:
        ValueError: as :func:`query_independent_component`.
    """
    Gb = blind_component(G, key_padding_mask)
    blk = valid_block(G, key_padding_mask)
    num = Gb.flatten(-2).norm(dim=-1)
    den = (G if blk is None else G * blk).flatten(-2).norm(dim=-1)
    return torch.where(den > eps, num / den.clamp_min(eps), torch.zeros_like(den))
