"""Score scale of SPLADE at initialisation as a function of the MLM-head rescaling factor k.

SPLADE (Formal et al., SIGIR 2021, eq. 2; SPLADE v2, arXiv:2109.10086, eq. 1) gives every vocabulary
entry j a term weight from the masked-LM logits of the T tokens of a text,

    z_tj = (H W_head^T)_tj / k + b_j                    z: (T, V)
    a_j  = max_t log(1 + ReLU(z_tj))                    a: (V,)       (max pooling, SPLADE v2)
    a_j  = sum_t log(1 + ReLU(z_tj))                                  (sum pooling, SPLADE v1)

scores a query q and a document d by s(q, d) = sum_j a_j(q) a_j(d), trains with the in-batch-negative
InfoNCE loss  L_rank = (1/B) sum_q [-s(q, d_q+) + log sum_i exp s(q, d_i)]  and keeps vectors sparse
with the FLOPS regulariser (Paria et al., ICLR 2020, eq. 6; SPLADE v2 eq. 4)

    R = sum_j ( (1/N) sum_{i in batch} a_j(i) )^2,      L = L_rank + lambda_q R_q + lambda_d R_d.

**Gaussian logit model.** At initialisation we model the logits of all tokens and vocabulary entries
as i.i.d. ``z ~ N(mu, sigma_k^2)`` with ``sigma_k = sigma / k`` (the spread of H W_head^T is
proportional to the head norm, and dividing W_head by k divides it) and ``mu = mu_b + mu_h / k``
(the bias b is not rescaled, the head's mean part is). Queries pool ``L_q`` tokens, documents
``L_d``. Under this model (all closed forms derived with sympy in
:func:`initlab.theory.score_scale.symbolic.symbolic_formulas`):

* active fraction of one logit: ``p = Phi(mu / sigma_k)``; of a pooled term weight: ``1 - (1 - p)^L``;
* moments ``m_r = E[a^r]``: max pooling integrates against the density of the maximum,
  ``d/dx F(x)^L = L F^{L-1} f`` (no closed form: Gauss-Legendre quadrature); sum pooling uses
  ``E[a] = L e_1``, ``E[a^2] = L e_2 + L(L-1) e_1^2`` with single-token moments ``e_r``;
* expected FLOPS regulariser at a batch of N texts: ``E[R] = V (m_1^2 + (m_2 - m_1^2) / N)``;
  expected FLOPS cost (multiplications per query-document pair, Paria et al.): ``V P_q P_d``;
* expected score of an unrelated pair ``E[s] = V m_1(q) m_1(d)``; at initialisation positives and
  negatives are exchangeable, so the positive-minus-negative score difference has mean 0 and
  spread ``sd(s+ - s-) = sqrt(2 V m_2(q) Var_d(a))`` (per query, over candidates);
* gradients w.r.t. the document logits z_d (max pooling: ``da_j/dz_tj = 1[t = argmax, z > 0] / (1 + z)``):
  ranking loss, linearised at the uniform softmax p_i = 1/B (exact to first order when the score
  spread is << 1): ``E||grad_{z_d} L_rank||^2 = V (B - 1) / B^3 Var(a_q) E[g(M_d)]`` with
  ``g(M) = 1[M > 0] / (1 + M)^2``; FLOPS term: ``E||grad_{z_d} lambda_d R_d||^2 = lambda_d^2 V 4 / B^4
  E[(a_i + S)^2 g(M_i)]`` with S the sum of the other B - 1 documents' term weights.

**Mechanism** (what :func:`mechanism` computes): for large B the ratio of the two gradient norms is
``grad_flops / grad_rank ~ 2 lambda_d E[a_d] / sd(a_q)`` (the leading ``(B-1)(B-2) m_1^2`` term of
the FLOPS formula over the ``(B-1)/B^3`` of the ranking one; no B left). Once the logits are mostly
positive E[a_d] grows only like log(sigma/k) while sd(a_q) levels off, so the ratio grows slowly with
sigma/k and exceeds 1 at large sigma/k only if lambda_d is large enough (at mu = -1, B = 32, L_q = 8,
L_d = 64: lambda_d = 0.1 above sigma/k ~ 5.4; lambda_d = 1e-3 never for sigma/k <= 1e3). At small
sigma/k the ratio also exceeds 1, because sd(a_q) -> 0 faster than the FLOPS self-term (queries with
almost no active terms). ``grad_rank`` is the InfoNCE gradient linearised at the uniform softmax;
above the saturation point below the exact gradient (``monte_carlo``'s ``grad_rank_exact``) is several
times larger, so there the ratio overstates the FLOPS side. InfoNCE saturates (softmax over B candidates nearly one-hot on a random
candidate) when the per-candidate score sd ``score_spread / sqrt(2)`` exceeds ``sqrt(2 ln B)`` (the
freezing point of a softmax over B i.i.d. Gaussian scores, random-energy model, Derrida 1981). Everything here is
checked against Monte Carlo (:func:`initlab.theory.score_scale.monte_carlo.monte_carlo`) and autograd in ``tests/theory/score_scale/``.

Role of this module: the model's configuration, its closed forms and the mechanism; the sympy derivation
is :mod:`initlab.theory.score_scale.symbolic`, the simulation :mod:`initlab.theory.score_scale.monte_carlo`, the
theory-vs-Monte-Carlo table :mod:`initlab.theorycheck.score_scale.table`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from initlab.config import check_ranges, derive, ranged
from initlab.theory.score_scale.symbolic import symbolic_formulas

__all__ = [
    "ScoreScaleConfig",
    "logit_params",
    "active_fraction",
    "pooled_active_fraction",
    "pooled_moments",
    "max_pool_expectation",
    "expected_flops_reg",
    "expected_flops_cost",
    "expected_score",
    "score_spread",
    "grad_norm_rank",
    "grad_norm_flops",
    "theory_row",
    "mechanism",
    "describe_mechanism",
]

Pooling = Literal["max", "sum"]


# ------------------------------------------------------------------------------------------------
# configuration
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScoreScaleConfig:
    """Parameters of the score-scale table (theory and Monte Carlo).

    ``sigma`` values are the logit standard deviations at k = 1 (e.g. measured by ``initlab mlmhead
    inspect``); ``mu_b`` the bias mean, ``mu_h`` the head's mean logit part (divided by k).
    """

    ks: tuple[float, ...] = ranged((1.0, 2.0, 4.0, 8.0, 16.0, 32.0), "(0, inf)")
    sigmas: tuple[float, ...] = ranged((1.0, 4.0, 16.0), "(0, inf)")
    mu_b: float = ranged(-1.0, "(-inf, inf)")
    mu_h: float = ranged(0.0, "(-inf, inf)")
    vocab: int = ranged(30522, "[1, inf)")
    L_q: int = ranged(8, "[1, inf)")
    L_d: int = ranged(64, "[1, inf)")
    batch: int = ranged(32, "[2, inf)")  # InfoNCE needs a negative
    lambda_q: float = ranged(1e-3, "[0, inf)")
    lambda_d: float = ranged(1e-3, "[0, inf)")
    pooling: Literal["max", "sum"] = "max"
    mc_batches: int = ranged(4, "[1, inf)")
    seed: int = ranged(0, "[0, inf)")

    def __post_init__(self) -> None:
        check_ranges(self)


#: the theory table of ``initlab theory score-scale`` (BERT's vocabulary size).
BASE = ScoreScaleConfig()


# ------------------------------------------------------------------------------------------------
# numerics (float64)
# ------------------------------------------------------------------------------------------------
def _check_model(mu: float, s: float, L: int | None = None) -> None:
    if not (isinstance(mu, (int, float)) and math.isfinite(mu)):
        raise ValueError(f"mu: expected a finite float, got {mu!r}")
    if not (isinstance(s, (int, float)) and math.isfinite(s) and s > 0):
        raise ValueError(f"sigma: expected a positive finite float, got {s!r}")
    if L is not None and (isinstance(L, bool) or not isinstance(L, int) or L < 1):
        raise ValueError(f"L: expected an int >= 1 (tokens pooled), got {L!r}")


def logit_params(mu_b: float, mu_h: float, sigma: float, k: float) -> tuple[float, float]:
    """``(mu, sigma_k)`` of the logits after dividing W_head by k: ``(mu_b + mu_h / k, sigma / k)``.

    Raises:
        ValueError: ``k`` or ``sigma`` not positive and finite.
    """
    if not (math.isfinite(k) and k > 0):
        raise ValueError(f"k: expected a positive finite float, got {k!r}")
    _check_model(mu_b + mu_h, sigma)
    return mu_b + mu_h / k, sigma / k


def active_fraction(mu: float, s: float) -> float:
    """``P(z > 0) = Phi(mu / s)`` for one logit ``z ~ N(mu, s^2)``."""
    _check_model(mu, s)
    return float(symbolic_formulas()["f_active"](mu, s))


def pooled_active_fraction(mu: float, s: float, L: int) -> float:
    """``P(a > 0) = 1 - (1 - Phi(mu/s))^L`` for a term weight pooled (max or sum) over L tokens."""
    _check_model(mu, s, L)
    # 1 - Phi(-mu/s)^L computed via log for accuracy at large L
    log_q = torch.special.log_ndtr(torch.tensor(-mu / s, dtype=torch.float64)).item()
    return float(-math.expm1(L * log_q))


_GL_CACHE: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}


def _gauss_legendre(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    if n not in _GL_CACHE:
        xs, ws = np.polynomial.legendre.leggauss(n)
        _GL_CACHE[n] = (torch.tensor(xs, dtype=torch.float64), torch.tensor(ws, dtype=torch.float64))
    return _GL_CACHE[n]


def _max_pool_nodes(mu: float, s: float, L: int, panels: int, order: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Quadrature nodes x >= 0 and weights (density of M = max of L iid N(mu, s^2) included)."""
    lo = max(-mu / s, -12.0)
    hi = 12.0 + math.sqrt(2.0 * math.log(L))
    if lo >= hi:
        return None
    xs, ws = _gauss_legendre(order)
    edges = torch.linspace(lo, hi, panels + 1, dtype=torch.float64)
    a, b = edges[:-1, None], edges[1:, None]
    u = (a + b) / 2 + (b - a) / 2 * xs[None, :]
    w = (b - a) / 2 * ws[None, :]
    log_dens = math.log(L) + (L - 1) * torch.special.log_ndtr(u) - 0.5 * u ** 2 - 0.5 * math.log(2 * math.pi)
    return (mu + s * u).clamp_min(0.0), torch.exp(log_dens) * w


