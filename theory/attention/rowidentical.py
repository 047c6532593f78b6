"""Row-identical attention (T1') and the Q/K parameter gradients with biases (T3').

Setting: the layer of :mod:`initlab.theory.attention.case` (mean pooling, no residual, position-wise
f, any loss), but the attention need not be uniform: every row of ``A_h`` is the same probability
vector ``a_h`` (``A_h = 1 a_h^T``). This happens exactly when ``S_h,ij = c_i + s_j`` (rows differ by
constants, which softmax ignores), e.g. with ``nn.Linear`` biases and ``W_Q W_K^T = 0``.

T1' (row-identical attention). Every row of ``O_h = 1 (V_h^T a_h)^T`` is the same, so mean pooling gives
``R_h = 1 r_h^T`` and, from the softmax Jacobian ``dA_ij/dS_ik = a_j (delta_jk - a_k)``,

    grad_{S_h} L = 1 g_h^T,   g_h = diag(a_h) (I - 1 a_h^T) V_h r_h,   g_h^T 1 = 0,
    r_h = (1/T) [W_O J_f(ybar)^T grad_p L]_h,   ybar = (concat_h V_h^T a_h)^T W_O,

so the gradient lies in Q and is blind to every pattern in B, as in T1 (which is the case a = 1/T,
where g = (1/T) Pi V r). The closed form of T1 with uniform weights is wrong here (relative error 0.04 to
4.8 over the random biased cases of ``initlab theory verify``); blindness is not.

T3' (Q/K biases). Scores ``S_h = (X W_Q[h] + 1 b_Q[h]^T)(X W_K[h] + 1 b_K[h]^T)^T / sqrt(d_k)``
(the ``nn.Linear`` layout). With ``W_Q[h] W_K[h]^T = 0`` the rows of S differ by constants, the
attention is row-identical with ``a_h = softmax(X W_K[h] b_Q[h] / sqrt(d_k))`` (uniform when
``W_K b_Q = 0``, e.g. W_Q = W_K = 0) and, with ``u_h = W_K[h]^T C_a W_V[h] r_h`` and the weighted covariance
``C_a = sum_j a_j (x_j - xbar_a)(x_j - xbar_a)^T`` (``X^T g_h = C_a W_V[h] r_h``),

    grad_{W_Q[h]} = (T / sqrt(d_k)) xbar u_h^T,           grad_{b_Q[h]} = (T / sqrt(d_k)) u_h,
    grad_{W_K[h]} = (T / sqrt(d_k)) (C_a W_V[h] r_h)(W_Q[h]^T xbar + b_Q[h])^T,   grad_{b_K[h]} = 0,

(xbar = X^T 1 / T, the unweighted mean). grad_{b_K} = 0 always (b_K adds a per-query constant).
With centred tokens (xbar = 0) grad_{W_Q} = 0, but grad_{W_K} = (T/sqrt(d_k)) C_a W_V r b_Q^T and
grad_{b_Q} = (T/sqrt(d_k)) W_K^T C_a W_V r do not vanish (they vanish only when b_Q = 0, resp. W_K = 0),
which corrects T3's "all gradients vanish" for biased layers. The first-order change of the scores
after one step, ``dS = -eta (dQ K^T + Q dK^T) / sqrt(d_k)``, has rank <= 2; it is query-independent
modulo row constants (``dS Pi`` lies in Q) when W_Q = W_K = 0 (every query is b_Q and every key is
b_K: dS = 1 v^T + w 1^T), and when W_Q = 0 with centred tokens; otherwise its rows scale with
``x_i . xbar`` and it generically has a blind component (checked by :func:`first_order_score_step`).

Source: derived here from the softmax Jacobian; checked in :mod:`initlab.theory.attention.symbolic`
(sympy), :mod:`initlab.theory.attention.checks` (autograd and central differences). Statement texts:
:mod:`initlab.theory.statements`. Setting of the phenomenon: Amos et al., "Never Train from Scratch",
arXiv:2310.02980.
"""

from __future__ import annotations

import math

import torch

from initlab.theory.attention.case import AttentionCase, require_mean_pooling, case_loss, check_matrix, check_scores

__all__ = [
    "row_identical_weights",
    "row_pool_gradient",
    "t1p_closed_form",
    "weighted_covariance",
    "biased_scores",
    "qk_bias_gradient",
    "qk_bias_closed_form",
    "first_order_score_step",
]

Tensor = torch.Tensor


