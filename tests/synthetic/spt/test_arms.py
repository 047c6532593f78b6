"""The synthetic SPT arms table (initlab.synthetic.spt.arms): properties every entry must have (a recipe the code can
run, a colour, a place in the claim order, a learning rate in every run that trains it), checked on the table as it
stands, so that a new entry needs no edit here; bad entries are refused."""

from __future__ import annotations

import dataclasses

import pytest

from initlab.config import derive
from initlab.nn.encoder import ModelConfig
from initlab.synthetic.spt import arms, config, runner
from initlab.synthetic.spt.config import BASE, PRESETS, SPTConfig, condition_names, condition_spec, label_lr

ODD = derive(BASE, spt_sweep_epochs=(3, 10), depths=(1, 3), alibi_slope=0.7, qk_init_scale=2.5)
_CFG_FIELDS = {f.name for f in dataclasses.fields(SPTConfig)}
_MODEL_FIELDS = {f.name for f in dataclasses.fields(ModelConfig)}


@pytest.mark.parametrize("cfg", [BASE, ODD, *PRESETS.values()])
def test_every_arm_is_a_recipe_the_code_can_run(cfg):
    table = arms.arms(cfg.spt_sweep_epochs, cfg.depths)
    spec = condition_spec(cfg)
    assert list(spec) == [a.name for a in table]  # the table's order is the order of reports and figures
    for a in table:
        s = spec[a.name]
        assert (s["spt"] is None) == a.label_only and (not s["load"] if a.label_only else set(s["load"]))
        assert set(s["load"]) <= set(arms.ALL_GROUPS) | {"qk"} and set(s["freeze"]) <= set(arms.ALL_GROUPS)
        assert set(s["model"]) <= _MODEL_FIELDS, a.name  # overrides name ModelConfig fields
        assert {src for _, src in a.model_from_config} <= _CFG_FIELDS and a.qk_scale_from in _CFG_FIELDS | {""}
        assert s["budget"] == "early_stop" or a.label_only  # the compute-matched budget trains from scratch
        if a.spt is not None and isinstance(a.spt[1], int):
            assert a.spt[1] in cfg.spt_sweep_epochs  # a snapshot the SPT run keeps
    for L in cfg.depths:
        if L != 1:
            assert {f"depth{L}_scratch", f"depth{L}_spt"} <= set(spec)
    assert {f"spt_e{e}" for e in cfg.spt_sweep_epochs} <= set(spec)


def test_the_label_only_list_is_every_arm_without_an_spt_checkpoint():
    table = arms.arms((), (1, 2, 4))
    assert config.LABEL_ONLY == tuple(a.name for a in table if a.spt is None)
    assert "scratch" in config.LABEL_ONLY and "spt" not in config.LABEL_ONLY


def test_every_arm_has_a_colour_and_a_place_in_the_claim_order():
    """Colours: grey for a label-only arm and blue for an SPT one unless the entry says otherwise; curve colours
    tell the drawn arms apart. Claim order: the plan runs the listed arms in CLAIM_ORDER's order, then the others."""
    table = arms.arms((10,), (1, 2))
    for a in table:
        assert a.colour and a.label
        if a.colour not in (arms.GREY, arms.BLUE):
            assert dataclasses.replace(a, colour="").colour in (arms.GREY, arms.BLUE)  # an own colour, set in the entry
    curves = [a.curve_colour for a in table if a.curve_colour]
    assert len(curves) == len(set(curves))
    full = PRESETS["full"]
    order = list(dict.fromkeys(c.args["condition"] for c in runner.plan(full) if c.args["kind"] == "finetune"))
    rank = {n: (arms.CLAIM_ORDER.index(n) if n in arms.CLAIM_ORDER else len(arms.CLAIM_ORDER)) for n in order}
    assert order == sorted(order, key=rank.get)
    assert order[:3] == ["scratch", "spt", "scratch_matched"]