def max_pool_expectation(h, mu: float, s: float, L: int, *, panels: int = 120, order: int = 16) -> float:
    """``E[h(M) 1[M > 0]]`` for ``M = max of L iid N(mu, s^2)``, by composite Gauss-Legendre quadrature.

    Integrates ``h(x) L F(x)^{L-1} f(x)`` (the density of the maximum, ``d/dx F^L``, see
    :func:`symbolic_formulas`) over ``x > 0`` in the standardised variable ``u = (x - mu)/s`` on
    ``[max(-mu/s, -12), 12 + sqrt(2 ln L)]`` (outside it the density is below 1e-30). ``h`` maps a
    float64 tensor of x >= 0 to a tensor of the same shape. ``L = 1`` gives single-logit expectations.
    """
    _check_model(mu, s, L)
    nodes = _max_pool_nodes(mu, s, L, panels, order)
    if nodes is None:
        return 0.0
    x, w = nodes
    return float((h(x) * w).sum())


def pooled_moments(mu: float, s: float, L: int, pooling: Pooling = "max") -> dict[str, float]:
    """Moments of a pooled term weight ``a`` over L tokens with logits ``N(mu, s^2)``.

    Returns ``{"m1": E[a], "m2": E[a^2], "var": Var(a), "active": P(a > 0)}`` and, for max pooling,
    the gradient moments ``Eg = E[g(M)]``, ``Eag = E[a g(M)]``, ``Ea2g = E[a^2 g(M)]`` with
    ``g(M) = 1[M > 0] / (1 + M)^2`` (``(da/dM)^2``).

    Raises:
        ValueError: bad mu / s / L, or pooling not "max"/"sum".
    """
    _check_model(mu, s, L)
    f = symbolic_formulas()
    if pooling == "max":
        nodes = _max_pool_nodes(mu, s, L, 120, 16)
        if nodes is None:
            m1 = m2 = 0.0
            out = {"Eg": 0.0, "Eag": 0.0, "Ea2g": 0.0}
        else:  # one density evaluation for all five moments (same as max_pool_expectation)
            x, w = nodes
            a, g = torch.log1p(x), (1 + x) ** -2
            m1, m2 = float((a * w).sum()), float((a * a * w).sum())
            out = {"Eg": float((g * w).sum()), "Eag": float((a * g * w).sum()), "Ea2g": float((a * a * g * w).sum())}
    elif pooling == "sum":
        e1 = max_pool_expectation(torch.log1p, mu, s, 1)
        e2 = max_pool_expectation(lambda x: torch.log1p(x) ** 2, mu, s, 1)
        m1, m2 = float(f["f_sum_m1"](e1, L)), float(f["f_sum_m2"](e1, e2, L))
        out = {}
    else:
        raise ValueError(f"pooling: expected 'max' or 'sum', got {pooling!r}")
    return {"m1": m1, "m2": m2, "var": max(m2 - m1 ** 2, 0.0), "active": pooled_active_fraction(mu, s, L), **out}


