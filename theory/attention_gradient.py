"""Attention-score gradients at uniform attention: theorems T1, T2, T3 and T5 (T4 is in
:mod:`initlab.theory.attention_masked`).

Setting. One attention layer on one sequence of length T:

    X : (T, d)            token representations (embeddings + positions)
    S : (H, T, T)         attention scores per head h (rows i = queries, columns j = keys)
    A = row-softmax(S)    (H, T, T)
    V_h = X W_V[h]        (T, e)   with W_V : (H, d, e)
    O = concat_h A_h V_h  (T, H e)
    Y = O W_O             (T, m)   with W_O : (H e, m), or Y = O when there is no output projection
    Z = f(Y)              (T, n)   f position-wise (the same map on every row), no residual
    p = (1/T) 1^T Z       (n,)     mean pooling
    L = loss(p)           scalar, any differentiable loss

Notation: 1 is the all-ones vector of length T, J = 1 1^T, Pi = I - J/T (centering),
R = dL/dO : (T, H e) with per-head slices R_h : (T, e).

General identity (any loss, uniform attention A_h = J/T; from the softmax Jacobian
d A_ij / d S_ik = A_ij (delta_jk - A_ik)):

    grad_{S_h} L = (1/T) R_h V_h^T Pi                                                    (G)

T1 (query blindness). With mean pooling, R_h = 1 r_h^T (every position receives the same output
gradient, because Y_i = ybar is the same for every i, so J_f(Y_i) is too), hence

    grad_{S_h} L = 1 g_h^T,   g_h = (1/T) Pi V_h r_h,   g_h^T 1 = 0,
    r_h = (1/T) [W_O J_f(ybar)^T grad_p L]_h   (the h-th block of length e).

T2 (blind subspace). For any P : (T, T), <1 g^T, P> = sum_j g_j s_j with s = P^T 1 (column sums),
which is 0 whenever s is constant: identity, permutations, circulant (periodic) bands. For the
ordinary band P^(w)_ij = [|i-j| <= w] the column-sum deficit d_j = (2w+1) - s_j lives on the 2w edge
columns E, so

    <grad_S L, P^(w)> = - sum_{j in E} g_j d_j,
    |<grad_S L, P^(w)>| <= ||g_E||_2 ||d||_2 <= ||grad_S L||_F ||d||_2 / sqrt(T),
    ||d||_2^2 = 2 sum_{k=1}^{w} k^2 = w (w+1) (2w+1) / 3       (T >= 2w),

so relative to the gradient norm the band derivative is at most sqrt(w(w+1)(2w+1)/(3T)) -> 0 as T
grows. The first inequality is attained (g_E proportional to d_E, the other entries equal, T > 2w).
Over all g ⟂ 1 (each is the g of some layer, e.g. width 1 with values V = d) the exact supremum of
the ratio is ||Pi d||_2 / sqrt(T), ||Pi d||^2 = ||d||^2 - w^2 (w+1)^2 / T (T >= 2w), so the T^{-1/2}
rate is sharp. This worst case is far from typical: for generic data the entries g_j are of size
||g||/sqrt(T) with no alignment to d, so the sum is typically ~ ||d|| ||g|| / sqrt(T), a relative size
~ ||d||/T = O(w^{3/2}/T) (a heuristic, not a bound; measured by the reproduce stage's T2 curve).

T3 (parameter space). With S_h = X M_h X^T, M_h = W_Q[h] W_K[h]^T / sqrt(d_k), at uniform attention

    grad_{M_h} L = X^T (1 g_h^T) X = T xbar (C W_V[h] r_h)^T,   xbar = X^T 1 / T,
    C = (1/T) X^T Pi X  (the empirical covariance of the tokens),

a rank-one (d, d) matrix; hence grad_{W_Q} = grad_M W_K / sqrt(d_k) = (T/sqrt(d_k)) xbar (W_K^T C W_V r)^T
(every column along xbar) and grad_{W_K} = grad_M^T W_Q / sqrt(d_k) = (T/sqrt(d_k)) (C W_V r)(W_Q^T xbar)^T,
both rank <= 1. The first-order change of the scores from one gradient step is low-rank: a step in M
gives dS_h = -eta X grad_{M_h} X^T = -eta T (X xbar)(X C W_V[h] r_h)^T (rank one); a step in (W_Q, W_K)
gives dM = -(eta/d_k)(grad_M W_K W_K^T + W_Q W_Q^T grad_M), so dS has rank <= 2. A first-order step
therefore cannot create a band-*shaped* (high-rank) score matrix; it can still concentrate attention near
the diagonal, since a rank-2 S can: S_ij = beta (2ij - j^2) = beta i^2 - beta (i - j)^2 puts 0.99 of the
attention on |i - j| <= 2 at T = 30, beta = 0.5. (dS itself is not query-independent: its rows are
scaled by x_i . xbar, so it generically has a component on the blind subspace.) Without Q/K biases and
with centred tokens (xbar = 0) all three gradients vanish; with nn.Linear biases grad W_K and grad b_Q
do not (T3', :mod:`initlab.theory.attention_rowidentical`).

T5 (boundaries). The identity (G) still gives the blind component exactly,

    P_B(grad_{S_h} L) = (1/T) (R_h - 1 rbar_h^T) V_h^T Pi,   rbar_h = R_h^T 1 / T,

which is zero iff every centred output-gradient row is orthogonal to every centred value row (so
it needs rows of R_h that differ, and is then non-zero for generic data): a residual Y = X + O W_O before a non-linear f
(J_f(x_i + obar) varies with i; with a linear f, T1 still holds), CLS pooling (R = e_0 r^T, blind
fraction exactly sqrt(1 - 1/T)); and at non-uniform attention S = eps S_1 even a linear f gives a
blind component of first order in eps (see :func:`nonuniform_first_order`).

Statement texts (one registry for docstrings, ``verify`` and docs/theory.md): :mod:`initlab.theory.statements`.
Extensions: row-identical attention and Q/K biases (T1', T3') in :mod:`initlab.theory.attention_rowidentical`,
padding and dropout (T6) in :mod:`initlab.theory.attention_masks`, depth and residuals (T7) in
:mod:`initlab.theory.attention_depth`.

Sources: the phenomenon, Amos et al., "Never Train from Scratch", ICLR 2024, arXiv:2310.02980; the
theorem, the self-pretraining analysis (gradient of a mean-pooled supervised loss vs masked
reconstruction at uniform initialisation). The formulas above are derived here and
checked in :mod:`initlab.theory.attention_symbolic` (sympy) and :mod:`initlab.theory.verify`.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Callable, Literal

import torch

from initlab.theory.subspace import blind_component

__all__ = [
    "POSITIONWISE_MAPS",
    "LOSSES",
    "AttentionCase",
    "check_scores",
    "check_matrix",
    "make_positionwise_map",
    "make_loss",
    "random_case",
    "layer_forward",
    "case_loss",
    "score_gradient",
    "score_gradient_central_difference",
    "directional_central_difference",
    "uniform_score_gradient_from_R",
    "output_gradient",
    "mean_pool_row_gradient",
    "t1_closed_form",
    "band_pattern",
    "circulant_band_pattern",
    "permutation_pattern",
    "band_edge_deficit",
    "band_edge_bound",
    "band_relative_bound",
    "band_sharp_relative_bound",
    "bilinear_score_gradient",
    "t3_closed_form",
    "qk_closed_form",
    "blind_component_closed_form",
    "cls_blind_fraction",
    "nonuniform_first_order",
]

Tensor = torch.Tensor


# ----------------------------------------------------------------------------------------------
# input checks
# ----------------------------------------------------------------------------------------------
def check_matrix(x: Tensor, name: str, shape: tuple, expected: str) -> Tensor:
    """Check that ``x`` is a finite tensor of ``shape`` (``None`` = any size) and return it.

    Raises:
        TypeError: ``x`` is not a tensor.
        ValueError: wrong number of dimensions, wrong sizes, or NaN/inf entries; the message names
            ``name`` and the ``expected`` shape.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor of shape {expected}, got {type(x).__name__}")
    if x.dim() != len(shape) or any(s is not None and s != n for s, n in zip(shape, x.shape)):
        raise ValueError(f"{name}: expected shape {expected}, got {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name}: expected finite entries (shape {expected}), found NaN or inf")
    return x


