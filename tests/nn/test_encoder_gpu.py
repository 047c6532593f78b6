"""The shared encoder computes the same thing on CUDA as on CPU (float64 forward and backward).

Marked ``gpu``: excluded by default and skipped by ``tests/conftest.py`` where no CUDA device exists; run with
``pytest -m gpu`` on a machine with one.
"""

from __future__ import annotations

import copy

import pytest
import torch

from initlab.nn.encoder import ModelConfig, SequenceTransformer

pytestmark = pytest.mark.gpu


def _case():
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=20, max_len=48, d_model=32, n_heads=4, n_layers=2, d_ff=64)
    model = SequenceTransformer(cfg).double()
    tokens = torch.randint(1, cfg.vocab_size, (3, 40))
    real = torch.ones(3, 40, dtype=torch.bool)
    real[1, 30:] = False  # one padded sequence
    tokens[~real] = cfg.pad_id
    return model, tokens, real


def _run(model, tokens, real, causal, return_attn):
    out = model.encode(tokens, real, return_attn=return_attn, causal=causal)
    H, maps = out if return_attn else (out, [])
    logits = model.cls_head(model.pool(H, real))
    recon = model.mlm_head(H)
    loss = logits.square().sum() + recon.sin().sum()
    loss.backward()
    grads = {n: p.grad.detach().cpu() for n, p in model.named_parameters() if p.grad is not None}
    return H.detach().cpu(), [m.detach().cpu() for m in maps], grads


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("return_attn", [False, True], ids=["sdpa", "reference"])
def test_encoder_cuda_equals_cpu_in_float64(causal, return_attn):
    model, tokens, real = _case()
    on_gpu = copy.deepcopy(model).cuda()
    H_cpu, maps_cpu, g_cpu = _run(model, tokens, real, causal, return_attn)
    H_gpu, maps_gpu, g_gpu = _run(on_gpu, tokens.cuda(), real.cuda(), causal, return_attn)
    torch.testing.assert_close(H_gpu, H_cpu, rtol=1e-10, atol=1e-10)
    for a_gpu, a_cpu in zip(maps_gpu, maps_cpu):
        torch.testing.assert_close(a_gpu, a_cpu, rtol=1e-10, atol=1e-10)
    assert g_cpu.keys() == g_gpu.keys() and len(g_cpu) > 10
    for name in g_cpu:
        torch.testing.assert_close(g_gpu[name], g_cpu[name], rtol=1e-9, atol=1e-10, msg=lambda m: f"{name}: {m}")
