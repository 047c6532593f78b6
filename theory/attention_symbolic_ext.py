"""Exact sympy derivations of T1', T3', T6 and T7 for small concrete T (generic f and L as sympy Functions).

Same conventions as :mod:`initlab.theory.attention_symbolic`: each ``derive_*`` returns a
:class:`~initlab.theory.attention_symbolic.Derivation` whose residuals must simplify to exactly 0 and
whose witnesses must be non-zero. Statements: :mod:`initlab.theory.statements`.
"""

from __future__ import annotations

import itertools

import sympy as sp

from initlab.theory.attention_symbolic import Derivation, _pooled_loss, _softmax_rows

__all__ = ["derive_t1p", "derive_t3p", "derive_t6", "derive_t7", "DERIVATIONS_EXT"]


def _zero_exp(expr: sp.Expr) -> sp.Expr:
    """Reduce ``expr`` with every ``exp(...)`` atom replaced by an independent positive symbol, then
    ``cancel``. Sound for proving zero (substituting the exponentials back is a homomorphism), and much
    faster than ``simplify`` on softmax expressions; a non-zero result is returned as the residual."""
    expr = sp.expand_power_exp(sp.expand(sp.sympify(expr).doit(), power_exp=True))
    syms: dict[sp.Expr, sp.Symbol] = {}
    reps = {}
    for e in expr.atoms(sp.exp):
        c, m = e.args[0].as_coeff_Mul()  # exp(c m) = E_m^c for a rational c, E_m one positive symbol per m
        if not c.is_Rational:
            c, m = sp.Integer(1), e.args[0]
        reps[e] = syms.setdefault(m, sp.Dummy(positive=True)) ** c
    r = sp.cancel(sp.together(sp.expand(expr.xreplace(reps))))
    return sp.Integer(0) if r == 0 else r


def _rows_equal(d: Derivation, G: sp.Matrix, rows, cols, tag: str) -> None:
    r0 = rows[0]
    for i in rows[1:]:
        for j in cols:
            d.zero_residuals[f"{tag}G[{i},{j}]-G[{r0},{j}]"] = _zero_exp(G[i, j] - G[r0, j])


def derive_t1p(T: int = 3, e: int = 2) -> Derivation:
    """T1' exactly: with S_ij = b_j (row-identical attention, weights w = softmax(b); per-row constants
    a_i, which softmax ignores exactly, are left out), grad_S L has
    equal rows, each equal to g_j = w_j (c_j - sum_k w_k c_k), c = V r, r = (1/T) J_f(ybar)^T grad L at
    ybar = V^T w, for generic f and L."""
    S = sp.Matrix(T, T, lambda i, j: sp.Symbol(f"s{i}{j}"))
    V = sp.Matrix(T, e, lambda i, j: sp.Symbol(f"v{i}{j}"))
    b = sp.symbols(f"b0:{T}")
    Lexpr, f, L = _pooled_loss(_softmax_rows(S) * V)
    point = {S[i, j]: b[j] for i in range(T) for j in range(T)}
    G = sp.Matrix(T, T, lambda i, j: sp.diff(Lexpr, S[i, j]).subs(point).doit())
    d = Derivation("T1'", T)
    _rows_equal(d, G, list(range(T)), range(T), "")
    d.zero_residuals["sum_j G[0,j]"] = _zero_exp(sum(G[0, j] for j in range(T)))
    den = sum(sp.exp(bj) for bj in b)
    w = [sp.exp(bj) / den for bj in b]
    ybar = [sum(w[i] * V[i, c] for i in range(T)) for c in range(e)]
    y = sp.symbols(f"y0:{e}")
    fy = [f[k](*y) for k in range(2)]
    pz = sp.symbols("p0:2")
    gradL = [sp.diff(L(*pz), pz[k]).subs({pz[0]: fy[0], pz[1]: fy[1]}) for k in range(2)]
    r = [sp.sympify(sum(sp.diff(fy[k], y[c]) * gradL[k] for k in range(2)) / T).subs(dict(zip(y, ybar))).doit() for c in range(e)]
    c = [sum(V[j, cc] * r[cc] for cc in range(e)) for j in range(T)]
    wc = sum(wj * cj for wj, cj in zip(w, c))
    for j in range(T):
        d.zero_residuals[f"G[0,{j}]-g[{j}]"] = _zero_exp(G[0, j] - w[j] * (c[j] - wc))
    return d