@pytest.mark.parametrize("name", [n for n in PRESETS if not PRESETS[n].lr_sweep])
def test_every_label_only_arm_a_run_trains_has_its_chosen_rate(name):
    """A label-only arm fine-tunes at the rate chosen for it (its ``label_lr`` entry; the compute-matched arm at
    scratch's), never silently at ``lr``, the SPT fine-tuning rate."""
    cfg = PRESETS[name]
    rates = dict(cfg.label_lr)
    for c in condition_names(cfg):
        if c in config.label_only_names(cfg.depths):
            assert c in rates or (c == "scratch_matched" and "scratch" in rates), (name, c)
            assert label_lr(cfg, c) == rates.get(c, rates.get("scratch"))


@pytest.mark.parametrize("kw, match", [
    (dict(name="x y"), "Arm.name"), (dict(name="a", variant="tiny"), "variant"), (dict(name="a", depth=0), "depth"),
    (dict(name="a", budget="long"), "budget"), (dict(name="a", spt=("web", "rule")), "spt"),
    (dict(name="a", load=("qk",)), "label-only arm"),
])
def test_a_bad_entry_is_refused_naming_the_field(kw, match):
    with pytest.raises(ValueError, match=match):
        arms.Arm(**kw)


def test_two_arms_of_one_name_are_refused():
    with pytest.raises(ValueError, match="names used twice"):
        arms.arms((), (1,), table=arms.ARMS + (arms.Arm("scratch"),))


def test_a_run_saves_its_arms_as_the_figures_read_them():
    from initlab.synthetic.spt.report import arm_rows

    cfg = derive(BASE, conditions=("scratch", "spt", "lastpool_scratch"))
    assert arm_rows(cfg) == [
        {"name": "scratch", "label_only": True, "colour": arms.GREY, "curve_colour": arms.GREY},
        {"name": "spt", "label_only": False, "colour": arms.BLUE, "curve_colour": arms.BLUE},
        {"name": "lastpool_scratch", "label_only": True, "colour": arms.GREY, "curve_colour": "tab:pink"}]


def test_the_figures_take_the_saved_colours_else_fall_back_by_name():
    from initlab.paper_figs import spt_figures

    saved = {"summary": {"arms": [{"name": "odd", "label_only": True, "colour": "tab:olive", "curve_colour": ""}]}}
    assert spt_figures.saved_arms(saved)["odd"]["colour"] == "tab:olive"
    old = {"summary": {"per_seed": {"scratch": [], "alibi_scratch": [], "spt": []}, "conditions": []}}
    got = spt_figures.saved_arms(old)
    assert got["alibi_scratch"]["colour"] == "tab:gray" and got["alibi_scratch"]["curve_colour"] == ""
    assert got["spt"]["curve_colour"] == "tab:blue"


def test_an_arm_is_labelled_by_its_name_unless_given_a_label():
    assert arms.Arm("plain").label == "plain"
    assert arms.Arm("plain", label="a plain\narm").label == "a plain\narm"


def test_every_headline_chart_shows_arms_of_the_presets_that_feed_it():
    full, causal = PRESETS["full"], PRESETS["causal"]
    names = {"accuracy": condition_names(full), "causal": condition_names(causal)}
    for chart, shown in arms.HEADLINE.items():
        assert set(shown) <= set(names[chart]), (chart, sorted(set(shown) - set(names[chart])))
        got = arms.headline_conditions(chart, full.spt_sweep_epochs, full.depths)
        assert [n for n, _ in got] == list(shown)  # every one, in the chart's order
    assert dict(arms.headline_conditions("accuracy", (10,)))["spt_e10"] == "SPT,\n10 epochs"
    assert "spt_e10" not in dict(arms.headline_conditions("accuracy", ()))  # an arm the run lacks is left out


def test_an_unknown_headline_chart_is_refused_by_name():
    with pytest.raises(ValueError, match="chart: expected one of"):
        arms.headline_conditions("accuracies")