def row_identical_weights(S: Tensor, rtol: float = 1e-12) -> Tensor:
    """The common row ``a_h = softmax(S_h[0])`` of ``softmax(S_h)``, shape ``(H, T)``.

    Args:
        S: ``(H, T, T)`` or ``(T, T)`` scores whose rows differ by constants (``S_ij - S_i0`` the same
            for every i, up to ``rtol`` times max|S|).
    Raises:
        ValueError: S not a finite square score tensor, or its softmax rows are not identical.
    """
    S = check_scores(S)
    D = S - S[..., :1]
    if float((D - D[:, :1, :]).abs().max()) > rtol * (1.0 + float(S.abs().max())):
        raise ValueError("S: T1' needs row-identical attention (S_ij - S_i0 the same for every query i)")
    return torch.softmax(S[:, 0, :], -1)


def weighted_covariance(X: Tensor, a: Tensor) -> Tensor:
    """``C_a = sum_j a_j (x_j - xbar_a)(x_j - xbar_a)^T`` per head, ``(H, d, d)``; X ``(T, d)``, a ``(H, T)``.

    Raises:
        ValueError: wrong shapes or non-finite entries.
    """
    check_matrix(X, "X", (None, None), "(T, d)")
    check_matrix(a, "a", (None, X.shape[0]), f"(H, T) with T = {X.shape[0]}")
    xa = a @ X  # (H, d)
    Xc = X[None] - xa[:, None, :]
    return torch.einsum("ht,htd,hte->hde", a, Xc, Xc)


def row_pool_gradient(case: AttentionCase, a: Tensor) -> Tensor:
    """T1''s ``r_h = (1/T) [W_O J_f(ybar)^T grad_p L]_h`` at ``ybar = (concat_h V_h^T a_h)^T W_O``, ``(H, e)``.

    Autograd only through f and the loss at the single point ybar (not through the attention).

    Raises:
        ValueError: CLS pooling or a residual (T1' does not apply), or ``a`` not a finite ``(H, T)``.
    """
    require_mean_pooling(case, "r_h (T1')")
    H, T = case.H, case.T
    check_matrix(a, "a", (H, T), f"(H, T) = ({H}, {T})")
    V = torch.einsum("td,hde->hte", case.X, case.W_V)
    obar = torch.einsum("ht,hte->he", a, V).reshape(1, -1)
    ybar = (obar if case.W_O is None else obar @ case.W_O).detach().requires_grad_(True)
    z = case.f(ybar)[0]
    pz = z.detach().requires_grad_(True)
    (gp,) = torch.autograd.grad(case.loss(pz), pz)
    (u,) = torch.autograd.grad(z, ybar, grad_outputs=gp)
    r = u if case.W_O is None else u @ case.W_O.T
    return (r / T).reshape(H, -1)


def t1p_closed_form(case: AttentionCase, S: Tensor | None = None) -> Tensor:
    """T1': ``g_h = diag(a_h)(I - 1 a_h^T) V_h r_h`` for row-identical attention, ``(H, T)``.

    ``grad_{S_h} L = 1 g_h^T`` at the scores ``S`` (default ``case.S``), whose rows must differ by constants.

    Raises:
        ValueError: rows of softmax(S) not identical, CLS pooling or a residual connection.
    """
    a = row_identical_weights(case.S if S is None else S)
    r = row_pool_gradient(case, a)
    V = torch.einsum("td,hde->hte", case.X, case.W_V)
    c = torch.einsum("hte,he->ht", V, r)
    return a * (c - (a * c).sum(-1, keepdim=True))


def _check_qk(case: AttentionCase, W_Q: Tensor, b_Q: Tensor, W_K: Tensor, b_K: Tensor) -> int:
    H, d = case.H, case.X.shape[1]
    check_matrix(W_Q, "W_Q", (H, d, None), f"(H, d, d_k) with H = {H}, d = {d}")
    dk = W_Q.shape[2]
    check_matrix(W_K, "W_K", (H, d, dk), f"(H, d, d_k) = {tuple(W_Q.shape)}")
    check_matrix(b_Q, "b_Q", (H, dk), f"(H, d_k) = ({H}, {dk})")
    check_matrix(b_K, "b_K", (H, dk), f"(H, d_k) = ({H}, {dk})")
    return dk


def biased_scores(X: Tensor, W_Q: Tensor, b_Q: Tensor, W_K: Tensor, b_K: Tensor) -> Tensor:
    """``S_h = (X W_Q[h] + 1 b_Q[h]^T)(X W_K[h] + 1 b_K[h]^T)^T / sqrt(d_k)``, ``(H, T, T)``.

    Shapes: X ``(T, d)``; W_Q, W_K ``(H, d, d_k)``; b_Q, b_K ``(H, d_k)``.
    """
    dk = W_Q.shape[-1]
    Q = torch.einsum("td,hdk->htk", X, W_Q) + b_Q[:, None, :]
    K = torch.einsum("td,hdk->htk", X, W_K) + b_K[:, None, :]
    return Q @ K.transpose(-1, -2) / math.sqrt(dk)