def derive_t3p(T: int = 3, dim: int = 1) -> Derivation:
    """T3' exactly (one head, d_k = 1, scalar values): at W_Q = 0 with biases b_Q, b_K and any W_K, the
    gradients of W_Q, b_Q, W_K, b_K equal the closed forms with the weighted covariance C_a,
    a = softmax(b_Q X W_K); grad b_K = 0; and for centred tokens grad W_K = T C_a W_V r b_Q^T != 0."""
    X = sp.Matrix(T, dim, lambda i, j: sp.Symbol(f"x{i}{j}"))
    WQ = sp.Matrix(dim, 1, lambda i, j: sp.Symbol(f"q{i}"))
    WK = sp.Matrix(dim, 1, lambda i, j: sp.Symbol(f"k{i}"))
    Wv = sp.Matrix(dim, 1, lambda i, j: sp.Symbol(f"wv{i}"))
    bQ, bK = sp.symbols("b_Q b_K")
    f, L = sp.Function("f"), sp.Function("L")
    Q = X * WQ + sp.ones(T, 1) * bQ
    K = X * WK + sp.ones(T, 1) * bK
    Y = _softmax_rows(Q * K.T) * (X * Wv)
    Lexpr = L(sum(f(Y[i, 0]) for i in range(T)) / T)
    at = {WQ[i, 0]: 0 for i in range(dim)}
    gWQ = [sp.diff(Lexpr, WQ[i, 0]).subs(at).doit() for i in range(dim)]
    gWK = [sp.diff(Lexpr, WK[i, 0]).subs(at).doit() for i in range(dim)]
    gbQ = sp.diff(Lexpr, bQ).subs(at).doit()
    gbK = sp.diff(Lexpr, bK).subs(at).doit()
    s = [bQ * (sum(X[j, c] * WK[c, 0] for c in range(dim)) + bK) for j in range(T)]  # the same exp atoms as S
    den = sum(sp.exp(sj) for sj in s)
    a = [sp.exp(sj) / den for sj in s]
    xa = [sum(a[j] * X[j, c] for j in range(T)) for c in range(dim)]
    Ca = sp.Matrix(dim, dim, lambda p, q: sum(a[j] * (X[j, p] - xa[p]) * (X[j, q] - xa[q]) for j in range(T)))
    ybar = sum(a[j] * (X[j, :] * Wv)[0, 0] for j in range(T))
    yv = sp.Symbol("y")
    r = (sp.diff(L(f(yv)), yv) / T).subs(yv, ybar).doit()
    Xg = Ca * Wv * r  # X^T g
    u = (WK.T * Xg)[0, 0]
    xbar = [sum(X[j, c] for j in range(T)) / T for c in range(dim)]
    d = Derivation("T3'", T)
    for i in range(dim):
        d.zero_residuals[f"grad W_Q[{i}] - T xbar u"] = _zero_exp(gWQ[i] - T * xbar[i] * u)
        d.zero_residuals[f"grad W_K[{i}] - T (C_a W_V r) b_Q"] = _zero_exp(gWK[i] - T * Xg[i, 0] * bQ)
    d.zero_residuals["grad b_Q - T u"] = _zero_exp(gbQ - T * u)
    d.zero_residuals["grad b_K"] = _zero_exp(gbK)
    # centred tokens (xbar = 0): grad W_Q = 0 but grad W_K != 0 at a rational point with L' = 1
    pt = {X[j, c]: sp.Integer([1, -1, 0, 2, -2][(j + c) % T] if T <= 5 else 0) for j in range(T) for c in range(dim)}
    if all(sum(X[j, c].subs(pt) for j in range(T)) == 0 for c in range(dim)) and T <= 5:  # centred tokens
        pt.update({WK[c, 0]: sp.Rational(c + 1, 2) for c in range(dim)})
        pt.update({Wv[c, 0]: c + 1 for c in range(dim)})
        pt.update({bQ: 1, bK: 0})
        d.zero_residuals["centred tokens: grad W_Q[0]"] = _zero_exp(gWQ[0].subs(pt))
        wit = gWK[0].subs(pt).replace(lambda z: isinstance(z, (sp.Subs, sp.Derivative)), lambda z: sp.Integer(1))
        d.nonzero_witnesses["centred tokens: grad W_K[0] (f' = L' = 1)"] = sp.nsimplify(sp.N(wit, 30), rational=False)
    return d


