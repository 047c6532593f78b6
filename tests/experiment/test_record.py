"""initlab.experiment.record: the record each experiment exposes, and the roof's claims tables built from them."""

from __future__ import annotations

import types

import pytest

from initlab.app.docgen import claims as docgen
from initlab.experiment.record import Command, Experiment
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
                                                    "synthetic_splade_ood", "realdata_splade", "diagnose_validation"]
    assert "SPLADE_OOD primary: interaction" in docgen.legend()


def test_every_record_names_what_exists():
    """Each record's preset table is a non-empty table of frozen configs, its figures are functions, its stages are
    stages of ``initlab reproduce`` (every stage in exactly one record), and its commands run its own package's
    code."""
    import dataclasses

    from initlab.app.experiments import EXPERIMENTS, by_name
    from initlab.app.stages import REGISTRY
    from initlab.experiment.record import resolve

    assert [e.name for e in EXPERIMENTS] == ["theory_verify", "score_scale", "synthetic_spt", "synthetic_splade",
                                             "synthetic_splade_ood", "realdata_splade", "lra_listops",
                                             "diagnose_validation"]
    for exp in EXPERIMENTS:
        if exp.presets is not None:
            table = exp.preset_table()
            assert table and all(dataclasses.is_dataclass(c) and c.__dataclass_params__.frozen for c in table.values())
        assert all(callable(resolve(f)) for f in exp.figures)
        package = {"theory_verify": "initlab.theorycheck.verify", "score_scale": "initlab.theorycheck.score_scale",
                   "synthetic_spt": "initlab.synthetic.spt", "synthetic_splade": "initlab.synthetic.splade.phase",
                   "synthetic_splade_ood": "initlab.synthetic.splade.ood", "realdata_splade": "initlab.realdata.splade",
                   "lra_listops": "initlab.realdata.lra", "diagnose_validation": "initlab.synthetic.diagnose"}[exp.name]
        assert all(c.target.startswith(package + ".") and callable(resolve(c.target)) for c in exp.commands)
    stages = [s.name for e in EXPERIMENTS for s in e.stage_records()]
    assert sorted(stages) == sorted(s.name for s in REGISTRY) and len(set(stages)) == len(stages)
    assert by_name("score_scale").preset_table() is resolve("initlab.theorycheck.score_scale.experiment:PRESETS")
    with pytest.raises(KeyError, match="expected one of"):
        by_name("nope")


@pytest.mark.parametrize("kwargs, match", [
    ({"commands": (Command("g", "x", "initlab.x:f", "h"),), "presets": "PRESETS"}, "presets: expected a name"),
    ({"commands": (Command("g", "x", "initlab.x:f", "h"),), "figures": ("initlab.paper_figs.x",)}, "figures: expected"),
    ({"commands": ("initlab.x:f",)}, "commands: expected Command records"),
    ({"stages": ("theory",)}, "stages: expected a name"),
    ({"stages": ("initlab.x:STAGE",), "order": "1"}, "order: expected an int or None"),
    ({"stages": ("initlab.x:STAGE",), "order": True}, "order: expected an int or None"),
    ({}, "expected claims, a command or a reproduce stage"),
])
def test_a_record_with_malformed_names_or_nothing_in_it_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Experiment("fake", **kwargs)


@pytest.mark.parametrize("args, match", [(("g", "x", "initlab.x.f", "h"), "target: expected"),
                                         (("", "x", "initlab.x:f", "h"), "non-empty group"),
                                         (("g", "", "initlab.x:f", "h"), "non-empty group"),
                                         (("g", "x", "initlab.x:f", ""), "non-empty group")])
def test_a_malformed_command_is_refused(args, match):
    with pytest.raises(ValueError, match=match):
        Command(*args)


def test_a_record_without_presets_says_so():
    exp = Experiment("fake", stages=("initlab.x:STAGE",))
    assert exp.claim_rows() == []
    with pytest.raises(ValueError, match="has no preset table"):
        exp.preset_table()


def test_a_stage_name_that_names_no_stage_is_refused():
    exp = Experiment("fake", stages=("initlab.theorycheck.verify.stage:theory",))  # the function, not its record
    with pytest.raises(ValueError, match="expected names of Stage records"):
        exp.stage_records()


def test_the_registry_follows_the_reading_order_and_refuses_a_stage_named_twice():
    from initlab.app.experiments import EXPERIMENTS, reading_order
    from initlab.app.stages import REGISTRY, registry

    assert [e.name for e in reading_order()] == ["theory_verify", "synthetic_spt", "score_scale", "lra_listops",
                                                 "synthetic_splade", "synthetic_splade_ood", "realdata_splade",
                                                 "diagnose_validation"]
    cmd = (Command("g", "x", "initlab.x:f", "h"),)
    late, none, early, tie = (Experiment("late", commands=cmd, order=5), Experiment("none", commands=cmd),
                              Experiment("early", commands=cmd, order=-1), Experiment("tie", commands=cmd, order=5))
    assert [e.name for e in reading_order((none, late, early, tie))] == ["early", "late", "tie", "none"]
    assert [s.name for s in REGISTRY] == ["theory", "spt", "score_scale", "splade", "splade_in_domain", "lra_listops"]
    twice = Experiment("twice", stages=("initlab.theorycheck.verify.stage:STAGE",))
    with pytest.raises(ValueError, match="stage 'theory': named by the records 'theory_verify' and 'twice'"):
        registry((*EXPERIMENTS, twice))
