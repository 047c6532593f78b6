"""Token masking for masked reconstruction (self-pretraining), one function for synthetic and LRA runs."""

from __future__ import annotations

import torch

__all__ = ["mask_tokens"]


def mask_tokens(tokens: torch.Tensor, ratio: float, generator: torch.Generator | None, *,
                pad_mask: torch.Tensor | None = None, mask_id: int = 1,
                at_least_one: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """I.i.d. masking: each real position is replaced by ``mask_id`` with probability ``ratio``.

    The uniform draws come from ``torch.rand(tokens.shape, generator=generator)`` on the CPU (so a
    seeded CPU generator gives the same masks on any device), then move to ``tokens.device``.

    Args:
        tokens: ``(B, T)`` long ids.
        ratio: masking probability in (0, 1).
        generator: a seeded CPU ``torch.Generator`` (determinism), or None (global RNG).
        pad_mask: ``(B, T)`` bool, True = real token (padding is never masked), or None (all real).
        mask_id: the id written at masked positions.
        at_least_one: if no position was drawn, mask the first one of the batch (so the loss is defined).
    Returns:
        ``inputs (B, T)`` with masked positions set to ``mask_id``, and ``masked (B, T)`` bool (the
        positions the loss is computed on; False on padding).
    Raises:
        ValueError: ``ratio`` outside (0, 1), or ``pad_mask`` of another shape than ``tokens``.
    """
    if not (isinstance(ratio, (int, float)) and 0.0 < ratio < 1.0):
        raise ValueError(f"ratio: expected a float in (0, 1), got {ratio!r}")
    if pad_mask is not None and pad_mask.shape != tokens.shape:
        raise ValueError(f"pad_mask: expected shape {tuple(tokens.shape)} like tokens, got {tuple(pad_mask.shape)}")
    masked = torch.rand(tokens.shape, generator=generator).to(tokens.device) < ratio
    if pad_mask is not None:
        masked &= pad_mask
    if at_least_one and not masked.any():
        masked.view(-1)[0] = True
    return tokens.masked_fill(masked, mask_id), masked
