"""SPLADE term weights: the one definition of SPLADE max pooling used across initlab.

Formal et al., "SPLADE v2: Sparse Lexical and Expansion Model for Information Retrieval"
(arXiv:2109.10086), eq. 1 with max pooling over the tokens t of a query or document:

    w_j = max_t log(1 + ReLU(z_tj)),    z = H W_head^T + b   (T, V)

Because ``log(1 + ReLU(.))`` is non-decreasing it commutes with the max, so the logits are pooled
first (one ``log1p`` per vocabulary entry instead of per token); the value is identical to applying
the activation per token and then taking the max (sentence-transformers' ``SpladePooling``; the
equality is a test).
"""

from __future__ import annotations

import torch

__all__ = ["splade_term_weights"]


def splade_term_weights(z: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Max-pooled SPLADE term weights.

    Args:
        z: logits ``(B, T, V)``.
        mask: attention mask ``(B, T)`` (1/True = token, 0/False = padding), or None (all tokens).
    Returns:
        ``(B, V)`` non-negative term weights.
    Raises:
        ValueError: ``z`` not 3-d, or ``mask`` not of shape ``(B, T)``.
    """
    if z.dim() != 3:
        raise ValueError(f"z: expected logits of shape (B, T, V), got {tuple(z.shape)}")
    if mask is not None:
        if mask.shape != z.shape[:2]:
            raise ValueError(f"mask: expected shape (B, T) = {tuple(z.shape[:2])}, got {tuple(mask.shape)}")
        z = z.masked_fill(~mask.bool()[..., None], float("-inf"))
    return torch.log1p(torch.relu(z.amax(dim=1)))