def expected_flops_reg(m1: float, m2: float, vocab: int, batch: int) -> float:
    """``E[R] = V (m1^2 + (m2 - m1^2)/N)``: expected FLOPS regulariser of a batch of N texts (Paria et al. 2020, eq. 6)."""
    return float(symbolic_formulas()["f_flops_reg"](m1, m2, vocab, batch))


def expected_flops_cost(p_q: float, p_d: float, vocab: int) -> float:
    """``V P_q P_d``: expected multiplications per query-document dot product (the FLOPS retrieval cost)."""
    return float(symbolic_formulas()["f_flops_cost"](p_q, p_d, vocab))


def expected_score(m1_q: float, m1_d: float, vocab: int) -> float:
    """``E[s(q, d)] = V E[a(q)] E[a(d)]`` for an unrelated (independent) query-document pair."""
    return float(symbolic_formulas()["f_score"](m1_q, m1_d, vocab))


def score_spread(m2_q: float, m1_d: float, m2_d: float, vocab: int) -> float:
    """``sd(s(q, d+) - s(q, d-)) = sqrt(2 V E[a_q^2] Var(a_d))``, per query, at initialisation (mean 0)."""
    return float(symbolic_formulas()["f_spread"](m2_q, m1_d, m2_d, vocab))


def grad_norm_rank(var_q: float, Eg_d: float, vocab: int, batch: int) -> float:
    """RMS norm of ``grad_{z_d} L_rank`` for one document: ``sqrt(V (B-1)/B^3 Var(a_q) E[g(M_d)])``.

    InfoNCE with in-batch negatives, batch mean over B queries, linearised at the uniform softmax
    (first order in the score spread; see module docstring). Max pooling.
    """
    return math.sqrt(max(float(symbolic_formulas()["f_grad_rank_sq"](var_q, Eg_d, vocab, batch)), 0.0))


