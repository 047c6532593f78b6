"""Exactness of :func:`initlab.mlmhead.fused.splade_max_pool` against the slow reference and sentence-transformers.

float64 throughout except the reduced-precision test: pooled vectors and the gradients on every input and every
parameter of tiny in-process masked-LM models (tied and untied heads) are compared with
:func:`splade_reference` and with sentence-transformers' own ``SpladePooling`` module on the model's logits.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from sentence_transformers.sparse_encoder.modules import SpladePooling

from initlab.mlmhead import is_tied, rescale_mlm_head, tiny_masked_lm
from initlab.mlmhead.fused import splade_max_pool, splade_reference

F64 = torch.float64
#: gradients must agree to this relative error (the sums run in different orders)
GRAD_RTOL = 1e-10


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| over max |b| (0 when both are all 0)."""
    scale = b.abs().max().item()
    diff = (a - b).abs().max().item()
    return diff / scale if scale > 0 else diff


def _inputs(B, T, d, V, *, seed=0, dtype=F64, bias=True, pad=None):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(B, T, d, generator=g, dtype=F64).to(dtype).requires_grad_()
    w = (torch.randn(V, d, generator=g, dtype=F64) / d ** 0.5).to(dtype).requires_grad_()
    b = (torch.randn(V, generator=g, dtype=F64) * 0.5).to(dtype).requires_grad_() if bias else None
    mask = torch.ones(B, T, dtype=torch.long)
    for row, n in (pad or {}).items():
        mask[row, n:] = 0
    return h, w, b, mask


def _grads(out, inputs, seed=1):
    go = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=F64).to(out.dtype)
    return torch.autograd.grad(out, inputs, go)


def _compare(h, w, b, mask, block):
    ins = tuple(x for x in (h, w, b) if x is not None)
    fused = splade_max_pool(h, w, b, mask, block=block)
    ref = splade_reference(h, w, b, mask)
    # equal up to the last bits of the logits: the fused path's (transposed, blocked) product rounds differently
    torch.testing.assert_close(fused, ref, rtol=1e-13, atol=1e-15)
    for gf, gr in zip(_grads(fused, ins), _grads(ref, ins)):
        assert _rel(gf, gr) <= GRAD_RTOL
    return fused, ref


@pytest.mark.parametrize("block", [1, 3, 7, 2048])
@pytest.mark.parametrize("bias", [True, False])
def test_float64_matches_reference(block, bias):
    h, w, b, mask = _inputs(4, 9, 6, 23, bias=bias, pad={1: 4, 2: 1})
    fused, _ = _compare(h, w, b, mask, block)
    assert (fused > 0).any() and (fused == 0).any()  # both branches of the ReLU are exercised


def test_pooling_of_the_same_logits_is_bitwise_equal():
    """log1p(relu(max z)) and max(log1p(relu(z))) on the same logits: the same bits (log1p and relu are
    non-decreasing), so every difference from the reference is the product's rounding."""
    z = torch.randn(5, 9, 31, generator=torch.Generator().manual_seed(9), dtype=F64)
    assert torch.equal(torch.log1p(torch.relu(z.max(dim=1)[0])), torch.log1p(torch.relu(z)).max(dim=1)[0])


def test_reference_is_sentence_transformers_splade_pooling():
    h, w, b, mask = _inputs(3, 7, 5, 19, pad={0: 3})
    st_mod = SpladePooling(pooling_strategy="max", activation_function="relu").train()
    logits = torch.nn.functional.linear(h, w, b)
    st_out = st_mod({"token_embeddings": logits, "attention_mask": mask})["sentence_embedding"]
    ref = splade_reference(h, w, b, mask)
    assert torch.equal(st_out, ref)
    for gs, gr in zip(_grads(st_out, (h, w, b)), _grads(ref, (h, w, b))):
        assert torch.equal(gs, gr)


def _decoder_input(model):
    """Capture the input of the model's decoder (the head transform's output) on the next forward."""
    seen = {}
    hook = model.get_output_embeddings().register_forward_pre_hook(lambda mod, args: seen.__setitem__("h", args[0]))
    return seen, hook


@pytest.mark.parametrize("family,tied", [("bert", True), ("bert", False), ("distilbert", True), ("albert", True),
                                         ("roberta", True), ("modernbert", True), ("roberta", False)])
