"""Exact sympy derivations of T1-T7 (initlab.theory.attention.symbolic), small concrete T."""

from __future__ import annotations

import pytest
import sympy as sp

from initlab.theory.attention import symbolic as sy
@pytest.mark.parametrize("name", ["T1", "T2", "T3", "T4", "T5"])
def test_attention_symbolic_derivation_holds(name):
    d = sy.DERIVATIONS[name]()
    assert d.statement == name
    assert d.zero_residuals, "a derivation must check at least one identity"
    for key, residual in d.zero_residuals.items():
        assert residual == 0, f"{name}: {key} simplifies to {residual}, not 0"
    for key, value in d.nonzero_witnesses.items():
        assert value != 0, f"{name}: {key} should be non-zero"
    assert d.holds


def test_attention_symbolic_t2_other_sizes_and_witness():
    d = sy.derive_t2(T=5, w=1)
    assert d.holds
    # band <1 g^T, P> at g = (1, -1, 0, 0, 0) is -(g_0 d_0 + g_1 d_1) = -(1*1 + (-1)*0) = -1
    assert d.nonzero_witnesses["<G, band> at g = (1, -1, 0, ..., 0)"] == -1


def test_attention_symbolic_catches_a_wrong_identity():
    """The machinery can fail: a deliberately wrong closed form leaves a non-zero residual."""
    d = sy.Derivation("X", 2, zero_residuals={"wrong": sp.simplify(sp.Symbol("a") + 1 - sp.Symbol("a") - 2)})
    assert not d.holds
    with pytest.raises(ValueError, match="T, w"):
        sy.derive_t2(T=2, w=1)


def _holds(d):
    assert d.zero_residuals
    for k, v in d.zero_residuals.items():
        assert v == 0, f"{d.statement}: {k} = {v}"
    for k, v in d.nonzero_witnesses.items():
        assert v != 0, f"{d.statement}: {k} should be non-zero"


@pytest.mark.parametrize("name", ["T6", "T7"])
def test_attention_symbolic_fast(name):
    _holds(sy.DERIVATIONS[name]())


@pytest.mark.slow
@pytest.mark.parametrize("name", ["T1'", "T3'"])
def test_attention_symbolic_slow(name):  # 20-40 s each on a loaded 2-core machine
    _holds(sy.DERIVATIONS[name]())


def test_attention_symbolic_small_t1p_and_zero_exp_can_fail():
    _holds(sy.derive_t1p(T=2, e=1))
    a, b = sp.symbols("a b")
    assert sy.zero_exp(sp.exp(a + b) - sp.exp(a) * sp.exp(b)) == 0
    assert sy.zero_exp(sp.exp(2 * a) - sp.exp(a) ** 2) == 0
    assert sy.zero_exp(sp.exp(a) - sp.exp(b)) != 0
    assert not sy.Derivation("X", 2, zero_residuals={"w": sy.zero_exp(sp.exp(a) + 1)}).holds
