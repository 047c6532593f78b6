"""Exact sympy derivations of T1', T3', T6, T7 (initlab.theory.attention_symbolic_ext)."""

from __future__ import annotations

import pytest
import sympy as sp

from initlab.theory import attention_symbolic_ext as sx
from initlab.theory.attention_symbolic import Derivation


def _holds(d):
    assert d.zero_residuals
    for k, v in d.zero_residuals.items():
        assert v == 0, f"{d.statement}: {k} = {v}"
    for k, v in d.nonzero_witnesses.items():
        assert v != 0, f"{d.statement}: {k} should be non-zero"


@pytest.mark.parametrize("name", ["T6", "T7"])
def test_symbolic_ext_fast(name):
    _holds(sx.DERIVATIONS_EXT[name]())


@pytest.mark.slow
@pytest.mark.parametrize("name", ["T1'", "T3'"])
def test_symbolic_ext_slow(name):  # 20-40 s each on a loaded 2-core machine
    _holds(sx.DERIVATIONS_EXT[name]())


def test_symbolic_ext_small_t1p_and_zero_exp_can_fail():
    _holds(sx.derive_t1p(T=2, e=1))
    a, b = sp.symbols("a b")
    assert sx._zero_exp(sp.exp(a + b) - sp.exp(a) * sp.exp(b)) == 0
    assert sx._zero_exp(sp.exp(2 * a) - sp.exp(a) ** 2) == 0
    assert sx._zero_exp(sp.exp(a) - sp.exp(b)) != 0
    assert not Derivation("X", 2, zero_residuals={"w": sx._zero_exp(sp.exp(a) + 1)}).holds
