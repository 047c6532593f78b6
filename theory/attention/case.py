"""The attention layer of theorems T1-T7 as code: random cases, the forward pass, and its gradients by
autograd and central differences.

Role: the numeric side of every check. One attention layer on one sequence of length T (the setting of
:mod:`initlab.theory.attention.gradient`, whose docstring states it in full):

    X : (T, d),  S : (H, T, T),  A = row-softmax(S),  V_h = X W_V[h] : (T, e),
    O = concat_h A_h V_h : (T, H e),  Y = O W_O : (T, m) (or O; plus X with a residual),
    Z = f(Y) : (T, n) position-wise,  p = mean_t Z_t (or Z_0 for CLS pooling),  L = loss(p).

:class:`AttentionCase` holds one instance, :func:`random_case` draws one, :func:`case_loss` evaluates L;
:func:`score_gradient`, :func:`output_gradient` and :func:`bilinear_score_gradient` differentiate it by
autograd, :func:`score_gradient_central_difference` and :func:`directional_central_difference` by
central differences (the slow obvious references). The closed forms they are compared with live in
:mod:`initlab.theory.attention.gradient` and the modules it names. Source of the setting: Amos et al.,
"Never Train from Scratch", ICLR 2024, arXiv:2310.02980.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal

import torch

__all__ = [
    "POSITIONWISE_MAPS",
    "LOSSES",
    "AttentionCase",
    "check_scores",
    "check_matrix",
    "require_mean_pooling",
    "make_positionwise_map",
    "make_loss",
    "random_case",
    "layer_forward",
    "case_loss",
    "score_gradient",
    "score_gradient_central_difference",
    "directional_central_difference",
    "output_gradient",
    "bilinear_score_gradient",
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


def require_mean_pooling(case: "AttentionCase", what: str) -> None:
    """Raise unless ``case`` has mean pooling and no residual (the setting of T1, T3 and the T6/T1' closed forms).

    Raises:
        ValueError: CLS pooling or a residual connection, naming ``what`` needed it.
    """
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
    """One random instance of the one-layer attention setting of the module docstring (all tensors float64).

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
# the layer and its gradients by autograd and central differences
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
