"""The fast relative-position score against the slow reference (float64), and the metrics of a toy model."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, strategies as st

from initlab.realdata.lra.metrics import attention_metrics, relative_position_score_fast
from initlab.nn.attention_metrics import relative_position_score


def _toeplitz_plus_rows(T: int, g: torch.Generator) -> torch.Tensor:
    idx = torch.arange(T)
    t = torch.randn(2 * T - 1, generator=g, dtype=torch.float64)
    return torch.randn(T, 1, generator=g, dtype=torch.float64) + t[idx[None, :] - idx[:, None] + T - 1]


@pytest.mark.parametrize("T", [1, 2, 3, 5, 16, 33])
def test_fast_score_matches_reference_float64(T):
    g = torch.Generator().manual_seed(T)
    noise = torch.randn(3, T, T, generator=g, dtype=torch.float64)
    structured = _toeplitz_plus_rows(T, g)
    for S in (noise, structured, noise + 0.5 * structured, torch.randn(T, 1, generator=g, dtype=torch.float64).expand(T, T)):
        assert relative_position_score_fast(S) == pytest.approx(relative_position_score(S), abs=1e-10)
    if T >= 2:
        assert relative_position_score_fast(structured) == pytest.approx(1.0, abs=1e-10)


@given(T=st.integers(2, 12), seed=st.integers(0, 10_000), mix=st.floats(0.0, 3.0))
def test_fast_score_property(T, seed, mix):
    g = torch.Generator().manual_seed(seed)
    S = torch.randn(2, T, T, generator=g, dtype=torch.float64) + mix * _toeplitz_plus_rows(T, g)
    fast = relative_position_score_fast(S)
    assert 0.0 <= fast <= 1.0 and fast == pytest.approx(relative_position_score(S), abs=1e-9)
    # invariant to a per-row constant and to scale
    shifted = 3.0 * (S + torch.randn(2, T, 1, generator=g, dtype=torch.float64))
    assert relative_position_score_fast(shifted) == pytest.approx(fast, abs=1e-9)


def test_fast_score_rejects_non_square():
    with pytest.raises(ValueError, match=r"S: expected \(\.\.\., T, T\)"):
        relative_position_score_fast(torch.zeros(3, 4))


def test_attention_metrics_use_the_reference_definition():
    from initlab.realdata.lra.config import PRESETS
    TOY = PRESETS["toy"]
    from initlab.realdata.lra.splits import split_from_sequences
    from initlab.realdata.lra.train import build_model

    torch.manual_seed(0)
    model = build_model(TOY)
    seqs = [torch.randint(2, 19, (n,)).tolist() for n in (7, 12, 20)]
    split = split_from_sequences(seqs, [0, 1, 2], 30)
    res = attention_metrics(model, split, 3)
    ref = 0.0
    for i in range(3):
        t = int(split.lengths[i])
        model.backbone.encode(split.tokens[i : i + 1, :t].long(), None, return_attn=True)
        ref += relative_position_score(model.backbone.blocks[0].attn.last_scores[0]) / 3
    assert res["layers"][0]["relative_position_score"] == pytest.approx(ref, abs=1e-6)