def check_scores(S: Tensor, name: str = "S") -> Tensor:
    """Check attention scores ``S`` of shape ``(H, T, T)`` or ``(T, T)`` and return ``(H, T, T)``.

    Raises:
        TypeError: not a tensor.
        ValueError: not 2-D/3-D, non-square, T < 2, or NaN/inf entries (naming ``name``).
    """
    expected = "(H, T, T) or (T, T) with T >= 2"
    if not isinstance(S, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor of shape {expected}, got {type(S).__name__}")
    if S.dim() not in (2, 3) or S.shape[-1] != S.shape[-2]:
        raise ValueError(f"{name}: expected a square score matrix of shape {expected}, got {tuple(S.shape)}")
    if S.shape[-1] < 2:
        raise ValueError(f"{name}: expected T >= 2 (shape {expected}), got T = {S.shape[-1]}")
    if not torch.isfinite(S).all():
        raise ValueError(f"{name}: expected finite entries (shape {expected}), found NaN or inf")
    return S if S.dim() == 3 else S.unsqueeze(0)


def _check_band_args(T: int, w: int) -> None:
    try:
        ok = operator.index(T) >= 2 and operator.index(w) >= 0
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"T, w: expected integers T >= 2 and w >= 0, got T = {T!r}, w = {w!r}")


