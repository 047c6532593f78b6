"""Self-pretraining objectives on token sequences: i.i.d. masked denoising and causal next-token.

Masked denoising (Amos et al., ICLR 2024, §3; BERT-style without the 80/10/10 rule): every real token
is independently replaced by ``MASK_ID`` with probability ``ratio``; the loss is the cross-entropy of
the reconstruction head at the masked positions only. Task ratios: 10 % ListOps, 15 % Text and
Retrieval, 50 % Image and Pathfinder (following Amos et al., arXiv:2310.02980).

Causal: the encoder runs with a causal attention mask and position t predicts token t + 1, over real
targets only (Amos et al.'s autoregressive SPT).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from initlab.nn.masking import mask_tokens as _mask_tokens
from initlab.realdata.lra.config import LRAConfig
from initlab.realdata.lra.tokens import MASK_ID

__all__ = ["MASK_RATIO", "mask_tokens", "masked_loss", "causal_targets", "masked_pixel_l1", "spt_loss"]

MASK_RATIO = {"listops": 0.10, "text": 0.15, "retrieval": 0.15, "image": 0.50, "pathfinder": 0.50}


def mask_tokens(tokens: torch.Tensor, pad_mask: torch.Tensor, ratio: float, generator: torch.Generator | None = None,
                mask_id: int = MASK_ID) -> tuple[torch.Tensor, torch.Tensor]:
    """LRA's argument order over :func:`initlab.nn.masking.mask_tokens` (the one masking function).

    Args: ``tokens (B, T)`` long ids; ``pad_mask (B, T)`` bool True = real; ``ratio`` in (0, 1);
    ``generator`` a CPU generator. Returns ``(corrupted (B, T), masked (B, T) bool)``, False on padding.
    Raises: ValueError: ``ratio`` outside (0, 1) or shape mismatch.
    """
    return _mask_tokens(tokens, ratio, generator, pad_mask=pad_mask, mask_id=mask_id)


def masked_loss(logits: torch.Tensor, targets: torch.Tensor, masked: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Mean cross-entropy over masked positions: ``logits (B, T, V)``, ``targets (B, T)``, ``masked (B, T)``.

    Returns ``(loss, n_masked)``; with no masked position the loss is ``0 * logits.sum()`` (keeps the
    graph, so every DDP rank still runs backward).
    """
    n = int(masked.sum())
    if n == 0:
        return logits.sum() * 0.0, 0
    return F.cross_entropy(logits[masked].float(), targets[masked]), n


def causal_targets(tokens: torch.Tensor, pad_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-token targets: ``targets[:, t] = tokens[:, t + 1]``; ``valid (B, T)`` marks t where t + 1 is real."""
    targets = torch.zeros_like(tokens)
    targets[:, :-1] = tokens[:, 1:]
    valid = torch.zeros_like(pad_mask)
    valid[:, :-1] = pad_mask[:, 1:]
    return targets, valid


def masked_pixel_l1(pred: torch.Tensor, tokens: torch.Tensor, masked: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Masked-pixel L1 loss (the ``lm_loss: l1`` / ``masked_mae`` of Amos et al.'s Image pretraining file).

    Args:
        pred: ``(B, T)`` predicted pixel values / 255. tokens: ``(B, T)`` pixel tokens ``N_SPECIAL + v``.
        masked: ``(B, T)`` bool, positions that count.
    Returns:
        ``(mean |pred - v / 255| over masked positions, n_masked)``; with none masked, ``0 * pred.sum()``.
    """
    from initlab.realdata.lra.tokens import N_SPECIAL

    n = int(masked.sum())
    if n == 0:
        return pred.sum() * 0.0, 0
    target = (tokens[masked] - N_SPECIAL).float() / 255.0
    return (pred[masked].float() - target).abs().mean(), n


def spt_loss(model, tok, mask, cfg: LRAConfig, ratio: float, gen: torch.Generator):
    """The SPT loss of ``cfg.spt_objective`` on a batch ``tok, mask : (B, T)``: masked denoising (cross-entropy,
    or masked-pixel L1 with ``cfg.spt_loss == "l1"``) or causal next-token; returns ``(loss, n_targets)``."""
    if cfg.spt_objective == "masked":
        corrupted, masked = mask_tokens(tok, mask, ratio, gen)
        if cfg.spt_loss == "l1":
            return masked_pixel_l1(model(corrupted, mask, mode="pixel"), tok, masked)
        logits = model(corrupted, mask, mode="masked")
        return masked_loss(logits, tok, masked)
    targets, valid = causal_targets(tok, mask)
    logits = model(tok, mask, mode="causal")
    return masked_loss(logits, targets, valid)