def test_tiny_model_matches_sentence_transformers(family, tied):
    V = 61
    model = tiny_masked_lm(family, V, hidden=16, layers=1, seed=3).to(F64).train()
    for m in model.modules():  # dropout off: both paths must see the same network
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    if not tied:
        rescale_mlm_head(model, 1.0, untie=True)
    assert is_tied(model) == tied
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(5, V, (3, 10), generator=g)
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[1, 6:] = 0
    mask[2, 2:] = 0
    ids[mask == 0] = 0
    params = dict(model.named_parameters())

    logits = model(input_ids=ids, attention_mask=mask).logits
    st_vec = SpladePooling(pooling_strategy="max", activation_function="relu").train()(
        {"token_embeddings": logits, "attention_mask": mask})["sentence_embedding"]
    go = torch.randn(st_vec.shape, generator=torch.Generator().manual_seed(7), dtype=F64)
    st_grads = torch.autograd.grad(st_vec, list(params.values()), go, allow_unused=True)

    seen, hook = _decoder_input(model)
    try:
        model(input_ids=ids, attention_mask=mask)
    finally:
        hook.remove()
    dec = model.get_output_embeddings()
    fused = splade_max_pool(seen["h"], dec.weight, dec.bias, mask)
    fu_grads = torch.autograd.grad(fused, list(params.values()), go, allow_unused=True)

    torch.testing.assert_close(fused, st_vec, rtol=1e-13, atol=1e-15)
    assert (fused > 0).sum() > 10
    # relative to the parameter's own gradient, floored at 1e-6 of the largest one: some gradients are exactly 0
    # in exact arithmetic (the attention key bias: softmax ignores a shift) and both paths give rounding noise there
    largest = max(gs.abs().max().item() for gs in st_grads if gs is not None)
    checked = 0
    for (name, _), gs, gf in zip(params.items(), st_grads, fu_grads):
        if gs is None:
            assert gf is None or not gf.any(), name
            continue
        assert gf is not None, name
        scale = max(gs.abs().max().item(), 1e-6 * largest)
        assert (gf - gs).abs().max().item() <= GRAD_RTOL * scale, name
        checked += bool(gs.abs().max().item() > 1e-6 * largest)
    assert checked >= 5
    # the decoder (the shared embedding when tied) receives its gradient
    wname = next(n for n, p in params.items() if p is dec.weight)
    assert fu_grads[list(params).index(wname)].abs().sum() > 0