def _check_R_V(R: Tensor, V: Tensor) -> None:
    """``R`` and ``V`` must be finite ``(H, T, e)`` tensors of the same shape with T >= 2."""
    check_matrix(R, "R", (None, None, None), "(H, T, e)")
    check_matrix(V, "V", tuple(R.shape), f"(H, T, e) = {tuple(R.shape)} (the shape of R)")
    if R.shape[1] < 2:
        raise ValueError(f"R: expected shape (H, T, e) with T >= 2, got {tuple(R.shape)}")


def _require_mean_pooling(case: "AttentionCase", what: str) -> None:
    if case.pooling != "mean" or case.residual:
        raise ValueError(f"case: {what} needs mean pooling and no residual connection "
                         f"(got pooling = {case.pooling!r}, residual = {case.residual}); see T5")


# ----------------------------------------------------------------------------------------------
# position-wise maps f and losses (registries used by tests and `initlab theory verify`)
# ----------------------------------------------------------------------------------------------
POSITIONWISE_MAPS = ("identity", "linear", "tanh", "gelu", "softplus", "mlp")
LOSSES = ("mse", "cross_entropy", "logistic", "log_cosh")


def make_positionwise_map(name: str, d_in: int, gen: torch.Generator) -> tuple[Callable[[Tensor], Tensor], int]:
    """A position-wise map ``f : (..., T, d_in) -> (..., T, n)`` acting on each row alike.

    Returns ``(f, n)``. ``linear`` and ``mlp`` draw their weights from ``gen`` (float64).

    Raises:
        ValueError: unknown ``name``.
    """
    if name == "identity":
        return (lambda y: y), d_in
    if name == "linear":
        W = torch.randn(d_in, 3, generator=gen, dtype=torch.float64) / math.sqrt(d_in)
        return (lambda y: y @ W), 3
    if name == "tanh":
        return torch.tanh, d_in
    if name == "gelu":
        return torch.nn.functional.gelu, d_in
    if name == "softplus":
        return torch.nn.functional.softplus, d_in
    if name == "mlp":
        W1 = torch.randn(d_in, 5, generator=gen, dtype=torch.float64) / math.sqrt(d_in)
        W2 = torch.randn(5, 3, generator=gen, dtype=torch.float64) / math.sqrt(5)
        return (lambda y: torch.tanh(y @ W1) @ W2), 3
    raise ValueError(f"f: expected one of {POSITIONWISE_MAPS}, got {name!r}")


def make_loss(name: str, n: int, gen: torch.Generator) -> Callable[[Tensor], Tensor]:
    """A differentiable loss of the pooled vector ``p : (n,)`` -> scalar (targets drawn from ``gen``).

    Raises:
        ValueError: unknown ``name``.
    """
    if name == "mse":
        t = torch.randn(n, generator=gen, dtype=torch.float64)
        return lambda p: 0.5 * ((p - t) ** 2).sum()
    if name == "cross_entropy":
        # logits (p, 0): n + 1 classes, so the loss is not constant when n = 1
        c = int(torch.randint(n + 1, (1,), generator=gen))

        def ce(p: Tensor) -> Tensor:
            z = torch.cat([p, torch.zeros_like(p[..., :1])], -1)
            return torch.logsumexp(z, -1) - z[..., c]

        return ce
    if name == "logistic":
        w = torch.randn(n, generator=gen, dtype=torch.float64)
        y = 1.0 if float(torch.rand(1, generator=gen)) < 0.5 else -1.0
        return lambda p: torch.nn.functional.softplus(-y * (p @ w))
    if name == "log_cosh":
        t = torch.randn(n, generator=gen, dtype=torch.float64)
        return lambda p: torch.log(torch.cosh(p - t)).sum()
    raise ValueError(f"loss: expected one of {LOSSES}, got {name!r}")


@dataclass
class AttentionCase:
    """One random instance of the item-4 setting (all tensors float64).

    Attributes:
        X: ``(T, d)``; S: ``(H, T, T)``; W_V: ``(H, d, e)``; W_O: ``(H e, m)`` or None;
        f: position-wise map ``(T, m) -> (T, n)``; loss: ``(n,) -> scalar``;
        pooling: ``"mean"`` or ``"cls"`` (position 0); residual: ``Y = X + O W_O`` (needs m = d).
    """

    X: Tensor
    S: Tensor
    W_V: Tensor
    W_O: Tensor | None
    f: Callable[[Tensor], Tensor]
    loss: Callable[[Tensor], Tensor]
    pooling: Literal["mean", "cls"] = "mean"
    residual: bool = False
    f_name: str = ""
    loss_name: str = ""

    @property
    def T(self) -> int:
        return self.X.shape[0]

    @property
    def H(self) -> int:
        return self.W_V.shape[0]


