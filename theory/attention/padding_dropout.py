"""T6: key-padding masks with length-aware pooling, and dropout.

Setting: the layer of :mod:`initlab.theory.attention.case` (mean pooling, no residual, position-wise
f, any loss) at uniform attention, with

(a) Key padding. ``pad : (T,)`` bool, True = padding (torch's ``key_padding_mask`` convention), L valid
positions (L >= 2). Padded keys get score -inf (attention 0), and pooling is length-aware,
``p = (1/L) sum_{i valid} f(Y_i)``. On the valid block the layer *is* the unpadded layer on the L valid
tokens, so T1 holds there with T replaced by L, and the gradient is 0 outside it:

    grad_{S_h} L = 1_valid g_h^T,   g_h = (1/L) Pi_L V_h r_h on the valid keys, 0 on padded keys,
    r_h = (1/L) [W_O J_f(ybar)^T grad_p L]_h,   ybar = the mean of the valid rows of V (times W_O).

Projecting the full T x T matrix (ignoring the mask) would report a blind fraction of exactly
``sqrt(1 - L/T)`` (the padded rows are zero while the valid rows are not); the projections of
:mod:`initlab.theory.subspace` take ``key_padding_mask`` and then report 0.

(b) Dropout. Attention dropout ``A -> A * M / (1 - p)`` with a keep mask ``M : (H, T, T)`` and output
dropout ``Y -> Y * M / (1 - p)`` with ``M : (T, m)`` (i.i.d. Bernoulli(1 - p) entries). For one mask the
output rows differ, so ``grad_S L`` has a blind component (identity (G) still holds with the mask folded
in: ``grad_{S_h} L = (1/T)(C_h - C_h 1 1^T / T)``, ``C_h,ij = M_h,ij R_h,i . v_h,j / (1 - p)`` for attention
dropout, ``C_h = R_h V_h^T`` for output dropout). In expectation over the masks the gradient is blind
again, exactly: for any mask law invariant under permuting the query rows (i.i.d. dropout in
particular), mean pooling makes L(M) invariant under that permutation, so grad_S L(sigma M) =
sigma grad_S L(M) and the expectation has equal rows,

    E_M[grad_{S_h} L] = 1 gbar_h^T,   gbar_h ⟂ 1.

A Monte Carlo mean over n masks therefore has a blind fraction that falls like n^{-1/2} (measured by
:func:`dropout_blind_fraction_curve`). With a residual connection the invariance, and the statement,
fail (T5).

Source: derived here (symmetry of mean pooling under query permutations; the softmax Jacobian);
checked in :mod:`initlab.theory.attention.symbolic` (sympy, exact expectation over all masks at
T = 2), :mod:`initlab.theory.attention.checks` (exact enumeration, autograd, central differences, Monte
Carlo). Dropout: Srivastava et al., "Dropout", JMLR 2014. Statement texts: :mod:`initlab.theory.statements`.
"""

from __future__ import annotations

import itertools
import math
from typing import Literal

import torch

from initlab.theory.attention.case import AttentionCase, require_mean_pooling, check_scores
from initlab.theory.attention.gradient import t1_closed_form
from initlab.theory.subspace import blind_fraction

__all__ = [
    "check_padding",
    "padded_case_loss",
    "padded_score_gradient",
    "padded_closed_form",
    "unmasked_padding_blind_fraction",
    "dropout_case_loss",
    "dropout_score_gradient",
    "dropout_gradient_from_R",
    "exact_dropout_expectation",
    "dropout_blind_fraction_curve",
]

Tensor = torch.Tensor
DropKind = Literal["attention", "output"]


def check_padding(pad: Tensor, T: int) -> Tensor:
    """Check a key-padding mask ``pad : (T,)`` bool (True = padding) with at least 2 valid positions.

    Raises:
        TypeError: not a tensor.
        ValueError: wrong dtype or shape, or fewer than 2 valid positions.
    """
    if not isinstance(pad, torch.Tensor):
        raise TypeError(f"pad: expected a bool torch.Tensor of shape (T,) = ({T},), got {type(pad).__name__}")
    if pad.dtype != torch.bool or tuple(pad.shape) != (T,):
        raise ValueError(f"pad: expected a bool tensor of shape (T,) = ({T},) (True = padding), got {pad.dtype} {tuple(pad.shape)}")
    if int((~pad).sum()) < 2:
        raise ValueError(f"pad: expected at least 2 valid (False) positions, got {int((~pad).sum())}")
    return pad


