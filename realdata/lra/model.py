"""LRA models on top of :class:`initlab.nn.encoder.SequenceTransformer`.

:class:`LRAModel` wraps the synthetic encoder (multi-layer, pre-norm, additive sinusoidal positions,
length-aware mean pooling) and adds

* the Retrieval two-tower head: both documents go through the same encoder, are mean-pooled to
  ``x1, x2`` (B, d) and classified from ``[x1, x2, x1 * x2, x1 - x2]`` (B, 4d) by an MLP
  (Tay et al., LRA, §3.3, following the dual-encoder setup of the AAN task);
* the pixel input path of Amos et al.'s Image/Pathfinder pipelines (``encoder: linear``):
  :class:`PixelLinearEmbedding` maps a pixel token to ``W x + b`` with ``x = value / 255`` instead of a
  256-entry embedding table, and an optional ``pixel_head`` (d -> 1) regresses masked pixel values
  for the masked-pixel L1 loss of their Image pretraining file (``lm_loss: l1``);
* a causal encoder pass (:func:`causal_encode`) for the autoregressive SPT option, built from the same
  blocks with a causal mask (the synthetic ``Attention`` has no causal switch; we reuse its
  ``W_Q/W_K/W_V/W_O`` and the block's LayerNorms and residuals).

Everything goes through ``forward(tokens, pad_mask, mode)`` so DDP's gradient hooks see every call.
"""

from __future__ import annotations

import torch
from torch import nn

from initlab.nn.encoder import ModelConfig, SequenceTransformer

__all__ = ["LRAModel", "PixelLinearEmbedding", "causal_encode", "flops_per_sequence", "backbone_config"]


def backbone_config(vocab_size: int, max_len: int, n_classes: int, *, n_layers: int, d_model: int, n_heads: int, d_ff: int,
                    dropout: float = 0.0) -> ModelConfig:
    """The synthetic ``ModelConfig`` for an LRA task (pre-norm, LayerNorm, FFN, sinusoidal positions)."""
    return ModelConfig(vocab_size=vocab_size, max_len=max_len, d_model=d_model, n_heads=n_heads, n_layers=n_layers,
                       d_ff=d_ff, dropout=dropout, pre_norm=True, n_classes=n_classes)


def causal_encode(model: SequenceTransformer, tokens: torch.Tensor, pad_mask: torch.Tensor | None = None,
                  causal: bool = True) -> torch.Tensor:
    """Encoder pass where query t attends to keys ``s <= t`` (and never to padding).

    Args: ``tokens (B, T)`` long, ``pad_mask (B, T)`` bool True = real. ``causal=False`` gives the
    bidirectional pass (used by the float64 test against ``model.encode``).
    Returns: ``H (B, T, d)``. Padding query rows attend to the real prefix (their outputs are unused).
    """
    return model.encode(tokens, pad_mask, causal=causal)


class PixelLinearEmbedding(nn.Module):
    """Token ids -> (..., d) vectors where pixel tokens enter through a linear map of their value.

    Pixel token ``N_SPECIAL + v`` (``v`` in 0..255) becomes ``proj(v / 255)`` (a d x 1 weight and a bias);
    the special tokens (padding, the mask token) keep learned vectors ``special[id]``. Replaces
    ``SequenceTransformer.tok_emb``, so every encoder pass (bidirectional, causal, reference) uses it.

    Args: d_model, n_special (ids below it are special). Input ``ids (..., T)`` long; output ``(..., T, d)``.
    """

    def __init__(self, d_model: int, n_special: int):
        super().__init__()
        self.n_special = n_special
        self.special = nn.Embedding(n_special, d_model)
        self.proj = nn.Linear(1, d_model)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        is_pixel = ids >= self.n_special
        value = ((ids - self.n_special).clamp_min(0).to(self.proj.weight.dtype) / 255.0)[..., None]
        return torch.where(is_pixel[..., None], self.proj(value), self.special(ids.clamp_max(self.n_special - 1)))


