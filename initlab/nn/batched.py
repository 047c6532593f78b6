"""M models of one :class:`initlab.nn.encoder.SequenceTransformer` config as one batched model.

Imported as ``initlab.nn.batched``. The parameters of M models with the same :class:`~initlab.nn.encoder.ModelConfig`
are stacked along a leading *model axis* (:func:`stack`: ``name -> (M, *shape)``, the names of
``SequenceTransformer.named_parameters()``), and one call computes all M forward passes with batched matmuls
(``torch.baddbmm``) and one ``scaled_dot_product_attention`` over ``M * B`` sequences. Letters as in
:mod:`initlab.nn.encoder` (B batch, T length, d width, H heads, V vocabulary), plus M models:

    tokens (M, B, T) --tok_emb[m]--> (M, B, T, d) + P[:T]
      -> n_layers x block (the same pre-/post-norm, residual, FFN and LayerNorm switches as ``Block``)
      -> ln_f -> H (M, B, T, d) -> classify (M, B, n_classes) | reconstruct (M, B, T, V)

Model m of the output is model m's :class:`~initlab.nn.encoder.SequenceTransformer` output on ``tokens[m]``: the same
operations in the same order, so in float64 the two agree to rounding (tests/nn/test_batched.py; the batched matmul
and the LayerNorm's affine step, done apart from the normalisation here, may round differently from the model's
fused kernels, so float32 results are equal to rounding, not bitwise). Why: at the synthetic sizes (d = 32, T = 100)
one model's step is a few hundred small kernels, and their fixed costs are paid once for M models here.

Scope: no dropout (``dropout = 0``: M models' dropout masks could not match M separate runs) and no padding
(every synthetic sequence is full length); both raise.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from initlab.nn.encoder import ModelConfig, SequenceTransformer, sinusoidal_table

__all__ = ["stack", "unstack", "check_config", "encode", "classify", "reconstruct"]


def check_config(cfg: ModelConfig) -> ModelConfig:
    """``cfg`` if the batched model supports it.

    Raises:
        ValueError: ``dropout > 0`` (the batched model has no dropout).
    """
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"cfg: expected ModelConfig, got {type(cfg).__name__}")
    if cfg.dropout:
        raise ValueError(f"ModelConfig.dropout: the batched model supports dropout = 0 only, got {cfg.dropout!r}")
    return cfg


def stack(models: Sequence[SequenceTransformer]) -> dict[str, torch.Tensor]:
    """The parameters of ``models`` (one config) stacked on a new leading axis: ``name -> (M, *shape)``, detached
    copies (leaf tensors; ``requires_grad`` as in the first model).

    Raises:
        ValueError: no model, models of different configs, or an unsupported config (:func:`check_config`).
    """
    if not models:
        raise ValueError("models: expected at least one model")
    cfg = check_config(models[0].cfg)
    if any(m.cfg != cfg for m in models):
        raise ValueError("models: expected models of one ModelConfig")
    out = {}
    for n, p in models[0].named_parameters():
        t = torch.stack([dict(m.named_parameters())[n].detach() for m in models]).clone()
        out[n] = t.requires_grad_(p.requires_grad)
    return out


def unstack(params: dict[str, torch.Tensor], m: int) -> dict[str, torch.Tensor]:
    """Model ``m``'s state dict (detached copies) from stacked ``params``: loads into a ``SequenceTransformer``."""
    return {n: p[m].detach().clone() for n, p in params.items()}