def random_case(
    gen: torch.Generator,
    T: int,
    d: int = 4,
    heads: int = 2,
    e: int = 3,
    use_W_O: bool = True,
    f: str = "tanh",
    loss: str = "mse",
    pooling: Literal["mean", "cls"] = "mean",
    residual: bool = False,
    score_scale: float = 0.0,
    row_shift: bool = True,
) -> AttentionCase:
    """Draw an :class:`AttentionCase` from ``gen``.

    ``score_scale = 0`` gives uniform attention: every row of S is a constant (a random constant per
    row when ``row_shift``, which softmax ignores). ``score_scale > 0`` adds ``score_scale * N(0, 1)``
    entries (non-uniform attention). With ``residual`` the output projection maps back to width d.

    Raises:
        ValueError: T < 2, non-positive sizes, unknown f/loss/pooling.
    """
    if T < 2:
        raise ValueError(f"T: expected T >= 2, got {T}")
    if min(d, heads, e) < 1:
        raise ValueError(f"d, heads, e: expected positive sizes, got {(d, heads, e)}")
    if pooling not in ("mean", "cls"):
        raise ValueError(f"pooling: expected 'mean' or 'cls', got {pooling!r}")
    dt = torch.float64
    X = torch.randn(T, d, generator=gen, dtype=dt)
    W_V = torch.randn(heads, d, e, generator=gen, dtype=dt) / math.sqrt(d)
    m = d if residual else 5
    W_O = torch.randn(heads * e, m, generator=gen, dtype=dt) / math.sqrt(heads * e) if (use_W_O or residual) else None
    width = m if W_O is not None else heads * e
    fmap, n = make_positionwise_map(f, width, gen)
    lossf = make_loss(loss, n, gen)
    S = torch.zeros(heads, T, T, dtype=dt)
    if row_shift:
        S = S + torch.randn(heads, T, 1, generator=gen, dtype=dt)
    if score_scale:
        S = S + score_scale * torch.randn(heads, T, T, generator=gen, dtype=dt)
    return AttentionCase(X, S, W_V, W_O, fmap, lossf, pooling, residual, f, loss)


# ----------------------------------------------------------------------------------------------
# the layer and its gradients
# ----------------------------------------------------------------------------------------------
def layer_forward(S: Tensor, X: Tensor, W_V: Tensor, W_O: Tensor | None, residual: bool = False) -> Tensor:
    """``Y = concat_h softmax(S_h) X W_V[h]`` (times ``W_O``, plus ``X`` with ``residual``).

    Shapes: S ``(H, T, T)`` or ``(T, T)``; X ``(T, d)``; W_V ``(H, d, e)``; W_O ``(H e, m)`` or None.
    Returns Y ``(T, m)`` (or ``(T, H e)`` without W_O).

    Raises:
        ValueError: shape mismatches, T < 2, non-finite entries (naming the argument).
    """
    S = check_scores(S)
    H, T, _ = S.shape
    check_matrix(X, "X", (T, None), f"(T, d) with T = {T} from S")
    d = X.shape[1]
    check_matrix(W_V, "W_V", (H, d, None), f"(H, d, e) with H = {H}, d = {d}")
    e = W_V.shape[2]
    if W_O is not None:
        check_matrix(W_O, "W_O", (H * e, None), f"(H e, m) with H e = {H * e}")
    if residual and (W_O is None or W_O.shape[1] != d):
        raise ValueError(f"W_O: a residual connection needs W_O of shape (H e, d) = ({H * e}, {d})")
    A = torch.softmax(S, dim=-1)
    V = torch.einsum("td,hde->hte", X, W_V)
    O = torch.einsum("hij,hje->ihe", A, V).reshape(T, H * e)
    Y = O if W_O is None else O @ W_O
    return X + Y if residual else Y


def case_loss(case: AttentionCase, S: Tensor | None = None) -> Tensor:
    """The scalar loss ``L(S)`` of ``case`` (at ``case.S`` unless ``S`` is given; S ``(H, T, T)``).

    Raises:
        ValueError: S or the case's tensors of the wrong shape or non-finite (see :func:`layer_forward`).
    """
    S = case.S if S is None else S
    Z = case.f(layer_forward(S, case.X, case.W_V, case.W_O, case.residual))
    p = Z.mean(0) if case.pooling == "mean" else Z[0]
    return case.loss(p)


def score_gradient(case: AttentionCase, S: Tensor | None = None) -> Tensor:
    """``grad_S L`` by autograd (float64), shape ``(H, T, T)``, at ``case.S`` unless ``S`` is given.

    Raises:
        ValueError: as :func:`layer_forward`.
    """
    S0 = (case.S if S is None else S).detach().clone().requires_grad_(True)
    (G,) = torch.autograd.grad(case_loss(case, S0), S0)
    return G