def padded_case_loss(case: AttentionCase, pad: Tensor, S: Tensor | None = None) -> Tensor:
    """L(S) with padded keys masked (-inf) and length-aware mean pooling over the valid rows.

    Shapes: ``pad (T,)`` bool True = padding; S ``(H, T, T)`` (default ``case.S``). Returns a scalar.

    Raises:
        ValueError: a bad mask, CLS pooling or a residual connection.
    """
    require_mean_pooling(case, "T6 (padding)")
    S = check_scores(case.S if S is None else S)
    H, T, _ = S.shape
    check_padding(pad, T)
    A = torch.softmax(S.masked_fill(pad[None, None, :], float("-inf")), -1)
    V = torch.einsum("td,hde->hte", case.X, case.W_V)
    O = torch.einsum("hij,hje->ihe", A, V).reshape(T, -1)
    Y = O if case.W_O is None else O @ case.W_O
    Z = case.f(Y)
    valid = (~pad).to(Z.dtype)
    return case.loss((Z * valid[:, None]).sum(0) / valid.sum())


def padded_score_gradient(case: AttentionCase, pad: Tensor, S: Tensor | None = None) -> Tensor:
    """Autograd ``grad_S L`` of :func:`padded_case_loss`, ``(H, T, T)`` (0 on padded keys)."""
    S0 = (case.S if S is None else S).detach().clone().requires_grad_(True)
    (G,) = torch.autograd.grad(padded_case_loss(case, pad, S0), S0)
    return G


def padded_closed_form(case: AttentionCase, pad: Tensor) -> Tensor:
    """T6(a): ``g : (H, T)`` with ``grad_S L = 1_valid g^T``; T1's g of the L valid tokens, 0 on padding.

    Computed by :func:`initlab.theory.attention.gradient.t1_closed_form` on the layer restricted to the
    valid tokens (an independent route: no mask, no -inf).

    Raises:
        ValueError: a bad mask, CLS pooling or a residual connection.
    """
    check_padding(pad, case.T)
    require_mean_pooling(case, "T6 (padding)")
    keep = ~pad
    Lv = int(keep.sum())
    sub = AttentionCase(case.X[keep], torch.zeros(case.H, Lv, Lv, dtype=case.X.dtype), case.W_V, case.W_O, case.f, case.loss, f_name=case.f_name, loss_name=case.loss_name)
    g = torch.zeros(case.H, case.T, dtype=case.X.dtype)
    g[:, keep] = t1_closed_form(sub)
    return g


def unmasked_padding_blind_fraction(T: int, L: int) -> float:
    """``sqrt(1 - L/T)``: the blind fraction that a projection *without* the mask reports for ``1_valid g^T``.

    Raises:
        ValueError: unless 1 <= L <= T.
    """
    if not (1 <= L <= T):
        raise ValueError(f"L, T: expected 1 <= L <= T, got L = {L}, T = {T}")
    return math.sqrt(1.0 - L / T)


def _check_drop(case: AttentionCase, keep: Tensor, p: float, kind: DropKind) -> None:
    if kind not in ("attention", "output"):
        raise ValueError(f"kind: expected 'attention' or 'output', got {kind!r}")
    if not (isinstance(p, (int, float)) and 0.0 <= p < 1.0):
        raise ValueError(f"p: expected a dropout probability in [0, 1), got {p!r}")
    if not isinstance(keep, torch.Tensor) or keep.dtype != torch.bool:
        raise ValueError(f"keep: expected a bool tensor (True = kept), got {type(keep).__name__} {getattr(keep, 'dtype', '')}")
    H, T = case.H, case.T
    m = case.W_O.shape[1] if case.W_O is not None else case.W_V.shape[0] * case.W_V.shape[2]
    want = (H, T, T) if kind == "attention" else (T, m)
    if tuple(keep.shape[-len(want):]) != want:
        raise ValueError(f"keep: expected shape (N, *{want}) for {kind} dropout, got {tuple(keep.shape)}")


def dropout_case_loss(case: AttentionCase, S: Tensor, keep: Tensor, p: float, kind: DropKind = "attention") -> Tensor:
    """Sum over N masks of L(S; mask), so the gradient w.r.t. a batched ``S : (N, H, T, T)`` is per mask.

    ``keep``: ``(N, H, T, T)`` (attention dropout) or ``(N, T, m)`` (output dropout on ``Y = O W_O``), bool.

    Raises:
        ValueError: bad kind, p, mask shape; CLS pooling or a residual connection.
    """
    require_mean_pooling(case, "T6 (dropout)")
    _check_drop(case, keep, p, kind)
    N, T = keep.shape[0], case.T
    A = torch.softmax(S, -1)
    if kind == "attention":
        A = A * keep.to(A.dtype) / (1 - p)
    V = torch.einsum("td,hde->hte", case.X, case.W_V)
    O = torch.einsum("nhij,hje->nihe", A, V).reshape(N, T, -1)
    Y = O if case.W_O is None else O @ case.W_O
    if kind == "output":
        Y = Y * keep.to(Y.dtype) / (1 - p)
    return case.loss(case.f(Y).mean(-2)).sum()


