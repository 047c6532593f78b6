"""Attention metrics of LRA models, reusing the synthetic issue's definitions.

For each of the first ``n`` sequences (each alone, no padding, cropped to its first ``max_t`` real
tokens so that (H, T, T) maps fit in memory at LRA lengths), each layer's attention maps A and
pre-softmax scores S come from the encoder's explicit reference path; we report per layer the means of

* ``proximity_mass(A, w)`` (:func:`initlab.nn.attention_metrics.proximity_mass`): attention within
  ``|i - j| <= w`` (uniform: about ``(2w + 1) / T``);
* ``relative_position_score(S)``: share of the row-centred scores explained by a function of ``i - j``
  (random: about ``2 / T``), the quantity of :func:`initlab.nn.attention_metrics.relative_position_score`
  computed by :func:`relative_position_score_fast` in ``O(H T^2)`` per map plus one ``(2T-2)``-sized
  Cholesky factorisation per length (cached), instead of a ``(T^2, 3T-1)`` pseudo-inverse (the
  reference; it took minutes per Pathfinder sequence at T = 1024);
* ``attention_entropy(A)`` in nats, and ``uniform_proximity = mean (2w + 1 clipped) / T`` for scale.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from initlab.realdata.lra.data import Split
from initlab.nn.attention_metrics import attention_entropy, proximity_mass

__all__ = ["attention_metrics", "relative_position_score_fast"]


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

    Same quantity as :func:`initlab.nn.attention_metrics.relative_position_score` (least-squares fit
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


@torch.no_grad()
def attention_metrics(model, split: Split, n: int, w: int = 2, max_t: int = 512) -> dict:
    """Per-layer metrics averaged over the first ``n`` rows of a single-sequence ``split``.

    Args:
        model: :class:`initlab.realdata.lra.model.LRAModel` (on CPU). split: tokens (N, T).
    Returns:
        ``{"layers": [{"layer", "proximity_mass", "relative_position_score", "entropy"}, ...],
        "uniform_proximity", "n_sequences", "w", "max_t"}``.
    Raises:
        ValueError: ``n < 1`` or a pair split (flatten Retrieval pairs first).
    """
    if n < 1:
        raise ValueError(f"n: expected >= 1, got {n}")
    if split.tokens.dim() != 2:
        raise ValueError("split: expected single sequences (N, T); flatten Retrieval pairs first")
    bb = model.backbone
    was_training = bb.training
    bb.eval()
    L = bb.cfg.n_layers
    sums = torch.zeros(L, 3, dtype=torch.float64)
    uni = 0.0
    m = min(n, len(split))
    for i in range(m):
        t = int(min(max(int(split.lengths[i]), 2), max_t, bb.cfg.max_len))
        tok = split.tokens[i : i + 1, :t].long()
        _, maps = bb.encode(tok, None, return_attn=True)
        for layer, (A, blk) in enumerate(zip(maps, bb.blocks)):
            S = blk.attn.last_scores
            sums[layer] += torch.tensor([proximity_mass(A[0], w), relative_position_score_fast(S[0]), attention_entropy(A[0])],
                                        dtype=torch.float64)
        idx = torch.arange(t)
        uni += float(((idx[:, None] - idx[None, :]).abs() <= w).sum()) / (t * t)
    bb.train(was_training)
    means = (sums / m).tolist()
    return {
        "layers": [{"layer": k, "proximity_mass": r[0], "relative_position_score": r[1], "entropy": r[2]} for k, r in enumerate(means)],
        "uniform_proximity": uni / m,
        "n_sequences": m,
        "w": w,
        "max_t": max_t,
    }