def score_gradient_central_difference(case: AttentionCase, h: float = 1e-5) -> Tensor:
    """Slow obvious reference: ``(L(S + h E_hij) - L(S - h E_hij)) / 2h`` for every entry, ``(H, T, T)``.

    Costs ``2 H T^2`` forward passes; use :func:`directional_central_difference` for large T.
    Truncation error O(h^2), round-off about 1e-16 |L| / h.

    Raises:
        ValueError: as :func:`layer_forward`.
    """
    S = case.S.detach()
    out = torch.zeros_like(S)
    with torch.no_grad():
        for idx in torch.cartesian_prod(*(torch.arange(n) for n in S.shape)).tolist():
            E = torch.zeros_like(S)
            E[tuple(idx)] = h
            out[tuple(idx)] = (case_loss(case, S + E) - case_loss(case, S - E)) / (2 * h)
    return out


def directional_central_difference(case: AttentionCase, E: Tensor, h: float = 1e-5) -> float:
    """``(L(S + h E) - L(S - h E)) / 2h``, the derivative of L along the direction ``E : (H, T, T)``.

    Raises:
        ValueError: E not a finite tensor of the shape of ``case.S``.
    """
    check_matrix(E, "E", tuple(case.S.shape), f"{tuple(case.S.shape)} (the shape of case.S)")
    S = case.S.detach()
    with torch.no_grad():
        return float((case_loss(case, S + h * E) - case_loss(case, S - h * E)) / (2 * h))


def output_gradient(case: AttentionCase) -> tuple[Tensor, Tensor]:
    """``R = dL/dO`` as ``(H, T, e)`` (autograd through f, pooling and loss only, O as a leaf) and
    ``V = X W_V`` as ``(H, T, e)``, both at ``case.S``.

    Raises:
        ValueError: ``case.S`` not a finite ``(H, T, T)`` score tensor.
    """
    S = check_scores(case.S)
    H, T, _ = S.shape
    A = torch.softmax(S, -1)
    V = torch.einsum("td,hde->hte", case.X, case.W_V)
    O = torch.einsum("hij,hje->hie", A, V).detach().requires_grad_(True)
    Ocat = O.permute(1, 0, 2).reshape(T, -1)
    Y = Ocat if case.W_O is None else Ocat @ case.W_O
    if case.residual:
        Y = case.X + Y
    Z = case.f(Y)
    p = Z.mean(0) if case.pooling == "mean" else Z[0]
    (R,) = torch.autograd.grad(case.loss(p), O)
    return R, V


def uniform_score_gradient_from_R(R: Tensor, V: Tensor) -> Tensor:
    """Identity (G): at uniform attention ``grad_{S_h} L = (1/T) R_h V_h^T Pi``, ``Pi = I - 1 1^T / T``.

    Args:
        R: ``(H, T, e)`` = dL/dO per head; V: ``(H, T, e)`` values. Returns ``(H, T, T)``.
    Source: the softmax Jacobian ``dA_ij/dS_ik = A_ij (delta_jk - A_ik)`` at ``A = J/T``.
    Raises:
        ValueError: R, V not finite ``(H, T, e)`` tensors of equal shape with T >= 2 (naming the argument).
    """
    _check_R_V(R, V)
    T = R.shape[-2]
    C = R @ V.transpose(-1, -2)  # (H, T, T), C_ij = r_i . v_j = dL/dA_ij
    return (C - C.mean(-1, keepdim=True)) / T


def mean_pool_row_gradient(case: AttentionCase) -> Tensor:
    """T1's ``r_h = (1/T) [W_O J_f(ybar)^T grad_p L]_h``, shape ``(H, e)``, at uniform attention.

    Uses autograd only for the vector-Jacobian product of ``f`` at the single point ``ybar`` and for
    ``grad_p L`` (not through the attention), so it is an independent route to the gradient.
    ``case.S`` is not read (the formula is the uniform-attention one).

    Raises:
        ValueError: the case uses CLS pooling or a residual connection (T1 does not apply).
    """
    _require_mean_pooling(case, "r_h (T1)")
    H, T = case.H, case.T
    V = torch.einsum("td,hde->hte", case.X, case.W_V)
    obar = V.mean(1).reshape(1, -1)  # (1, H e): every row of O equals the mean value at A = J/T
    ybar = obar if case.W_O is None else obar @ case.W_O
    ybar = ybar.detach().requires_grad_(True)
    z = case.f(ybar)[0]  # (n,)
    pz = z.detach().requires_grad_(True)
    (gp,) = torch.autograd.grad(case.loss(pz), pz)  # grad_p L at p = f(ybar)
    (u,) = torch.autograd.grad(z, ybar, grad_outputs=gp)  # J_f(ybar)^T grad_p L, (1, m)
    r = u if case.W_O is None else u @ case.W_O.T  # (1, H e)
    return (r / T).reshape(H, -1)


