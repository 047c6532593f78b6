"""The numeric checks of ``initlab theory verify``: one checker per statement T1, T1', T2, T3, T3', T4, T5,
T6, T7 (statement texts: :mod:`initlab.theory.statements`; closed forms: :mod:`~initlab.theory.attention.gradient`
(T1, T2, T3, T5), :mod:`~initlab.theory.attention.rowidentical` (T1', T3'),
:mod:`~initlab.theory.attention.masked_reconstruction` (T4), :mod:`~initlab.theory.attention.padding_dropout` (T6),
:mod:`~initlab.theory.attention.depth` (T7)).

Role: each checker is ``(VerifyConfig, torch.Generator) -> StatementResult``. Every check compares the gradient
under test (autograd, passed through the test hook :func:`initlab.theory.verify.base.hook` so that tests can inject
wrong gradients) with an independent route: the closed form, identity (G) from R, central differences, an exact
expectation by enumeration, or Monte Carlo within ``MC_SIGMAS`` standard errors (T4). Random cases come from
:mod:`initlab.theory.attention.case`; central differences have truncation error O(h^2) at h = 1e-5 (float64),
hence the tolerances of :mod:`initlab.theory.verify.base`. The runner that calls these checkers and prints the
table is :mod:`initlab.theorycheck.verify.runner`; drawing cases and comparing gradients is
:mod:`initlab.theory.attention.check_cases` (its names re-exported here).
"""

from __future__ import annotations

import math

import torch

from initlab.theory.attention import case as ac
from initlab.theory.attention import depth as a7
from initlab.theory.attention import gradient as ag
from initlab.theory.attention import masked_reconstruction as am
from initlab.theory.attention import padding_dropout as a6
from initlab.theory.attention import rowidentical as ar
from initlab.theory.attention.check_cases import draw_T, draw_case, fd_check, fd_scale, mc_projection, pick, round_off_floor
from initlab.theory.subspace import blind_component, blind_fraction
from initlab.theory.verify.base import MC_SIGMAS, STATEMENTS, TOL_EXACT, TOL_FD, StatementResult, VerifyConfig, hook

__all__ = ["draw_T", "pick", "draw_case", "round_off_floor", "fd_scale", "fd_check", "check_t1", "check_t1p",
           "check_t2", "check_t3", "check_t3p", "check_t4", "check_t5", "check_t6", "check_t7", "CHECKERS"]


# ----------------------------------------------------------------------------------------------
# one checker per statement
# ----------------------------------------------------------------------------------------------
def check_t1(cfg: VerifyConfig, gen: torch.Generator) -> StatementResult:
    res = StatementResult("T1", STATEMENTS["T1"])
    for _ in range(cfg.cases):
        case = draw_case(gen, draw_T(gen, cfg.t_max))
        G = hook("T1", ac.score_gradient(case))
        g = ag.t1_closed_form(case)
        scale = float(G.abs().max()) + round_off_floor(case)
        res.record("autograd = 1 g^T (closed form)", G, g[:, None, :].expand_as(G), TOL_EXACT, scale)
        R, V = ac.output_gradient(case)  # autograd from O (a leaf) only, not through the softmax
        res.record("autograd = (1/T) R V^T Pi (identity (G))", G, ag.uniform_score_gradient_from_R(R, V), TOL_EXACT, scale)
        res.record("rows of autograd equal", G, G[:, :1, :].expand_as(G), TOL_EXACT, scale)
        res.record("blind component of autograd = 0", blind_component(G), 0.0, TOL_EXACT, scale)
        fd_check(res, "central difference = autograd", case, G, gen)
        res.cases += 1
    return res


