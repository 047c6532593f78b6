"""Attention-score gradients at uniform attention: theorems T1, T2, T3 and T5 (T4 is in
:mod:`initlab.theory.attention.masked_reconstruction`).

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
do not (T3', :mod:`initlab.theory.attention.rowidentical`).

T5 (boundaries). The identity (G) still gives the blind component exactly,

    P_B(grad_{S_h} L) = (1/T) (R_h - 1 rbar_h^T) V_h^T Pi,   rbar_h = R_h^T 1 / T,

which is zero iff every centred output-gradient row is orthogonal to every centred value row (so
it needs rows of R_h that differ, and is then non-zero for generic data): a residual Y = X + O W_O before a non-linear f
(J_f(x_i + obar) varies with i; with a linear f, T1 still holds), CLS pooling (R = e_0 r^T, blind
fraction exactly sqrt(1 - 1/T)); and at non-uniform attention S = eps S_1 even a linear f gives a
blind component of first order in eps (see :func:`nonuniform_first_order`).

Role of this module: the closed forms of T1, T2, T3 and T5 (the identity (G), r_h and g_h, the T2 patterns
and band bounds, the T3 rank-one gradients, the T5 blind component). The setting as code (random cases,
the layer, its gradients by autograd and central differences) is :mod:`initlab.theory.attention.case`.

Statement texts (one registry for docstrings, ``verify`` and docs/theory.md): :mod:`initlab.theory.statements`.
Extensions: row-identical attention and Q/K biases (T1', T3') in :mod:`initlab.theory.attention.rowidentical`,
padding and dropout (T6) in :mod:`initlab.theory.attention.padding_dropout`, depth and residuals (T7) in
:mod:`initlab.theory.attention.depth`.

Sources: the phenomenon, Amos et al., "Never Train from Scratch", ICLR 2024, arXiv:2310.02980; the
theorem, the self-pretraining analysis (gradient of a mean-pooled supervised loss vs masked
reconstruction at uniform initialisation). The formulas above are derived here and
checked in :mod:`initlab.theory.attention.symbolic` (sympy) and :mod:`initlab.theorycheck.verify.runner`.
"""

from __future__ import annotations

import math
import operator
from typing import Callable

import torch

from initlab.theory.attention.case import AttentionCase, check_matrix, check_scores, output_gradient, require_mean_pooling
from initlab.theory.subspace import blind_component

__all__ = [
    "uniform_score_gradient_from_R",
    "mean_pool_row_gradient",
    "t1_closed_form",
    "band_pattern",
    "circulant_band_pattern",
    "permutation_pattern",
    "band_edge_deficit",
    "band_edge_bound",
    "band_relative_bound",
    "band_sharp_relative_bound",
    "t3_closed_form",
    "qk_closed_form",
    "blind_component_closed_form",
    "cls_blind_fraction",
    "nonuniform_first_order",
]

Tensor = torch.Tensor


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
    require_mean_pooling(case, "r_h (T1)")
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
    require_mean_pooling(case, "T1")
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
def t3_closed_form(case: AttentionCase) -> tuple[Tensor, Tensor, Tensor]:
    """T3: ``grad_{M_h} L = T xbar (C W_V[h] r_h)^T`` at uniform attention (rank one), ``(H, d, d)``.

    Returns ``(grad_M, xbar : (d,), b : (H, d))`` with ``b_h = C W_V[h] r_h`` and
    ``C = X^T Pi X / T``; r_h is T1's (:func:`mean_pool_row_gradient`). ``case.S`` is not read.

    Raises:
        ValueError: CLS pooling or a residual connection (the closed form needs T1's setting).
    """
    require_mean_pooling(case, "T3")
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
    require_mean_pooling(case, "nonuniform_first_order")
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