def t1_closed_form(case: AttentionCase) -> Tensor:
    """T1: ``g_h = (1/T) Pi V_h r_h`` with ``g_h^T 1 = 0``; returns ``g : (H, T)``.

    ``grad_{S_h} L = 1 g_h^T`` for mean pooling, no residual, uniform attention, any f and loss,
    every T >= 2 (with or without W_O, per head). Source: see the module docstring.

    Raises:
        ValueError: the case's attention is not uniform (some row of S is not constant), or it uses
            CLS pooling or a residual connection (T1 does not apply; see T5).
    """
    S = check_scores(case.S)
    if (S - S[..., :1]).abs().max() > 0:
        raise ValueError("S: T1 needs uniform attention (every row of S constant)")
    _require_mean_pooling(case, "T1")
    r = mean_pool_row_gradient(case)  # (H, e)
    V = torch.einsum("td,hde->hte", case.X, case.W_V)
    c = torch.einsum("hte,he->ht", V, r)
    return (c - c.mean(-1, keepdim=True)) / case.T


# ----------------------------------------------------------------------------------------------
# T2: patterns and the band bound
# ----------------------------------------------------------------------------------------------
def band_pattern(T: int, w: int, diagonal: bool = True, dtype=torch.float64) -> Tensor:
    """``P_ij = [|i - j| <= w]`` (``[1 <= |i - j| <= w]`` without the diagonal), ``(T, T)``.

    Raises:
        ValueError: T < 2 or w < 0.
    """
    _check_band_args(T, w)
    i = torch.arange(T)
    dist = (i[:, None] - i[None, :]).abs()
    P = (dist <= w) & ((dist >= 1) | diagonal)
    return P.to(dtype)


def circulant_band_pattern(T: int, w: int, dtype=torch.float64) -> Tensor:
    """Periodic band ``P_ij = [min(|i-j|, T-|i-j|) <= w]``, ``(T, T)``: constant column sums (in B).

    Raises:
        ValueError: T < 2 or w < 0.
    """
    _check_band_args(T, w)
    i = torch.arange(T)
    dist = (i[:, None] - i[None, :]).abs()
    return (torch.minimum(dist, T - dist) <= w).to(dtype)


def permutation_pattern(perm: Tensor, dtype=torch.float64) -> Tensor:
    """``P_{i, perm[i]} = 1``, ``(T, T)``: a permutation matrix (constant column sums 1).

    Raises:
        TypeError: ``perm`` is not a tensor.
        ValueError: ``perm`` is not a ``(T,)`` integer permutation of 0..T-1 with T >= 2.
    """
    if not isinstance(perm, torch.Tensor):
        raise TypeError(f"perm: expected a torch.Tensor of shape (T,), got {type(perm).__name__}")
    T = perm.numel()
    if perm.dim() != 1 or T < 2 or perm.is_floating_point() or perm.is_complex() or not torch.equal(
        torch.sort(perm.long()).values, torch.arange(T)
    ):
        raise ValueError(f"perm: expected a (T,) integer permutation of 0..T-1 with T >= 2, got {perm.tolist()}")
    P = torch.zeros(T, T, dtype=dtype)
    P[torch.arange(T), perm] = 1
    return P


def band_edge_deficit(T: int, w: int) -> Tensor:
    """Column-sum deficit ``d_j = (2w + 1) - s_j`` of the band ``|i - j| <= w``, shape ``(T,)`` (float64).

    ``d_j = max(0, w - j) + max(0, w - (T - 1 - j))``: non-zero only on the 2w edge columns.

    Raises:
        ValueError: T < 2 or w < 0.
    """
    _check_band_args(T, w)
    j = torch.arange(T, dtype=torch.float64)
    return (w - j).clamp_min(0) + (w - (T - 1 - j)).clamp_min(0)


def band_edge_bound(g: Tensor, w: int) -> float:
    """T2's bound ``|<1 g^T, P^(w)>| <= ||g_E||_2 ||d||_2`` for ``g : (T,)``, E = edge columns.

    Raises:
        ValueError: g not a finite ``(T,)`` vector with T >= 2, or w < 0.
    """
    check_matrix(g, "g", (None,), "(T,)")
    if g.numel() < 2:
        raise ValueError(f"g: expected shape (T,) with T >= 2, got {tuple(g.shape)}")
    _check_band_args(g.numel(), w)
    d = band_edge_deficit(g.numel(), w).to(g.dtype)
    return float((g * (d > 0)).norm() * d.norm())


def band_relative_bound(T: int, w: int) -> float:
    """Data-free bound on ``|<grad_S L, P^(w)>| / ||grad_S L||_F``: ``||d||_2 / sqrt(T)``.

    Equals ``sqrt(w (w+1) (2w+1) / (3 T))`` for T >= 2w; tends to 0 like T^{-1/2}.

    Raises:
        ValueError: T < 2 or w < 0.
    """
    return float(band_edge_deficit(T, w).norm() / math.sqrt(T))


def band_sharp_relative_bound(T: int, w: int) -> float:
    """Exact supremum of ``|<1 g^T, P^(w)>| / ||1 g^T||_F`` over all ``g ⟂ 1``: ``||Pi d||_2 / sqrt(T)``.

    Attained at ``g = Pi d`` (d = :func:`band_edge_deficit`); never above :func:`band_relative_bound`.
    For T >= 2w, ``||Pi d||^2 = w (w+1) (2w+1) / 3 - w^2 (w+1)^2 / T``. Zero when the band covers every
    column equally (T <= w + 1).

    Raises:
        ValueError: T < 2 or w < 0.
    """
    d = band_edge_deficit(T, w)
    return float((d - d.mean()).norm() / math.sqrt(T))


