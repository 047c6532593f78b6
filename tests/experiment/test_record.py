"""initlab.experiment.record: the record each experiment exposes, and the roof's claims tables built from them."""

from __future__ import annotations

import types

import pytest

from initlab.app.docgen import claims as docgen
from initlab.experiment.record import Experiment
from initlab.synthetic.spt import claims as spt_claims


def test_a_record_reads_its_rows_when_asked():
    mod = types.ModuleType("fake_claims")
    mod.CLAIM_ROWS = []
    exp = Experiment("fake", mod)
    mod.CLAIM_ROWS.append("row")
    assert exp.claim_rows() == ["row"]


@pytest.mark.parametrize("name, module, match", [("", spt_claims, "Experiment.name"),
                                                 ("fake", types.ModuleType("no_rows"), "CLAIM_ROWS")])
def test_a_bad_record_is_refused(name, module, match):
    with pytest.raises(ValueError, match=match):
        Experiment(name, module)


def test_the_claims_tables_hold_every_experiments_rows_once():
    rows = docgen.all_claims()
    assert rows == [c for e in docgen.EXPERIMENTS for c in e.claims.CLAIM_ROWS]
    assert len({id(c) for c in rows}) == len(rows)
    assert [e.name for e in docgen.EXPERIMENTS] == ["theory_verify", "synthetic_spt", "lra_listops", "synthetic_splade",
                                                    "diagnose_validation"]
    assert "SPLADE_OOD primary: interaction" in docgen.legend()
