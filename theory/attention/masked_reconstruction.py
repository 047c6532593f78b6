"""T4: masked reconstruction sees the blind subspace.

Setting: the one attention layer of :mod:`initlab.theory.attention.case` (scores S, row-softmax A, values V) with a
masked-token reconstruction loss instead of a pooled label loss.
Tokens ``x : (T,)`` in ``{0..K-1}``; a mask ``m : (T,)`` in {0, 1} (1 = masked, u = 1 - m); the input
token is ``xt_j = x_j`` if unmasked, else [MASK]. Values ``V_j = e_{xt_j} W_V`` with the [MASK] value 0,
``Y = A V``, per-position decoder logits ``z_i = Y_i W_D`` and

    L = (1/T) sum_i m_i l(z_i, x_i)           (fixed normaliser 1/T, loss on masked positions only)

with l the cross-entropy, or its first-order (logit-linear) version at z = 0,
``l_lin(z, x) = log K - z_x + (1/K) 1^T z`` (CE = l_lin + O(||z||^2)). The value-decoder path is the
(K, K) matrix ``C = W_V W_D`` (row = input token, column = output logit); "copying token identity"
is C = beta I.

(a) Generic data. By identity (G) of :mod:`initlab.theory.attention.gradient`,
``grad_S L = (1/T) R V^T Pi`` with ``R_i = dL/dO_i`` non-zero only on masked rows and depending on
x_i, so the rows differ and the blind component (1/T)(R - 1 rbar^T) V^T Pi is non-zero for generic
data (checked numerically: blind fraction > 0).

(b) Closed form (linearised loss, any C, any T >= 2). Tokens from the stationary Markov chain
``x_0 ~ U{K}``, ``x_{t+1} = x_t`` with probability p, else a fresh ``U{K}`` draw, so that

    P(x_i = a, x_j = b) = (1/K) [ p^n delta_ab + (1 - p^n)/K ],   n = |i - j|,   P(x_j = x_i) = p^n + (1 - p^n)/K,

and masks i.i.d. Bernoulli(q) independent of the tokens. With D = -grad_S L at uniform attention
(the descent direction), for any pattern P : (T, T)

    E <D, P> = kappa(C) * Psi(P),
    kappa(C) = (tr C - 1^T C 1 / K) / K,
    Psi(P)  = q (1 - q) / T^2 * sum_{i != j} p^{|i-j|} (P_ij - Pbar_i),   Pbar_i = (1/T) sum_k P_ik.

Derivation: -dL/dA_ij = (m_i u_j / T)(C_{x_j x_i} - (C 1)_{x_j} / K); its expectation is
(q(1-q)/T) p^n kappa(C) for j != i (0 for j = i); the softmax Jacobian at A = J/T centres rows and
divides by T, so exactly

    E D_ij = kappa(C) q (1 - q) / T^2 * (h_ij - mean_k h_ik),   h_ij = p^{|i-j|} [i != j]   (h_ii = 0).

For the copy path C = beta I, kappa = beta (1 - 1/K) > 0, so the expected descent direction *raises*
the scores of nearby keys (largest h_ij) and *lowers* the diagonal (self) score, E D_ii < 0 for p > 0,
0 < q < 1
(a masked query's own value is the [MASK] value 0 and carries no information). Entry-wise the sign is
that of h_ij - mean_k h_ik, so at small p only the nearest keys rise: at p = 0.1, T = 8 or 16, the
|i - j| = 2 keys are lowered (:func:`expected_descent`); the band statement below is about the sum.
For the off-diagonal band P_ij = [1 <= |i-j| <= w], Psi > 0 for every p in (0, 1], q in (0, 1), T >= 2, w >= 1
(each row's band holds its largest entries of h_ij = p^{|i-j|}[i != j], the mean of that row also
counts h_ii = 0), and Psi = 0 for p = 0 (i.i.d. tokens). For the cross-entropy the same holds to
first order in C (checked by Monte Carlo at small beta; at beta = 1 the value is measured, not claimed).

(c) Random initialisation. With W_V, W_D independent with zero-mean entries (any symmetric law),
E[C] = 0 and kappa(C) has a symmetric law, so the expected projection, averaged over initialisations,
is exactly 0, and its sign at a given initialisation is + or - with probability 1/2 each when kappa(C)
has no atom at 0 (e.g. Gaussian entries); for paths with
kappa(C) = 0 (e.g. tr C = 1^T C 1 / K) it vanishes for that initialisation although the per-sequence
blind component is non-zero. What is claimed: a non-zero blind-subspace signal for generic data, and a
proximity-favouring sign once the path copies (kappa > 0).

Statement texts: :mod:`initlab.theory.statements`. Source: the self-pretraining analysis (masked reconstruction gives
gradients on score directions that mean-pooled supervision cannot see); Amos et al., ICLR 2024 for the
phenomenon. The closed form (b) is derived here and checked exactly by enumeration in
:func:`initlab.theory.attention.symbolic.derive_t4` and by Monte Carlo in :func:`monte_carlo_projection`.
"""