def derive_t6(T: int = 3, valid: int = 2) -> Derivation:
    """T6 exactly. (a) Padding: keys valid..T-1 masked, pooling over the valid rows: grad_S = 0 outside
    the valid block and 1 g^T on it with T1's g for the valid tokens. (b) Attention dropout at T = 2,
    symbolic keep probability k: the expectation over all 16 masks of grad_S L has equal rows."""
    d = Derivation("T6", T)
    S = sp.Matrix(T, T, lambda i, j: sp.Symbol(f"s{i}{j}"))
    x = sp.Matrix(T, 1, lambda i, j: sp.Symbol(f"v{i}"))
    f, L = sp.Function("f"), sp.Function("L")
    A = sp.zeros(T, T)
    for i in range(T):
        den = sum(sp.exp(S[i, k]) for k in range(valid))
        for j in range(valid):
            A[i, j] = sp.exp(S[i, j]) / den
    Y = A * x
    Lexpr = L(sum(f(Y[i, 0]) for i in range(valid)) / valid)
    zero = {S[i, j]: 0 for i in range(T) for j in range(T)}
    G = sp.Matrix(T, T, lambda i, j: sp.diff(Lexpr, S[i, j]).subs(zero).doit())
    for i in range(T):
        for j in range(T):
            if i >= valid or j >= valid:
                d.zero_residuals[f"padding: G[{i},{j}]"] = _zero_exp(G[i, j])
    _rows_equal(d, G, list(range(valid)), range(valid), "padding: ")
    ybar = sum(x[j, 0] for j in range(valid)) / valid
    yv = sp.Symbol("y")
    r = (sp.diff(L(f(yv)), yv) / valid).subs(yv, ybar).doit()
    for j in range(valid):
        d.zero_residuals[f"padding: G[0,{j}] - (1/L)(v_j - vbar) r"] = _zero_exp(G[0, j] - (x[j, 0] - ybar) * r / valid)
    # (b) attention dropout, T = 2: E over keep masks of grad_S at uniform attention
    k = sp.Symbol("k", positive=True)
    S2 = sp.Matrix(2, 2, lambda i, j: sp.Symbol(f"t{i}{j}"))
    A2 = _softmax_rows(S2)
    x2 = sp.Matrix(2, 1, lambda i, j: sp.Symbol(f"u{i}"))
    EG = sp.zeros(2, 2)
    for m in itertools.product((0, 1), repeat=4):
        M = sp.Matrix(2, 2, list(m))
        prob = sp.Mul(*[k if mi else 1 - k for mi in m])
        Y2 = sp.Matrix(2, 2, lambda i, j: A2[i, j] * M[i, j] / k) * x2
        L2 = L(sum(f(Y2[i, 0]) for i in range(2)) / 2)
        EG += prob * sp.Matrix(2, 2, lambda i, j: sp.diff(L2, S2[i, j]).subs({S2[a, b]: 0 for a in range(2) for b in range(2)}).doit())
    for j in range(2):
        d.zero_residuals[f"dropout: E G[1,{j}] - E G[0,{j}]"] = _zero_exp(EG[1, j] - EG[0, j])
    return d


def derive_t7(T: int = 2) -> Derivation:
    """T7 exactly (scalar widths): (a) no residual, a second layer with random attention S2 = q O1 O1^T
    and generic f, L: the first layer's score gradient at uniform attention has equal rows;
    (b) residual x + w_o O1, a uniform linear second layer and linear f: equal rows;
    (c) residual with a random-attention second layer: rows differ (witness)."""
    d = Derivation("T7", T)
    S = sp.Matrix(T, T, lambda i, j: sp.Symbol(f"s{i}{j}"))
    x = sp.Matrix(T, 1, lambda i, j: sp.Symbol(f"x{i}"))
    wv, wo, q, v2, m2, alpha = sp.symbols("w_v w_o q v_2 m_2 alpha")
    f, L = sp.Function("f"), sp.Function("L")
    O1 = _softmax_rows(S) * x * wv
    zero = {S[i, j]: 0 for i in range(T) for j in range(T)}

    def grad(Lexpr):
        return sp.Matrix(T, T, lambda i, j: sp.diff(Lexpr, S[i, j]).subs(zero).doit())

    def second(h):  # random-attention layer on a (T, 1) input
        return _softmax_rows(q * h * h.T) * h * v2

    Ga = grad(L(sum(f(second(O1)[i, 0]) for i in range(T)) / T))
    _rows_equal(d, Ga, list(range(T)), range(T), "no residual, random layer 2: ")
    x1 = x + O1 * wo
    x2 = x1 + sp.ones(T, 1) * (sum(x1) / T) * m2
    Gb = grad(L(sum(alpha * x2[i, 0] for i in range(T)) / T))
    _rows_equal(d, Gb, list(range(T)), range(T), "residual, linear uniform layer 2: ")
    Gc = grad(L(sum(alpha * (x1 + second(x1))[i, 0] for i in range(T)) / T))
    pt = {x[i, 0]: sp.Rational(i + 1, 2) for i in range(T)}
    pt.update({wv: 1, wo: 1, q: 1, v2: 1, alpha: 1})
    wit = (Gc[1, 0] - Gc[0, 0]).subs(pt).replace(lambda z: isinstance(z, (sp.Subs, sp.Derivative)), lambda z: sp.Integer(1))
    d.nonzero_witnesses["residual, random layer 2: G[1,0]-G[0,0] (L' = 1)"] = sp.nsimplify(sp.N(wit, 30), rational=False)
    return d


DERIVATIONS_EXT = {"T1'": derive_t1p, "T3'": derive_t3p, "T6": derive_t6, "T7": derive_t7}
