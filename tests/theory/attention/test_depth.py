"""T7 (depth and residuals), initlab.theory.attention.depth."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from initlab.theory.attention import depth as a7
from initlab.theory.subspace import blind_fraction

F64 = torch.float64
pytestmark = pytest.mark.usefixtures("one_thread")


@given(depth=st.integers(2, 3), ffn=st.booleans(), ln=st.booleans(), later=st.sampled_from(["uniform", "random"]),
       T=st.integers(2, 20), seed=st.integers(0, 2**31 - 1))
def test_t7_no_residual_closed_form_any_later_layers(depth, ffn, ln, later, T, seed):
    st_ = a7.random_stack(torch.Generator().manual_seed(seed), a7.StackSpec(depth, False, ffn, ln, later), T)
    G = a7.first_layer_gradient(st_)
    g = a7.no_residual_closed_form(st_)
    assert torch.allclose(G, g[:, :, None, :].expand_as(G), rtol=0, atol=1e-10 * (float(G.abs().max()) + 1e-12))
    assert float(blind_fraction(G).max()) < 1e-9


def test_t7_residual_cases():
    gen = torch.Generator().manual_seed(1)
    st_ = a7.random_stack(gen, a7.StackSpec(3, True, False, False, "uniform"), 9)
    G = a7.first_layer_gradient(st_)
    assert torch.allclose(G, a7.residual_linear_closed_form(st_)[:, :, None, :].expand_as(G), rtol=0, atol=1e-12)
    for spec in (a7.StackSpec(2, True, True, False, "uniform"), a7.StackSpec(2, True, False, True, "uniform"), a7.StackSpec(2, True, False, False, "random")):
        G = a7.first_layer_gradient(a7.random_stack(gen, spec, 9))
        assert float(blind_fraction(G).min()) > 1e-3, spec.label()
    with pytest.raises(ValueError, match="T7\\(a\\) needs"):
        a7.no_residual_closed_form(st_)
    with pytest.raises(ValueError, match="T7\\(b\\) needs"):
        a7.residual_linear_closed_form(a7.random_stack(gen, a7.StackSpec(2, True, True, False), 4))


def test_t7_experiment_like_ablation_orders():
    rows = {r["label"]: r for r in a7.experiment_like_blind_fraction(seeds=1, T=24, batch=4)}
    assert rows["no residual (FFN, LayerNorm, uniform attention)"]["mean"] < 1e-9
    assert rows["no FFN, no LayerNorm, uniform attention"]["mean"] < 1e-9
    assert rows["experiment-like: residual, FFN, LayerNorm, random W_Q/W_K"]["mean"] > 0.05


def test_t7_bad_spec():
    with pytest.raises(ValueError, match="depth"):
        a7.StackSpec(0)
    with pytest.raises(ValueError, match="later_attention"):
        a7.StackSpec(2, later_attention="local")


def test_t7_pinned_regression_and_central_difference():
    # Produced once with: random_stack(Generator().manual_seed(7), StackSpec(2, False, True, True, "random"), 4, d=3, heads=1, e=2, d_ff=4)
    st_ = a7.random_stack(torch.Generator().manual_seed(7), a7.StackSpec(2, False, True, True, "random"), 4, d=3, heads=1, e=2, d_ff=4)
    expected = torch.tensor([[[-0.0004725955368991406, 0.0008791829845162647, 0.0014148514307276419, -0.0018214388783447657]]], dtype=F64)
    assert torch.allclose(a7.no_residual_closed_form(st_), expected, rtol=1e-10, atol=1e-16)
    G = a7.first_layer_gradient(st_)
    E = torch.randn(G.shape, generator=torch.Generator().manual_seed(1), dtype=F64)
    h = 1e-5
    with torch.no_grad():
        fd = float((a7.stack_loss(st_, h * E) - a7.stack_loss(st_, -h * E)) / (2 * h))
    assert fd == pytest.approx(float((G * E).sum()), abs=1e-8)
