"""Checks of ``initlab theory verify`` for T1', T3', T6 and T7 (statement texts:
:mod:`initlab.theory.statements`; closed forms: :mod:`~initlab.theory.attention_rowidentical`,
:mod:`~initlab.theory.attention_masks`, :mod:`~initlab.theory.attention_depth`).

Every check compares a gradient under test (autograd, passed through verify's test hook so that tests
can inject wrong gradients) with an independent route: a closed form, identity (G) from R, central
differences, or an exact expectation by enumeration.
"""

from __future__ import annotations

import math

import torch

from initlab.theory import attention_depth as a7
from initlab.theory import attention_case as ac
from initlab.theory import attention_gradient as ag
from initlab.theory import attention_masks as a6
from initlab.theory import attention_rowidentical as ar
from initlab.theory.statements import BY_ID
from initlab.theory.subspace import blind_component, blind_fraction
from initlab.theory.verify_base import TOL_EXACT, TOL_FD, StatementResult, VerifyConfig, draw_T, draw_case, fd_check, fd_scale, hook, pick, round_off_floor

__all__ = ["check_t1p", "check_t3p", "check_t6", "check_t7", "CHECKERS_EXT"]

F64 = torch.float64


def _qk(gen: torch.Generator, H: int, d: int, split: bool = True):
    """W_Q, W_K ``(H, d, d_k)`` with W_Q W_K^T = 0 (disjoint column halves) and biases ``(H, d_k)``."""
    dk = int(torch.randint(2, 6, (1,), generator=gen))
    W_Q = torch.randn(H, d, dk, generator=gen, dtype=F64)
    W_K = torch.randn(H, d, dk, generator=gen, dtype=F64)
    W_Q[..., : dk // 2] = 0
    W_K[..., dk // 2:] = 0
    b_Q = torch.randn(H, dk, generator=gen, dtype=F64)
    b_K = torch.randn(H, dk, generator=gen, dtype=F64)
    return W_Q, b_Q, W_K, b_K


def check_t1p(cfg: VerifyConfig, gen: torch.Generator) -> StatementResult:
    res = StatementResult("T1'", BY_ID["T1'"].summary)
    t1_err = []
    for _ in range(cfg.cases):
        case = draw_case(gen, draw_T(gen, cfg.t_max), row_shift=False)
        W_Q, b_Q, W_K, b_K = _qk(gen, case.H, case.X.shape[1])
        case.S = ar.biased_scores(case.X, W_Q, b_Q, W_K, b_K)
        case.S = case.S + torch.randn(case.H, case.T, 1, generator=gen, dtype=F64)  # row constants: softmax ignores them
        G = hook("T1'", ac.score_gradient(case))
        g = ar.t1p_closed_form(case)
        sc = float(G.abs().max()) + round_off_floor(case)
        res.record("autograd = 1 g^T, g = diag(a)(I - 1a^T) V r", G, g[:, None, :].expand_as(G), TOL_EXACT, sc)
        res.record("blind component of autograd = 0", blind_component(G), 0.0, TOL_EXACT, sc)
        fd_check(res, "central difference = autograd", case, G, gen)
        uni = ac.AttentionCase(case.X, torch.zeros_like(case.S), case.W_V, case.W_O, case.f, case.loss)
        g1 = ag.t1_closed_form(uni)
        n = g.norm(dim=-1)
        t1_err += [float(x) for x in ((g1 - g).norm(dim=-1) / n)[n > 1e-12]]
        res.cases += 1
    t1_err.sort()
    res.measured["t1_uniform_formula_rel_error"] = {"min": t1_err[0], "median": t1_err[len(t1_err) // 2], "max": t1_err[-1]} if t1_err else None
    return res


def check_t3p(cfg: VerifyConfig, gen: torch.Generator) -> StatementResult:
    res = StatementResult("T3'", BY_ID["T3'"].summary)
    centred_wk = []
    for k in range(cfg.cases):
        T = draw_T(gen, cfg.t_max)
        case = draw_case(gen, T, d=int(torch.randint(2, 7, (1,), generator=gen)), row_shift=False)
        W_Q, b_Q, W_K, b_K = _qk(gen, case.H, case.X.shape[1])
        if k % 2:  # centred tokens and W_Q = W_K = 0: T3 would say every gradient vanishes
            case.X = case.X - case.X.mean(0)
            W_Q, W_K = torch.zeros_like(W_Q), torch.zeros_like(W_K)
        auto = {n: hook("T3'", t) for n, t in ar.qk_bias_gradient(case, W_Q, b_Q, W_K, b_K).items()}
        closed = ar.qk_bias_closed_form(case, W_Q, b_Q, W_K, b_K)
        fl = round_off_floor(case) * (1 + float(case.X.abs().max())) ** 2 * T * (1 + float(b_Q.abs().max()) + float(W_K.abs().max()))
        top = max(float(t.abs().max()) for t in auto.values()) + fl
        for n in ("W_Q", "b_Q", "W_K", "b_K"):
            res.record(f"grad {n}: autograd = closed form", auto[n], closed[n], TOL_EXACT, top)
        dS = ar.first_order_score_step(case.X, W_Q, b_Q, W_K, b_K, auto)
        if k % 2:
            res.record("W_Q = W_K = 0: (dS) Pi query-independent", blind_component(dS), 0.0, TOL_EXACT, float(dS.abs().max()) + fl)
            wk = float(auto["W_K"].norm())
            res.claim("centred tokens: grad W_K != 0", wk > 1e-8 * top, f"(||grad W_K|| = {wk:.3g})")
            centred_wk.append(wk / top)
        E = torch.randn(b_Q.shape, generator=gen, dtype=F64)
        h = 1e-5

        def L_of(bq, case=case, W_Q=W_Q, W_K=W_K, b_K=b_K):
            with torch.no_grad():
                return float(ac.case_loss(case, ar.biased_scores(case.X, W_Q, bq, W_K, b_K)))

        fd = (L_of(b_Q + h * E) - L_of(b_Q - h * E)) / (2 * h)
        res.record("central difference = autograd (b_Q)", float((auto["b_Q"] * E).sum()), fd, TOL_FD, fd_scale(auto["b_Q"], E, L_of(b_Q)))
        res.cases += 1
    res.measured["centred_grad_WK_over_max"] = centred_wk
    return res


def _padded_fd(res: StatementResult, case, pad, G, gen) -> None:
    E = torch.randn(G.shape, generator=gen, dtype=F64)
    h = 1e-5
    with torch.no_grad():
        L0 = float(a6.padded_case_loss(case, pad))
        fd = float((a6.padded_case_loss(case, pad, case.S + h * E) - a6.padded_case_loss(case, pad, case.S - h * E)) / (2 * h))
    res.record("padding: central difference = autograd", float((G * E).sum()), fd, TOL_FD, fd_scale(G, E, L0))


def check_t6(cfg: VerifyConfig, gen: torch.Generator) -> StatementResult:
    res = StatementResult("T6", BY_ID["T6"].summary)
    per_mask = []
    for k in range(cfg.cases):
        # (a) key padding with length-aware pooling
        T = draw_T(gen, cfg.t_max)
        case = draw_case(gen, T)
        Lv = int(torch.randint(2, T + 1, (1,), generator=gen))
        pad = torch.zeros(T, dtype=torch.bool)
        pad[torch.randperm(T, generator=gen)[: T - Lv]] = True
        G = hook("T6", a6.padded_score_gradient(case, pad))
        g = a6.padded_closed_form(case, pad)
        blk = (~pad).to(F64)
        sc = float(G.abs().max()) + round_off_floor(case)
        res.record("padding: autograd = 1_valid g^T (T1 on the valid tokens)", G, blk[:, None] * g[:, None, :], TOL_EXACT, sc)
        res.record("padding: masked blind component of autograd = 0", blind_component(G, key_padding_mask=pad), 0.0, TOL_EXACT, sc)
        nz = G.flatten(1).norm(dim=1) > 1e-10 * sc
        if bool(nz.any()):
            res.record("padding: unmasked blind fraction = sqrt(1 - L/T)", blind_fraction(G[nz]), a6.unmasked_padding_blind_fraction(T, Lv), TOL_EXACT, 1.0)
        _padded_fd(res, case, pad, G, gen)
        # (b) dropout, exact expectation over every mask (tiny layer), identity (G) per mask
        kind = "attention" if k % 2 == 0 else "output"
        Td = 2 + k % 2 if kind == "attention" else 3
        small = draw_case(gen, Td, heads=1, e=2, use_W_O=False, d=2, f=pick(gen, ("tanh", "gelu", "softplus", "mlp")))
        p = 0.1 + 0.3 * float(torch.rand(1, generator=gen))
        shape = (1, Td, Td) if kind == "attention" else (Td, 2)
        n = math.prod(shape)
        keep = torch.tensor([[(m >> b) & 1 for b in range(n)] for m in range(2**n)], dtype=torch.bool).reshape(-1, *shape)
        kk = keep.flatten(1).sum(1).to(F64)
        prob = (1 - p) ** kk * p ** (n - kk)
        Gm = hook("T6", a6.dropout_score_gradient(small, keep, p, kind))
        ref = a6.dropout_gradient_from_R(small, keep, p, kind)
        scm = float(Gm.abs().max()) + round_off_floor(small)
        res.record(f"{kind} dropout: autograd per mask = identity (G) with the mask", Gm, ref, TOL_EXACT, scm)
        EG = torch.einsum("n,nhij->hij", prob, Gm)
        res.record(f"{kind} dropout: exact E_M[grad] blind (all {2**n} masks)", blind_component(EG), 0.0, TOL_EXACT, scm)
        per_mask.append(float(blind_fraction(Gm.flatten(0, 1)).median()))
        res.cases += 1
    res.claim("dropout: per-mask blind fraction != 0 (median over cases)", sorted(per_mask)[len(per_mask) // 2] > 1e-3, f"({per_mask})")
    # Monte Carlo rate: blind fraction of the mean over n masks ~ n^{-1/2}
    case = ac.random_case(gen, 8, d=4, heads=1, e=3, f="tanh", loss="mse")
    rows = a6.dropout_blind_fraction_curve(case, 0.1, (100, 400, 1600, 6400), gen, "attention", reps=2)
    xs, ys = [math.log(r["n"]) for r in rows], [math.log(r["blind_fraction"]) for r in rows]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    res.claim("dropout: Monte Carlo blind fraction falls like n^-1/2 (slope in [-0.75, -0.25])", -0.75 <= slope <= -0.25, f"(slope {slope:.3g})")
    res.measured["dropout_mc"] = {"rows": rows, "loglog_slope": slope, "per_mask_median_blind_fraction": per_mask}
    return res


_SPECS = [a7.StackSpec(depth, res_, ffn, ln, later) for depth in (2, 3) for res_ in (False, True) for ffn in (False, True) for ln in (False, True) for later in ("uniform", "random")]


def check_t7(cfg: VerifyConfig, gen: torch.Generator) -> StatementResult:
    res = StatementResult("T7", BY_ID["T7"].summary)
    for k in range(cfg.cases):
        spec = _SPECS[int(torch.randint(len(_SPECS), (1,), generator=gen))] if k >= 3 else [
            a7.StackSpec(2, False, True, True, "random"), a7.StackSpec(3, True, False, False, "uniform"), a7.StackSpec(2, True, True, False, "random")][k]
        T = int(torch.randint(2, min(cfg.t_max, 24) + 1, (1,), generator=gen))
        st = a7.random_stack(gen, spec, T, d=int(torch.randint(2, 7, (1,), generator=gen)), heads=int(torch.randint(1, 3, (1,), generator=gen)), e=2, d_ff=6)
        G = hook("T7", a7.first_layer_gradient(st))
        R, V = a7.first_layer_R(st)
        floor = 1e-4 * float(R.abs().max()) * float(V.abs().max()) + 1e-300
        sc = float(G.abs().max()) + floor
        res.record("autograd = (1/T) R_1 V_1^T Pi (identity (G))", G, ag.uniform_score_gradient_from_R(R[0], V[0])[None], TOL_EXACT, sc)
        if not spec.residual:
            g = a7.no_residual_closed_form(st)
            res.record("no residual: autograd = 1 g^T, r = grad Phi(1 obar^T)/T", G, g[:, :, None, :].expand_as(G), TOL_EXACT, sc)
        elif not spec.ffn and not spec.layernorm and spec.later_attention == "uniform":
            g = a7.residual_linear_closed_form(st)
            res.record("residual + linear uniform: autograd = 1 g^T (explicit r)", G, g[:, :, None, :].expand_as(G), TOL_EXACT, sc)
        elif T >= 3:
            fr = float(blind_fraction(G).max())
            res.claim("residual + random attention / FFN / LayerNorm: blind component != 0", fr > 1e-6, f"({spec.label()}, T = {T}, fraction {fr:.3g})")
        E = torch.randn(G.shape, generator=gen, dtype=F64)
        S0 = torch.zeros_like(G)
        h = 1e-5
        with torch.no_grad():
            L0 = float(a7.stack_loss(st, S0))
            fd = float((a7.stack_loss(st, S0 + h * E) - a7.stack_loss(st, S0 - h * E)) / (2 * h))
        res.record("central difference = autograd", float((G * E).sum()), fd, TOL_FD, fd_scale(G, E, L0))
        res.cases += 1
    table_specs = [a7.StackSpec(2, r, f, n, later) for r in (False, True) for later in ("uniform", "random") for f, n in ((False, False), (True, False), (True, True))]
    res.measured["table"] = a7.blind_fraction_table(table_specs, T=16, seeds=3, seed=cfg.seed)
    return res


CHECKERS_EXT = {"T1'": check_t1p, "T3'": check_t3p, "T6": check_t6, "T7": check_t7}