from __future__ import annotations

import math
from typing import Literal

import torch

from initlab.theory.attention.case import check_matrix, check_scores

__all__ = [
    "markov_tokens",
    "pair_equal_probability",
    "kappa",
    "psi",
    "expected_projection",
    "expected_descent",
    "masked_reconstruction_loss",
    "masked_score_gradient",
    "monte_carlo_projection",
    "generic_masked_loss",
]

Tensor = torch.Tensor


def _check_probs(p: float, q: float) -> None:
    if not (0.0 <= p <= 1.0):
        raise ValueError(f"p: expected a repeat probability in [0, 1], got {p}")
    if not (0.0 <= q <= 1.0):
        raise ValueError(f"q: expected a mask probability in [0, 1], got {q}")


def markov_tokens(n: int, T: int, K: int, p: float, gen: torch.Generator) -> Tensor:
    """``(n, T)`` int64 tokens of the repeat-previous Markov chain (stationary uniform start).

    Raises:
        ValueError: T < 2, K < 2, n < 1 or p outside [0, 1].
    """
    if T < 2 or K < 2 or n < 1:
        raise ValueError(f"n, T, K: expected n >= 1, T >= 2, K >= 2, got n = {n}, T = {T}, K = {K}")
    _check_probs(p, 0.0)
    fresh = torch.randint(K, (n, T), generator=gen)
    repeat = torch.rand(n, T, generator=gen) < p
    x = fresh.clone()
    for t in range(1, T):
        x[:, t] = torch.where(repeat[:, t], x[:, t - 1], fresh[:, t])
    return x


def pair_equal_probability(n: int | Tensor, K: int, p: float) -> float | Tensor:
    """``P(x_j = x_i) = p^n + (1 - p^n)/K`` for ``n = |i - j|`` under :func:`markov_tokens`.

    Raises:
        ValueError: K < 2 or p outside [0, 1].
    """
    if K < 2:
        raise ValueError(f"K: expected a vocabulary size K >= 2, got {K}")
    _check_probs(p, 0.0)
    return p**n + (1 - p**n) / K


def kappa(C: Tensor) -> float:
    """``kappa(C) = (tr C - 1^T C 1 / K) / K`` for a ``(K, K)`` value-decoder path.

    Raises:
        ValueError: C not a finite square ``(K, K)`` matrix.
    """
    check_matrix(C, "C", (None, None), "(K, K)")
    K = C.shape[0]
    if C.shape[1] != K:
        raise ValueError(f"C: expected a square (K, K) path, got {tuple(C.shape)}")
    return float((torch.trace(C) - C.sum() / K) / K)


def psi(P: Tensor, p: float, q: float) -> float:
    """``Psi(P) = q(1-q)/T^2 sum_{i != j} p^{|i-j|} (P_ij - Pbar_i)`` (float64), ``P : (T, T)``.

    Raises:
        ValueError: P not a finite square ``(T, T)`` with T >= 2, or p, q outside [0, 1].
    """
    check_matrix(P, "P", (None, None), "(T, T)")
    T = P.shape[0]
    if P.shape[1] != T or T < 2:
        raise ValueError(f"P: expected a square (T, T) pattern with T >= 2, got {tuple(P.shape)}")
    _check_probs(p, q)
    P = P.to(torch.float64)
    i = torch.arange(T)
    n = (i[:, None] - i[None, :]).abs().to(torch.float64)
    h = torch.where(n > 0, torch.tensor(p, dtype=torch.float64) ** n, torch.zeros_like(n))
    Pc = P - P.mean(-1, keepdim=True)
    return float(q * (1 - q) / T**2 * (h * Pc).sum())


def expected_projection(P: Tensor, p: float, q: float, C: Tensor) -> float:
    """T4(b): ``E <-grad_S L, P> = kappa(C) Psi(P)`` (linearised reconstruction loss, uniform attention).

    Shapes: P ``(T, T)``, C ``(K, K)``. Raises ValueError as :func:`kappa` and :func:`psi`.
    """
    return kappa(C) * psi(P, p, q)