# ----------------------------------------------------------------------------------------------
# T3: bilinear form M = W_Q W_K^T / sqrt(d_k)
# ----------------------------------------------------------------------------------------------
def bilinear_score_gradient(case: AttentionCase, W_Q: Tensor, W_K: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Autograd ``(grad_M, grad_{W_Q}, grad_{W_K})`` for ``S_h = X W_Q[h] W_K[h]^T X^T / sqrt(d_k)``.

    Shapes: W_Q, W_K ``(H, d, d_k)``; returns ``(H, d, d)``, ``(H, d, d_k)``, ``(H, d, d_k)``.
    ``case.S`` is ignored (the scores come from W_Q, W_K).
    """
    H, d = case.H, case.X.shape[1]
    check_matrix(W_Q, "W_Q", (H, d, None), f"(H, d, d_k) with H = {H}, d = {d}")
    check_matrix(W_K, "W_K", (H, d, W_Q.shape[2]), f"(H, d, d_k) = {tuple(W_Q.shape)}")
    dk = W_Q.shape[2]
    WQ = W_Q.detach().clone().requires_grad_(True)
    WK = W_K.detach().clone().requires_grad_(True)
    M = (WQ @ WK.transpose(-1, -2) / math.sqrt(dk)).detach().requires_grad_(True)
    S = torch.einsum("id,hde,je->hij", case.X, M, case.X)
    (gM,) = torch.autograd.grad(case_loss(case, S), M)
    S2 = torch.einsum("id,hde,je->hij", case.X, WQ @ WK.transpose(-1, -2) / math.sqrt(dk), case.X)
    gQ, gK = torch.autograd.grad(case_loss(case, S2), (WQ, WK))
    return gM, gQ, gK


def t3_closed_form(case: AttentionCase) -> tuple[Tensor, Tensor, Tensor]:
    """T3: ``grad_{M_h} L = T xbar (C W_V[h] r_h)^T`` at uniform attention (rank one), ``(H, d, d)``.

    Returns ``(grad_M, xbar : (d,), b : (H, d))`` with ``b_h = C W_V[h] r_h`` and
    ``C = X^T Pi X / T``; r_h is T1's (:func:`mean_pool_row_gradient`). ``case.S`` is not read.

    Raises:
        ValueError: CLS pooling or a residual connection (the closed form needs T1's setting).
    """
    _require_mean_pooling(case, "T3")
    X = case.X
    T = X.shape[0]
    xbar = X.mean(0)
    Xc = X - xbar
    C = Xc.T @ Xc / T
    r = mean_pool_row_gradient(case)
    b = torch.einsum("de,hef,hf->hd", C, case.W_V, r)
    return T * xbar[None, :, None] * b[:, None, :], xbar, b


def qk_closed_form(case: AttentionCase, W_Q: Tensor, W_K: Tensor) -> tuple[Tensor, Tensor]:
    """T3 consequences: ``grad_{W_Q} = grad_M W_K / sqrt(d_k)``, ``grad_{W_K} = grad_M^T W_Q / sqrt(d_k)``.

    Valid when ``W_Q[h] W_K[h]^T = 0`` (uniform attention). Returns ``(H, d, d_k)`` twice.

    Raises:
        ValueError: W_Q, W_K not finite ``(H, d, d_k)`` matching the case, ``W_Q W_K^T != 0``, or the
            case is not in T1's setting.
    """
    H, d = case.H, case.X.shape[1]
    check_matrix(W_Q, "W_Q", (H, d, None), f"(H, d, d_k) with H = {H}, d = {d}")
    check_matrix(W_K, "W_K", (H, d, W_Q.shape[2]), f"(H, d, d_k) = {tuple(W_Q.shape)}")
    prod = W_Q @ W_K.transpose(-1, -2)
    if float(prod.abs().max()) > 1e-12 * (1.0 + float(W_Q.abs().max()) * float(W_K.abs().max())):
        raise ValueError("W_Q, W_K: the closed form holds at uniform attention, expected W_Q[h] W_K[h]^T = 0")
    gM, _, _ = t3_closed_form(case)
    dk = W_Q.shape[2]
    return gM @ W_K / math.sqrt(dk), gM.transpose(-1, -2) @ W_Q / math.sqrt(dk)


# ----------------------------------------------------------------------------------------------
# T5: where T1 stops holding
# ----------------------------------------------------------------------------------------------
def blind_component_closed_form(R: Tensor, V: Tensor) -> Tensor:
    """T5: ``P_B(grad_{S_h} L) = (1/T) (R_h - 1 rbar_h^T) V_h^T Pi`` at uniform attention, ``(H, T, T)``.

    Zero iff the query-centred output gradients ``R_h - 1 rbar_h^T`` are orthogonal to the centred
    values; it is what a residual before a non-linear f, or CLS pooling, switch on.

    Raises:
        ValueError: R, V not finite ``(H, T, e)`` tensors of equal shape with T >= 2.
    """
    _check_R_V(R, V)
    return uniform_score_gradient_from_R(R - R.mean(-2, keepdim=True), V)


def cls_blind_fraction(T: int) -> float:
    """T5 (CLS pooling): ``||P_B(grad_S L)||_F / ||grad_S L||_F = sqrt(1 - 1/T)`` exactly (when the
    gradient is non-zero): ``grad_S L = e_0 v^T`` with ``v ⟂ 1`` and ``P_Q(e_0 v^T) = 1 (v/T)^T``.

    Raises:
        ValueError: T is not an integer >= 2 (floats such as 2.5, NaN and bools are rejected).
    """
    if isinstance(T, bool):
        raise ValueError(f"T: expected an integer sequence length T >= 2, got {T!r}")
    try:
        T = operator.index(T)
    except TypeError:
        raise ValueError(f"T: expected an integer sequence length T >= 2, got {T!r}") from None
    if T < 2:
        raise ValueError(f"T: expected an integer sequence length T >= 2, got {T}")
    return math.sqrt(1.0 - 1.0 / T)


def _check_affine(f: Callable[[Tensor], Tensor], m: int, dtype, name: str) -> None:
    """Raise unless ``f`` is affine on R^m: ``f(sum_k lam_k y_k) = sum_k lam_k f(y_k)`` for m + 2 random
    points (spanning R^m, so no direction is left untested) and random weights summing to 1."""
    gen = torch.Generator().manual_seed(0)
    y = torch.randn(m + 2, m, dtype=dtype, generator=gen)
    for _ in range(3):
        lam = torch.randn(m + 2, dtype=dtype, generator=gen)
        lam = lam - (lam.sum() - 1) / (m + 2)
        lhs, rhs = f((lam @ y)[None])[0], lam @ f(y)
        if not torch.allclose(lhs, rhs, rtol=1e-9, atol=1e-12 * (1 + float(rhs.abs().max()))):
            raise ValueError(f"case.f: expected an affine position-wise map (e.g. 'identity', 'linear'), got {name}")


def nonuniform_first_order(case: AttentionCase, S1: Tensor) -> Tensor:
    """T5 (non-uniform attention, linear f): ``d/d eps P_B(grad_S L)(eps S_1)`` at eps = 0, ``(H, T, T)``.

    For mean pooling and an affine f (so dL/dA_ij = c_j exactly, c = V r, for every A):
    ``grad_S L_ij = A_ij (c_j - sum_k A_ik c_k)`` and with ``A = J/T + (eps/T) S1c + O(eps^2)``,
    ``S1c = S_1 Pi`` (rows centred),

        d grad_S L_ij / d eps = (1/T) [ S1c_ij (c_j - cbar) - (1/T) sum_k S1c_ik c_k ],

    whose blind component (:func:`initlab.theory.subspace.blind_component`) is the first-order
    coefficient (the eps-dependence of grad_p L only adds query-independent terms). At T = 2 this
    coefficient vanishes identically; for T >= 3 it is non-zero for generic S_1 and data. The check is
    against autograd at small eps by central differences in eps.

    Args:
        case: mean pooling, no residual, uniform ``case.S``, affine ``f``.
        S1: ``(H, T, T)`` direction of the scores (finite).
    Returns:
        ``(H, T, T)``, the first-order coefficient of the blind component.
    Raises:
        ValueError: S1 of the wrong shape or non-finite; case with CLS pooling, a residual, non-uniform
            ``case.S`` or a non-affine f (the formula assumes all four).
    """
    H, T = case.H, case.T
    check_matrix(S1, "S1", (H, T, T), f"(H, T, T) = ({H}, {T}, {T})")
    _require_mean_pooling(case, "nonuniform_first_order")
    S0 = check_scores(case.S)
    if (S0 - S0[..., :1]).abs().max() > 0:
        raise ValueError("case.S: expected uniform attention (every row of S constant) at eps = 0")
    m = case.W_O.shape[1] if case.W_O is not None else case.W_V.shape[0] * case.W_V.shape[2]
    _check_affine(case.f, m, case.X.dtype, case.f_name or repr(case.f))
    R, V = output_gradient(case)  # at case.S (uniform), R = 1 r^T for mean pooling
    r = R.mean(-2)  # (H, e)
    c = torch.einsum("hte,he->ht", V, r)  # (H, T)
    S1c = S1 - S1.mean(-1, keepdim=True)
    D = (S1c * (c - c.mean(-1, keepdim=True))[:, None, :] - (S1c @ c[..., None]) / T) / T
    return blind_component(D)
