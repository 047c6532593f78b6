"""LRA model pieces: causal pass vs the reference encoder, Retrieval head, masking, FLOP count, metrics."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from initlab.realdata.lra.splits import split_from_sequences
from initlab.realdata.lra.tokens import MASK_ID
from initlab.realdata.lra.masking import causal_targets, mask_tokens, masked_loss
from initlab.realdata.lra.metrics import attention_metrics
from initlab.realdata.lra.model import LRAModel, backbone_config, causal_encode, flops_per_sequence


def _model(pair=False, n_layers=2, dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    cfg = backbone_config(20, 32, 3, n_layers=n_layers, d_model=16, n_heads=2, d_ff=24)
    return LRAModel(cfg, pair=pair).to(dtype)


def test_lra_bidirectional_path_matches_reference_encoder_float64():
    m = _model()
    tok = torch.randint(2, 20, (3, 10))
    mask = torch.arange(10)[None] < torch.tensor([10, 7, 3])[:, None]
    ref = m.backbone.encode(tok, mask)
    ours = causal_encode(m.backbone, tok, mask, causal=False)
    assert torch.allclose(ref[mask], ours[mask], atol=1e-12)


def test_lra_causal_pass_ignores_the_future_but_not_the_past():
    m = _model()
    tok = torch.randint(2, 20, (1, 12))
    mask = torch.ones(1, 12, dtype=torch.bool)
    h = causal_encode(m.backbone, tok, mask)
    tok2 = tok.clone()
    tok2[0, 8] = (tok[0, 8] - 2 + 1) % 18 + 2
    h2 = causal_encode(m.backbone, tok2, mask)
    assert torch.allclose(h[0, :8], h2[0, :8], atol=1e-12)
    assert not torch.allclose(h[0, 8:], h2[0, 8:])
    # the same change moves earlier positions in the bidirectional encoder
    assert not torch.allclose(m.backbone.encode(tok, mask)[0, :8], m.backbone.encode(tok2, mask)[0, :8])


def test_lra_causal_mode_has_no_leakage_from_any_later_position():
    """LRAModel(mode="causal"), 2 layers, float64, padded batch: for every t, replacing ALL tokens after t
    leaves the next-token logits at positions <= t unchanged (so the SPT target tokens[t + 1] is never seen)."""
    m = _model(n_layers=2)
    g = torch.Generator().manual_seed(1)
    B, T = 3, 11
    tok = torch.randint(2, 20, (B, T), generator=g)
    lengths = torch.tensor([11, 8, 4])
    mask = torch.arange(T)[None] < lengths[:, None]
    tok = tok.masked_fill(~mask, 0)
    base = m(tok, mask, mode="causal")
    assert base.shape == (B, T, 20)
    for t in range(T - 1):
        other = tok.clone()
        after = torch.arange(T)[None].expand(B, T) > t
        other[after & mask] = (tok[after & mask] - 2 + 1 + torch.randint(0, 17, (int((after & mask).sum()),), generator=g)) % 18 + 2
        assert not torch.equal(other, tok) or t >= int(lengths.max()) - 1
        out = m(other, mask, mode="causal")
        for b in range(B):
            k = min(t + 1, int(lengths[b]))
            assert torch.allclose(out[b, :k], base[b, :k], atol=1e-12, rtol=0), (t, b)
    # and the masked (bidirectional) mode does see later tokens
    other = tok.clone()
    other[0, -1] = (tok[0, -1] - 2 + 1) % 18 + 2
    assert not torch.allclose(m(other, mask, mode="masked")[0, 0], m(tok, mask, mode="masked")[0, 0])


def test_lra_retrieval_two_tower_features():
    m = _model(pair=True)
    tok = torch.randint(2, 20, (4, 2, 9))
    mask = torch.ones(4, 2, 9, dtype=torch.bool)
    mask[0, 1, 5:] = False
    logits = m(tok, mask, mode="classify")
    assert logits.shape == (4, 3)
    # by hand: shared encoder, mean pooling, [x1, x2, x1*x2, x1-x2]
    bb = m.backbone
    x1 = bb.pool(bb.encode(tok[:, 0], mask[:, 0]), mask[:, 0])
    x2 = bb.pool(bb.encode(tok[:, 1], mask[:, 1]), mask[:, 1])
    want = m.pair_head(torch.cat([x1, x2, x1 * x2, x1 - x2], -1))
    assert torch.allclose(logits, want, atol=1e-12)
    with pytest.raises(ValueError, match=r"Retrieval expects \(B, 2, T\)"):
        m(tok[:, 0], mask[:, 0], mode="classify")


def test_lra_set_stage_freezes_unused_heads():
    m = _model(pair=True)
    m.set_stage("spt")
    assert m.backbone.mlm_head.weight.requires_grad and not m.pair_head[0].weight.requires_grad
    m.set_stage("finetune")
    assert not m.backbone.mlm_head.weight.requires_grad and not m.backbone.cls_head.weight.requires_grad
    assert m.pair_head[0].weight.requires_grad


def test_lra_masking_ratio_and_loss_on_masked_positions_only():
    g = torch.Generator().manual_seed(0)
    tok = torch.randint(2, 20, (64, 50))
    mask = torch.arange(50)[None] < torch.randint(10, 51, (64, 1))
    corrupted, masked = mask_tokens(tok, mask, 0.5, g)
    assert not masked[~mask].any()
    assert (corrupted[masked] == MASK_ID).all() and torch.equal(corrupted[~masked], tok[~masked])
    frac = masked.sum() / mask.sum()
    assert 0.45 < float(frac) < 0.55
    logits = torch.randn(64, 50, 20, requires_grad=True)
    loss, n = masked_loss(logits, tok, masked)
    loss.backward()
    assert n == int(masked.sum())
    assert (logits.grad[~masked] == 0).all() and (logits.grad[masked].abs().sum(-1) > 0).all()
    with pytest.raises(ValueError, match="ratio"):
        mask_tokens(tok, mask, 1.0)
    t, v = causal_targets(tok[:1, :5], torch.tensor([[True, True, True, False, False]]))
    assert t[0, :2].tolist() == tok[0, 1:3].tolist() and v.tolist() == [[True, True, False, False, False]]


@pytest.mark.parametrize("head", ["classify", "masked"])
def test_lra_flop_count_matches_torch_flop_counter(head):
    m = _model(dtype=torch.float32, n_layers=3)
    T, B = 32, 2
    tok = torch.randint(2, 20, (B, T))
    mask = torch.ones(B, T, dtype=torch.bool)
    bb = m.backbone
    with FlopCounterMode(display=False) as fc:  # explicit-softmax path: the counter sees S = QK^T and AV
        H, _ = bb.encode(tok, mask, return_attn=True)
        bb.mlm_head(H) if head == "masked" else bb.cls_head(bb.pool(H, mask))
    analytic = B * flops_per_sequence(m.backbone.cfg, T, head=head, training=False)
    assert abs(fc.get_total_flops() - analytic) / analytic < 0.02


def test_lra_attention_metrics_use_synthetic_definitions():
    m = _model(dtype=torch.float32)
    split = split_from_sequences([[3, 4, 5, 6, 7, 8], [9, 10, 11]], [0, 1], 32)
    res = attention_metrics(m, split, n=2)
    assert len(res["layers"]) == 2 and res["n_sequences"] == 2
    for layer in res["layers"]:
        assert 0.0 <= layer["proximity_mass"] <= 1.0 and 0.0 <= layer["relative_position_score"] <= 1.0
    # identical W_Q = W_K = 0 -> uniform attention: proximity mass equals the uniform value exactly
    with torch.no_grad():
        for blk in m.backbone.blocks:
            blk.attn.W_Q.weight.zero_(), blk.attn.W_Q.bias.zero_()
    res0 = attention_metrics(m, split, n=2)
    assert res0["layers"][0]["proximity_mass"] == pytest.approx(res0["uniform_proximity"], abs=1e-6)
