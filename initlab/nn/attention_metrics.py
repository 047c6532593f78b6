"""Attention-map measurements shared by the synthetic SPT runs and LRA.

Letters: B batch, H heads, T length (queries i = rows, keys j = columns).

* :func:`proximity_mass` -- mean attention within ``|i - j| <= w`` (uniform attention gives about
  ``(2w + 1) / T``; exactly :func:`uniform_proximity_mass`);
* :func:`toeplitz_part` -- the orthogonal projection of a score matrix onto Toeplitz matrices (functions
  of ``i - j``: each diagonal replaced by its mean), beside the slow :func:`toeplitz_part_reference`;
* :func:`relative_position_score` -- the share of the scores' variation beyond per-row constants
  (which softmax ignores) explained by a function of ``i - j`` (least squares);
* :func:`attention_entropy` -- mean row entropy in nats (uniform attention: ``log T``);
* :func:`relative_position_score_fast` -- the same score in ``O(N T^2)`` plus one cached ``O(T^3)``
  factorisation per length (compared with the reference in float64 in the tests).
"""

from __future__ import annotations

import functools
from functools import lru_cache

import numpy as np

import torch

__all__ = [
    "proximity_mass",
    "uniform_proximity_mass",
    "toeplitz_part",
    "toeplitz_part_reference",
    "relative_position_score",
    "attention_entropy",
    "relative_position_score_fast",
]


def _check_maps(A: torch.Tensor, name: str) -> None:
    if not isinstance(A, torch.Tensor) or A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        got = tuple(A.shape) if isinstance(A, torch.Tensor) else type(A).__name__
        raise ValueError(f"{name}: expected a tensor of shape (..., T, T), got {got}")


def proximity_mass(attn: torch.Tensor, w: int = 2) -> float:
    """Mean over all leading dims and queries of ``sum_{j : |i-j| <= w} A_ij``.

    Args:
        attn: ``(..., T, T)`` attention maps (rows sum to 1).
        w: window half-width, ``w >= 0``.
    Returns:
        a float in [0, 1].
    Raises:
        ValueError: bad shape or negative ``w``.
    """
    _check_maps(attn, "attn")
    if w < 0:
        raise ValueError(f"w: expected an int >= 0, got {w}")
    T = attn.shape[-1]
    idx = torch.arange(T, device=attn.device)
    band = ((idx[:, None] - idx[None, :]).abs() <= w).to(attn.dtype)
    return float((attn * band).sum(-1).mean())


def uniform_proximity_mass(T: int, w: int) -> float:
    """:func:`proximity_mass` of uniform attention over T keys, edge effects included (about (2w+1)/T)."""
    i = np.arange(T)
    return float((np.minimum(i + w, T - 1) - np.maximum(i - w, 0) + 1).mean() / T)


def toeplitz_part_reference(S: torch.Tensor) -> torch.Tensor:
    """Slow, obvious reference of :func:`toeplitz_part` (a Python loop over diagonals)."""
    _check_maps(S, "S")
    T = S.shape[-1]
    out = torch.empty_like(S)
    for k in range(-(T - 1), T):
        diag = torch.diagonal(S, offset=k, dim1=-2, dim2=-1)  # (..., T - |k|)
        m = diag.mean(-1, keepdim=True)
        torch.diagonal(out, offset=k, dim1=-2, dim2=-1).copy_(m.expand_as(diag))
    return out


def toeplitz_part(S: torch.Tensor) -> torch.Tensor:
    """Orthogonal (Frobenius) projection of ``S (..., T, T)`` onto Toeplitz matrices.

    Each diagonal ``j - i = k`` is replaced by its mean ``t_k``; the result is a function of ``i - j`` only.
    Vectorised with a scatter over offsets; equals :func:`toeplitz_part_reference`.
    """
    _check_maps(S, "S")
    T = S.shape[-1]
    idx = torch.arange(T, device=S.device)
    off = (idx[None, :] - idx[:, None] + T - 1).reshape(-1)  # (T*T,) offset index in [0, 2T-2]
    flat = S.reshape(*S.shape[:-2], T * T)
    sums = torch.zeros(*S.shape[:-2], 2 * T - 1, dtype=S.dtype, device=S.device).index_add_(-1, off, flat)
    counts = torch.bincount(off, minlength=2 * T - 1).to(S.dtype)
    means = sums / counts
    return means[..., off].reshape(S.shape)