def grad_norm_flops(mom_d: dict[str, float], lam: float, vocab: int, batch: int) -> float:
    """RMS norm of ``grad_{z_d} (lambda R_d)`` for one document of a batch of B (max pooling)."""
    val = symbolic_formulas()["f_grad_flops_sq"](
        mom_d["Ea2g"], mom_d["Eag"], mom_d["Eg"], mom_d["m1"], mom_d["m2"], lam, vocab, batch
    )
    return math.sqrt(max(float(val), 0.0))


def theory_row(cfg: ScoreScaleConfig, sigma: float, k: float) -> dict[str, float]:
    """All theory quantities at one (sigma, k): logit model, active fractions, moments, FLOPS, scores, gradients."""
    mu, s = logit_params(cfg.mu_b, cfg.mu_h, sigma, k)
    mq = pooled_moments(mu, s, cfg.L_q, cfg.pooling)
    md = pooled_moments(mu, s, cfg.L_d, cfg.pooling)
    V, B = cfg.vocab, cfg.batch
    row = {
        "sigma": sigma, "k": k, "mu_k": mu, "sigma_k": s,
        "active_logit": active_fraction(mu, s),
        "active_q": mq["active"], "active_d": md["active"],
        "active_dims_q": V * mq["active"], "active_dims_d": V * md["active"],
        "Ea_q": mq["m1"], "Ea2_q": mq["m2"], "Ea_d": md["m1"], "Ea2_d": md["m2"],
        "flops_reg_q": expected_flops_reg(mq["m1"], mq["m2"], V, B),
        "flops_reg_d": expected_flops_reg(md["m1"], md["m2"], V, B),
        "flops_cost": expected_flops_cost(mq["active"], md["active"], V),
        "score_mean": expected_score(mq["m1"], md["m1"], V),
        "score_spread": score_spread(mq["m2"], md["m1"], md["m2"], V),
    }
    row["flops_loss"] = cfg.lambda_q * row["flops_reg_q"] + cfg.lambda_d * row["flops_reg_d"]
    row["infonce_saturated"] = float(row["score_spread"] / math.sqrt(2) > math.sqrt(2 * math.log(B)))
    if cfg.pooling == "max":
        row["grad_rank"] = grad_norm_rank(mq["var"], md["Eg"], V, B)
        row["grad_flops"] = grad_norm_flops(md, cfg.lambda_d, V, B)
        row["grad_ratio"] = row["grad_flops"] / row["grad_rank"] if row["grad_rank"] > 0 else float("inf")
    return row