def test_torch_max_sends_a_tie_to_the_first_token():
    """The reference's tie rule comes from torch.max(dim=1): first index, whole gradient (not split like amax)."""
    x = torch.tensor([[[1.0], [3.0], [3.0], [2.0], [3.0]]], dtype=F64, requires_grad=True)
    val, idx = torch.max(x, dim=1)
    assert idx.item() == 1
    (grad,) = torch.autograd.grad(val.sum(), x)
    assert grad.flatten().tolist() == [0.0, 1.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("block", [2, 2048])
def test_ties_go_to_the_first_token(block):
    h, w, b, mask = _inputs(2, 6, 4, 9)
    with torch.no_grad():
        h[:, 4] = h[:, 1] = 3.0 * h[:, 1].abs()  # tokens 1 and 4 identical: the same logits for every term
        w.abs_()
    fused, ref = _compare(h, w, b, mask, block)
    go = torch.ones_like(fused)
    (gf,) = torch.autograd.grad(splade_max_pool(h, w, b, mask, block=block), (h,), go)
    (gr,) = torch.autograd.grad(splade_reference(h, w, b, mask), (h,), go)
    winners = (torch.nn.functional.linear(h, w, b).argmax(dim=1) == 1)
    assert winners.any()
    assert gf[:, 1].abs().sum() > 0 and gr[:, 1].abs().sum() > 0
    assert not gf[:, 4].any() and not gr[:, 4].any()


def test_padding_never_wins():
    h, w, b, mask = _inputs(2, 5, 4, 11, pad={0: 2})
    with torch.no_grad():
        w.abs_()
        h[0, 2:] = 100.0  # padded tokens with the largest logits of all
    fused, _ = _compare(h, w, b, mask, 4)
    (gh,) = torch.autograd.grad(splade_max_pool(h, w, b, mask, block=4), (h,), torch.ones_like(fused))
    assert not gh[0, 2:].any()
    assert fused[0].max() < 50


def test_all_padding_row_is_zero_without_gradient():
    h, w, b, mask = _inputs(3, 4, 5, 13, pad={1: 0})
    fused, ref = _compare(h, w, b, mask, 5)
    assert not fused[1].any() and not ref[1].any()
    gh, gw, gb = torch.autograd.grad(splade_max_pool(h[1:2], w, b, mask[1:2], block=5), (h, w, b),
                                     torch.ones(1, 13, dtype=F64))
    assert not gh.any() and not gw.any() and not gb.any()
    assert torch.isfinite(gh).all()


def test_bool_and_int_masks_agree():
    h, w, b, mask = _inputs(2, 5, 3, 8, pad={0: 3})
    assert torch.equal(splade_max_pool(h, w, b, mask), splade_max_pool(h, w, b, mask.bool()))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_close_to_float32(dtype):
    eps = torch.finfo(dtype).eps
    h32, w32, b32, mask = _inputs(4, 12, 16, 300, dtype=torch.float32, pad={1: 5})
    h, w, b = (x.detach().to(dtype).requires_grad_() for x in (h32, w32, b32))
    low = splade_max_pool(h, w, b, mask, block=128)
    assert low.dtype == dtype
    with torch.no_grad():  # float32 on the same rounded inputs: only the arithmetic differs
        ref32 = splade_reference(h.float(), w.float(), b.float(), mask)
    torch.testing.assert_close(low.float(), ref32, rtol=4 * eps, atol=4 * eps)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_reduced_precision_gradients_close_to_float32(dtype):
    """Gradients where the winning token is clear by far more than the dtype's rounding (in bfloat16/float16,
    logits a rounding apart tie, and after log1p more of them: the reference then gives the gradient to the first
    token of the rounded tie, the fused path to the first of the largest logit)."""
    eps = torch.finfo(dtype).eps
    B, T, V = 3, 5, 70
    g = torch.Generator().manual_seed(4)
    scale = torch.stack([4.0 ** torch.randperm(T, generator=g) for _ in range(B)]) / 4 ** (T - 1)  # (B, T)
    h32 = torch.zeros(B, T, T)
    h32[:, torch.arange(T), torch.arange(T)] = scale  # token t of text b: scale[b, t] * e_t
    w32 = 0.5 + torch.rand(V, T, generator=g)  # so the largest scale wins by a factor >= 4 / 3
    b32 = 0.1 * torch.randn(V, generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 3:] = 0
    h, w, b = (x.to(dtype).requires_grad_() for x in (h32, w32, b32))
    h3, w3, b3 = (x.detach().float().requires_grad_() for x in (h, w, b))
    go = torch.rand(B, V, generator=g)
    low = torch.autograd.grad(splade_max_pool(h, w, b, mask, block=32), (h, w, b), go.to(dtype))
    full = torch.autograd.grad(splade_reference(h3, w3, b3, mask), (h3, w3, b3), go)
    for gl, gf in zip(low, full):
        assert gl.dtype == dtype
        assert _rel(gl.float(), gf) <= 8 * eps


@st.composite
def _case(draw):
    B = draw(st.integers(1, 4))
    T = draw(st.integers(1, 6))
    d = draw(st.integers(1, 5))
    V = draw(st.integers(1, 40))
    block = draw(st.integers(1, 17))
    lengths = draw(st.lists(st.integers(0, T), min_size=B, max_size=B))
    return B, T, d, V, block, lengths, draw(st.booleans()), draw(st.integers(0, 2 ** 16))


@given(_case())
def test_property_matches_reference(case):
    B, T, d, V, block, lengths, bias, seed = case
    h, w, b, mask = _inputs(B, T, d, V, seed=seed, bias=bias, pad=dict(enumerate(lengths)))
    fused, ref = _compare(h, w, b, mask, block)
    assert fused.shape == (B, V) and (fused >= 0).all()
    assert not fused[torch.tensor(lengths) == 0].any()


@pytest.mark.parametrize("kwargs,name", [
    (dict(hidden=torch.zeros(2, 3)), "hidden"),
    (dict(hidden=torch.zeros(2, 0, 4)), "hidden"),
    (dict(hidden=torch.zeros(2, 3, 4, dtype=torch.int64)), "hidden"),
    (dict(weight=torch.zeros(5, 3)), "weight"),
    (dict(weight=torch.zeros(5, 4, dtype=F64)), "weight"),
    (dict(bias=torch.zeros(4)), "bias"),
    (dict(mask=torch.ones(3, 2)), "mask"),
    (dict(mask=torch.ones(2, 3)), "mask"),
    (dict(mask=torch.full((2, 3), 2)), "mask"),
    (dict(block=0), "block"),
    (dict(block=2.5), "block"),
])
def test_bad_arguments_are_named(kwargs, name):
    args = dict(hidden=torch.zeros(2, 3, 4), weight=torch.zeros(5, 4), bias=torch.zeros(5),
                mask=torch.ones(2, 3, dtype=torch.long))
    block = kwargs.pop("block", 8)
    args.update(kwargs)
    with pytest.raises(ValueError, match=rf"^{name}:"):
        splade_max_pool(args["hidden"], args["weight"], args["bias"], args["mask"], block=block)


def test_autocast_runs_in_autocast_dtype_like_the_dense_decoder():
    """Under torch.autocast (bf16 training) the fused head gives what the reference gives under the same autocast
    (whose nn.Linear logits are bf16), and its gradients reach the float32 parameters in float32."""
    h, w, b, mask = _inputs(3, 9, 16, 200, dtype=torch.float32, pad={2: 4})
    go = torch.rand(3, 200, generator=torch.Generator().manual_seed(5))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = splade_max_pool(h, w, b, mask, block=64)
        ref = splade_reference(h, w, b, mask)
    assert fused.dtype == torch.bfloat16
    eps = torch.finfo(torch.bfloat16).eps
    torch.testing.assert_close(fused.float(), ref.float(), rtol=2 * eps, atol=2 * eps)
    grads = torch.autograd.grad(fused, (h, w, b), go.to(fused.dtype))
    assert all(g.dtype == torch.float32 and bool(g.abs().sum() > 0) for g in grads)
    with torch.no_grad():  # autocast off again: float32 as before
        assert splade_max_pool(h, w, b, mask).dtype == torch.float32


@pytest.mark.parametrize("B,T", [(1, 1), (1, 4), (2, 1)])
def test_single_text_and_single_token(B, T):
    """One text (the pooled (1, V) row must not alias what the backward pass reads) and one token."""
    h, w, b, mask = _inputs(B, T, 3, 10)
    _compare(h, w, b, mask, 4)


@pytest.mark.parametrize("T", [255, 256, 300])
def test_long_texts(T):
    """Texts of 256 tokens and more take torch.max's own index (the faster first-max search holds T < 256)."""
    h, w, b, mask = _inputs(2, T, 2, 7, pad={1: T - 40})
    with torch.no_grad():
        h[0, T - 1] = h[0, T - 3] = 5.0  # a tie far down the text
        w.abs_()
    _compare(h, w, b, mask, 3)
    (gh,) = torch.autograd.grad(splade_max_pool(h, w, b, mask), (h,), torch.ones(2, 7, dtype=F64))
    assert gh[0, T - 3].abs().sum() > 0 and not gh[0, T - 1].any()


def test_many_tokens_sort_with_wide_keys():
    """B T >= 2**15 token rows: the backward pass sorts int32 keys (int16 below)."""
    h, w, b, mask = _inputs(130, 256, 2, 5, pad={0: 3, 7: 0})
    _compare(h, w, b, mask, 2)


def test_without_gradients_the_values_are_the_same():
    """Under no_grad (evaluation, encode) the argmax search is skipped: the pooled values must not change."""
    h, w, b, mask = _inputs(3, 7, 4, 29, pad={1: 2, 2: 0})
    with_grad = splade_max_pool(h, w, b, mask, block=8)
    with torch.no_grad():
        no_grad = splade_max_pool(h, w, b, mask, block=8)
    plain = splade_max_pool(h.detach(), w.detach(), b.detach(), mask, block=8)
    assert not no_grad.requires_grad and not plain.requires_grad
    assert torch.equal(with_grad.detach(), no_grad) and torch.equal(no_grad, plain)
    torch.testing.assert_close(no_grad, splade_reference(h, w, b, mask).detach(), rtol=1e-13, atol=1e-15)