class LRAModel(nn.Module):
    """Classifier / SPT model for one LRA task.

    Args:
        cfg: backbone :class:`ModelConfig`. pair: Retrieval (two documents per example).
        pixel_input: ``"token"`` (embedding table) or ``"linear"`` (:class:`PixelLinearEmbedding`).
        pixel_head: add ``pixel_head`` (d -> 1) for the masked-pixel L1 objective (``mode="pixel"``).
    Attributes: ``backbone`` (SequenceTransformer), ``pair_head`` (Retrieval only: 4d -> d -> n_classes),
    ``pixel_head`` (only with ``pixel_head=True``).
    """

    def __init__(self, cfg: ModelConfig, pair: bool = False, pixel_input: str = "token", pixel_head: bool = False):
        super().__init__()
        from initlab.realdata.lra.tokens import N_SPECIAL

        if pixel_input not in ("token", "linear"):
            raise ValueError(f"pixel_input: expected 'token' or 'linear', got {pixel_input!r}")
        self.backbone = SequenceTransformer(cfg)
        if pixel_input == "linear":
            self.backbone.tok_emb = PixelLinearEmbedding(cfg.d_model, N_SPECIAL)
        self.pixel_head = nn.Linear(cfg.d_model, 1) if pixel_head else None
        self.pair = pair
        if pair:
            d = cfg.d_model
            self.pair_head = nn.Sequential(nn.Linear(4 * d, d), nn.GELU(), nn.Linear(d, cfg.n_classes))

    def set_stage(self, stage: str) -> None:
        """Switch off gradients of heads a stage does not use (so DDP never sees unused parameters):
        ``spt`` trains ``mlm_head`` only among heads, ``finetune`` the classifier head(s) only."""
        if stage not in ("spt", "finetune"):
            raise ValueError(f"stage: expected 'spt' or 'finetune', got {stage!r}")
        bb = self.backbone
        bb.mlm_head.requires_grad_(stage == "spt" and self.pixel_head is None)
        if self.pixel_head is not None:
            self.pixel_head.requires_grad_(stage == "spt")
        bb.cls_head.requires_grad_(stage == "finetune" and not self.pair)
        if self.pair:
            self.pair_head.requires_grad_(stage == "finetune")

    def classify(self, tokens: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, n_classes)`` from ``tokens (B, T)`` or, for Retrieval, ``(B, 2, T)`` (with masks alike)."""
        bb = self.backbone
        if not self.pair:
            return bb.cls_head(bb.pool(bb.encode(tokens, pad_mask), pad_mask))
        if tokens.dim() != 3 or tokens.shape[1] != 2:
            raise ValueError(f"tokens: Retrieval expects (B, 2, T), got {tuple(tokens.shape)}")
        B, _, T = tokens.shape
        flat_t, flat_m = tokens.reshape(2 * B, T), pad_mask.reshape(2 * B, T)
        pooled = bb.pool(bb.encode(flat_t, flat_m), flat_m).view(B, 2, -1)
        x1, x2 = pooled[:, 0], pooled[:, 1]
        return self.pair_head(torch.cat([x1, x2, x1 * x2, x1 - x2], dim=-1))

    def forward(self, tokens: torch.Tensor, pad_mask: torch.Tensor, mode: str = "classify") -> torch.Tensor:
        """``mode``: ``classify`` -> (B, n_classes); ``masked`` -> reconstruction logits (B, T, V) of the
        bidirectional encoder; ``pixel`` -> predicted pixel values / 255 (B, T) of the bidirectional encoder
        (needs ``pixel_head``); ``causal`` -> next-token logits (B, T, V) of the causal encoder."""
        if mode == "classify":
            return self.classify(tokens, pad_mask)
        if mode == "masked":
            return self.backbone.mlm_head(self.backbone.encode(tokens, pad_mask))
        if mode == "pixel":
            if self.pixel_head is None:
                raise ValueError("mode: 'pixel' needs a model built with pixel_head=True (spt_loss='l1')")
            return self.pixel_head(self.backbone.encode(tokens, pad_mask)).squeeze(-1)
        if mode == "causal":
            return self.backbone.mlm_head(causal_encode(self.backbone, tokens, pad_mask))
        raise ValueError(f"mode: expected 'classify', 'masked', 'pixel' or 'causal', got {mode!r}")


def flops_per_sequence(cfg: ModelConfig, T: int, head: str = "classify", training: bool = True) -> float:
    """Analytic matmul FLOPs for one sequence of length T (2 FLOPs per multiply-add).

    Per layer and token: ``W_Q, W_K, W_V, W_O``: ``4 * 2 d^2``; scores ``S = Q K^T`` and ``A V``:
    ``2 * 2 T d``; FFN ``2 * 2 d d_ff``. Heads: ``2 d V`` per token for reconstruction, ``2 d n_classes``
    per sequence for classification. Training = 3 x forward (backward ~ 2 x forward; Kaplan et al.
    2020, §2.1). Embedding lookups, softmax, LayerNorm are ignored (standard MFU convention,
    Chowdhery et al. 2022, App. B).
    """
    d, f, L = cfg.d_model, cfg.d_ff, cfg.n_layers
    per_tok = L * (8 * d * d + 4 * T * d + (4 * d * f if cfg.use_ffn else 0))
    fwd = T * per_tok + (T * 2 * d * cfg.vocab_size if head in ("masked", "causal") else 2 * d * cfg.n_classes)
    return float(fwd * (3 if training else 1))