def dropout_score_gradient(case: AttentionCase, keep: Tensor, p: float, kind: DropKind = "attention") -> Tensor:
    """Per-mask autograd ``grad_S L`` at ``case.S`` (uniform), ``(N, H, T, T)``."""
    S = case.S.detach()[None].expand(keep.shape[0], *case.S.shape).clone().requires_grad_(True)
    (G,) = torch.autograd.grad(dropout_case_loss(case, S, keep, p, kind), S)
    return G


def dropout_gradient_from_R(case: AttentionCase, keep: Tensor, p: float, kind: DropKind = "attention") -> Tensor:
    """Identity (G) with the mask folded in (module docstring), ``(N, H, T, T)``: an independent route
    using autograd only from O (a leaf) to the loss, not through the softmax.
    """
    _check_drop(case, keep, p, kind)
    N, H, T = keep.shape[0], case.H, case.T
    V = torch.einsum("td,hde->hte", case.X, case.W_V)
    A0 = torch.full((N, H, T, T), 1.0 / T, dtype=V.dtype)
    Ad = A0 * keep.to(V.dtype) / (1 - p) if kind == "attention" else A0
    O = torch.einsum("nhij,hje->nhie", Ad, V).detach().requires_grad_(True)
    Y = O.permute(0, 2, 1, 3).reshape(N, T, -1)
    Y = Y if case.W_O is None else Y @ case.W_O
    if kind == "output":
        Y = Y * keep.to(Y.dtype) / (1 - p)
    (R,) = torch.autograd.grad(case.loss(case.f(Y).mean(-2)).sum(), O)  # (N, H, T, e)
    C = torch.einsum("nhie,hje->nhij", R, V)
    if kind == "attention":
        C = C * keep.to(C.dtype) / (1 - p)
    return (C - C.mean(-1, keepdim=True)) / T


def exact_dropout_expectation(case: AttentionCase, p: float, kind: DropKind = "attention", max_masks: int = 4096) -> Tensor:
    """``E_M[grad_S L]`` by enumerating every keep mask with its Bernoulli(1 - p) probability, ``(H, T, T)``.

    Raises:
        ValueError: more than ``max_masks`` masks (2^(H T^2) or 2^(T m)), or bad p / kind.
    """
    H, T = case.H, case.T
    m = case.W_O.shape[1] if case.W_O is not None else case.W_V.shape[0] * case.W_V.shape[2]
    shape = (H, T, T) if kind == "attention" else (T, m)
    n = math.prod(shape)
    if 2**n > max_masks:
        raise ValueError(f"case: exact enumeration needs 2^{n} masks > max_masks = {max_masks}; use a smaller T, H or m")
    keep = torch.tensor(list(itertools.product((False, True), repeat=n)), dtype=torch.bool).reshape(-1, *shape)
    k = keep.flatten(1).sum(1).to(torch.float64)
    prob = (1 - p) ** k * p ** (n - k)
    G = dropout_score_gradient(case, keep, p, kind)
    return torch.einsum("n,nhij->hij", prob, G)


def dropout_blind_fraction_curve(
    case: AttentionCase, p: float, ns: tuple[int, ...], gen: torch.Generator, kind: DropKind = "attention", reps: int = 4
) -> list[dict[str, float]]:
    """Blind fraction of the Monte Carlo mean gradient over n masks, for each n in ``ns`` (mean over
    ``reps`` independent repetitions), and the median per-mask blind fraction.

    Returns rows ``{"n", "blind_fraction", "per_mask_median"}``. Under T6(b) the first falls like n^{-1/2}.
    """
    H, T = case.H, case.T
    m = case.W_O.shape[1] if case.W_O is not None else case.W_V.shape[0] * case.W_V.shape[2]
    shape = (H, T, T) if kind == "attention" else (T, m)
    rows = []
    for n in ns:
        fr, med = [], []
        for _ in range(reps):
            acc, done, per = None, 0, []
            while done < n:
                b = min(1024, n - done)
                keep = torch.rand(b, *shape, generator=gen) >= p
                G = dropout_score_gradient(case, keep, p, kind)
                acc = G.sum(0) if acc is None else acc + G.sum(0)
                per.append(blind_fraction(G).flatten())
                done += b
            fr.append(float(blind_fraction(acc / n).mean()))
            med.append(float(torch.cat(per).median()))
        rows.append({"n": n, "blind_fraction": sum(fr) / reps, "per_mask_median": sum(med) / reps})
    return rows
