"""The one SPLADE pooling against sentence-transformers' SpladePooling and a slow loop, in float64."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from initlab.nn.pooling import mean_pool, splade_pool


def _slow(z: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    B, T, V = z.shape
    out = torch.zeros(B, V, dtype=torch.float64)
    for b in range(B):
        for j in range(V):
            out[b, j] = max(math.log1p(max(z[b, t, j].item(), 0.0)) for t in range(T) if mask[b, t] > 0)
    return out


@given(st.integers(1, 4), st.integers(1, 6), st.integers(1, 9), st.integers(0, 10_000))
def test_splade_pool_equals_sentence_transformers_and_slow_reference(B, T, V, seed):
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    g = torch.Generator().manual_seed(seed)
    z = torch.randn(B, T, V, generator=g, dtype=torch.float64) * 4
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
    ours = splade_pool(z, mask)
    st_out = SpladePooling(pooling_strategy="max", activation_function="relu")(
        {"token_embeddings": z, "attention_mask": mask})["sentence_embedding"]
    assert torch.allclose(ours, st_out.to(torch.float64), atol=1e-12, rtol=0)
    assert torch.allclose(ours, _slow(z, mask), atol=1e-14, rtol=0)


def test_splade_pool_bad_shapes_name_the_argument():
    with pytest.raises(ValueError, match="z"):
        splade_pool(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="mask"):
        splade_pool(torch.zeros(2, 3, 4), torch.ones(2, 4))


def test_mean_pool_ignores_padding():
    H = torch.arange(12, dtype=torch.float64).view(1, 4, 3)
    mask = torch.tensor([[True, True, False, False]])
    assert torch.equal(mean_pool(H, mask), H[:, :2].mean(dim=1))
    assert torch.equal(mean_pool(H), H.mean(dim=1))
