"""A small sequence-classification transformer encoder (shared by the synthetic SPT runs and LRA).

Imported as ``initlab.nn.encoder``.

Layout, readable top to bottom (letters: B batch, T length, d width, H heads, V vocabulary):

    tokens (B, T) --tok_emb--> (B, T, d) + P[:T]          P: fixed sinusoidal table (Vaswani et al. 2017, §3.5)
      -> n_layers x Block:   x = x + W_O softmax(S) (x W_V),   S = (x W_Q)(x W_K)^T / sqrt(d/H)   (pre-norm)
                             x = x + FFN(x)
      -> ln_f -> H (B, T, d)
      -> classify:    length-aware mean over real tokens (or H[:, 0], or the last real token) -> cls_head -> (B, n_classes)
      -> reconstruct: mlm_head per position               -> (B, T, V)   (masked reconstruction, SPT)

Attention keeps separate ``W_Q, W_K, W_V, W_O`` (``nn.Linear(d, d)``) because hybrid initialisation and
freezing address them by name (:func:`param_groups`). The normal path calls
``torch.nn.functional.scaled_dot_product_attention``; asking for attention maps (``return_attn=True``)
switches to the explicit-softmax reference path, which also keeps the pre-softmax scores S of the last
call in ``Attention.last_scores`` (in the autograd graph, so callers can ``retain_grad()`` on them).

Padding: ``pad_mask`` (B, T) bool is True for REAL tokens at the model level (``encode``); the attention
module takes the opposite convention of torch, ``key_padding_mask`` True = pad.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from initlab.config import check_ranges, ranged
from initlab.nn.pooling import mean_pool

__all__ = [
    "ModelConfig",
    "sinusoidal_table",
    "Attention",
    "Block",
    "SequenceTransformer",
    "param_groups",
    "load_partial",
    "freeze",
    "GROUPS",
]

GROUPS = ("qk", "qkvo", "attention", "ffn", "embeddings", "heads", "layernorm")


@dataclass(frozen=True)
class ModelConfig:
    """Sizes and switches of :class:`SequenceTransformer` (strict loading via ``initlab.config.from_dict``)."""

    vocab_size: int = ranged(within="[1, inf)")  # including special tokens (pad, mask, ...)
    max_len: int = ranged(within="[1, inf)")  # T_max for the sinusoidal table
    d_model: int = ranged(64, "[1, inf)")  # d
    n_heads: int = ranged(1, "[1, inf)")
    n_layers: int = ranged(1, "[1, inf)")
    d_ff: int = ranged(128, "[1, inf)")
    dropout: float = ranged(0.0, "[0, 1)")
    use_ffn: bool = True
    use_layernorm: bool = True
    use_residual: bool = True
    pre_norm: bool = True
    pos_encoding: Literal["sinusoidal", "none"] = "sinusoidal"  # additive, fixed
    pad_id: int = ranged(0, "[0, inf)")
    n_classes: int = ranged(2, "[1, inf)")
    pooling: Literal["mean", "cls", "last"] = "mean"  # classifier input: length-aware mean, the first position's state, or the last real token's
    proximity_bias: float = ranged(0.0, "[0, inf)")  # m >= 0: a fixed ALiBi-like score bias -m |i - j| (a proximity prior; 0 = none)

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.d_model % self.n_heads:
            raise ValueError(f"ModelConfig.n_heads: must divide d_model={self.d_model}, got {self.n_heads}")
        if self.pos_encoding not in ("sinusoidal", "none"):
            raise ValueError(f"ModelConfig.pos_encoding: expected 'sinusoidal' or 'none', got {self.pos_encoding!r}")
        if self.pooling not in ("mean", "cls", "last"):
            raise ValueError(f"ModelConfig.pooling: expected 'mean', 'cls' or 'last', got {self.pooling!r}")
        if not self.pad_id < self.vocab_size:
            raise ValueError(f"ModelConfig.pad_id: expected 0 <= pad_id < vocab_size={self.vocab_size}, got {self.pad_id}")


def sinusoidal_table(max_len: int, d: int) -> torch.Tensor:
    """Fixed positional table P, shape ``(max_len, d)``, float32.

    ``P[t, 2i] = sin(t / 10000^(2i/d))``, ``P[t, 2i+1] = cos(t / 10000^(2i/d))`` (Vaswani et al. 2017,
    §3.5). For odd ``d`` the last column is a sine.
    """
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    i = torch.arange(0, d, 2, dtype=torch.float64)
    freq = torch.exp(-math.log(10000.0) * i / d)
    P = torch.zeros(max_len, d, dtype=torch.float64)
    P[:, 0::2] = torch.sin(pos * freq)
    P[:, 1::2] = torch.cos(pos * freq)[:, : d // 2]
    return P.float()


class Attention(nn.Module):
    """Multi-head self-attention with separate ``W_Q, W_K, W_V, W_O`` (each ``nn.Linear(d, d)``).

    ``S_h = (x W_Q)_h (x W_K)_h^T / sqrt(d/H)``, ``A_h = softmax_j(S_h)`` over non-pad keys,
    ``y = concat_h(A_h (x W_V)_h) W_O`` (Vaswani et al. 2017, eq. 1-2). With ``proximity_bias = m > 0`` the
    scores get the fixed bias ``-m |i - j|`` (ALiBi, Press et al., arXiv:2108.12409, eq. in §3, one slope for
    every head): attention is then concentrated near the diagonal already at initialisation.
    """

    def __init__(self, d_model: int, n_heads: int = 1, dropout: float = 0.0, proximity_bias: float = 0.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"n_heads: must divide d_model={d_model}, got {n_heads}")
        self.d_model, self.n_heads, self.d_head = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.proximity_bias = float(proximity_bias)
        self.W_Q = nn.Linear(d_model, d_model)
        self.W_K = nn.Linear(d_model, d_model)
        self.W_V = nn.Linear(d_model, d_model)
        self.W_O = nn.Linear(d_model, d_model)
        self.last_scores: torch.Tensor | None = None  # (B, H, T, T), set by the reference path only

    def split_heads(self, z: torch.Tensor) -> torch.Tensor:  # (B, T, d) -> (B, H, T, d_head)
        B, T, _ = z.shape
        return z.view(B, T, self.n_heads, self.d_head).transpose(1, 2)

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None, return_attn: bool = False,
        causal: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Args:
            x: ``(B, T, d)`` float.
            key_padding_mask: ``(B, T)`` bool, True = padding (never attended to), or None.
            return_attn: use the explicit reference path and return the attention maps.
            causal: query t attends only to keys ``s <= t`` (and never to padding). A padding query row
                still attends to the real prefix (its output is unused).
        Returns:
            ``y (B, T, d)`` and ``attn (B, H, T, T)`` (rows = queries, sum to 1) or None.
        Raises:
            ValueError: wrong shapes, or a sequence whose keys are all padding.
        """
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x: expected shape (B, T, {self.d_model}), got {tuple(x.shape)}")
        B, T, d = x.shape
        keep = None  # (B, 1, 1, T) bool, True = may attend
        if key_padding_mask is not None:
            if key_padding_mask.shape != (B, T) or key_padding_mask.dtype != torch.bool:
                raise ValueError(f"key_padding_mask: expected bool (B, T) = ({B}, {T}), got {key_padding_mask.dtype} {tuple(key_padding_mask.shape)}")
            if key_padding_mask.all(dim=1).any():
                raise ValueError("key_padding_mask: a sequence has only padding (no key to attend to)")
            keep = ~key_padding_mask[:, None, None, :]
        if causal:
            tril = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()[None, None]  # (1, 1, T, T)
            keep = tril if keep is None else keep & tril
        q, k, v = self.split_heads(self.W_Q(x)), self.split_heads(self.W_K(x)), self.split_heads(self.W_V(x))
        p = self.dropout if self.training else 0.0
        bias = None  # (T, T) float: -m |i - j|
        if self.proximity_bias:
            idx = torch.arange(T, device=x.device)
            bias = -self.proximity_bias * (idx[:, None] - idx[None, :]).abs().to(q.dtype)
        if not return_attn:  # fast path
            mask = keep
            if bias is not None:
                mask = bias if keep is None else bias.masked_fill(~keep, float("-inf"))
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
            attn = None
        else:  # reference path: explicit scores and softmax
            S = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, H, T, T)
            if bias is not None:
                S = S + bias
            self.last_scores = S
            if keep is not None:
                S = S.masked_fill(~keep, float("-inf"))
            attn = torch.softmax(S, dim=-1)
            o = F.dropout(attn, p=p, training=self.training) @ v
        y = self.W_O(o.transpose(1, 2).reshape(B, T, d))
        return y, attn


