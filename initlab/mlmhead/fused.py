"""The SPLADE head fused with its max pooling: the pooled vector without the batch x length x vocabulary tensor.

SPLADE (Formal et al., "SPLADE v2: Sparse Lexical and Expansion Model for Information Retrieval",
arXiv:2109.10086, eq. 1) weights term ``j`` of a text with ``T`` tokens as

    w_j = max_t log(1 + ReLU(z_tj)),        z = H W^T + b        (T, V)

where ``H`` ``(T, d)`` is the output of the family's head transform (dense, activation, LayerNorm: the
input of the vocabulary projection), ``W`` ``(V, d)`` the vocabulary projection (the decoder, often tied to
the input embeddings) and ``b`` ``(V,)`` its bias. sentence-transformers computes this as its ``SpladePooling``
module does: the whole logits tensor ``(B, T, V)``, then ``log1p(relu(.))``, then the max over tokens, and
keeps the ``(B, T, V)`` tensors for the backward pass.

``log(1 + ReLU(.))`` is non-decreasing, so ``w_j = log(1 + ReLU(max_t z_tj))``: :func:`splade_max_pool`
computes the max and its argmax over tokens one block of vocabulary columns at a time (never holding
``B x T x V``), and its backward pass goes through the argmax token only, as sparse products costing
``O(B V d)`` instead of ``O(B T V d)``. :func:`splade_reference` is the slow obvious path, kept beside it and
compared with it (and with sentence-transformers' own module) in float64 tests.
"""

from __future__ import annotations

import warnings

import torch

__all__ = ["splade_max_pool", "splade_reference"]

#: the floating dtypes both functions accept
DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


# ------------------------------------------------------------------------------------------------
# arguments
# ------------------------------------------------------------------------------------------------
def _check(hidden, weight, bias, mask) -> None:
    """Shapes, dtypes and devices of the four tensors (see :func:`splade_max_pool`), each error naming its argument."""
    if not isinstance(hidden, torch.Tensor) or hidden.dim() != 3:
        raise ValueError(f"hidden: expected a tensor of shape (B, T, d), got "
                         f"{tuple(hidden.shape) if isinstance(hidden, torch.Tensor) else type(hidden).__name__}")
    if hidden.dtype not in DTYPES:
        raise ValueError(f"hidden: expected dtype float32, float64, bfloat16 or float16, got {hidden.dtype}")
    B, T, d = hidden.shape
    if T < 1:
        raise ValueError(f"hidden: expected at least one token (T >= 1), got shape {tuple(hidden.shape)}")
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or weight.shape[1] != d:
        got = tuple(weight.shape) if isinstance(weight, torch.Tensor) else type(weight).__name__
        raise ValueError(f"weight: expected a tensor of shape (V, d) with d = {d} (hidden's last size), got {got}")
    if weight.dtype != hidden.dtype or weight.device != hidden.device:
        raise ValueError(f"weight: expected hidden's dtype and device ({hidden.dtype}, {hidden.device}), got "
                         f"{weight.dtype}, {weight.device}")
    V = weight.shape[0]
    if V < 1:
        raise ValueError(f"weight: expected at least one vocabulary row (V >= 1), got shape {tuple(weight.shape)}")
    if bias is not None:
        if not isinstance(bias, torch.Tensor) or tuple(bias.shape) != (V,):
            got = tuple(bias.shape) if isinstance(bias, torch.Tensor) else type(bias).__name__
            raise ValueError(f"bias: expected None or a tensor of shape ({V},) (weight's rows), got {got}")
        if bias.dtype != hidden.dtype or bias.device != hidden.device:
            raise ValueError(f"bias: expected hidden's dtype and device ({hidden.dtype}, {hidden.device}), got "
                             f"{bias.dtype}, {bias.device}")
    if not isinstance(mask, torch.Tensor) or tuple(mask.shape) != (B, T):
        got = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise ValueError(f"mask: expected an attention mask of shape (B, T) = {(B, T)}, got {got}")
    if mask.dtype.is_floating_point or mask.dtype.is_complex:
        raise ValueError(f"mask: expected a bool or integer attention mask (1 = token, 0 = padding), got {mask.dtype}")
    if mask.device != hidden.device:
        raise ValueError(f"mask: expected hidden's device {hidden.device}, got {mask.device}")
    if mask.dtype != torch.bool and bool(((mask != 0) & (mask != 1)).any()):
        raise ValueError("mask: expected values 0 (padding) and 1 (token) only, got others")


def _check_block(block) -> int:
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"block: expected an int >= 1 (vocabulary columns per block), got {block!r}")
    return block