def expected_descent(T: int, p: float, q: float, C: Tensor) -> Tensor:
    """T4(b) entry-wise: ``E D = kappa(C) q (1 - q) / T^2 (h - rowmean(h))``, ``h_ij = p^{|i-j|} [i != j]``, ``(T, T)``.

    ``E D_ij > 0`` (the expected descent raises key j for query i, when kappa > 0) iff ``p^{|i-j|}`` exceeds
    the mean of row i of h: at small p only the nearest keys rise (T = 16, p = 0.1: the |i-j| = 2 keys
    are lowered). ``E <D, P> = sum_ij (E D)_ij P_ij`` equals :func:`expected_projection`.

    Raises:
        ValueError: T < 2, p or q outside [0, 1], C not a finite square matrix.
    """
    if not (isinstance(T, int) and T >= 2):
        raise ValueError(f"T: expected an integer T >= 2, got {T!r}")
    _check_probs(p, q)
    i = torch.arange(T)
    n = (i[:, None] - i[None, :]).abs().to(torch.float64)
    h = torch.where(n > 0, torch.tensor(p, dtype=torch.float64) ** n, torch.zeros_like(n))
    return kappa(C) * q * (1 - q) / T**2 * (h - h.mean(-1, keepdim=True))


def _check_tokens_mask(tokens: Tensor, mask: Tensor, shape: tuple) -> None:
    """tokens: integer tensor of ``shape``; mask: bool tensor of ``shape`` (True = masked)."""
    for name, x in (("tokens", tokens), ("mask", mask)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor of shape {shape}, got {type(x).__name__}")
        if tuple(x.shape) != tuple(shape):
            raise ValueError(f"{name}: expected shape {tuple(shape)}, got {tuple(x.shape)}")
    if tokens.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
        raise ValueError(f"tokens: expected an integer tensor, got dtype {tokens.dtype}")
    if mask.dtype != torch.bool:
        raise ValueError(f"mask: expected a bool tensor (True = masked), got dtype {mask.dtype}")


def masked_reconstruction_loss(
    S: Tensor, tokens: Tensor, mask: Tensor, C: Tensor, loss: Literal["ce", "linear"] = "ce"
) -> Tensor:
    """Sum over the batch of ``L = (1/T) sum_i m_i l(z_i, x_i)``, ``z = softmax(S) V C``.

    Shapes: S ``(N, T, T)``; tokens ``(N, T)`` int in [0, K); mask ``(N, T)`` bool (True = masked);
    C ``(K, K)``. Returns a scalar (sum over the N sequences, so ``grad_{S_n}`` is each sequence's own).

    Raises:
        TypeError: a tensor argument is not a tensor.
        ValueError: shape mismatch, non-finite S or C, non-integer tokens, non-bool mask, tokens out of
            range, unknown loss (naming the argument).
    """
    if not isinstance(S, torch.Tensor) or S.dim() != 3 or S.shape[-1] != S.shape[-2] or S.shape[-1] < 2:
        raise ValueError(f"S: expected shape (N, T, T) with T >= 2, got {tuple(getattr(S, 'shape', ()))}")
    check_matrix(S, "S", tuple(S.shape), "(N, T, T)")
    N, T, _ = S.shape
    _check_tokens_mask(tokens, mask, (N, T))
    check_matrix(C, "C", (None, None), "(K, K)")
    K = C.shape[0]
    if C.shape[1] != K or K < 2:
        raise ValueError(f"C: expected a square (K, K) path with K >= 2, got {tuple(C.shape)}")
    if tokens.min() < 0 or tokens.max() >= K:
        raise ValueError(f"tokens: expected integers in [0, {K}), got range [{int(tokens.min())}, {int(tokens.max())}]")
    V = torch.nn.functional.one_hot(tokens.long(), K).to(C.dtype) * (~mask)[..., None]  # [MASK] value = 0
    z = torch.softmax(S, -1) @ V @ C  # (N, T, K)
    idx = tokens.long()[..., None]
    if loss == "ce":
        ell = torch.logsumexp(z, -1) - z.gather(-1, idx)[..., 0]
    elif loss == "linear":
        ell = math.log(K) - z.gather(-1, idx)[..., 0] + z.mean(-1)
    else:
        raise ValueError(f"loss: expected 'ce' or 'linear', got {loss!r}")
    return (ell * mask).sum() / T


def masked_score_gradient(tokens: Tensor, mask: Tensor, C: Tensor, loss: Literal["ce", "linear"] = "ce") -> Tensor:
    """Autograd ``grad_S L`` at uniform attention (S = 0), per sequence, ``(N, T, T)`` in C's dtype.

    Shapes: tokens ``(N, T)`` int; mask ``(N, T)`` bool; C ``(K, K)``.

    Raises:
        ValueError: as :func:`masked_reconstruction_loss`.
    """
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
        raise ValueError(f"tokens: expected shape (N, T), got {tuple(getattr(tokens, 'shape', ()))}")
    check_matrix(C, "C", (None, None), "(K, K)")
    N, T = tokens.shape
    if T < 2:
        raise ValueError(f"tokens: expected shape (N, T) with T >= 2, got {tuple(tokens.shape)}")
    S = torch.zeros(N, T, T, dtype=C.dtype, requires_grad=True)
    (G,) = torch.autograd.grad(masked_reconstruction_loss(S, tokens, mask, C, loss), S)
    return G


def monte_carlo_projection(
    P: Tensor,
    p: float,
    q: float,
    C: Tensor,
    n: int,
    gen: torch.Generator,
    loss: Literal["ce", "linear"] = "linear",
    chunk: int = 4096,
) -> tuple[float, float]:
    """Monte Carlo estimate of ``E <-grad_S L, P>`` over n sequences: returns ``(mean, standard error)``.

    Raises:
        ValueError: bad P, p, q, C (see :func:`psi`, :func:`kappa`) or n < 2.
    """
    psi(P, p, q)
    kappa(C)
    if n < 2:
        raise ValueError(f"n: expected at least 2 Monte Carlo samples, got {n}")
    T, K = P.shape[0], C.shape[0]
    vals = []
    done = 0
    while done < n:
        b = min(chunk, n - done)
        x = markov_tokens(b, T, K, p, gen)
        m = torch.rand(b, T, generator=gen) < q
        G = masked_score_gradient(x, m, C.to(torch.float64), loss)
        vals.append(-(G * P.to(torch.float64)).sum((-1, -2)))
        done += b
    v = torch.cat(vals)
    return float(v.mean()), float(v.std() / math.sqrt(n))


def generic_masked_loss(
    S: Tensor, E: Tensor, W_V: Tensor, W_O: Tensor, W_D: Tensor, tokens: Tensor, mask: Tensor, return_O: bool = False
):
    """T4(a): a generic masked-reconstruction loss ``L(S)`` for one sequence (cross-entropy decoder).

    ``X = E[xt]`` (row K of E is the [MASK] embedding), ``V_h = X W_V[h]``, ``O = concat_h A_h V_h``,
    ``z_i = tanh(O_i W_O) W_D``, ``L = (1/T) sum_i m_i CE(z_i, x_i)``.

    Shapes: S ``(H, T, T)``; E ``(K + 1, d)``; W_V ``(H, d, e)``; W_O ``(H e, m)``; W_D ``(m, K)``;
    tokens ``(T,)`` in [0, K); mask ``(T,)`` bool. With ``return_O`` returns ``(L, O, V)`` where O is a
    leaf ``(H, T, e)`` computed at S (for R = dL/dO).

    Raises:
        TypeError, ValueError: an argument of the wrong type, shape or dtype, non-finite entries, or
            tokens out of range (naming the argument).
    """
    S = check_scores(S)
    H, T, _ = S.shape
    check_matrix(E, "E", (None, None), "(K + 1, d)")
    K, d = E.shape[0] - 1, E.shape[1]
    if K < 2:
        raise ValueError(f"E: expected shape (K + 1, d) with K >= 2 (row K = [MASK]), got {tuple(E.shape)}")
    check_matrix(W_V, "W_V", (H, d, None), f"(H, d, e) with H = {H}, d = {d}")
    check_matrix(W_O, "W_O", (H * W_V.shape[2], None), f"(H e, m) with H e = {H * W_V.shape[2]}")
    check_matrix(W_D, "W_D", (W_O.shape[1], K), f"(m, K) = ({W_O.shape[1]}, {K})")
    _check_tokens_mask(tokens, mask, (T,))
    if tokens.min() < 0 or tokens.max() >= K:
        raise ValueError(f"tokens: expected integers in [0, {K}), got range [{int(tokens.min())}, {int(tokens.max())}]")
    tokens = tokens.long()
    xt = torch.where(mask, torch.full_like(tokens, K), tokens)
    X = E[xt]
    V = torch.einsum("td,hde->hte", X, W_V)
    O = torch.einsum("hij,hje->hie", torch.softmax(S, -1), V)
    if return_O:
        O = O.detach().requires_grad_(True)
    z = torch.tanh(O.permute(1, 0, 2).reshape(T, -1) @ W_O) @ W_D
    ell = torch.logsumexp(z, -1) - z.gather(-1, tokens[:, None])[:, 0]
    L = (ell * mask).sum() / T
    return (L, O, V) if return_O else L
