"""T7: the first layer's blind fraction in a stack of layers (depth, residuals, FFN, LayerNorm).

Setting: ``x_0 = X : (T, d)`` (token embeddings plus positions, so rows differ), then ``depth`` pre-norm
blocks, block l: ``x <- x + Attn_l(LN(x))`` and, with an FFN, ``x <- x + FFN(LN(x))`` (without residual:
``x <- Attn_l(LN(x))``, ``x <- FFN(LN(x))``; without LayerNorm, LN = identity). ``Attn_l`` has H heads
of width e, values ``W_V[l] : (H, d, e)``, output ``W_O[l] : (H e, d)``; the first layer's scores ``S_1``
are the variable (uniform: ``S_1 = 0``), the later layers' attention is uniform (scores 0) or
random (``S = LN(x) W_Q W_K^T LN(x)^T / sqrt(e)``, random W_Q, W_K). Then a final LN (if any), mean
pooling over positions, a linear head and a loss. ``O_1 : (T, H e)`` is the first layer's
concatenated attention output, ``R_1 = dL/dO_1`` and ``V_1 = LN(X) W_V[1]``.

T7. At uniform first-layer attention, identity (G) gives ``grad_{S_1,h} L = (1/T) R_1,h V_1,h^T Pi``,
so the first layer is blind iff R_1 has equal rows (T5). Then:

(a) No residual: every row of O_1 is the same (``O_1 = 1 obar^T``) and the network after O_1 is
permutation-equivariant (attention of any kind, FFN, LayerNorm are; no positions are added later)
followed by mean pooling, hence permutation-invariant in the rows of O_1. A permutation-invariant
function has equal row gradients at a point with equal rows, so ``R_1 = 1 r^T`` with
``r = (1/T) grad_obar Phi(1 obar^T)`` (Phi = the network after O_1) and

    grad_{S_1,h} L = 1 g_h^T,   g_h = (1/T) Pi V_1,h r_h          (blind, any later layers).

(b) Residual, later layers uniform-attention and linear (no FFN, no LayerNorm, linear head): every
later layer maps the mean ``xbar <- xbar (I + W_V,cat[l] W_O[l])``, so the pooled vector is linear in
the mean of x_1 and ``R_1 = 1 r^T`` with

    r = (1/T) W_O[1] prod_{l >= 2} (I + W_V,cat[l] W_O[l]) W_head grad_logits L    (blind).

(c) Residual with a random-attention later layer, or with an FFN or LayerNorm (non-linear position-wise
maps of rows that differ by X): R_1's rows differ and the first layer has a blind component (measured,
no closed form; :func:`blind_fraction_table`).

The experiment model of the synthetic runs (one pre-norm block with residuals, FFN, LayerNorm and
random W_Q, W_K with biases, so the first layer's attention is not uniform either) is case (c) plus
T5's non-uniform attention; :func:`experiment_like_blind_fraction` measures it and its ablations.

Source: derived here (permutation symmetry of mean pooling; identity (G) from the softmax Jacobian);
checked in :mod:`initlab.theory.attention.symbolic` and :mod:`initlab.theory.attention.checks`.
Pre-norm blocks: Xiong et al., "On Layer Normalization in the Transformer Architecture", arXiv:2002.04745.
Statement texts: :mod:`initlab.theory.statements`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import torch

from initlab.theory.subspace import blind_component, blind_fraction

__all__ = [
    "StackSpec",
    "Stack",
    "random_stack",
    "stack_loss",
    "first_layer_gradient",
    "first_layer_R",
    "no_residual_closed_form",
    "residual_linear_closed_form",
    "blind_fraction_table",
    "experiment_like_blind_fraction",
]

Tensor = torch.Tensor
F64 = torch.float64


@dataclass(frozen=True)
class StackSpec:
    """Architecture switches of a stack (see the module docstring).

    Attributes:
        depth: number of blocks (>= 1); residual, ffn, layernorm: on/off;
        later_attention: ``"uniform"`` or ``"random"`` for blocks 2..depth;
        first_attention: ``"uniform"`` (S_1 = 0) or ``"random"`` (random W_Q, W_K with biases).
    """

    depth: int = 2
    residual: bool = False
    ffn: bool = False
    layernorm: bool = False
    later_attention: Literal["uniform", "random"] = "uniform"
    first_attention: Literal["uniform", "random"] = "uniform"

    def __post_init__(self) -> None:
        if not (isinstance(self.depth, int) and self.depth >= 1):
            raise ValueError(f"depth: expected an integer >= 1, got {self.depth!r}")
        for name in ("later_attention", "first_attention"):
            if getattr(self, name) not in ("uniform", "random"):
                raise ValueError(f"{name}: expected 'uniform' or 'random', got {getattr(self, name)!r}")

    def label(self) -> str:
        parts = [f"depth {self.depth}", "residual" if self.residual else "no residual"]
        parts += ["FFN"] * self.ffn + ["LayerNorm"] * self.layernorm
        parts.append(f"later attention {self.later_attention}")
        if self.first_attention != "uniform":
            parts.append("first attention random")
        return ", ".join(parts)


@dataclass
class Stack:
    """Parameters (float64) of a stack for a batch ``X : (B, T, d)``; ``layers[l]`` is a dict of tensors."""

    spec: StackSpec
    X: Tensor
    layers: list[dict[str, Tensor]]
    W_head: Tensor  # (d, n_classes)
    labels: Tensor  # (B,) int64
    heads: int
    e: int = field(default=0)


def _ln(x: Tensor, on: bool) -> Tensor:
    return torch.nn.functional.layer_norm(x, x.shape[-1:]) if on else x


def random_stack(gen: torch.Generator, spec: StackSpec, T: int, d: int = 8, heads: int = 2, e: int = 3, d_ff: int = 16,
                 batch: int = 1, n_classes: int = 3, init: Literal["normal", "torch_linear"] = "normal", vocab: int = 0) -> Stack:
    """Draw a :class:`Stack`. ``init="normal"``: N(0, 1/fan_in) weights, N(0, 0.1^2) biases;
    ``"torch_linear"``: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases (``nn.Linear``'s default).
    ``X`` = N(0, 1) rows, or with ``vocab > 0`` N(0, 1) embeddings of uniform tokens from ``vocab``,
    plus sinusoidal positions (Vaswani et al., arXiv:1706.03762, section 3.5).

    Raises:
        ValueError: T < 2 or non-positive sizes.
    """
    if T < 2 or min(d, heads, e, d_ff, batch, n_classes) < 1:
        raise ValueError(f"T, d, heads, e, d_ff, batch, n_classes: expected T >= 2 and positive sizes, got {(T, d, heads, e, d_ff, batch, n_classes)}")

    def w(*shape, fan):
        if init == "normal":
            return torch.randn(*shape, generator=gen, dtype=F64) / math.sqrt(fan)
        return (torch.rand(*shape, generator=gen, dtype=F64) * 2 - 1) / math.sqrt(fan)

    def b(*shape, fan):
        if init == "normal":
            return 0.1 * torch.randn(*shape, generator=gen, dtype=F64)
        return (torch.rand(*shape, generator=gen, dtype=F64) * 2 - 1) / math.sqrt(fan)

    if vocab > 0:
        E = torch.randn(vocab, d, generator=gen, dtype=F64)
        X = E[torch.randint(vocab, (batch, T), generator=gen)]
    else:
        X = torch.randn(batch, T, d, generator=gen, dtype=F64)
    pos = torch.arange(T, dtype=F64)[:, None] / 10000 ** (torch.arange(0, d, 2, dtype=F64) / d)
    P = torch.zeros(T, d, dtype=F64)
    P[:, 0::2], P[:, 1::2] = torch.sin(pos), torch.cos(pos[:, : d // 2])
    X = X + P
    layers = []
    for l in range(spec.depth):
        L = {"W_V": w(heads, d, e, fan=d), "b_V": b(heads, e, fan=d), "W_O": w(heads * e, d, fan=heads * e), "b_O": b(d, fan=heads * e)}
        kind = spec.first_attention if l == 0 else spec.later_attention
        if kind == "random":
            L.update(W_Q=w(heads, d, e, fan=d), b_Q=b(heads, e, fan=d), W_K=w(heads, d, e, fan=d), b_K=b(heads, e, fan=d))
        if spec.ffn:
            L.update(W_1=w(d, d_ff, fan=d), b_1=b(d_ff, fan=d), W_2=w(d_ff, d, fan=d_ff), b_2=b(d, fan=d_ff))
        layers.append(L)
    W_head = w(d, n_classes, fan=d)
    labels = torch.randint(n_classes, (batch,), generator=gen)
    return Stack(spec, X, layers, W_head, labels, heads, e)


def _scores(L: dict[str, Tensor], h: Tensor) -> Tensor:
    """``(B, H, T, T)`` scores of a random-attention layer (zeros for a uniform one)."""
    if "W_Q" not in L:
        B, T = h.shape[:2]
        return torch.zeros(B, L["W_V"].shape[0], T, T, dtype=h.dtype)
    q = torch.einsum("btd,hdk->bhtk", h, L["W_Q"]) + L["b_Q"][None, :, None, :]
    k = torch.einsum("btd,hdk->bhtk", h, L["W_K"]) + L["b_K"][None, :, None, :]
    return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])


def _after_O1(st: Stack, O1: Tensor) -> Tensor:
    """The network after the first layer's attention output ``O1 : (B, T, H e)``; returns the loss (summed over B)."""
    sp = st.spec
    L = st.layers[0]
    a = O1 @ L["W_O"] + L["b_O"]
    x = st.X + a if sp.residual else a
    for l, L in enumerate(st.layers):
        if l > 0:
            h = _ln(x, sp.layernorm)
            A = torch.softmax(_scores(L, h), -1)
            V = torch.einsum("btd,hde->bhte", h, L["W_V"]) + L["b_V"][None, :, None, :]
            O = torch.einsum("bhij,bhje->bihe", A, V).flatten(2)
            a = O @ L["W_O"] + L["b_O"]
            x = x + a if sp.residual else a
        if sp.ffn:
            u = torch.nn.functional.gelu(_ln(x, sp.layernorm) @ L["W_1"] + L["b_1"]) @ L["W_2"] + L["b_2"]
            x = x + u if sp.residual else u
    logits = _ln(x, sp.layernorm).mean(1) @ st.W_head
    return torch.nn.functional.cross_entropy(logits, st.labels, reduction="sum")


def _V1(st: Stack) -> Tensor:
    L = st.layers[0]
    return torch.einsum("btd,hde->bhte", _ln(st.X, st.spec.layernorm), L["W_V"]) + L["b_V"][None, :, None, :]


def first_layer_S(st: Stack) -> Tensor:
    """The first layer's scores at the stack's parameters, ``(B, H, T, T)`` (zeros when uniform)."""
    return _scores(st.layers[0], _ln(st.X, st.spec.layernorm))


def stack_loss(st: Stack, S1: Tensor) -> Tensor:
    """Loss (summed over the batch) as a function of the first layer's scores ``S1 : (B, H, T, T)``."""
    O1 = torch.einsum("bhij,bhje->bihe", torch.softmax(S1, -1), _V1(st)).flatten(2)
    return _after_O1(st, O1)


def first_layer_gradient(st: Stack, S1: Tensor | None = None) -> Tensor:
    """Autograd ``grad_{S_1} L``, ``(B, H, T, T)``, at ``S1`` (default: the stack's own first-layer scores)."""
    S = (first_layer_S(st) if S1 is None else S1).detach().clone().requires_grad_(True)
    (G,) = torch.autograd.grad(stack_loss(st, S), S)
    return G


def first_layer_R(st: Stack) -> tuple[Tensor, Tensor]:
    """``R_1 = dL/dO_1`` as ``(B, H, T, e)`` at uniform first-layer attention, and ``V_1 : (B, H, T, e)``."""
    V = _V1(st)
    B, H, T, e = V.shape
    O1 = V.mean(2, keepdim=True).expand(B, H, T, e).detach().requires_grad_(True)
    (R,) = torch.autograd.grad(_after_O1(st, O1.permute(0, 2, 1, 3).flatten(2)), O1)
    return R, V


def no_residual_closed_form(st: Stack) -> Tensor:
    """T7(a): ``g = (1/T) Pi V_1 r``, ``r = (1/T) grad_obar Phi(1 obar^T)``, shape ``(B, H, T)``.

    ``r`` comes from autograd of the network after O_1 with respect to one shared row ``obar`` (an
    independent route: no softmax, no per-row gradient).

    Raises:
        ValueError: the stack has a residual connection (T7(a) does not apply).
    """
    if st.spec.residual:
        raise ValueError("st: T7(a) needs a stack without residual connections")
    V = _V1(st)
    B, H, T, e = V.shape
    obar = V.mean(2).detach().requires_grad_(True)  # (B, H, e)
    (u,) = torch.autograd.grad(_after_O1(st, obar.flatten(1)[:, None, :].expand(B, T, H * e)), obar)
    c = torch.einsum("bhte,bhe->bht", V, u / T)
    return (c - c.mean(-1, keepdim=True)) / T


def residual_linear_closed_form(st: Stack) -> Tensor:
    """T7(b): ``g = (1/T) Pi V_1 r`` with the explicit ``r`` of the module docstring, ``(B, H, T)``.

    Raises:
        ValueError: the stack is not residual, uniform-attention and linear after the first layer.
    """
    sp = st.spec
    if not sp.residual or sp.ffn or sp.layernorm or sp.later_attention != "uniform" or sp.first_attention != "uniform":
        raise ValueError("st: T7(b) needs residual blocks with uniform attention and no FFN or LayerNorm")
    V = _V1(st)
    B, H, T, e = V.shape
    d = st.X.shape[-1]
    M = torch.eye(d, dtype=F64)
    for L in st.layers[1:]:
        M = M @ (torch.eye(d, dtype=F64) + L["W_V"].permute(1, 0, 2).reshape(d, -1) @ L["W_O"])
    xbar = st.X.mean(1) + V.mean(2).flatten(1) @ st.layers[0]["W_O"] + st.layers[0]["b_O"]  # (B, d), mean of x_1
    for L in st.layers[1:]:
        xbar = xbar + (xbar @ L["W_V"].permute(1, 0, 2).reshape(d, -1) + L["b_V"].reshape(-1)) @ L["W_O"] + L["b_O"]
    logits = (xbar @ st.W_head).detach().requires_grad_(True)
    (gl,) = torch.autograd.grad(torch.nn.functional.cross_entropy(logits, st.labels, reduction="sum"), logits)
    r = (gl @ st.W_head.T @ M.T @ st.layers[0]["W_O"].T / T).reshape(B, H, e)
    c = torch.einsum("bhte,bhe->bht", V, r)
    return (c - c.mean(-1, keepdim=True)) / T


def blind_fraction_table(specs: list[StackSpec], T: int, seeds: int, seed: int = 0, **sizes) -> list[dict]:
    """First-layer blind fraction (uniform first layer) per spec: min, median, max over ``seeds`` stacks.

    ``sizes`` go to :func:`random_stack`. Returns rows ``{"spec", "label", "min", "median", "max"}``.
    """
    rows = []
    for k, spec in enumerate(specs):
        gen = torch.Generator().manual_seed(seed * 1000 + k)
        fr = []
        for _ in range(seeds):
            st = random_stack(gen, spec, T, **sizes)
            fr.append(float(blind_fraction(first_layer_gradient(st).flatten(0, 1)).mean()))
        fr.sort()
        rows.append({"spec": spec.__dict__, "label": spec.label(), "min": fr[0], "median": fr[len(fr) // 2], "max": fr[-1]})
    return rows


def experiment_like_blind_fraction(seeds: int = 5, T: int = 100, d: int = 32, d_ff: int = 64, batch: int = 64, vocab: int = 16) -> list[dict]:
    """Batch blind fraction ``||P_B G||_F / ||G||_F`` (over the whole batch, as the synthetic runs
    measure it) of the first layer's score gradient for a depth-1 stack sized like the synthetic
    experiment model (pre-norm, residual, FFN, LayerNorm, one head, ``nn.Linear`` init, random W_Q, W_K
    with biases, 2 classes, random labels) and ablations that remove one ingredient at a time.

    Returns rows ``{"label", "mean", "sd", "values"}`` over ``seeds`` draws (seeds 0..seeds-1).
    """
    variants = [
        ("experiment-like: residual, FFN, LayerNorm, random W_Q/W_K", StackSpec(1, True, True, True, "uniform", "random")),
        ("first-layer attention uniform (W_Q = W_K = 0)", StackSpec(1, True, True, True, "uniform", "uniform")),
        ("no FFN, no LayerNorm (random W_Q/W_K)", StackSpec(1, True, False, False, "uniform", "random")),
        ("no FFN, no LayerNorm, uniform attention", StackSpec(1, True, False, False, "uniform", "uniform")),
        ("no residual (FFN, LayerNorm, uniform attention)", StackSpec(1, False, True, True, "uniform", "uniform")),
    ]
    rows = []
    for label, spec in variants:
        vals = []
        for s in range(seeds):
            gen = torch.Generator().manual_seed(s)
            st = random_stack(gen, spec, T, d=d, heads=1, e=d, d_ff=d_ff, batch=batch, n_classes=2, init="torch_linear", vocab=vocab)
            G = first_layer_gradient(st)
            vals.append(float(blind_component(G).norm() / G.norm()))
        mean = sum(vals) / len(vals)
        sd = (sum((v - mean) ** 2 for v in vals) / max(1, len(vals) - 1)) ** 0.5
        rows.append({"label": label, "mean": mean, "sd": sd, "values": vals})
    return rows