# ------------------------------------------------------------------------------------------------
# the slow obvious path
# ------------------------------------------------------------------------------------------------
def splade_reference(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                     mask: torch.Tensor) -> torch.Tensor:
    """SPLADE max pooling the way sentence-transformers computes it: all logits, ``log1p(relu)``, mask, max.

    The logits are ``torch.nn.functional.linear(hidden, weight, bias)`` (what a family's decoder
    ``nn.Linear`` computes); the rest follows ``SpladePooling.forward`` of sentence-transformers 6.3
    (``sentence_transformers/sparse_encoder/modules/splade_pooling.py``, pooling ``"max"``, activation
    ``"relu"``, one chunk): the logits are multiplied by the mask (padding logits become 0), then
    ``log1p(relu(.))``, then ``torch.max(., dim=1)[0]`` over tokens. Formula: SPLADE v2, arXiv:2109.10086, eq. 1.

    Ties: ``torch.max(dim=1)`` returns (and its backward sends the whole gradient to) the first maximal
    token; the tests check this on this torch.

    Args:
        hidden: ``(B, T, d)`` output of the head transform (the decoder's input).
        weight: ``(V, d)`` decoder (vocabulary projection).
        bias: ``(V,)`` decoder bias, or None.
        mask: ``(B, T)`` bool or integer attention mask, 1 = token, 0 = padding.
    Returns:
        ``(B, V)`` pooled term weights, ``>= 0``; a row whose mask is all 0 is all 0. Holds ``B x T x V``
        tensors (forward and backward).
    Raises:
        ValueError: a shape, dtype or device that does not fit (the message names the argument).
    """
    _check(hidden, weight, bias, mask)
    logits = torch.nn.functional.linear(hidden, weight, bias)
    transformed = torch.log1p(torch.relu(logits * mask.unsqueeze(-1).to(logits.dtype)))
    return torch.max(transformed, dim=1)[0]