# ------------------------------------------------------------------------------------------------
# the mechanism: thresholds in sigma/k
# ------------------------------------------------------------------------------------------------
def _bisect(fn, lo: float, hi: float, iters: int = 40) -> float | None:
    flo, fhi = fn(lo), fn(hi)
    if (flo > 0) == (fhi > 0):
        return None
    for _ in range(iters):
        mid = math.sqrt(lo * hi)
        if (fn(mid) > 0) == (flo > 0):
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def mechanism(cfg: ScoreScaleConfig, s_range: tuple[float, float] = (1e-2, 1e3), points: int = 41) -> dict[str, Any]:
    """Where, in the logit scale ``sigma_k = sigma/k``, each failure mode sets in (mu fixed at ``mu_b + mu_h``).

    * ``flops_dominates``: the sigma/k intervals (on a log grid of ``points`` values in ``s_range``,
      end points refined by bisection) where ``grad_flops / grad_rank > 1``;
    * ``infonce_saturates_above``: the sigma/k above which the per-candidate score sd
      (``score_spread / sqrt(2)``) exceeds ``sqrt(2 ln B)``, the freezing point of a softmax over B i.i.d.
      Gaussian scores; ``None`` when it is never (or always) exceeded in ``s_range``.
    """
    mu = cfg.mu_b + cfg.mu_h
    fixed = derive(cfg, mu_h=0.0, mu_b=mu)

    def row(s: float) -> dict[str, float]:
        return theory_row(fixed, s, 1.0)

    thr = math.sqrt(2 * math.log(cfg.batch))
    sat = _bisect(lambda s: row(s)["score_spread"] / math.sqrt(2) - thr, *s_range)
    grid = np.geomspace(s_range[0], s_range[1], points)
    out: dict[str, Any] = {"mu": mu, "lambda_d": cfg.lambda_d, "batch": cfg.batch,
                           "saturation_threshold_sd": thr, "infonce_saturates_above": sat}
    if cfg.pooling == "max":
        ratio = [row(float(s))["grad_ratio"] for s in grid]
        above = [r > 1 for r in ratio]
        intervals, start = [], (float(grid[0]) if above[0] else None)
        for i in range(1, points):
            if above[i] != above[i - 1]:
                edge = _bisect(lambda s: row(s)["grad_ratio"] - 1.0, float(grid[i - 1]), float(grid[i]))
                if above[i]:
                    start = edge
                else:
                    intervals.append((start, edge))
                    start = None
        if start is not None:
            intervals.append((start, float(grid[-1])))
        out["flops_dominates"] = intervals
        out["active_q_at_edges"] = [row(b)["active_q"] for _, b in intervals]
        out["ratio_at"] = {f"{s:.3g}": r for s, r in zip(grid[:: max(1, points // 10)], ratio[:: max(1, points // 10)])}
    return out


def describe_mechanism(mech: dict[str, Any]) -> str:
    """One paragraph stating the two thresholds found by :func:`mechanism`."""
    iv = mech.get("flops_dominates")
    if iv is None:
        flops = "gradients not computed (sum pooling)"
    elif not iv:
        flops = "the FLOPS gradient never exceeds the ranking gradient in the scanned range"
    else:
        flops = "the FLOPS gradient exceeds the ranking gradient for sigma/k in " + ", ".join(
            f"[{a:.3g}, {b:.3g}]" for a, b in iv) + " (P(a_q > 0) at the upper edge(s): " + ", ".join(
            f"{p:.2g}" for p in mech.get("active_q_at_edges", [])) + ")"
    sat = mech["infonce_saturates_above"]
    sat_s = ("InfoNCE saturates (per-candidate score sd > sqrt(2 ln B) = "
             f"{mech['saturation_threshold_sd']:.3g}) for sigma/k > {sat:.3g}" if sat is not None
             else "no saturation crossing in the scanned range")
    return (f"With mu = {mech['mu']:g}, B = {mech['batch']}, lambda_d = {mech['lambda_d']:g}: {flops}; {sat_s}.")
