"""Input validation of T5's helpers: cls_blind_fraction(T) and nonuniform_first_order's affine-f test."""

from __future__ import annotations

import math

import pytest
import torch

from initlab.theory.attention import case as ac
from initlab.theory.attention import gradient as ag
F64 = torch.float64


@pytest.mark.parametrize("T", [float("nan"), 2.5, 1, 0, True, "3", None])
def test_cls_blind_fraction_rejects_non_integer_T(T):
    with pytest.raises(ValueError, match="T: expected an integer sequence length T >= 2"):
        ag.cls_blind_fraction(T)


def test_cls_blind_fraction_values():
    assert ag.cls_blind_fraction(4) == pytest.approx(math.sqrt(0.75))
    assert ag.cls_blind_fraction(torch.tensor(4).item()) == pytest.approx(math.sqrt(0.75))


def test_nonuniform_first_order_rejects_quadratic_f():
    """f(y) = [y, (u.y)^2] with u orthogonal to the old midpoint test's y1 - y2 passed before (24 % off FD)."""
    gen = torch.Generator().manual_seed(3)
    case = ac.random_case(gen, 5, d=3, heads=1, e=2, use_W_O=True, f="identity", loss="mse", row_shift=False)
    y = torch.randn(2, 5, dtype=F64, generator=torch.Generator().manual_seed(0))  # the old test's points (m = 5)
    dlt = y[0] - y[1]
    u = torch.randn(5, dtype=F64, generator=gen)
    u = u - (u @ dlt) / (dlt @ dlt) * dlt
    case.f = lambda Y: torch.cat([Y, ((Y @ u) ** 2)[..., None]], -1)
    case.loss = ac.make_loss("mse", 6, gen)
    mid, ends = case.f(y.mean(0, keepdim=True))[0], case.f(y).mean(0)
    assert torch.allclose(mid, ends)  # the old midpoint test is fooled
    with pytest.raises(ValueError, match="case.f: expected an affine"):
        ag.nonuniform_first_order(case, torch.randn(1, 5, 5, dtype=F64, generator=gen))


def test_quadratic_f_really_breaks_the_first_order_formula(monkeypatch):
    """Why the check matters: with f(y) = [y, (u.y)^2] the affine-f formula is off finite differences
    (2.4 % relative in this case, T = 5, H = 1, d = 3, e = 2, m = 4)."""
    from initlab.theory.subspace import blind_component

    gen = torch.Generator().manual_seed(3)
    case = ac.random_case(gen, 5, d=3, heads=1, e=2, use_W_O=True, f="identity", loss="mse", row_shift=False)
    case.W_O = torch.randn(2, 4, generator=gen, dtype=F64)
    y = torch.randn(2, 4, dtype=F64, generator=torch.Generator().manual_seed(0))
    dlt = y[0] - y[1]
    u = torch.randn(4, dtype=F64, generator=gen)
    u = u - (u @ dlt) / (dlt @ dlt) * dlt
    case.f = lambda Y: torch.cat([Y, ((Y @ u) ** 2)[..., None]], -1)
    case.loss = ac.make_loss("mse", 5, gen)
    S1 = torch.randn(1, 5, 5, dtype=F64, generator=gen)
    monkeypatch.setattr(ag, "_check_affine", lambda *a, **k: None)  # bypass the check to measure the error
    first = ag.nonuniform_first_order(case, S1)
    h = 1e-4
    case.S = h * S1
    Gp = blind_component(ac.score_gradient(case))
    case.S = -h * S1
    Gm = blind_component(ac.score_gradient(case))
    rel = float((first - (Gp - Gm) / (2 * h)).norm() / ((Gp - Gm) / (2 * h)).norm())
    assert rel == pytest.approx(0.0244, abs=0.001)
