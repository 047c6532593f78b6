"""Tiny backbone families: class, tying, head location, determinism, scaling modes and the input side of the tie."""

from __future__ import annotations

import pytest
import torch

from initlab.mlmhead import head_projection, is_tied, rescale_mlm_head
from initlab.synthetic.splade.data import SPECIAL_TOKENS
from initlab.synthetic.splade.families import (FAMILIES, FamilyConfig, build_family_model, family_tokenizer,
                                               hidden_change, scale_backbone)

VOCAB = list(SPECIAL_TOKENS) + [f"w{i}" for i in range(30)]
TINY = FamilyConfig(d=16, layers=1, heads=2, ffn=32, albert_embedding=8, max_len=16)
#: (class name, dotted path of the output projection) as in the released checkpoints
EXPECTED = {
    "bert": ("BertForMaskedLM", "cls.predictions.decoder"),
    "roberta": ("RobertaForMaskedLM", "lm_head.decoder"),
    "albert": ("AlbertForMaskedLM", "predictions.decoder"),
    "modernbert": ("ModernBertForMaskedLM", "decoder"),
}


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _batch(family):
    tok = family_tokenizer(family, VOCAB)
    enc = tok(["w1 w2 w3 w4", "w5 w6 w7", "w8 w9 w10 w11 w12"], padding=True, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"]


@pytest.mark.parametrize("family", FAMILIES)
def test_family_class_tied_head_location_and_shape(family):
    model = build_family_model(family, len(VOCAB), TINY, seed=0)
    cls_name, head_path = EXPECTED[family]
    assert type(model).__name__ == cls_name
    assert model.get_output_embeddings() is model.get_submodule(head_path)
    assert is_tied(model) and head_projection(model) is model.get_input_embeddings().weight
    width = TINY.albert_embedding if family == "albert" else TINY.d
    assert tuple(head_projection(model).shape) == (len(VOCAB), width)
    ids, mask = _batch(family)
    assert model(input_ids=ids, attention_mask=mask).logits.shape == (3, ids.shape[1], len(VOCAB))


@pytest.mark.parametrize("family", ["bert", "modernbert"])
def test_family_is_deterministic_by_seed(family):
    a, b, c = (build_family_model(family, len(VOCAB), TINY, seed=s) for s in (0, 0, 1))
    for (n, p), (_, q), (_, r) in zip(a.named_parameters(), b.named_parameters(), c.named_parameters()):
        assert torch.equal(p, q), n
    assert not torch.equal(head_projection(a), head_projection(c))


def test_modernbert_tokenizer_has_no_token_type_ids():
    assert "token_type_ids" not in family_tokenizer("modernbert", VOCAB)("w1 w2")
    assert "token_type_ids" in family_tokenizer("bert", VOCAB)("w1 w2")
    with pytest.raises(ValueError, match="family"):
        family_tokenizer("gpt2", VOCAB)


@pytest.mark.parametrize("family", FAMILIES)
def test_scale_backbone_tied_and_untied(family):
    model = build_family_model(family, len(VOCAB), TINY, seed=0)
    w0 = head_projection(model).detach().clone()
    scale_backbone(model, 4.0, 4.0, tied=True)
    assert is_tied(model) and torch.equal(head_projection(model), 4.0 * w0)

    model = build_family_model(family, len(VOCAB), TINY, seed=0)
    bias0 = model.get_output_embeddings().bias
    scale_backbone(model, 16.0, 0.25, tied=False)
    assert not is_tied(model) and model.config.tie_word_embeddings is False
    assert torch.equal(model.get_input_embeddings().weight, 16.0 * w0)
    assert torch.equal(head_projection(model), 0.25 * w0)
    if bias0 is not None:  # the head got its own bias copy
        assert model.get_output_embeddings().bias is not bias0


@pytest.mark.parametrize("family", ["bert", "albert"])
@pytest.mark.parametrize("untie", [False, True])
def test_head_scale_then_mlmhead_rescale_equals_one_scaling_bitwise(family, untie):
    """Grid points with the same s / k share one cell: exact for powers of two, also via ``rescale_mlm_head``."""
    a = build_family_model(family, len(VOCAB), TINY, seed=0)
    scale_backbone(a, 16.0, 16.0, tied=True)
    rescale_mlm_head(a, 64.0, untie=untie)
    b = build_family_model(family, len(VOCAB), TINY, seed=0)
    scale_backbone(b, 16.0 if untie else 0.25, 0.25, tied=not untie)
    assert is_tied(a) == is_tied(b)
    assert torch.equal(head_projection(a), head_projection(b))
    assert torch.equal(a.get_input_embeddings().weight, b.get_input_embeddings().weight)


def test_scale_backbone_bad_input():
    model = build_family_model("bert", len(VOCAB), TINY, seed=0)
    w0 = head_projection(model).detach().clone()
    for e, h, tied in [(0.0, 0.0, True), (float("nan"), 1.0, False), (2.0, 4.0, True)]:
        with pytest.raises(ValueError):
            scale_backbone(model, e, h, tied)
    assert torch.equal(head_projection(model), w0) and is_tied(model)
    scale_backbone(model, 1.0, 2.0, tied=False)
    with pytest.raises(ValueError, match="tied"):
        scale_backbone(model, 1.0, 1.0, tied=True)  # already untied


@pytest.mark.parametrize("family", FAMILIES)
def test_output_only_rescale_leaves_hidden_states_unchanged(family):
    """The input side of the tie: untied rescaling changes only the logits, never the hidden states."""
    ids, mask = _batch(family)
    model = build_family_model(family, len(VOCAB), TINY, seed=0).eval()
    with torch.no_grad():
        h1 = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[-1]
        scale_backbone(model, 1.0, 1 / 16, tied=False)
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    assert torch.equal(out.hidden_states[-1], h1)


def test_tied_rescale_changes_hidden_states_except_through_a_direct_layernorm():
    """BERT-like families sum word and position embeddings before the LayerNorm, so dividing the tied
    matrix changes the hidden states; ModernBERT's word embeddings feed a LayerNorm directly."""
    change = {}
    for family in FAMILIES:
        ids, mask = _batch(family)
        model = build_family_model(family, len(VOCAB), TINY, seed=0)
        w0 = head_projection(model).detach().clone()
        change[family] = hidden_change(model, ids, mask, 2.0)
        assert torch.equal(head_projection(model), w0)  # restored
    for family in ("bert", "roberta", "albert"):
        assert change[family] > 0.05, change
    assert change["modernbert"] < 0.1 * min(change[f] for f in ("bert", "roberta", "albert")), change


def test_a_backbone_saved_in_bf16_loads_in_float32(tmp_path):
    """The synthetic backbones are trained from float32 master weights whatever their saved config records."""
    from initlab.synthetic.splade.families import load_family_backbone
    from initlab.synthetic.splade.train import load_encoder

    model = build_family_model("bert", len(VOCAB), TINY, seed=0)
    model.to(torch.bfloat16).save_pretrained(tmp_path)
    family_tokenizer("bert", VOCAB).save_pretrained(tmp_path)
    loaded, _ = load_family_backbone(tmp_path)
    assert loaded.dtype == torch.float32
    encoder = load_encoder(tmp_path, 12, seed=0)
    assert {p.dtype for p in encoder.parameters()} == {torch.float32}


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "modernbert"])
def test_sparse_mlm_loss_equals_the_models_own_loss_in_float64(family):
    """The fast path (head at the masked positions only) against the slow, obvious reference (the model's own loss
    over all positions), in float64: the same number, and the same gradients."""
    import torch

    from initlab.synthetic.splade.families import FamilyConfig, build_family_model
    from initlab.synthetic.splade.model import sparse_mlm_loss

    model = build_family_model(family, 50, FamilyConfig(d=16, layers=1, heads=2, ffn=32, albert_embedding=8, max_len=12), 0)
    model = model.double().eval()  # no dropout: both paths see the same network
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 50, (3, 10), generator=g)
    mask = torch.ones_like(ids)
    labels = torch.full_like(ids, -100)
    labels[:, [1, 4, 7]] = ids[:, [1, 4, 7]]
    ids[:, [1, 4, 7]] = 4
    def reference():  # every position's logits, the loss over the masked ones (float64 throughout)
        z = model(input_ids=ids, attention_mask=mask).logits
        return torch.nn.functional.cross_entropy(z.reshape(-1, z.shape[-1]), labels.reshape(-1), ignore_index=-100)

    ref = reference()
    assert ref.item() == pytest.approx(model(input_ids=ids, attention_mask=mask, labels=labels).loss.item(), rel=1e-6)
    fast = sparse_mlm_loss(model, ids, mask, labels)
    assert fast.item() == pytest.approx(ref.item(), rel=1e-12, abs=1e-12)
    g_ref = torch.autograd.grad(reference(), list(model.parameters()), allow_unused=True)
    g_fast = torch.autograd.grad(sparse_mlm_loss(model, ids, mask, labels), list(model.parameters()), allow_unused=True)
    for a, b in zip(g_ref, g_fast):
        if a is None or b is None:
            assert a is None and b is None or (a if a is not None else b).abs().max() == 0
        else:
            assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="sparse_mlm_loss"):
        sparse_mlm_loss(torch.nn.Linear(2, 2), ids, mask, labels)
