"""Exact sympy derivations of T1-T5 for small concrete T (every entry a symbol, every map generic).

Each ``derive_tN`` builds the item-4 layer with symbolic entries, differentiates with sympy (no
numerics), and returns a :class:`Derivation` listing the residuals of the claimed identities after
``sympy.simplify`` (each must be exactly 0) and, where the claim is that something is *not* zero,
the value of that expression at a fixed rational point (must be non-zero).

Generic maps are ``sympy.Function`` objects (f : R^e -> R^2 component-wise generic, L : R^2 -> R
generic), so the identities hold for every differentiable f and loss, not for a chosen one. An output
projection W_O is absorbed into f (f o W_O is again a position-wise map). Source of the statements:
see :mod:`initlab.theory.attention_gradient` and :mod:`initlab.theory.attention_masked`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import sympy as sp

__all__ = ["Derivation", "derive_t1", "derive_t2", "derive_t3", "derive_t4", "derive_t5", "DERIVATIONS"]


@dataclass
class Derivation:
    """Result of one symbolic derivation.

    Attributes:
        statement: "T1".."T5"; T: the concrete length used.
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
    :func:`initlab.theory.attention_gradient.nonuniform_first_order` (including the eps-dependence of
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
    blind component equals :func:`initlab.theory.attention_gradient.nonuniform_first_order`'s closed form,
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


DERIVATIONS = {"T1": derive_t1, "T2": derive_t2, "T3": derive_t3, "T4": derive_t4, "T5": derive_t5}
