"""The synthetic SPT arms table (initlab.synthetic.spt.arms): the recipes it gives are those of the hand-written
condition list it replaced (kept here as the reference), in the same order; bad entries are refused."""

from __future__ import annotations

from typing import Any

import pytest

from initlab.config import derive
from initlab.synthetic.spt import arms, config, plan
from initlab.synthetic.spt.config import BASE, PRESETS, condition_names, condition_spec

_GROUPS = ("embeddings", "qkvo", "ffn", "layernorm")
_HYBRIDS = {"qk": ("qk",), "qkvo": ("qkvo",), "ffn": ("ffn",), "qk_emb": ("qk", "embeddings"),
            "qk_ln": ("qk", "layernorm"), "qk_emb_ln": ("qk", "embeddings", "layernorm")}


def reference_spec(cfg: Any) -> dict[str, dict[str, Any]]:
    """The condition list as it was written by hand before the arms table (the reference)."""
    def c(variant="full", depth=1, spt=None, load=(), freeze=(), budget="early_stop", model=(), qk_scale=1.0):
        return dict(variant=variant, depth=depth, spt=spt, load=load, freeze=freeze, budget=budget, model=dict(model),
                    qk_scale=qk_scale)

    spec = {"scratch": c(), "scratch_matched": c(budget="matched"), "spt": c(spt=("local", "rule"), load=_GROUPS),
            "frozen_attn": c(freeze=("qkvo",))}
    for h, groups in _HYBRIDS.items():
        spec[f"hybrid_{h}"] = c(spt=("local", "rule"), load=groups)
    for e in cfg.spt_sweep_epochs:
        spec[f"spt_e{e}"] = c(spt=("local", e), load=_GROUPS)
    for L in cfg.depths:
        if L != 1:
            spec[f"depth{L}_scratch"] = c(depth=L)
            spec[f"depth{L}_spt"] = c(depth=L, spt=("local", "rule"), load=_GROUPS)
    spec["cross_count"] = c(spt=("count", "rule"), load=_GROUPS)
    spec["cross_iid"] = c(spt=("iid", "rule"), load=_GROUPS)
    spec["attn_scratch"] = c(variant="attn_only")
    spec["attn_spt"] = c(variant="attn_only", spt=("local", "rule"), load=("embeddings", "qkvo"))
    spec["attn_qk"] = c(variant="attn_only", spt=("local", "rule"), load=("qk",))
    spec["alibi_scratch"] = c(model={"proximity_bias": cfg.alibi_slope})
    spec["qkscale_scratch"] = c(qk_scale=cfg.qk_init_scale)
    spec["lastpool_scratch"] = c(model={"pooling": "last"})
    spec["spt_nopos"] = c(spt=("nopos", "rule"), load=_GROUPS)
    return spec


ODD = derive(BASE, spt_sweep_epochs=(3, 10), depths=(1, 3), alibi_slope=0.7, qk_init_scale=2.5)


@pytest.mark.parametrize("cfg", [BASE, ODD, *PRESETS.values()])
def test_the_table_gives_the_reference_recipes_in_order(cfg):
    want, got = reference_spec(cfg), condition_spec(cfg)
    assert list(got) == list(want)  # the order of reports and figures
    assert got == want


def test_label_only_and_claim_order_are_those_of_before():
    assert config.LABEL_ONLY == ("scratch", "scratch_matched", "frozen_attn", "depth2_scratch", "depth4_scratch",
                                 "attn_scratch", "alibi_scratch", "qkscale_scratch", "lastpool_scratch")
    full = PRESETS["full"]
    names = [c.args["condition"] for c in plan.plan(full) if c.args["kind"] == "finetune"]
    order = list(dict.fromkeys(names))
    assert order == sorted(condition_names(full), key=lambda n: arms.CLAIM_ORDER.index(n))
    assert order[:3] == ["scratch", "spt", "scratch_matched"]


def test_colours_follow_the_groups():
    by = {a.name: a for a in arms.arms((10,), (1, 2))}
    assert by["scratch"].colour == by["alibi_scratch"].colour == by["depth2_scratch"].colour == arms.GREY
    assert by["spt"].colour == by["spt_e10"].colour == by["spt_nopos"].colour == arms.BLUE
    assert by["hybrid_qk"].colour == arms.ORANGE and by["cross_iid"].colour == arms.GREEN
    assert by["attn_scratch"].colour == by["attn_qk"].colour == arms.PURPLE
    assert [a.name for a in by.values() if a.curve_colour] == ["scratch", "spt", "alibi_scratch", "qkscale_scratch",
                                                               "lastpool_scratch", "spt_nopos"]


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