class Block(nn.Module):
    """One encoder layer: attention then (optional) feed-forward, each with LayerNorm and residual.

    Pre-norm: ``x + f(LN(x))``; post-norm: ``LN(x + f(x))``; without residual: ``f(LN(x))`` (pre-norm)
    or ``LN(f(x))`` (post-norm). ``ffn`` is ``Linear(d, d_ff) -> GELU -> Linear(d_ff, d)`` or Identity
    (and skipped) when ``use_ffn=False``.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d = cfg.d_model
        self.cfg = cfg
        self.attn = Attention(d, cfg.n_heads, cfg.dropout, cfg.proximity_bias)
        self.ln1 = nn.LayerNorm(d) if cfg.use_layernorm else nn.Identity()
        self.ln2 = nn.LayerNorm(d) if (cfg.use_layernorm and cfg.use_ffn) else nn.Identity()
        if cfg.use_ffn:
            self.ffn = nn.Sequential(nn.Linear(d, cfg.d_ff), nn.GELU(), nn.Linear(cfg.d_ff, d))
        else:
            self.ffn = nn.Identity()
        self.drop = nn.Dropout(cfg.dropout)

    def _sub(self, x: torch.Tensor, f, ln: nn.Module) -> torch.Tensor:
        if self.cfg.pre_norm:
            out = self.drop(f(ln(x)))
            return x + out if self.cfg.use_residual else out
        out = self.drop(f(x))
        return ln(x + out) if self.cfg.use_residual else ln(out)

    def forward(
        self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None, return_attn: bool = False,
        causal: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x (B, T, d)`` -> ``(B, T, d)`` and the attention maps ``(B, H, T, T)`` or None."""
        box: list[torch.Tensor | None] = [None]

        def att(z: torch.Tensor) -> torch.Tensor:
            y, box[0] = self.attn(z, key_padding_mask, return_attn, causal)
            return y

        x = self._sub(x, att, self.ln1)
        if self.cfg.use_ffn:
            x = self._sub(x, self.ffn, self.ln2)
        return x, box[0]


