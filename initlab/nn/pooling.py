"""Pooling over tokens: SPLADE max pooling and length-aware mean pooling.

* :func:`splade_pool` -- ``w_j = max_t log(1 + ReLU(z_tj))`` (SPLADE v2, arXiv:2109.10086, eq. 1), the
  one implementation in initlab (defined with the theory in :mod:`initlab.theory.score_scale.splade_terms`).
* :func:`mean_pool` -- mean over real tokens, the pooling of the label loss whose attention-score
  gradient is blind to query-dependent patterns (:mod:`initlab.theory.attention.gradient`, T1).
"""

from __future__ import annotations

import torch

from initlab.theory.score_scale.splade_terms import splade_term_weights

__all__ = ["splade_pool", "mean_pool"]


def splade_pool(z: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """SPLADE term weights ``(B, V)`` from logits ``z (B, T, V)`` and attention mask ``(B, T)`` (1 = token).

    Raises:
        ValueError: wrong shapes (see :func:`initlab.theory.score_scale.splade_terms.splade_term_weights`).
    """
    return splade_term_weights(z, mask)


def mean_pool(H: torch.Tensor, pad_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Length-aware mean over real tokens: ``H (B, T, d)``, ``pad_mask (B, T)`` bool True = real -> ``(B, d)``."""
    if pad_mask is None:
        return H.mean(dim=1)
    w = pad_mask.to(H.dtype)[..., None]  # (B, T, 1)
    return (H * w).sum(dim=1) / w.sum(dim=1).clamp_min(1.0)
