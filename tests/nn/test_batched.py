"""initlab.nn.batched: M stacked models give, in float64, each model's own SequenceTransformer outputs (every
encoder switch), and unsupported configs are refused."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from initlab.nn import batched as nb
from initlab.nn.encoder import ModelConfig, SequenceTransformer

BASE = ModelConfig(vocab_size=11, max_len=12, d_model=8, n_heads=2, n_layers=1, d_ff=16)


def _models(cfg, m=3):
    out = []
    for s in range(m):
        torch.manual_seed(100 + s)
        out.append(SequenceTransformer(cfg).double())
    return out


@pytest.mark.parametrize("over", [{}, dict(n_layers=2), dict(use_ffn=False, use_layernorm=False), dict(pre_norm=False),
                                  dict(use_residual=False), dict(proximity_bias=0.5), dict(pos_encoding="none"),
                                  dict(pooling="cls"), dict(pooling="last"), dict(n_heads=1)])
def test_outputs_equal_each_model_float64(over):
    cfg = dataclasses.replace(BASE, **over)
    models = _models(cfg)
    params = nb.stack(models)
    tokens = torch.randint(0, cfg.vocab_size, (3, 5, 10), generator=torch.Generator().manual_seed(0))
    for causal in (False, True):
        H = nb.encode(params, cfg, tokens, causal=causal)
        for i, m in enumerate(models):
            assert torch.allclose(H[i], m.encode(tokens[i], causal=causal), rtol=1e-12, atol=1e-12)
    cls, rec = nb.classify(params, cfg, tokens), nb.reconstruct(params, cfg, tokens)
    for i, m in enumerate(models):
        assert torch.allclose(cls[i], m.classify(tokens[i]), rtol=1e-12, atol=1e-12)
        assert torch.allclose(rec[i], m.reconstruct(tokens[i]), rtol=1e-12, atol=1e-12)


def test_stack_and_unstack_round_trip():
    models = _models(BASE)
    params = nb.stack(models)
    assert all(p.shape[0] == 3 and p.is_leaf for p in params.values())
    for i, m in enumerate(models):
        for n, v in nb.unstack(params, i).items():
            assert torch.equal(v, m.state_dict()[n])


def test_refusals():
    with pytest.raises(ValueError, match="dropout"):
        nb.stack([SequenceTransformer(dataclasses.replace(BASE, dropout=0.1))])
    with pytest.raises(ValueError, match="one ModelConfig"):
        nb.stack([SequenceTransformer(BASE), SequenceTransformer(dataclasses.replace(BASE, d_ff=8))])
    params = nb.stack(_models(BASE))
    with pytest.raises(ValueError, match="tokens"):
        nb.encode(params, BASE, torch.zeros(2, 4, 5, dtype=torch.long))  # 2 sequences sets for 3 models
    with pytest.raises(ValueError, match="ids must lie"):
        nb.encode(params, BASE, torch.full((3, 4, 5), 11, dtype=torch.long))