def check_t2(cfg: VerifyConfig, gen: torch.Generator) -> StatementResult:
    res = StatementResult("T2", STATEMENTS["T2"])
    ratios = []
    for _ in range(cfg.cases):
        T = draw_T(gen, cfg.t_max)
        case = draw_case(gen, T, heads=1)
        G = hook("T2", ac.score_gradient(case))[0]
        nG = float(G.norm()) + round_off_floor(case)
        w = int(torch.randint(1, max(1, T // 2) + 1, (1,), generator=gen))
        blind = {
            "identity": torch.eye(T, dtype=torch.float64),
            "permutation": ag.permutation_pattern(torch.randperm(T, generator=gen)),
            "circulant band": ag.circulant_band_pattern(T, w),
        }
        for name, P in blind.items():
            res.record(f"<G, {name}> = 0", float((G * P).sum()), 0.0, TOL_EXACT, nG * float(P.norm()))
        band = ag.band_pattern(T, w)
        inner = float((G * band).sum())
        g = ag.t1_closed_form(case)[0]  # T1's g, an independent route (G itself is under test)
        d = ag.band_edge_deficit(T, w)
        res.record("<G, band> = -sum_E g_j d_j (closed-form g)", inner, -float((g * d).sum()), TOL_EXACT, nG * float(band.norm()))
        bound = ag.band_edge_bound(g, w)
        res.record("|<G, band>| <= ||g_E|| ||d||", max(0.0, abs(inner) - bound), 0.0, TOL_EXACT, nG * float(band.norm()))
        rel_bound = ag.band_relative_bound(T, w)
        res.record("|<G, band>|/||G|| <= ||d||/sqrt(T)", max(0.0, abs(inner) / nG - rel_bound), 0.0, TOL_EXACT, 1.0)
        ratios.append({"T": T, "w": w, "ratio": abs(inner) / nG, "bound": rel_bound})
        if T >= 2 * w + 2:  # the bound is nearly sharp: a layer whose values are the deficits attains ||Pi d||/sqrt(T)
            worst = ac.AttentionCase(
                d[:, None].clone(), torch.zeros(1, T, T, dtype=torch.float64), torch.ones(1, 1, 1, dtype=torch.float64),
                None, lambda y: y, lambda p: p.sum(), f_name="identity", loss_name="sum")
            Gw = hook("T2", ac.score_gradient(worst))[0]
            worst_ratio = abs(float((Gw * band).sum())) / float(Gw.norm())
            sharp = ag.band_sharp_relative_bound(T, w)
            res.record("worst-case layer attains ||Pi d||/sqrt(T)", worst_ratio, sharp, TOL_EXACT)
        res.record("|<G, band>|/||G|| <= ||Pi d||/sqrt(T) (sharp bound)", max(0.0, abs(inner) / nG - ag.band_sharp_relative_bound(T, w)), 0.0, TOL_EXACT, 1.0)
        res.record("||G||_F = sqrt(T) ||g|| (closed-form g)", float(G.norm()), math.sqrt(T) * float(g.norm()), TOL_EXACT, nG)
        fd_check(res, "central difference = autograd", case, G[None], gen, extra=[band[None], blind["circulant band"][None]])
        res.cases += 1
    res.measured["band_ratio_samples"] = ratios
    return res


def check_t3(cfg: VerifyConfig, gen: torch.Generator) -> StatementResult:
    res = StatementResult("T3", STATEMENTS["T3"])
    for _ in range(cfg.cases):
        T = draw_T(gen, cfg.t_max)
        case = draw_case(gen, T, d=int(torch.randint(2, 7, (1,), generator=gen)), row_shift=False)
        H, d = case.H, case.X.shape[1]
        dk = int(torch.randint(2, 6, (1,), generator=gen))
        W_Q = torch.randn(H, d, dk, generator=gen, dtype=torch.float64)
        W_K = torch.randn(H, d, dk, generator=gen, dtype=torch.float64)
        half = dk // 2
        W_Q[..., :half] = 0  # W_Q W_K^T = 0: uniform attention with both factors non-zero
        W_K[..., half:] = 0
        gM, gQ, gK = ac.bilinear_score_gradient(case, W_Q, W_K)
        gM = hook("T3", gM)
        cM, xbar, b = ag.t3_closed_form(case)
        cQ, cK = ag.qk_closed_form(case, W_Q, W_K)
        fl = round_off_floor(case) * float(case.X.abs().max()) ** 2 * case.T
        sc = float(gM.abs().max()) + fl
        res.record("grad_M autograd = T xbar (C W_V r)^T", gM, cM, TOL_EXACT, sc)
        res.record("grad_WQ = grad_M W_K / sqrt(d_k)", gQ, cQ, TOL_EXACT, float(gQ.abs().max()) + fl * float(W_K.abs().max()))
        res.record("grad_WK = grad_M^T W_Q / sqrt(d_k)", gK, cK, TOL_EXACT, float(gK.abs().max()) + fl * float(W_Q.abs().max()))
        sv = torch.linalg.svdvals(gM)
        res.record("grad_M rank one (s2/s1)", sv[:, 1], 0.0, TOL_EXACT, float(sv[:, 0].max()) + fl)
        # central difference in M along a random direction
        E = torch.randn(H, d, d, generator=gen, dtype=torch.float64)

        def L_of_M(M):
            return float(ac.case_loss(case, torch.einsum("id,hde,je->hij", case.X, M, case.X)))

        M0 = W_Q @ W_K.transpose(-1, -2) / math.sqrt(dk)
        h = 1e-5
        fd = (L_of_M(M0 + h * E) - L_of_M(M0 - h * E)) / (2 * h)
        res.record("central difference = autograd (M)", float((gM * E).sum()), fd, TOL_FD, fd_scale(gM, E, L_of_M(M0)))
        res.cases += 1
    return res


def check_t4(cfg: VerifyConfig, gen: torch.Generator) -> StatementResult:
    res = StatementResult("T4", STATEMENTS["T4"])
    fractions = _t4_generic(res, cfg, gen)
    res.measured["blind_fraction_generic_min"] = min(fractions) if fractions else None
    res.measured["blind_fraction_generic_median"] = sorted(fractions)[len(fractions) // 2] if fractions else None
    mc = _t4_markov(res, cfg, gen)
    small_p, kappa0 = _t4_kappa0_and_small_p(res, cfg, gen)
    res.measured["small_p_distance2"] = small_p
    res.measured["monte_carlo"] = mc
    res.measured["kappa0_path"] = kappa0
    return res


def _t4_generic(res: StatementResult, cfg: VerifyConfig, gen: torch.Generator) -> list[float]:
    """T4 (a) generic data: identity (G) vs autograd vs central differences, blind component non-zero;
    returns the blind fractions."""
    fractions = []
    for _ in range(cfg.cases):
        T = draw_T(gen, cfg.t_max)
        K, d, H, e, m = int(torch.randint(2, 8, (1,), generator=gen)), 4, int(torch.randint(1, 3, (1,), generator=gen)), 3, 5
        dt = torch.float64
        E = torch.randn(K + 1, d, generator=gen, dtype=dt)
        W_V = torch.randn(H, d, e, generator=gen, dtype=dt) / 2
        W_O = torch.randn(H * e, m, generator=gen, dtype=dt) / 2
        W_D = torch.randn(m, K, generator=gen, dtype=dt)
        x = torch.randint(K, (T,), generator=gen)
        mask = torch.rand(T, generator=gen) < 0.3
        mask[int(torch.randint(T, (1,), generator=gen))] = True  # at least one masked position
        S0 = torch.randn(H, T, 1, generator=gen, dtype=dt).expand(H, T, T).clone()  # uniform attention
        S = S0.clone().requires_grad_(True)
        (G,) = torch.autograd.grad(am.generic_masked_loss(S, E, W_V, W_O, W_D, x, mask), S)
        G = hook("T4", G)
        L, O, V = am.generic_masked_loss(S0, E, W_V, W_O, W_D, x, mask, return_O=True)
        (R,) = torch.autograd.grad(L, O)
        sc = float(G.abs().max()) + 1e-4 * float(R.abs().max()) * float(V.abs().max()) + 1e-300
        res.record("autograd = (1/T) R V^T Pi", G, ag.uniform_score_gradient_from_R(R, V.detach()), TOL_EXACT, sc)
        res.record("P_B(autograd) = (1/T)(R - 1 rbar^T) V^T Pi", blind_component(G), ag.blind_component_closed_form(R, V.detach()), TOL_EXACT, sc)
        Dir = torch.randn(H, T, T, generator=gen, dtype=dt)
        hh = 1e-5
        with torch.no_grad():
            fd = float((am.generic_masked_loss(S0 + hh * Dir, E, W_V, W_O, W_D, x, mask) - am.generic_masked_loss(S0 - hh * Dir, E, W_V, W_O, W_D, x, mask)) / (2 * hh))
        res.record("central difference = autograd", float((G * Dir).sum()), fd, TOL_FD, fd_scale(G, Dir, float(L.detach())))
        frac = float(blind_fraction(G).min())
        fractions.append(frac)
        # generic data: the blind component is non-zero unless the sequence is degenerate (one token value)
        if len(set(x.tolist())) > 1 and int(mask.sum()) < T:
            res.claim("blind component != 0 (generic data)", frac > 1e-8, f"(fraction {frac:.3g}, T = {T})")
        res.cases += 1
    return fractions


def _t4_markov(res: StatementResult, cfg: VerifyConfig, gen: torch.Generator) -> list[dict]:
    """T4 (b) Markov chain: the closed form kappa(C) Psi(P) vs Monte Carlo (copy and random paths)."""
    mc = []
    for k in range(max(2, cfg.cases // 4)):
        T = int(torch.randint(4, 25, (1,), generator=gen))
        K = int(torch.randint(2, 6, (1,), generator=gen))
        p = 0.1 + 0.8 * float(torch.rand(1, generator=gen))
        q = 0.1 + 0.4 * float(torch.rand(1, generator=gen))
        w = int(torch.randint(1, max(1, T // 3) + 1, (1,), generator=gen))
        P = ag.band_pattern(T, w, diagonal=False)
        copy = k % 2 == 0
        C = torch.eye(K, dtype=torch.float64) if copy else torch.randn(K, K, generator=gen, dtype=torch.float64)
        exact = am.expected_projection(P, p, q, C)
        est, se = mc_projection(P, p, q, C, cfg.mc_samples, gen)
        res.record("Monte Carlo = kappa(C) Psi(P) (within 5 SE)", max(0.0, abs(est - exact) - MC_SIGMAS * se), 0.0, TOL_EXACT, abs(exact) + 1e-300)
        if copy:
            res.claim("copy path: Monte Carlo E<D, band> > 3 SE", est > 3 * se, f"(estimate {est:.3g}, SE {se:.2g})")
        mc.append({"T": T, "K": K, "p": p, "q": q, "w": w, "path": "copy" if copy else "random", "closed_form": exact, "monte_carlo": est, "se": se})
    return mc


def _t4_kappa0_and_small_p(res: StatementResult, cfg: VerifyConfig, gen: torch.Generator) -> tuple[dict, dict]:
    """T4 (c) kappa(C) = 0: the expected projection vanishes, the per-sequence blind component does not; and
    small p: only the nearest keys rise (the |i-j| = 2 keys are lowered). Returns the two measured records."""
    T, K, p, q = 12, 4, 0.8, 0.3
    C = torch.randn(K, K, generator=gen, dtype=torch.float64)
    C0 = C - am.kappa(C) * K / (K - 1) * torch.eye(K, dtype=torch.float64)
    P = ag.band_pattern(T, 2, diagonal=False)
    est, se = mc_projection(P, p, q, C0, cfg.mc_samples, gen)
    res.record("kappa(C) = 0 => E<D, band> = 0 (within 5 SE)", max(0.0, abs(est) - MC_SIGMAS * se), 0.0, TOL_EXACT, 1.0)
    x = am.markov_tokens(64, T, K, p, gen)
    msk = torch.rand(64, T, generator=gen) < q
    Gs = am.masked_score_gradient(x, msk, C0, "linear")
    nz = Gs.flatten(1).norm(dim=1) > 0
    med = float(blind_fraction(Gs[nz]).median())
    res.claim("kappa(C) = 0: per-sequence blind component != 0", med > 1e-3, f"(median fraction {med:.3g})")
    # small p: only the nearest keys rise; the |i-j| = 2 keys are lowered (T = 8, p = 0.1, q = 0.5, copy path)
    P2 = ag.band_pattern(8, 2, diagonal=False) - ag.band_pattern(8, 1, diagonal=False)
    Ck = torch.eye(4, dtype=torch.float64)
    exact2 = float((am.expected_descent(8, 0.1, 0.5, Ck) * P2).sum())
    est2, se2 = mc_projection(P2, 0.1, 0.5, Ck, 2 * cfg.mc_samples, gen)
    res.record("small p: Monte Carlo E<D, |i-j| = 2> = entry-wise closed form (within 5 SE)", max(0.0, abs(est2 - exact2) - MC_SIGMAS * se2), 0.0, TOL_EXACT, abs(exact2))
    res.claim("small p: Monte Carlo E<D, |i-j| = 2> < -3 SE (those keys are lowered)", est2 < -3 * se2, f"(estimate {est2:.3g}, SE {se2:.2g}, closed form {exact2:.3g})")
    small_p = {"closed_form": exact2, "monte_carlo": est2, "se": se2}
    return small_p, {"kappa": am.kappa(C0), "monte_carlo": est, "se": se, "median_blind_fraction": med}


def check_t5(cfg: VerifyConfig, gen: torch.Generator) -> StatementResult:
    res = StatementResult("T5", STATEMENTS["T5"])
    cls_f, res_f, nonuni = [], [], []
    for _ in range(cfg.cases):
        T = draw_T(gen, cfg.t_max)
        # CLS pooling
        case = draw_case(gen, T, pooling="cls")
        G = hook("T5", ac.score_gradient(case))
        R, V = ac.output_gradient(case)
        sc = float(G.abs().max()) + round_off_floor(case)
        res.record("CLS: P_B(autograd) = closed form", blind_component(G), ag.blind_component_closed_form(R, V), TOL_EXACT, sc)
        nz = G.flatten(1).norm(dim=1) > 1e-12 * (1 + sc)
        if bool(nz.any()):
            bf = blind_fraction(G[nz])
            res.record("CLS: blind fraction = sqrt(1 - 1/T)", bf, ag.cls_blind_fraction(T), TOL_EXACT)
            cls_f.append({"T": T, "blind_fraction": float(bf.min())})
        fd_check(res, "CLS: central difference = autograd", case, G, gen)
        # residual before f
        f_name = pick(gen, ("tanh", "gelu", "softplus", "mlp"))
        case = draw_case(gen, T, residual=True, f=f_name)
        G = hook("T5", ac.score_gradient(case))
        R, V = ac.output_gradient(case)
        sc = float(G.abs().max()) + round_off_floor(case)
        res.record("residual: P_B(autograd) = closed form", blind_component(G), ag.blind_component_closed_form(R, V), TOL_EXACT, sc)
        frac = float(blind_fraction(G).min())
        res.claim("residual + non-linear f: blind component != 0", frac > 1e-8, f"(fraction {frac:.3g}, f = {f_name})")
        res_f.append({"T": T, "f": f_name, "blind_fraction": frac})
        fd_check(res, "residual: central difference = autograd", case, G, gen)
        lin = draw_case(gen, T, residual=True, f=pick(gen, ("identity", "linear")))
        Gl = ac.score_gradient(lin)
        res.record("residual + linear f: blind component = 0", blind_component(Gl), 0.0, TOL_EXACT, float(Gl.abs().max()) + round_off_floor(lin))
        # non-uniform attention, affine f: first-order coefficient in eps
        case = draw_case(gen, T, f=pick(gen, ("identity", "linear")), row_shift=False)
        S1 = torch.randn(case.H, T, T, generator=gen, dtype=torch.float64)
        first = ag.nonuniform_first_order(case, S1)
        h = 1e-4
        case.S = h * S1
        Gp = blind_component(hook("T5", ac.score_gradient(case)))
        case.S = -h * S1
        Gm = blind_component(hook("T5", ac.score_gradient(case)))
        case.S = torch.zeros_like(S1)
        g0 = float(ac.score_gradient(case).abs().max())
        res.record("non-uniform: d P_B(grad)/d eps = closed form", (Gp - Gm) / (2 * h), first, TOL_FD, float(first.abs().max()) + g0 + round_off_floor(case))
        if T >= 3:  # at T = 2 the first-order blind term vanishes identically (affine f)
            res.claim("non-uniform: first-order blind component != 0", float(first.abs().max()) > 1e-6 * g0, f"(T = {T})")
        by_eps = {}
        for eps in (0.1, 1.0):
            case.S = eps * S1
            by_eps[str(eps)] = float(blind_fraction(ac.score_gradient(case)).mean())
        nonuni.append({"T": T, "blind_fraction_by_eps": by_eps})
        res.cases += 1
    res.measured.update({"cls": cls_f, "residual": res_f, "nonuniform": nonuni})
    return res


# ----------------------------------------------------------------------------------------------
# T1', T3', T6, T7: row-identical attention, Q/K biases, padding and dropout, depth
# ----------------------------------------------------------------------------------------------
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
    res = StatementResult("T1'", STATEMENTS["T1'"])
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
    res = StatementResult("T3'", STATEMENTS["T3'"])
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
    res = StatementResult("T6", STATEMENTS["T6"])
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
    res = StatementResult("T7", STATEMENTS["T7"])
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


#: statement id -> checker, in the registry's order
CHECKERS = {"T1": check_t1, "T1'": check_t1p, "T2": check_t2, "T3": check_t3, "T3'": check_t3p, "T4": check_t4,
            "T5": check_t5, "T6": check_t6, "T7": check_t7}