class SequenceTransformer(nn.Module):
    """Encoder with a mean-pooled classifier head and a per-position masked-reconstruction head.

    Attributes: ``tok_emb`` (V, d), ``pos`` buffer (max_len, d), ``blocks``, ``ln_f``, ``cls_head``
    (d -> n_classes), ``mlm_head`` (d -> V).
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if not isinstance(cfg, ModelConfig):
            raise TypeError(f"cfg: expected ModelConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        if cfg.pos_encoding == "sinusoidal":
            self.register_buffer("pos", sinusoidal_table(cfg.max_len, cfg.d_model), persistent=False)
        else:
            self.register_buffer("pos", torch.zeros(cfg.max_len, cfg.d_model), persistent=False)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model) if (cfg.use_layernorm and cfg.pre_norm) else nn.Identity()
        self.cls_head = nn.Linear(cfg.d_model, cfg.n_classes)
        self.mlm_head = nn.Linear(cfg.d_model, cfg.vocab_size)

    # -- input checks --------------------------------------------------------------------------
    def _check(self, tokens: torch.Tensor, pad_mask: torch.Tensor | None) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor) or tokens.dtype != torch.long or tokens.dim() != 2:
            got = f"{tokens.dtype} {tuple(tokens.shape)}" if isinstance(tokens, torch.Tensor) else type(tokens).__name__
            raise ValueError(f"tokens: expected a long tensor (B, T), got {got}")
        B, T = tokens.shape
        if T > self.cfg.max_len:
            raise ValueError(f"tokens: length T={T} exceeds max_len={self.cfg.max_len}")
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.cfg.vocab_size):
            raise ValueError(f"tokens: ids must lie in [0, {self.cfg.vocab_size}), got [{int(tokens.min())}, {int(tokens.max())}]")
        if pad_mask is None:
            return torch.ones(B, T, dtype=torch.bool, device=tokens.device)
        if pad_mask.dtype != torch.bool or pad_mask.shape != (B, T):
            raise ValueError(f"pad_mask: expected bool (B, T) = ({B}, {T}) with True = real token, got {pad_mask.dtype} {tuple(pad_mask.shape)}")
        if not pad_mask.any(dim=1).all():
            raise ValueError("pad_mask: every sequence needs at least one real token")
        return pad_mask

    # -- encoder -------------------------------------------------------------------------------
    def encode(self, tokens: torch.Tensor, pad_mask: torch.Tensor | None = None, return_attn: bool = False,
               causal: bool = False):
        """Args:
            tokens: ``(B, T)`` long ids in ``[0, vocab_size)``, ``T <= max_len``.
            pad_mask: ``(B, T)`` bool, True = real token; None = all real.
            return_attn: also return the per-layer attention maps (reference path).
            causal: query t attends to keys ``s <= t`` only (causal next-token pretraining).
        Returns:
            ``H (B, T, d)``, or ``(H, [attn (B, H, T, T) per layer])`` when ``return_attn``.
        Raises:
            ValueError: wrong dtype/shape/range of ``tokens`` or ``pad_mask``.
        """
        real = self._check(tokens, pad_mask)
        kpm = None if pad_mask is None else ~real
        T = tokens.shape[1]
        x = self.drop(self.tok_emb(tokens) + self.pos[:T])
        maps = []
        for blk in self.blocks:
            x, a = blk(x, kpm, return_attn, causal)
            maps.append(a)
        H = self.ln_f(x)
        return (H, maps) if return_attn else H

    @staticmethod
    def pool(H: torch.Tensor, pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Length-aware mean over real tokens: ``(B, T, d)``, mask ``(B, T)`` True = real -> ``(B, d)``."""
        return mean_pool(H, pad_mask)

    @staticmethod
    def pool_last(H: torch.Tensor, pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The last real token of each sequence: ``(B, T, d)``, mask ``(B, T)`` True = real -> ``(B, d)``."""
        B, T, _ = H.shape
        last = (torch.full((B,), T - 1, device=H.device, dtype=torch.long) if pad_mask is None
                else T - 1 - pad_mask.flip(1).to(torch.long).argmax(1))
        return H[torch.arange(B, device=H.device), last]

    def pooled(self, H: torch.Tensor, pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The classifier's input ``(B, d)`` from ``H (B, T, d)``: :meth:`pool` (``cfg.pooling = "mean"``), the
        first position's state ``H[:, 0]`` (``"cls"``: the data put a CLS token there) or :meth:`pool_last`
        (``"last"``)."""
        if self.cfg.pooling == "cls":
            return H[:, 0]
        return self.pool_last(H, pad_mask) if self.cfg.pooling == "last" else mean_pool(H, pad_mask)

    def classify(self, tokens: torch.Tensor, pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Class logits ``(B, n_classes)`` from the mean-pooled encoding."""
        return self.cls_head(self.pooled(self.encode(tokens, pad_mask), pad_mask))

    def reconstruct(self, tokens: torch.Tensor, pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Masked-reconstruction logits ``(B, T, vocab_size)``, one decoder per position."""
        return self.mlm_head(self.encode(tokens, pad_mask))

    def forward(self, tokens: torch.Tensor, pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.classify(tokens, pad_mask)


# -- parameter groups ----------------------------------------------------------------------------
def param_groups(model: SequenceTransformer) -> dict[str, list[str]]:
    """Names (as in ``model.named_parameters()``) per group.

    Keys: ``qk`` (all W_Q, W_K weights and biases), ``qkvo`` and its alias ``attention`` (W_Q, W_K, W_V,
    W_O), ``ffn``, ``embeddings`` (tok_emb), ``heads`` (cls_head, mlm_head), ``layernorm`` (ln1, ln2,
    ln_f; an optional extra group).
    """
    groups: dict[str, list[str]] = {g: [] for g in GROUPS}
    for name, _ in model.named_parameters():
        parts = name.split(".")
        if any(p in ("W_Q", "W_K") for p in parts):
            groups["qk"].append(name)
        if any(p in ("W_Q", "W_K", "W_V", "W_O") for p in parts):
            groups["qkvo"].append(name)
        if ".ffn." in f".{name}":
            groups["ffn"].append(name)
        if parts[0] == "tok_emb":
            groups["embeddings"].append(name)
        if parts[0] in ("cls_head", "mlm_head"):
            groups["heads"].append(name)
        if any(p in ("ln1", "ln2", "ln_f") for p in parts):
            groups["layernorm"].append(name)
    groups["attention"] = list(groups["qkvo"])
    return groups


def _names(model: nn.Module, groups: Sequence[str]) -> list[str]:
    if isinstance(groups, str):
        groups = [groups]
    table = param_groups(model)
    unknown = [g for g in groups if g not in table]
    if unknown:
        raise ValueError(f"groups: unknown group(s) {unknown}; expected names from {list(table)}")
    out: list[str] = []
    for g in groups:
        out += [n for n in table[g] if n not in out]
    return out


def load_partial(model: SequenceTransformer, state_dict: dict[str, torch.Tensor], groups: Sequence[str]) -> list[str]:
    """Copy only the parameters of ``groups`` from ``state_dict`` into ``model`` (hybrid initialisation).

    Returns the copied parameter names. Everything else keeps its current (fresh) values.

    Raises:
        ValueError: unknown group, or ``state_dict`` lacks a needed name or has a different shape.
    """
    names = _names(model, groups)
    params = dict(model.named_parameters())
    missing = [n for n in names if n not in state_dict]
    if missing:
        raise ValueError(f"state_dict: missing parameter(s) {missing[:5]}{'...' if len(missing) > 5 else ''} for groups {list(groups)}")
    for n in names:
        if tuple(state_dict[n].shape) != tuple(params[n].shape):
            raise ValueError(f"state_dict[{n!r}]: shape {tuple(state_dict[n].shape)} != model's {tuple(params[n].shape)}")
    with torch.no_grad():
        for n in names:
            params[n].copy_(state_dict[n])
    return names


def freeze(model: SequenceTransformer, groups: Sequence[str]) -> list[str]:
    """Set ``requires_grad=False`` for the parameters of ``groups``; returns their names.

    Raises:
        ValueError: unknown group.
    """
    names = _names(model, groups)
    params = dict(model.named_parameters())
    for n in names:
        params[n].requires_grad_(False)
    return names