def qk_bias_gradient(case: AttentionCase, W_Q: Tensor, b_Q: Tensor, W_K: Tensor, b_K: Tensor) -> dict[str, Tensor]:
    """Autograd gradients of L with respect to ``W_Q, b_Q, W_K, b_K`` (scores from :func:`biased_scores`).

    ``case.S`` is ignored. Returns a dict with those four keys, shapes as the inputs.

    Raises:
        ValueError: shapes that do not match the case (naming the argument).
    """
    _check_qk(case, W_Q, b_Q, W_K, b_K)
    ps = [t.detach().clone().requires_grad_(True) for t in (W_Q, b_Q, W_K, b_K)]
    grads = torch.autograd.grad(case_loss(case, biased_scores(case.X, *ps)), ps)
    return dict(zip(("W_Q", "b_Q", "W_K", "b_K"), grads))


def qk_bias_closed_form(case: AttentionCase, W_Q: Tensor, b_Q: Tensor, W_K: Tensor, b_K: Tensor) -> dict[str, Tensor]:
    """T3': the four Q/K gradients in closed form (module docstring), valid when ``W_Q[h] W_K[h]^T = 0``.

    Returns a dict ``W_Q, b_Q, W_K, b_K`` of shapes ``(H, d, d_k), (H, d_k), (H, d, d_k), (H, d_k)``.

    Raises:
        ValueError: shapes, ``W_Q W_K^T != 0``, CLS pooling or a residual connection.
    """
    dk = _check_qk(case, W_Q, b_Q, W_K, b_K)
    prod = W_Q @ W_K.transpose(-1, -2)
    if float(prod.abs().max()) > 1e-12 * (1.0 + float(W_Q.abs().max()) * float(W_K.abs().max())):
        raise ValueError("W_Q, W_K: T3' holds for row-identical attention, expected W_Q[h] W_K[h]^T = 0")
    X, T = case.X, case.T
    a = row_identical_weights(biased_scores(X, W_Q, b_Q, W_K, b_K))
    r = row_pool_gradient(case, a)
    xbar = X.mean(0)
    Xg = torch.einsum("hde,hef,hf->hd", weighted_covariance(X, a), case.W_V, r)  # X^T g_h = C_a W_V r
    u = torch.einsum("hdk,hd->hk", W_K, Xg)
    qbar = torch.einsum("hdk,d->hk", W_Q, xbar) + b_Q
    s = T / math.sqrt(dk)
    return {
        "W_Q": s * xbar[None, :, None] * u[:, None, :],
        "b_Q": s * u,
        "W_K": s * Xg[:, :, None] * qbar[:, None, :],
        "b_K": torch.zeros_like(b_K),
    }


def first_order_score_step(X: Tensor, W_Q: Tensor, b_Q: Tensor, W_K: Tensor, b_K: Tensor, grads: dict[str, Tensor]) -> Tensor:
    """Row-centred first-order score change of one descent step of size 1, ``(dS) Pi``, ``(H, T, T)``.

    ``dS = -(dQ K^T + Q dK^T) / sqrt(d_k)`` with ``dQ = X grad_{W_Q} + 1 grad_{b_Q}^T`` (and dK alike);
    right-multiplying by ``Pi = I - J/T`` drops row constants, which softmax ignores. T3' says its blind
    component is 0 when W_Q = W_K = 0 or when W_Q = 0 and the tokens are centred.

    Raises:
        ValueError: a missing key in ``grads``.
    """
    missing = {"W_Q", "b_Q", "W_K", "b_K"} - set(grads)
    if missing:
        raise ValueError(f"grads: expected keys W_Q, b_Q, W_K, b_K, missing {sorted(missing)}")
    dk = W_Q.shape[-1]
    Q = torch.einsum("td,hdk->htk", X, W_Q) + b_Q[:, None, :]
    K = torch.einsum("td,hdk->htk", X, W_K) + b_K[:, None, :]
    dQ = -(torch.einsum("td,hdk->htk", X, grads["W_Q"]) + grads["b_Q"][:, None, :])
    dK = -(torch.einsum("td,hdk->htk", X, grads["W_K"]) + grads["b_K"][:, None, :])
    dS = (dQ @ K.transpose(-1, -2) + Q @ dK.transpose(-1, -2)) / math.sqrt(dk)
    return dS - dS.mean(-1, keepdim=True)