# ------------------------------------------------------------------------------------------------
# the fused path
# ------------------------------------------------------------------------------------------------
def _csr(crow: torch.Tensor, col: torch.Tensor, val: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    with warnings.catch_warnings():  # "sparse CSR support is in beta": the products used here are tested
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(crow, col, val, size, check_invariants=False)


def _sparse_dtype(dtype: torch.dtype) -> torch.dtype:
    # the CPU sparse products have no bfloat16/float16 kernels: those run (and accumulate) in float32
    return torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype


class _SpladeMaxPool(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, bias, mask, block):
        B, T, d = hidden.shape
        V = weight.shape[0]
        h2 = hidden.reshape(B * T, d)
        pad = None if bool(mask.all()) else ~mask.bool().unsqueeze(-1)  # (B, T, 1), True on padding
        zmax = torch.empty(B, V, dtype=hidden.dtype, device=hidden.device)
        arg = torch.empty(B, V, dtype=torch.long, device=hidden.device)
        for j0 in range(0, V, block):
            j1 = min(V, j0 + block)
            w = weight[j0:j1].t()
            z = (torch.addmm(bias[j0:j1], h2, w) if bias is not None else h2 @ w).view(B, T, j1 - j0)
            if pad is not None:
                z.masked_fill_(pad, float("-inf"))  # padding never wins
            torch.max(z, dim=1, out=(zmax[:, j0:j1], arg[:, j0:j1]))  # the first maximal token on ties
        ctx.save_for_backward(hidden, weight, zmax, arg)
        ctx.has_bias = bias is not None
        return torch.log1p(torch.relu(zmax))

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        hidden, weight, zmax, arg = ctx.saved_tensors
        B, T, d = hidden.shape
        V = weight.shape[0]
        # the chain of the reference, in its order: log1p' = 1 / (1 + x) at x = relu(z), then relu' = [z > 0]
        g = (grad_out / (torch.relu(zmax) + 1)).masked_fill_(zmax <= 0, 0)
        need_h, need_w, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.needs_input_grad[2]
        grad_h = grad_w = grad_b = None
        if need_b and ctx.has_bias:
            grad_b = g.sum(0)
        if need_h or need_w:
            sdt = _sparse_dtype(hidden.dtype)
            rows = arg + torch.arange(B, device=arg.device).unsqueeze(1) * T  # (B, V) the winning token's row
            gs = g.to(sdt)
            if need_w:  # grad W = G^T H, G^T (V, B T) has exactly B entries in every row j
                crow = torch.arange(0, B * V + 1, B, device=arg.device) if B else torch.zeros(V + 1, dtype=torch.long,
                                                                                               device=arg.device)
                gt = _csr(crow, rows.t().reshape(-1), gs.t().reshape(-1), (V, B * T))
                grad_w = (gt @ hidden.reshape(B * T, d).to(sdt)).to(hidden.dtype)
            if need_h:  # grad H = G W, G (B T, V): the entries sorted by their token row
                flat = rows.reshape(-1)
                order = torch.argsort(flat, stable=True)
                counts = torch.bincount(flat, minlength=B * T)
                crow = torch.zeros(B * T + 1, dtype=torch.long, device=arg.device)
                torch.cumsum(counts, 0, out=crow[1:])
                gm = _csr(crow, order % V, gs.reshape(-1)[order], (B * T, V))
                grad_h = (gm @ weight.to(sdt)).to(hidden.dtype).view(B, T, d)
        return grad_h, grad_w, grad_b, None, None


def splade_max_pool(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, mask: torch.Tensor, *,
                    block: int = 2048) -> torch.Tensor:
    """SPLADE max pooling fused with the vocabulary projection: ``log1p(relu(max_t (H W^T + b)))``, never ``B x T x V``.

    Computes, for every text ``b`` and term ``j``,
    ``w_bj = log(1 + ReLU(max over unmasked t of (hidden[b, t] . weight[j] + bias[j])))`` (SPLADE v2,
    arXiv:2109.10086, eq. 1, with the max taken before the monotone ``log(1 + ReLU(.))``); the same values as
    :func:`splade_reference` and sentence-transformers' ``SpladePooling`` (max, relu) on the decoder's logits.

    Forward: for each block of ``block`` vocabulary columns, the logits ``(B, T, block)`` (masked tokens set
    to ``-inf``, so padding never wins), their max and first argmax over tokens; peak extra memory
    ``B T block`` logits instead of ``B T V``. The max is taken on the logits in the input dtype, as torch's
    ``max`` does on the reference's logits (the matmul itself accumulates as torch's ``addmm`` does).

    Backward (through the argmax token only): ``g = grad_out * [z* > 0] / (1 + relu(z*))`` with ``z*`` the
    max logit; ``grad_bias = sum_b g``; ``grad_weight[j] = sum_b g[b, j] hidden[b, t*(b, j)]`` and
    ``grad_hidden[b, t] = sum_{j: t*(b, j) = t} g[b, j] weight[j]``, both as sparse CSR products with
    ``B V`` entries (``O(B V d)``); for bfloat16/float16 inputs these products run in float32 and are
    rounded once to the input dtype. Tied decoders: pass the shared Parameter as ``weight``; autograd adds
    this gradient to the embedding's other uses. Not twice differentiable.

    Under ``torch.autocast`` (mixed-precision training: sentence-transformers' trainer with ``bf16=True``) the
    float32 inputs are cast to autocast's dtype first, as autocast casts them for the decoder's ``nn.Linear`` on
    the dense path, and the pooling runs in that dtype with autocast off; the gradients go back through the casts to
    the float32 parameters.

    Tie rule: when several unmasked tokens share the max logit of ``(b, j)``, the first one in ``t``
    receives the whole gradient -- what ``torch.max(dim=1)`` in the reference does on the transformed values
    (tested). Rows whose mask is all 0: the pooled row is all 0 and passes no gradient, as in the reference.

    Args:
        hidden: ``(B, T, d)`` output of the family's head transform (the decoder's input), ``T >= 1``;
            float32, float64, bfloat16 or float16.
        weight: ``(V, d)`` decoder weight (vocabulary projection), hidden's dtype and device.
        bias: ``(V,)`` decoder bias, or None.
        mask: ``(B, T)`` bool or integer attention mask: 1 = token, 0 = padding.
        block: vocabulary columns per block (>= 1); memory ``B T block`` logits, speed best near 2048 on CPU.
    Returns:
        ``(B, V)`` pooled term weights (``>= 0``) in hidden's dtype.
    Raises:
        ValueError: a shape, dtype, device or mask value that does not fit, or ``block < 1`` (the message
            names the argument and the expected form).
    """
    dev = hidden.device.type if isinstance(hidden, torch.Tensor) else "cpu"
    if torch.is_autocast_enabled(dev):  # as autocast runs the decoder's nn.Linear: float32 inputs in its dtype
        low = torch.get_autocast_dtype(dev)
        hidden, weight, bias = (x.to(low) if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x
                                for x in (hidden, weight, bias))
        _check(hidden, weight, bias, mask)
        with torch.autocast(dev, enabled=False):
            return _SpladeMaxPool.apply(hidden, weight, bias, mask, _check_block(block))
    _check(hidden, weight, bias, mask)
    block = _check_block(block)
    return _SpladeMaxPool.apply(hidden, weight, bias, mask, block)