def _linear(x: torch.Tensor, params: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    """``x (M, N, in) -> (M, N, out)``: ``x W_m^T + b_m`` per model (``nn.Linear`` of each model)."""
    return torch.baddbmm(params[f"{name}.bias"].unsqueeze(1), x, params[f"{name}.weight"].transpose(1, 2))


def _layer_norm(x: torch.Tensor, params: dict[str, torch.Tensor], name: str, on: bool) -> torch.Tensor:
    """``nn.LayerNorm`` of each model over the last axis of ``x (M, N, d)`` (identity when ``on`` is false)."""
    if not on:
        return x
    d = x.shape[-1]
    return torch.addcmul(params[f"{name}.bias"].unsqueeze(1), F.layer_norm(x, (d,), eps=1e-5),
                         params[f"{name}.weight"].unsqueeze(1))


def _attention(x: torch.Tensor, params: dict[str, torch.Tensor], pre: str, cfg: ModelConfig, B: int, T: int,
               causal: bool) -> torch.Tensor:
    """``Attention.forward``'s fast path for every model: ``x (M, B*T, d) -> (M, B*T, d)``."""
    M, d, H = x.shape[0], cfg.d_model, cfg.n_heads

    def heads(z: torch.Tensor) -> torch.Tensor:  # (M, B*T, d) -> (M*B, H, T, d_head)
        return z.reshape(M * B, T, H, d // H).transpose(1, 2)

    q, k, v = (heads(_linear(x, params, f"{pre}.W_{w}")) for w in "QKV")
    mask = None
    if cfg.proximity_bias:
        idx = torch.arange(T, device=x.device)
        mask = -float(cfg.proximity_bias) * (idx[:, None] - idx[None, :]).abs().to(q.dtype)
    if causal:
        keep = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        mask = keep if mask is None else mask.masked_fill(~keep, float("-inf"))
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return _linear(o.transpose(1, 2).reshape(M, B * T, d), params, f"{pre}.W_O")


def encode(params: dict[str, torch.Tensor], cfg: ModelConfig, tokens: torch.Tensor, causal: bool = False) -> torch.Tensor:
    """``H (M, B, T, d)`` of every model (``SequenceTransformer.encode`` of model m on ``tokens[m]``).

    Args:
        params: stacked parameters (:func:`stack`).
        cfg: the models' config.
        tokens: ``(M, B, T)`` long ids in ``[0, vocab_size)``, ``T <= max_len``, no padding.
        causal: query t attends to keys ``s <= t`` only.
    Raises:
        ValueError: wrong dtype, shape or range of ``tokens``, or an unsupported config.
    """
    check_config(cfg)
    M = params["tok_emb.weight"].shape[0]
    if tokens.dtype != torch.long or tokens.dim() != 3 or tokens.shape[0] != M:
        raise ValueError(f"tokens: expected a long tensor (M, B, T) with M = {M}, got {tokens.dtype} {tuple(tokens.shape)}")
    _, B, T = tokens.shape
    if T > cfg.max_len:
        raise ValueError(f"tokens: length T={T} exceeds max_len={cfg.max_len}")
    if tokens.numel() and (tokens.min() < 0 or tokens.max() >= cfg.vocab_size):
        raise ValueError(f"tokens: ids must lie in [0, {cfg.vocab_size}), got [{int(tokens.min())}, {int(tokens.max())}]")
    V, d = cfg.vocab_size, cfg.d_model
    offset = torch.arange(M, device=tokens.device).view(M, 1, 1) * V
    x = F.embedding(tokens + offset, params["tok_emb.weight"].reshape(M * V, d)).reshape(M, B * T, d)
    if cfg.pos_encoding == "sinusoidal":
        x = (x.view(M, B, T, d) + sinusoidal_table(cfg.max_len, d).to(x.dtype)[:T]).view(M, B * T, d)
    ln = cfg.use_layernorm
    for i in range(cfg.n_layers):
        pre = f"blocks.{i}"
        subs = [(lambda z, p=pre: _attention(z, params, f"{p}.attn", cfg, B, T, causal), f"{pre}.ln1", ln)]
        if cfg.use_ffn:
            subs.append((lambda z, p=pre: _linear(F.gelu(_linear(z, params, f"{p}.ffn.0")), params, f"{p}.ffn.2"),
                         f"{pre}.ln2", ln))
        for f, ln_name, on in subs:  # Block._sub
            if cfg.pre_norm:
                out = f(_layer_norm(x, params, ln_name, on))
                x = x + out if cfg.use_residual else out
            else:
                out = f(x)
                x = _layer_norm(x + out if cfg.use_residual else out, params, ln_name, on)
    x = _layer_norm(x, params, "ln_f", cfg.use_layernorm and cfg.pre_norm)
    return x.view(M, B, T, d)


def classify(params: dict[str, torch.Tensor], cfg: ModelConfig, tokens: torch.Tensor) -> torch.Tensor:
    """Class logits ``(M, B, n_classes)``: ``SequenceTransformer.classify`` of model m on ``tokens[m] (B, T)``."""
    H = encode(params, cfg, tokens)
    if cfg.pooling == "cls":
        pooled = H[:, :, 0]
    elif cfg.pooling == "last":
        pooled = H[:, :, -1]
    else:
        pooled = H.mean(dim=2)
    return _linear(pooled, params, "cls_head")


def reconstruct(params: dict[str, torch.Tensor], cfg: ModelConfig, tokens: torch.Tensor) -> torch.Tensor:
    """Masked-reconstruction logits ``(M, B, T, vocab_size)``: ``SequenceTransformer.reconstruct`` per model."""
    H = encode(params, cfg, tokens)
    M, B, T, d = H.shape
    return _linear(H.reshape(M, B * T, d), params, "mlm_head").view(M, B, T, cfg.vocab_size)