@functools.lru_cache(maxsize=8)
def _toeplitz_row_basis(T: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Indicator basis ``D (T*T, 3T-1)`` of Toeplitz (2T-1 diagonals) plus row-constant (T rows) matrices,
    and its pseudo-inverse ``(3T-1, T*T)``, float64."""
    idx = torch.arange(T)
    off = (idx[None, :] - idx[:, None] + T - 1).reshape(-1)
    row = idx[:, None].expand(T, T).reshape(-1)
    D = torch.zeros(T * T, 3 * T - 1, dtype=torch.float64)
    D[torch.arange(T * T), off] = 1.0
    D[torch.arange(T * T), 2 * T - 1 + row] = 1.0
    return D, torch.linalg.pinv(D)


def relative_position_score(S: torch.Tensor) -> float:
    """Share of the score matrix's variation, beyond per-row constants, explained by a function of i - j.

    Softmax ignores a constant per query row, so the reference model is ``S_ij ~ r_i`` and the full model
    ``S_ij ~ r_i + t_{i-j}`` (least squares). With ``P_row`` and ``P_joint`` the two orthogonal projections,

        score = (||P_joint S||^2 - ||P_row S||^2) / ||S - P_row S||^2     (summed over leading dims),

    in [0, 1]: 1 for ``r_i + t_{i-j}`` (ALiBi-like proximity bias), 0 for row-constant scores, about
    ``2 / T`` for a generic random matrix. Returns 0 when all rows are constant.

    Args:
        S: ``(..., T, T)`` scores.
    """
    _check_maps(S, "S")
    T = S.shape[-1]
    D, Dp = _toeplitz_row_basis(T)
    flat = S.detach().reshape(-1, T * T).double().cpu()
    fit = (flat @ Dp.T) @ D.T  # P_joint S
    row = flat.view(-1, T, T).mean(-1, keepdim=True).expand(-1, T, T).reshape(-1, T * T)  # P_row S
    den = float((flat - row).pow(2).sum())
    if den <= 1e-20 * float(flat.pow(2).sum()):  # rows constant up to rounding
        return 0.0
    num = float(fit.pow(2).sum() - row.pow(2).sum())
    return min(max(num / den, 0.0), 1.0)


def attention_entropy(attn: torch.Tensor, eps: float = 1e-12) -> float:
    """Mean row entropy ``-sum_j A_ij log A_ij`` in nats over all rows of ``attn (..., T, T)``."""
    _check_maps(attn, "attn")
    return float(-(attn * (attn + eps).log()).sum(-1).mean())


@lru_cache(maxsize=8)
def _offset_gram_cholesky(T: int) -> torch.Tensor:
    """Cholesky factor (float64) of the Gram matrix of the row-centred diagonal indicators, one diagonal dropped.

    Diagonal ``o = j - i`` (``-(T-1) .. T-1``) holds ``T - |o|`` entries and meets row ``i`` iff
    ``max(0, -o) <= i <= min(T-1, T-1-o)``. With ``X`` the (T^2, 2T-1) diagonal indicators and ``P_row``
    the row-mean projection, ``G = X^T (I - P_row) X = diag(T - |o|) - overlap(o, o') / T``, where
    ``overlap`` counts rows met by both diagonals. The columns of ``(I - P_row) X`` sum to zero (all
    diagonals together are the all-ones matrix, a row constant), so dropping diagonal ``-(T-1)`` leaves
    a basis of the same span and a positive definite ``(2T-2, 2T-2)`` matrix.
    """
    o = torch.arange(-(T - 1), T, dtype=torch.float64)
    lo = torch.maximum(torch.clamp(-o, min=0)[:, None], torch.clamp(-o, min=0)[None, :])
    hi = torch.minimum((T - 1 - torch.clamp(o, min=0))[:, None], (T - 1 - torch.clamp(o, min=0))[None, :])
    overlap = (hi - lo + 1).clamp_min(0)
    G = torch.diag(T - o.abs()) - overlap / T
    return torch.linalg.cholesky(G[1:, 1:])


def relative_position_score_fast(S: torch.Tensor) -> float:
    """Share of the row-centred variation of scores ``S (..., T, T)`` explained by a function of ``j - i``.

    Same quantity as :func:`relative_position_score` (the slow reference) (least-squares fit
    ``S_ij ~ r_i + t_{j-i}``, summed over leading dims):
    ``(||P_joint S||^2 - ||P_row S||^2) / ||S - P_row S||^2``. Because ``P_joint = P_row + P_Z`` with
    ``Z = (I - P_row) X`` (row-centred diagonal indicators), the numerator is ``c^T G^{-1} c`` with
    ``c`` the diagonal sums of the row-centred scores and ``G = Z^T Z`` (:func:`_offset_gram_cholesky`).
    Cost ``O(N T^2)`` for ``N`` maps plus one ``O(T^3)`` factorisation per ``T`` (cached), in float64.

    Returns a float in [0, 1]; 0 when every row is constant (up to rounding).
    Raises:
        ValueError: ``S`` is not ``(..., T, T)``.
    """
    if S.dim() < 2 or S.shape[-1] != S.shape[-2]:
        raise ValueError(f"S: expected (..., T, T) scores, got shape {tuple(S.shape)}")
    T = S.shape[-1]
    flat = S.detach().reshape(-1, T, T).double().cpu()
    centred = flat - flat.mean(-1, keepdim=True)
    den = float(centred.pow(2).sum())
    if T < 2 or den <= 1e-20 * float(flat.pow(2).sum()):
        return 0.0
    idx = torch.arange(T)
    offset = (idx[None, :] - idx[:, None] + T - 1).reshape(-1)  # diagonal index 0 .. 2T-2 of each entry
    c = torch.zeros(flat.shape[0], 2 * T - 1, dtype=torch.float64).index_add_(1, offset, centred.reshape(-1, T * T))
    L = _offset_gram_cholesky(T)
    y = torch.linalg.solve_triangular(L, c[:, 1:].T, upper=False)  # G^-1 = L^-T L^-1: c^T G^-1 c = ||L^-1 c||^2
    return min(max(float(y.pow(2).sum()) / den, 0.0), 1.0)
