"""Exact sympy derivations of T1, T1', T2, T3, T3', T4, T5, T6 and T7 for small concrete T (every entry a
symbol, every map generic).

Each ``derive_*`` builds the layer of the statement with symbolic entries, differentiates with sympy (no
numerics), and returns a :class:`Derivation` listing the residuals of the claimed identities after
reduction (each must be exactly 0) and, where the claim is that something is *not* zero, the value of
that expression at a fixed rational point (must be non-zero). T1-T5 reduce with ``sympy.simplify``
(:func:`_zero`); T1', T3', T6 and T7, whose residuals are softmax expressions at non-uniform points,
with :func:`zero_exp` (every ``exp`` atom an independent positive symbol, then ``cancel``).

Generic maps are ``sympy.Function`` objects (f : R^e -> R^2 component-wise generic, L : R^2 -> R
generic), so the identities hold for every differentiable f and loss, not for a chosen one. An output
projection W_O is absorbed into f (f o W_O is again a position-wise map). Source of the statements:
the closed-form modules of :mod:`initlab.theory.attention` (gradient, rowidentical, masked_reconstruction,
padding_dropout, depth); statement texts: :mod:`initlab.theory.statements`.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import sympy as sp

__all__ = ["Derivation", "derive_t1", "zero_exp", "derive_t1p", "derive_t2", "derive_t3", "derive_t3p", "derive_t4", "derive_t5",
           "derive_t6", "derive_t7", "DERIVATIONS"]


@dataclass
class Derivation:
    """Result of one symbolic derivation.

    Attributes:
        statement: "T1", "T1'", ..., "T7"; T: the concrete length used.
        zero_residuals: name -> simplified residual (an identity holds iff it is exactly 0).
        nonzero_witnesses: name -> value at a rational point (a "does not hold" claim needs != 0).
    """

    statement: str
    T: int
    zero_residuals: dict[str, sp.Expr] = field(default_factory=dict)
    nonzero_witnesses: dict[str, sp.Expr] = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        return all(r == 0 for r in self.zero_residuals.values()) and all(
            w != 0 for w in self.nonzero_witnesses.values()
        )


def _zero(expr: sp.Expr) -> sp.Expr:
    """Reduce ``expr``: ``expand`` first (cheap, enough for most residuals), ``simplify`` if not 0."""
    r = sp.expand(expr)
    return r if r == 0 else sp.simplify(r)


def _softmax_rows(S: sp.Matrix) -> sp.Matrix:
    T = S.shape[0]
    out = sp.zeros(T, T)
    for i in range(T):
        den = sum(sp.exp(S[i, k]) for k in range(T))
        for j in range(T):
            out[i, j] = sp.exp(S[i, j]) / den
    return out


def _generic_maps(e: int):
    """Generic f : R^e -> R^2 (two unknown functions) and L : R^2 -> R."""
    f = [sp.Function(f"f{k}") for k in range(2)]
    L = sp.Function("L")
    return f, L


def _pooled_loss(Y: sp.Matrix, pooling: str = "mean"):
    T, e = Y.shape
    f, L = _generic_maps(e)
    Z = [[f[k](*[Y[i, c] for c in range(e)]) for k in range(2)] for i in range(T)]
    if pooling == "mean":
        p = [sum(Z[i][k] for i in range(T)) / T for k in range(2)]
    else:
        p = [Z[0][k] for k in range(2)]
    return L(*p), f, L


def derive_t1(T: int = 3, e: int = 2) -> Derivation:
    """T1 exactly: with S_ij = a_i (uniform attention), grad_S L has equal rows summing to 0, and its
    row equals g = (1/T) Pi V r with r = (1/T) J_f(ybar)^T grad L, for generic f and L."""
    S = sp.Matrix(T, T, lambda i, j: sp.Symbol(f"s{i}{j}"))
    V = sp.Matrix(T, e, lambda i, j: sp.Symbol(f"v{i}{j}"))
    a = sp.symbols(f"a0:{T}")
    Y = _softmax_rows(S) * V
    Lexpr, f, L = _pooled_loss(Y)
    uniform = {S[i, j]: a[i] for i in range(T) for j in range(T)}
    G = sp.Matrix(T, T, lambda i, j: sp.diff(Lexpr, S[i, j]).subs(uniform).doit())
    d = Derivation("T1", T)
    for i in range(1, T):
        for j in range(T):
            d.zero_residuals[f"G[{i},{j}]-G[0,{j}]"] = _zero(G[i, j] - G[0, j])
    d.zero_residuals["sum_j G[0,j]"] = _zero(sum(G[0, j] for j in range(T)))
    # closed form: r = (1/T) J_f(ybar)^T grad L(f(ybar))
    ybar = [sum(V[i, c] for i in range(T)) / T for c in range(e)]
    y = sp.symbols(f"y0:{e}")
    fy = [f[k](*y) for k in range(2)]
    pz = sp.symbols("p0:2")
    gradL = [sp.diff(L(*pz), pz[k]).subs({pz[0]: fy[0], pz[1]: fy[1]}) for k in range(2)]
    r = [sum(sp.diff(fy[k], y[c]) * gradL[k] for k in range(2)) / T for c in range(e)]
    r = [sp.sympify(rc).subs(dict(zip(y, ybar))).doit() for rc in r]
    c = [sum(V[j, cc] * r[cc] for cc in range(e)) for j in range(T)]
    cbar = sum(c) / T
    for j in range(T):
        d.zero_residuals[f"G[0,{j}]-g[{j}]"] = _zero(G[0, j] - (c[j] - cbar) / T)
    return d


def _band(T: int, w: int, circulant: bool = False) -> sp.Matrix:
    def dist(i, j):
        n = abs(i - j)
        return min(n, T - n) if circulant else n

    return sp.Matrix(T, T, lambda i, j: 1 if dist(i, j) <= w else 0)


def derive_t2(T: int = 6, w: int = 2) -> Derivation:
    """T2 exactly: <1 g^T, P> = 0 (g ⟂ 1) for P = I, a permutation, a circulant band; for the band
    |i-j| <= w it equals -sum_j g_j d_j (edge deficits); and sum_{k=1}^w 2 k^2 = w(w+1)(2w+1)/3.

    Raises:
        ValueError: T < 3 or w < 1 (the non-zero witness needs two free entries of g and a band).
    """
    if T < 3 or w < 1:
        raise ValueError(f"T, w: expected T >= 3 and w >= 1, got T = {T}, w = {w}")
    gs = sp.symbols(f"g0:{T - 1}")
    g = list(gs) + [-sum(gs)]  # g ⟂ 1
    G = sp.Matrix(T, T, lambda i, j: g[j])  # 1 g^T

    def inner(P):
        return sp.expand(sum(G[i, j] * P[i, j] for i in range(T) for j in range(T)))

    d = Derivation("T2", T)
    perm = [(3 * i + 1) % T for i in range(T)] if T % 3 else [(i + 1) % T for i in range(T)]
    Pperm = sp.Matrix(T, T, lambda i, j: 1 if perm[i] == j else 0)
    d.zero_residuals["<G, I>"] = inner(sp.eye(T))
    d.zero_residuals["<G, permutation>"] = inner(Pperm)
    d.zero_residuals["<G, circulant band>"] = inner(_band(T, w, circulant=True))
    deficit = [max(0, w - j) + max(0, w - (T - 1 - j)) for j in range(T)]
    d.zero_residuals["<G, band> + sum_j g_j d_j"] = sp.expand(inner(_band(T, w)) + sum(gj * dj for gj, dj in zip(g, deficit)))
    k, W = sp.symbols("k w", integer=True, positive=True)
    d.zero_residuals["||d||^2 - w(w+1)(2w+1)/3"] = _zero(sp.summation(2 * k**2, (k, 1, W)) - W * (W + 1) * (2 * W + 1) / 3)
    d.nonzero_witnesses["<G, band> at g = (1, -1, 0, ..., 0)"] = inner(_band(T, w)).subs(
        {gs[0]: 1, gs[1]: -1, **{s: 0 for s in gs[2:]}}
    )
    return d


def derive_t3(T: int = 3, dim: int = 2) -> Derivation:
    """T3 exactly: S = X M X^T, at M = 0 grad_M L = T xbar (C W_V r)^T (rank one: det = 0), generic f, L
    (one head, scalar values e = 1, scalar generic f, generic L)."""
    X = sp.Matrix(T, dim, lambda i, j: sp.Symbol(f"x{i}{j}"))
    M = sp.Matrix(dim, dim, lambda i, j: sp.Symbol(f"m{i}{j}"))
    Wv = sp.Matrix(dim, 1, lambda i, j: sp.Symbol(f"wv{i}"))
    f, L = sp.Function("f"), sp.Function("L")
    S = X * M * X.T
    Y = _softmax_rows(S) * (X * Wv)
    Lexpr = L(sum(f(Y[i, 0]) for i in range(T)) / T)
    zero = {M[i, j]: 0 for i in range(dim) for j in range(dim)}
    gM = sp.Matrix(dim, dim, lambda a, b: sp.diff(Lexpr, M[a, b]).subs(zero).doit())
    xbar = sp.Matrix([sum(X[i, c] for i in range(T)) / T for c in range(dim)])
    Xc = X - sp.ones(T, 1) * xbar.T
    C = Xc.T * Xc / T
    ybar = (xbar.T * Wv)[0, 0]
    y = sp.Symbol("y")
    r = (sp.diff(L(f(y)), y) / T).subs(y, ybar).doit()
    closed = T * xbar * (C * Wv * r).T
    d = Derivation("T3", T)
    for a in range(dim):
        for b in range(dim):
            d.zero_residuals[f"gradM[{a},{b}] - closed"] = _zero(gM[a, b] - closed[a, b])
    if dim == 2:
        d.zero_residuals["det(gradM)"] = _zero(gM.det())
    return d


def derive_t4(T: int = 3, K: int = 2, w: int = 1) -> Derivation:
    """T4(b) exactly: by enumerating every token sequence (Markov chain, repeat prob p) and every mask
    (Bernoulli(q)) for symbolic p, q and a symbolic path C (K, K), E<-grad_S L, P> (linearised loss,
    S = 0, off-diagonal band of width w) equals kappa(C) Psi(P). Also: for one fixed sequence the
    blind component is non-zero (witness)."""
    p, q = sp.symbols("p q", positive=True)
    C = sp.Matrix(K, K, lambda a, b: sp.Symbol(f"c{a}{b}"))
    S = sp.Matrix(T, T, lambda i, j: sp.Symbol(f"s{i}{j}"))
    A = _softmax_rows(S)
    zero = {S[i, j]: 0 for i in range(T) for j in range(T)}
    # softmax Jacobian at S = 0, derived symbolically once: J[i][j][k] = dA_ij / dS_ik
    Jac = [[[sp.diff(A[i, j], S[i, k]).subs(zero) for k in range(T)] for j in range(T)] for i in range(T)]
    Aval = sp.Matrix(T, T, lambda i, j: sp.Symbol(f"A{i}{j}"))
    P = sp.Matrix(T, T, lambda i, j: 1 if 1 <= abs(i - j) <= w else 0)
    total = sp.Integer(0)
    witness = None
    for x in itertools.product(range(K), repeat=T):
        px = sp.Rational(1, K)
        for t in range(1, T):
            px *= p * (1 if x[t] == x[t - 1] else 0) + (1 - p) / K
        for m in itertools.product((0, 1), repeat=T):
            pm = sp.Mul(*[q if mi else 1 - q for mi in m])
            # loss as a function of the attention matrix (linear in A): L = (1/T) sum_i m_i l_lin(z_i, x_i)
            Lexpr = sp.Integer(0)
            for i in range(T):
                if not m[i]:
                    continue
                z = [sum(Aval[i, j] * (1 - m[j]) * C[x[j], b] for j in range(T)) for b in range(K)]
                Lexpr += (sp.log(K) - z[x[i]] + sum(z) / K) / T
            dA = [[sp.diff(Lexpr, Aval[i, j]) for j in range(T)] for i in range(T)]
            gS = sp.Matrix(T, T, lambda i, k: sum(dA[i][j] * Jac[i][j][k] for j in range(T)))
            total += px * pm * (-sum(gS[i, j] * P[i, j] for i in range(T) for j in range(T)))
            if witness is None and sum(m) >= 1 and len(set(x)) > 1 and sum(m) < T:
                Gc = gS - sp.ones(T, 1) * sp.Matrix([[sum(gS[i, j] for i in range(T)) / T for j in range(T)]])
                witness = sum(v**2 for v in Gc).subs({C[a, b]: (1 if a == b else 0) for a in range(K) for b in range(K)})
    kap = (C.trace() - sum(C) / K) / K
    psi = q * (1 - q) / T**2 * sum(
        p ** abs(i - j) * (P[i, j] - sum(P[i, k] for k in range(T)) / T) for i in range(T) for j in range(T) if i != j
    )
    d = Derivation("T4", T)
    d.zero_residuals["E<D,P> - kappa(C) Psi(P)"] = _zero(sp.expand(total - kap * psi))
    d.nonzero_witnesses["||P_B(grad_S L)||^2, one sequence, copy path"] = sp.nsimplify(witness)
    d.nonzero_witnesses["Psi(band) at p = 1/2, q = 1/2"] = psi.subs({p: sp.Rational(1, 2), q: sp.Rational(1, 2)})
    return d


def derive_t5(T: int = 3) -> Derivation:
    """T5 exactly (scalar width): CLS pooling gives grad_S = e_0 v^T with v ⟂ 1 and blind fraction^2 =
    1 - 1/T; a residual Y = X + O W_O with a linear f keeps equal rows, with f = tanh rows differ; at
    S = eps S_1 (symbolic S_1) with an affine f and a generic L, the eps-derivative at 0 of the blind
    component of grad_S L equals the closed form of
    :func:`initlab.theory.attention.gradient.nonuniform_first_order` (including the eps-dependence of
    L'(p), which must drop out), and is non-zero at a rational point for T >= 3."""
    S = sp.Matrix(T, T, lambda i, j: sp.Symbol(f"s{i}{j}"))
    x = sp.Matrix(T, 1, lambda i, j: sp.Symbol(f"x{i}"))
    wv, wo, alpha, beta = sp.symbols("w_v w_o alpha beta")
    a = sp.symbols(f"a0:{T}")
    uniform = {S[i, j]: a[i] for i in range(T) for j in range(T)}
    O = _softmax_rows(S) * x * wv
    d = Derivation("T5", T)
    _t5_cls_pooling(d, T, S, O, uniform)
    _t5_residual(d, T, S, O, x, uniform, wv, wo, alpha, beta)
    _t5_nonuniform(d, T, S, O, x, wv, alpha, beta)
    return d


def _t5_cls_pooling(d: Derivation, T: int, S: sp.Matrix, O: sp.Matrix, uniform: dict) -> None:
    """T5, CLS pooling with generic f and L: only row 0 of grad_S is non-zero, it sums to 0, and
    ||P_B G||^2 = (1 - 1/T) ||G||^2."""
    f, L = sp.Function("f"), sp.Function("L")
    Lcls = L(f(O[0, 0]))
    G = sp.Matrix(T, T, lambda i, j: sp.diff(Lcls, S[i, j]).subs(uniform).doit())
    for i in range(1, T):
        for j in range(T):
            d.zero_residuals[f"CLS G[{i},{j}]"] = _zero(G[i, j])
    d.zero_residuals["CLS sum_j G[0,j]"] = _zero(sum(G[0, j] for j in range(T)))
    colmean = sp.Matrix([[sum(G[i, j] for i in range(T)) / T for j in range(T)]])
    GB = G - sp.ones(T, 1) * colmean
    nB, nG = sum(v**2 for v in GB), sum(v**2 for v in G)
    d.zero_residuals["CLS ||P_B G||^2 - (1 - 1/T) ||G||^2"] = _zero(nB - (1 - sp.Rational(1, T)) * nG)


def _t5_residual(d: Derivation, T: int, S: sp.Matrix, O: sp.Matrix, x: sp.Matrix, uniform: dict, wv, wo, alpha,
                 beta) -> None:
    """T5, a residual Y = X + O w_o before f: equal rows for a linear f, different rows for f = tanh (witness)."""
    L = sp.Function("L")

    def residual_rows(fun):
        Lres = L(sum(fun(x[i, 0] + wo * O[i, 0]) for i in range(T)) / T)
        return sp.Matrix(T, T, lambda i, j: sp.diff(Lres, S[i, j]).subs(uniform).doit())

    Glin = residual_rows(lambda y: alpha * y + beta)
    for j in range(T):
        d.zero_residuals[f"residual, linear f: G[1,{j}]-G[0,{j}]"] = _zero(Glin[1, j] - Glin[0, j])
    Gt = residual_rows(sp.tanh)
    point = {x[i, 0]: sp.Rational(i + 1, 2) for i in range(T)}
    point.update({wv: 1, wo: 1})
    diff01 = (Gt[1, 0] - Gt[0, 0]).subs(point)
    # replace the generic L' by 1 (any non-zero value scales the difference)
    diff01 = diff01.replace(lambda e: isinstance(e, (sp.Subs, sp.Derivative)), lambda e: sp.Integer(1))
    d.nonzero_witnesses["residual, tanh: G[1,0]-G[0,0] (L' = 1)"] = sp.nsimplify(sp.N(diff01, 30), rational=False)


def _t5_nonuniform(d: Derivation, T: int, S: sp.Matrix, O: sp.Matrix, x: sp.Matrix, wv, alpha, beta) -> None:
    """T5, non-uniform attention S = eps S_1 with an affine f and a generic L: the eps-derivative at 0 of the
    blind component equals :func:`initlab.theory.attention.gradient.nonuniform_first_order`'s closed form,
    and is non-zero at a rational point."""
    L = sp.Function("L")
    # non-uniform attention S = eps S1, affine f = alpha y + beta, mean pooling, generic L
    eps = sp.Symbol("eps")
    S1 = sp.Matrix(T, T, lambda i, j: sp.Symbol(f"t{i}{j}"))
    Lmean = L(sum(alpha * O[i, 0] + beta for i in range(T)) / T)
    along = {S[i, j]: eps * S1[i, j] for i in range(T) for j in range(T)}
    D = sp.Matrix(T, T, lambda i, j: sp.diff(sp.diff(Lmean, S[i, j]).subs(along), eps).subs(eps, 0).doit())

    def blind(Mx):
        return Mx - sp.ones(T, 1) * sp.Matrix([[sum(Mx[i, j] for i in range(T)) / T for j in range(T)]])

    y = sp.Symbol("y")
    r = (sp.diff(L(y), y).subs(y, sum(alpha * x[i, 0] * wv + beta for i in range(T)) / T) * alpha / T).doit()
    c = [x[j, 0] * wv * r for j in range(T)]
    cbar = sum(c) / T
    S1c = sp.Matrix(T, T, lambda i, j: S1[i, j] - sum(S1[i, k] for k in range(T)) / T)
    closed = sp.Matrix(T, T, lambda i, j: (S1c[i, j] * (c[j] - cbar) - sum(S1c[i, k] * c[k] for k in range(T)) / T) / T)
    DB, CB = blind(D), blind(closed)
    for i in range(T):
        for j in range(T):
            d.zero_residuals[f"non-uniform: d/deps P_B(G)[{i},{j}] - closed form"] = _zero(DB[i, j] - CB[i, j])
    point = {S1[i, j]: sp.Rational((i * T + j) % 5 + 1, 3) for i in range(T) for j in range(T)}
    point.update({x[i, 0]: sp.Rational(i * i + 1, 2) for i in range(T)})
    point.update({wv: 1, alpha: 1, beta: 0})
    wit = DB[0, 0].subs(point).replace(lambda e: isinstance(e, (sp.Subs, sp.Derivative)), lambda e: sp.Integer(1))
    d.nonzero_witnesses["non-uniform: d/deps P_B(G)[0,0] at a rational point (L' = 1)"] = sp.nsimplify(wit)


# ----------------------------------------------------------------------------------------------
# T1', T3', T6, T7: row-identical attention, Q/K biases, padding and dropout, depth
# ----------------------------------------------------------------------------------------------
def zero_exp(expr: sp.Expr) -> sp.Expr:
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
            d.zero_residuals[f"{tag}G[{i},{j}]-G[{r0},{j}]"] = zero_exp(G[i, j] - G[r0, j])


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
    d.zero_residuals["sum_j G[0,j]"] = zero_exp(sum(G[0, j] for j in range(T)))
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
        d.zero_residuals[f"G[0,{j}]-g[{j}]"] = zero_exp(G[0, j] - w[j] * (c[j] - wc))
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
        d.zero_residuals[f"grad W_Q[{i}] - T xbar u"] = zero_exp(gWQ[i] - T * xbar[i] * u)
        d.zero_residuals[f"grad W_K[{i}] - T (C_a W_V r) b_Q"] = zero_exp(gWK[i] - T * Xg[i, 0] * bQ)
    d.zero_residuals["grad b_Q - T u"] = zero_exp(gbQ - T * u)
    d.zero_residuals["grad b_K"] = zero_exp(gbK)
    # centred tokens (xbar = 0): grad W_Q = 0 but grad W_K != 0 at a rational point with L' = 1
    pt = {X[j, c]: sp.Integer([1, -1, 0, 2, -2][(j + c) % T] if T <= 5 else 0) for j in range(T) for c in range(dim)}
    if all(sum(X[j, c].subs(pt) for j in range(T)) == 0 for c in range(dim)) and T <= 5:  # centred tokens
        pt.update({WK[c, 0]: sp.Rational(c + 1, 2) for c in range(dim)})
        pt.update({Wv[c, 0]: c + 1 for c in range(dim)})
        pt.update({bQ: 1, bK: 0})
        d.zero_residuals["centred tokens: grad W_Q[0]"] = zero_exp(gWQ[0].subs(pt))
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
                d.zero_residuals[f"padding: G[{i},{j}]"] = zero_exp(G[i, j])
    _rows_equal(d, G, list(range(valid)), range(valid), "padding: ")
    ybar = sum(x[j, 0] for j in range(valid)) / valid
    yv = sp.Symbol("y")
    r = (sp.diff(L(f(yv)), yv) / valid).subs(yv, ybar).doit()
    for j in range(valid):
        d.zero_residuals[f"padding: G[0,{j}] - (1/L)(v_j - vbar) r"] = zero_exp(G[0, j] - (x[j, 0] - ybar) * r / valid)
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
        d.zero_residuals[f"dropout: E G[1,{j}] - E G[0,{j}]"] = zero_exp(EG[1, j] - EG[0, j])
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


#: statement id -> derivation (T1-T5 first, then T1', T3', T6, T7: the order the runner runs them in)
DERIVATIONS = {"T1": derive_t1, "T2": derive_t2, "T3": derive_t3, "T4": derive_t4, "T5": derive_t5,
               "T1'": derive_t1p, "T3'": derive_t3p, "T6": derive_t6, "T7": derive_t7}
