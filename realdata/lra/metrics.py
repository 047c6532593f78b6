"""Attention metrics of LRA models, with the definitions of :mod:`initlab.nn.attention_metrics`.

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

import torch

from initlab.realdata.lra.splits import Split
from initlab.nn.attention_metrics import attention_entropy, proximity_mass, relative_position_score_fast

__all__ = ["attention_metrics", "relative_position_score_fast"]


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
