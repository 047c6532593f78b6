"""The checks of ``initlab theory verify`` for T1, T2, T3, T4 and T5 (statement texts:
:mod:`initlab.theory.statements`; closed forms: :mod:`initlab.theory.attention_gradient` and
:mod:`initlab.theory.attention_masked`).

Role: one checker per statement, ``(VerifyConfig, torch.Generator) -> StatementResult``. Every check
compares the gradient under test (autograd, passed through the test hook so that tests can inject wrong
gradients) with an independent route: the closed form, identity (G) from R, central differences, or
Monte Carlo within ``MC_SIGMAS`` standard errors (T4). The checks of T1', T3', T6 and T7 are in
:mod:`initlab.theory.verify_ext`; the shared instruments in :mod:`initlab.theory.verify_base`.
"""

from __future__ import annotations

import math

import torch

from initlab.theory import attention_case as ac
from initlab.theory import attention_gradient as ag
from initlab.theory import attention_masked as am
from initlab.theory.subspace import blind_component, blind_fraction
from initlab.theory.verify_base import (MC_SIGMAS, STATEMENTS, TOL_EXACT, TOL_FD, StatementResult, VerifyConfig, draw_T,
                                        draw_case, fd_check, fd_scale, hook, pick, round_off_floor)

__all__ = ["check_t1", "check_t2", "check_t3", "check_t4", "check_t5", "CHECKERS"]


# ----------------------------------------------------------------------------------------------
# Monte Carlo through the test hook
# ----------------------------------------------------------------------------------------------
def _mc_projection(P: torch.Tensor, p: float, q: float, C: torch.Tensor, n: int, gen: torch.Generator, chunk: int = 4096) -> tuple[float, float]:
    """Monte Carlo ``E<-grad_S L, P>`` (linearised loss) like :func:`initlab.theory.attention_masked.monte_carlo_projection`,
    with every per-sequence gradient passed through the test hook (statement "T4"). Returns (mean, SE)."""
    vals, done = [], 0
    T, K = P.shape[0], C.shape[0]
    while done < n:
        b = min(chunk, n - done)
        x = am.markov_tokens(b, T, K, p, gen)
        m = torch.rand(b, T, generator=gen) < q
        G = hook("T4", am.masked_score_gradient(x, m, C.to(torch.float64), "linear"))
        vals.append(-(G * P.to(torch.float64)).sum((-1, -2)))
        done += b
    v = torch.cat(vals)
    return float(v.mean()), float(v.std() / math.sqrt(n))


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
        est, se = _mc_projection(P, p, q, C, cfg.mc_samples, gen)
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
    est, se = _mc_projection(P, p, q, C0, cfg.mc_samples, gen)
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
    est2, se2 = _mc_projection(P2, 0.1, 0.5, Ck, 2 * cfg.mc_samples, gen)
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


CHECKERS = {"T1": check_t1, "T2": check_t2, "T3": check_t3, "T4": check_t4, "T5": check_t5}  # T1-T5; all: checkers()
