"""Monte Carlo reference for :mod:`initlab.theory.score_scale.closed_form`: SPLADE batches simulated under the Gaussian logit model.

Every closed form of the score-scale analysis is checked against :func:`monte_carlo` (tests and the
``score_scale`` stage of ``initlab reproduce``). Term weights use the one SPLADE pooling,
:func:`initlab.theory.score_scale.splade_terms.splade_term_weights` (SPLADE v2, arXiv:2109.10086, eq. 1).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from initlab.theory.score_scale.closed_form import ScoreScaleConfig, logit_params
from initlab.theory.score_scale.splade_terms import splade_term_weights

__all__ = ["monte_carlo"]


def monte_carlo(cfg: ScoreScaleConfig, sigma: float, k: float, *, n_batches: int | None = None,
                seed: int | None = None, chunk: int = 2048) -> dict[str, Any]:
    """Simulate SPLADE batches under the Gaussian logit model and measure every theory quantity.

    Each batch draws query logits ``(B, L_q, V)`` and document logits ``(B, L_d, V)`` i.i.d.
    ``N(mu_k, sigma_k^2)`` in float64 (in vocabulary chunks of ``chunk`` entries, so the full V fits in
    memory), pools them to term weights ``A_q, A_d: (B, V)``, scores ``S = A_q A_d^T`` ``(B, B)``
    (diagonal = positives) and takes autograd gradients w.r.t. ``A_d`` of the exact InfoNCE loss, of
    the InfoNCE loss linearised at the uniform softmax, and of ``lambda_d R_d``. The chain to the
    logits uses ``da/dz_tj = 1[t = argmax, M > 0] / (1 + M)`` (max pooling), itself checked against
    autograd in the tests, so ``||grad_{z_d}||^2 = sum_j (dL/da_j)^2 g(M_j)``.

    Returns:
        ``{name: mean over batches}``, ``{name + "_se": standard error}`` and the measured softmax
        entropy / ln B (1 = uniform, 0 = one-hot) and exact-InfoNCE gradient norm ``grad_rank_exact``.
    """
    n_batches = cfg.mc_batches if n_batches is None else n_batches
    seed = cfg.seed if seed is None else seed
    if n_batches < 2:
        raise ValueError(f"n_batches: expected >= 2 (standard errors), got {n_batches}")
    mu, s = logit_params(cfg.mu_b, cfg.mu_h, sigma, k)
    g = torch.Generator().manual_seed(seed)
    recs: dict[str, list[float]] = {}
    for _ in range(n_batches):
        aq, _, act_q = _pooled_batch(cfg, mu, s, cfg.L_q, g, chunk)
        ad, gd, _ = _pooled_batch(cfg, mu, s, cfg.L_d, g, chunk)
        for name, val in _batch_measurements(cfg, aq, ad, gd, act_q).items():
            recs.setdefault(name, []).append(float(val))
    return _summarise(recs, cfg.vocab)


def _pooled_batch(cfg: ScoreScaleConfig, mu: float, s: float, L: int, g: torch.Generator,
                  chunk: int) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Draw B texts of L logits ``z ~ N(mu, s^2)`` over all V entries (in vocabulary chunks) and pool them.

    Returns term weights ``(B, V)``, the squared max-pool derivative ``g(M) = 1[M > 0] / (1 + M)^2``
    ``(B, V)`` (zeros for sum pooling) and the active-logit fraction.
    """
    V, B = cfg.vocab, cfg.batch
    a_parts, g_parts, n_act = [], [], 0.0
    for j0 in range(0, V, chunk):
        z = mu + s * torch.randn(B, L, min(chunk, V - j0), generator=g, dtype=torch.float64)
        n_act += float((z > 0).sum())
        if cfg.pooling == "max":
            a_parts.append(splade_term_weights(z))
            M = z.amax(dim=1)
            g_parts.append((M > 0).double() / (1 + M.clamp_min(0)) ** 2)
        else:
            a_parts.append(torch.log1p(torch.relu(z)).sum(dim=1))
            g_parts.append(torch.zeros(B, z.shape[-1], dtype=torch.float64))
    return torch.cat(a_parts, 1), torch.cat(g_parts, 1), n_act / (B * L * V)


def _batch_measurements(cfg: ScoreScaleConfig, aq: torch.Tensor, ad: torch.Tensor, gd: torch.Tensor,
                        act_q: float) -> dict[str, Any]:
    """Every theory quantity of one batch (query and document term weights ``aq, ad : (B, V)``, the document
    max-pool derivative ``gd : (B, V)``); squared gradient norms w.r.t. the document logits by autograd
    w.r.t. ``ad`` chained through ``gd`` (max pooling only)."""
    B = cfg.batch
    out: dict[str, Any] = {
        "active_logit": act_q,
        "active_q": (aq > 0).double().mean(),
        "active_d": (ad > 0).double().mean(),
        "Ea_q": aq.mean(), "Ea2_q": (aq ** 2).mean(),
        "Ea_d": ad.mean(), "Ea2_d": (ad ** 2).mean(),
        "flops_reg_q": (aq.mean(0) ** 2).sum(),
        "flops_reg_d": (ad.mean(0) ** 2).sum(),
        "flops_cost": ((aq > 0).double() @ (ad > 0).double().T).mean(),
    }
    ad = ad.requires_grad_(True)
    S = aq @ ad.T  # (B, B) scores s(q, d), diagonal = positives
    off = ~torch.eye(B, dtype=torch.bool)
    Sd = S.detach()
    out["score_mean"] = Sd[off].mean()
    diff = Sd.diagonal()[:, None] - Sd  # s(q, d+) - s(q, d-)
    out["score_spread_sq"] = diff[off].pow(2).mean()
    logp = torch.log_softmax(Sd, dim=1)
    out["softmax_entropy_ratio"] = -(logp.exp() * logp).sum(1).mean() / math.log(B)
    if cfg.pooling == "max":
        y = torch.arange(B)
        (ga,) = torch.autograd.grad(torch.nn.functional.cross_entropy(S, y), ad, retain_graph=True)
        w = torch.full((B, B), 1.0 / B, dtype=torch.float64) - torch.eye(B, dtype=torch.float64)
        (gl,) = torch.autograd.grad((w * S).sum() / B, ad)  # InfoNCE linearised at uniform softmax
        (gf,) = torch.autograd.grad(cfg.lambda_d * (ad.mean(0) ** 2).sum(), ad)
        per_doc = lambda t: (t.pow(2) * gd).sum(1).mean()  # noqa: E731  E||grad_{z_d}||^2
        out["grad_rank_exact_sq"] = per_doc(ga)
        out["grad_rank_sq"] = per_doc(gl)
        out["grad_flops_sq"] = per_doc(gf)
    return out


def _summarise(recs: dict[str, list[float]], V: int) -> dict[str, Any]:
    """Mean and standard error over batches of every quantity; norms from the squared ones (delta method for
    their standard errors); active dims = V x active fraction."""
    out: dict[str, Any] = {}
    for name, vals in recs.items():
        arr = np.asarray(vals)
        out[name] = float(arr.mean())
        out[name + "_se"] = float(arr.std(ddof=1) / math.sqrt(len(arr)))
    for name in ("grad_rank", "grad_flops", "grad_rank_exact", "score_spread"):
        if name + "_sq" in out:
            out[name] = math.sqrt(out[name + "_sq"])
            out[name + "_se"] = out[name + "_sq_se"] / (2 * out[name]) if out[name] > 0 else 0.0
    out["active_dims_q"] = V * out["active_q"]
    out["active_dims_d"] = V * out["active_d"]
    return out
