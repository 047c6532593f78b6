"""Mutation tests of `initlab theory verify`: for every statement, injected wrong-but-plausible gradients
(one entry off by a relative 1e-6; a query-independent perturbation G + 0.1 max|G| 1 v^T with v ⟂ 1;
a 1 % rescaling) must turn that statement's row FAIL and leave the others PASS."""

from __future__ import annotations

import pytest
import torch

from initlab.config import derive
from initlab.theory.verify import base as verify_base
from initlab.theorycheck.verify import runner as verify
from initlab.theory.statements import REGISTRY

pytestmark = pytest.mark.usefixtures("one_thread")

IDS = [s.id for s in REGISTRY]
CFG = derive(verify.BASE, cases=3, t_max=12, mc_samples=2000)


def _one_entry(G):
    G = G.contiguous().clone()
    G.view(-1)[1] += 1e-6 * float(G.abs().max()) + 1e-12
    return G


def _query_independent(G):
    """G + c 1 v^T (every query row shifted alike, v ⟂ 1): a wrong gradient that is still blind."""
    gen = torch.Generator().manual_seed(G.numel())
    v = torch.randn(G.shape[-1], generator=gen, dtype=G.dtype)
    v = v - v.mean()
    return G + 0.1 * (float(G.abs().max()) + 1e-3) * v.expand_as(G)


def _rescaled(G):
    return 1.01 * G


MUTATIONS = {"one entry": _one_entry, "query-independent 1 v^T": _query_independent, "rescaled 1.01": _rescaled}


def _run_with(monkeypatch, target, mutate):
    monkeypatch.setattr(verify_base, "_TEST_HOOK", lambda st, G: mutate(G) if st == target else G)
    return verify.run_verify(CFG, statements=[target])["statements"][0]


@pytest.mark.parametrize("mutation", list(MUTATIONS))
@pytest.mark.parametrize("target", IDS)
def test_every_statement_row_fails_for_a_wrong_gradient(monkeypatch, target, mutation):
    row = _run_with(monkeypatch, target, MUTATIONS[mutation])
    assert row["verdict"] == "FAIL", f"{target} passed with a {mutation} gradient: {row['checks']}"


def test_unmutated_rows_pass():
    report = verify.run_verify(CFG)
    assert [r["statement"] for r in report["statements"]] == IDS
    assert report["passed"], [(r["statement"], r["failures"]) for r in report["statements"] if r["failures"]]


def test_t2_inner_product_check_itself_catches_a_query_independent_gradient(monkeypatch):
    """Not only the central differences: <G, band> is compared with the closed-form g, so G + 1 v^T fails it."""
    row = _run_with(monkeypatch, "T2", _query_independent)
    failed = {f.split(":")[0] for f in row["failures"]}
    assert "<G, band> = -sum_E g_j d_j (closed-form g)" in failed
    assert "||G||_F = sqrt(T) ||g|| (closed-form g)" in failed
