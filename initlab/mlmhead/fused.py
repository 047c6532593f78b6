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


def _index_dtype(*sizes: int) -> torch.dtype:
    # int32 indices sort and multiply faster; int64 only when a count could overflow them
    return torch.int32 if max(sizes) < 2 ** 31 - 1 else torch.long


#: entries of the sparse matrix G (B T, V) sorted at once in the backward pass (texts are taken in chunks of about
#: this many entries, to bound the sort's temporaries)
_SORT_CHUNK = 2 ** 18


def _first_max(z: torch.Tensor, rev: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Max over dim 1 of ``z`` ``(B, T, n)`` and the first index reaching it, ``(B, n)`` each (as ``torch.max``)."""
    if rev is None:  # T >= 256: torch.max's own index
        return torch.max(z, dim=1)
    # T < 256: amax over the middle dimension is vectorised (several times faster on CPU than torch.max with its
    # index); the first maximal token is then the largest of (T - t) over the tokens equal to the max
    v = torch.amax(z, dim=1)
    hit = (z == v.unsqueeze(1)).view(torch.uint8).mul_(rev).amax(dim=1)  # T - first t, 0 if none (a NaN max)
    return v, hit.to(torch.int16).neg_().add_(z.shape[1]).clamp_(max=z.shape[1] - 1)


class _SpladeMaxPool(torch.autograd.Function):
    # The logits of a block are (B T, block) = H W_blk^T + b_blk, viewed (B, T, block) for the max over each text's
    # tokens; the max and the argmax (in the smallest integer type that holds T) are kept as (B, V).
    @staticmethod
    def forward(ctx, hidden, weight, bias, mask, block, need_arg):
        B, T, d = hidden.shape
        V = weight.shape[0]
        dev = hidden.device
        h2 = hidden.reshape(B * T, d)
        pad = (mask.reshape(-1) == 0).nonzero().flatten()  # rows b T + t that are padding
        rev = torch.arange(T, 0, -1, dtype=torch.uint8, device=dev).view(1, T, 1) if T < 256 else None
        zmax = torch.empty(B, V, dtype=hidden.dtype, device=dev)
        arg = torch.empty(B, V, dtype=torch.int16 if T <= 2 ** 15 else torch.int32, device=dev) if need_arg else None
        for j0 in range(0, V, block):
            j1 = min(V, j0 + block)
            w = weight[j0:j1].t()
            z = torch.addmm(bias[j0:j1], h2, w) if bias is not None else h2 @ w
            if pad.numel():
                z.index_fill_(0, pad, float("-inf"))  # padding never wins
            if need_arg:
                v, i = _first_max(z.view(B, T, j1 - j0), rev)  # the first maximal token on ties
                arg[:, j0:j1] = i
                del i
            else:  # no gradient will be asked for: the max alone (the argmax search is a third of this loop)
                v = torch.amax(z.view(B, T, j1 - j0), dim=1)
            zmax[:, j0:j1] = v
            del z, v
        if need_arg:
            ctx.save_for_backward(hidden, weight, zmax, arg)
        ctx.has_bias = bias is not None
        return torch.relu(zmax).log1p_()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        hidden, weight, zmax, arg = ctx.saved_tensors  # zmax, arg: (B, V)
        B, T, d = hidden.shape
        V = weight.shape[0]
        dev = arg.device
        # the chain of the reference, in its order: log1p' = 1 / (1 + x) at x = relu(z), then relu' = [z > 0]
        # (B, V); where z* > 0, relu(z*) + 1 = z* + 1 exactly
        g = torch.where(zmax > 0, grad_out / (zmax + 1), 0)
        need_h, need_w, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.needs_input_grad[2]
        grad_h = grad_w = grad_b = None
        if need_b and ctx.has_bias:
            grad_b = g.sum(0)
        if B == 0:  # an empty batch
            return (torch.zeros_like(hidden) if need_h else None, torch.zeros_like(weight) if need_w else None,
                    grad_b, None, None, None)
        sdt = _sparse_dtype(hidden.dtype)
        idt = _index_dtype(B * T, B * V + 1)
        gs = g.to(sdt)
        del g
        if need_w:  # grad W = G^T H, G^T (V, B T): in row j, text b's entry g[b, j] at column b T + t*(b, j)
            cols = torch.empty(V, B, dtype=idt, device=dev).copy_(arg.t())
            cols.add_(torch.arange(B, device=dev, dtype=idt) * T)
            vals = torch.empty(V, B, dtype=sdt, device=dev).copy_(gs.t())
            crow = torch.arange(0, B * V + 1, B, device=dev, dtype=idt)
            grad_w = torch.empty(V, d, dtype=sdt, device=dev)  # addmm into it: the product allocates nothing more
            torch.addmm(grad_w, _csr(crow, cols.view(-1), vals.view(-1), (V, B * T)), hidden.reshape(B * T, d).to(sdt),
                        beta=0, out=grad_w)
            grad_w = grad_w.to(hidden.dtype)
            del cols, vals, crow
        if need_h:  # grad H = G W, G (B T, V): the entries of a chunk of texts sorted (stably: j ascending) by row
            grad_h = torch.empty(B * T, d, dtype=sdt, device=dev)
            w = weight.to(sdt)
            step = max(1, _SORT_CHUNK // V)
            for b0 in range(0, B, step):
                b1 = min(B, b0 + step)
                n = (b1 - b0) * T
                kdt = torch.int16 if n < 2 ** 15 else idt  # smaller sort keys sort faster
                flat = arg[b0:b1].to(kdt).add_(torch.arange(b1 - b0, device=dev, dtype=kdt)[:, None] * T).view(-1)
                order = torch.argsort(flat, stable=True)
                crow = torch.zeros(n + 1, dtype=idt, device=dev)
                torch.cumsum(torch.bincount(flat, minlength=n), 0, out=crow[1:])
                del flat
                cols = torch.remainder(order, V).to(idt)
                vals = gs[b0:b1].reshape(-1)[order]
                del order
                part = grad_h[b0 * T:b1 * T]
                torch.addmm(part, _csr(crow, cols, vals, (n, V)), w, beta=0, out=part)
                del crow, cols, vals
            grad_h = grad_h.to(hidden.dtype).view(B, T, d)
        return grad_h, grad_w, grad_b, None, None, None


def _needs_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def splade_max_pool(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, mask: torch.Tensor, *,
                    block: int = 512) -> torch.Tensor:
    """SPLADE max pooling fused with the vocabulary projection: ``log1p(relu(max_t (H W^T + b)))``, never ``B x T x V``.

    Computes, for every text ``b`` and term ``j``,
    ``w_bj = log(1 + ReLU(max over unmasked t of (hidden[b, t] . weight[j] + bias[j])))`` (SPLADE v2,
    arXiv:2109.10086, eq. 1, with the max taken before the monotone ``log(1 + ReLU(.))``); the same values as
    :func:`splade_reference` and sentence-transformers' ``SpladePooling`` (max, relu) on the decoder's logits.

    Forward: for each block of ``block`` vocabulary columns, the logits of all ``B T`` tokens (masked tokens
    set to ``-inf``, so padding never wins), their max and first argmax over each text's tokens; peak extra
    memory ``B T block`` logits instead of ``B T V``, plus ``(B, V)`` maxima and argmaxima kept for backward.
    Without a gradient to compute (``torch.no_grad()``, or no input requiring one) the argmax is not searched.
    The max is taken on the logits in the input dtype, as torch's ``max`` does on the reference's logits (the
    matmul itself accumulates as torch's ``addmm`` does, e.g. in float32 for bfloat16 inputs on CPU).

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
    (tested). In bfloat16/float16, distinct logits can round to one value of ``log1p(relu(.))``: the reference
    then picks the first token of that rounded tie, this function the first token of the largest logit. Rows
    whose mask is all 0: the pooled row is all 0 and passes no gradient, as in the reference. NaN logits give
    NaN weights.

    Args:
        hidden: ``(B, T, d)`` output of the family's head transform (the decoder's input), ``T >= 1``;
            float32, float64, bfloat16 or float16.
        weight: ``(V, d)`` decoder weight (vocabulary projection), hidden's dtype and device.
        bias: ``(V,)`` decoder bias, or None.
        mask: ``(B, T)`` bool or integer attention mask: 1 = token, 0 = padding.
        block: vocabulary columns per block (>= 1): memory ``B T block`` logits. 256-512 were the fastest on a
            2-core AVX-512 CPU at the synthetic shapes (``benchmarks/bench_splade_head.py``, docs/splade_head.md);
            larger blocks cost memory and, once the block leaves the cache, time.
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
            return _SpladeMaxPool.apply(hidden, weight, bias, mask, _check_block(block),
                                        _needs_grad(hidden, weight, bias))
    _check(hidden, weight, bias, mask)
    block = _check_block(block)
    return _SpladeMaxPool.apply(hidden, weight, bias, mask, block, _needs_grad(hidden, weight, bias))
