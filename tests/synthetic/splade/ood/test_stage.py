"""The ``splade_in_domain`` stage of ``initlab reproduce``: the 100-step-cap confirmation's recipe on fresh seeds, as many as
the power computation on the saved confirmation asks, deciding the in-domain head-norm interaction in a family of its own."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from initlab.app import stages
from initlab.config import to_dict
from initlab.synthetic.splade.ood import config as ood_config
from initlab.synthetic.splade.ood import stage as splade_stage

RESULTS = Path(__file__).resolve().parents[4] / "docs" / "results"


def _saved() -> dict:
    return json.loads((RESULTS / splade_stage.SAVED_RUN).read_text(encoding="utf-8"))


@pytest.mark.parametrize("preset", ["default", "full"])
def test_the_stage_runs_the_recipe_of_the_saved_confirmation_on_other_seeds(preset):
    assert splade_stage.RECIPE == "confirm-v2k-cap100"
    assert splade_stage.SAVED_RUN.startswith("synthetic_splade_ood_confirm_cap100/")
    ours = to_dict(splade_stage.stage_config(preset))
    recipe = to_dict(ood_config.PRESETS[splade_stage.RECIPE])
    # only the seeds and the report-only role differ from the preregistered recipe
    assert {k for k in {**ours, **recipe} if ours.get(k) != recipe.get(k)} <= {"seeds", "role"}
    assert ours["engine"] == "fused" and ours["max_steps"] == 100
    saved = _saved()["config"]
    assert {k: v for k, v in saved.items() if k not in ("seeds", "role")} == \
        {k: v for k, v in json.loads(json.dumps(ours)).items() if k in saved and k not in ("seeds", "role")}


def test_the_recipe_is_the_300_step_confirmation_with_a_100_step_cap():
    cap, base = (to_dict(ood_config.PRESETS[n]) for n in (splade_stage.RECIPE, "confirm-v2k"))
    changed = {k for k in {**cap, **base} if cap.get(k) != base.get(k)}
    assert changed <= {"max_steps", "checkpoints", "seeds", "engine", "role"}
    assert (cap["max_steps"], list(cap["checkpoints"])) == (100, [100])
    assert not set(cap["seeds"]) & set(base["seeds"])


def test_the_stage_seeds_are_fresh(saved_run_seeds):
    for cfg in (splade_stage.stage_config("default"), splade_stage.stage_config("full")):
        assert not set(cfg.seeds) & saved_run_seeds, sorted(set(cfg.seeds) & saved_run_seeds)


def _sizing() -> tuple[list[dict], list[dict]]:
    return splade_stage.sizing(RESULTS)


def test_the_seed_count_is_the_power_computation_on_the_saved_confirmation():
    reps, readings = _sizing()
    (plan,) = splade_stage.seed_plan(reps, readings=readings)
    assert plan.claim == "interaction" and plan.word == "reproduced" and plan.alpha == 0.05
    assert plan.achieved >= 0.9
    assert plan.seeds == len(splade_stage.stage_config("default").seeds)
    # planned at the smallest estimate measured, the step-100 readings included, never at a larger one
    ests = [splade_stage.seed_plan([r])[0].estimate for r in reps] + \
        [splade_stage._verdicts(r)[splade_stage.CLAIM].estimate for r in readings]
    assert plan.estimate == pytest.approx(min(ests)) and min(ests) < max(ests)
    # the readings bound the estimate, never the sd: the sd is the confirmation's own
    (alone,) = splade_stage.seed_plan(reps)
    assert plan.sd == alone.sd


def test_the_readings_are_the_300_step_runs_read_at_step_100():
    reps, readings = _sizing()
    assert len(readings) == 2 and {len(r["complete_seeds"]) for r in readings} == {3}
    assert not {s for r in readings for s in r["complete_seeds"]} & set(reps[0]["complete_seeds"])
    row = readings[0]["rows"][0]
    assert row["id_select"] == row["id_select_at"]["100"] and row["id_test"] == row["id_at"]["100"]
    with pytest.raises(ValueError, match="step"):
        splade_stage.at_step(readings[0], 150)


def test_pooling_refuses_shared_seeds_and_other_recipes():
    (a,), (b, _) = _sizing()
    with pytest.raises(ValueError, match="two runs"):
        splade_stage.pooled([a, a])
    other = {**b, "config": {**a["config"], "ks": [1.0, 2.0]}}
    with pytest.raises(ValueError, match="one recipe"):
        splade_stage.pooled([a, other])


def test_the_stage_decides_the_in_domain_interaction_of_a_saved_run_alone_in_its_family(tmp_path):
    shutil.copy(RESULTS / splade_stage.SAVED_RUN, tmp_path / "results.json")
    (claim,) = splade_stage.stage_claims(tmp_path)
    v = claim.verdict
    assert claim.title.endswith("(in domain)") and v.family == "primary"
    # the run's own in-domain record (uncorrected) and the stage's word agree: a family of one corrects nothing
    rec = _saved()["verdicts_in_domain"]["interaction"]
    assert (v.word, v.n) == (rec["word"], rec["n"]) and v.estimate == pytest.approx(rec["estimate"])
    assert stages.claim_line(claim).startswith(f"{claim.title}: reproduced; +0.171 [+0.108, +0.235]; 4 seeds")
    # the confirmed word the default is compared with is this decision on the saved confirmation
    assert splade_stage.confirmed(RESULTS) == {claim.title: v}
    assert splade_stage.confirmed(tmp_path / "nothing") == {}


def test_the_stage_is_in_the_default_run_and_the_phase_diagram_is_not():
    default = stages.RUNS["default"].stages()
    assert "splade_in_domain" in default and "splade" not in default
    assert "splade" in stages.RUNS["quick"].stages()


def test_the_out_of_domain_record_names_the_stage():
    from initlab.synthetic.splade import ood

    assert ood.EXPERIMENT.stage_records() == [splade_stage.STAGE]
    assert stages.STAGES["splade_in_domain"] is splade_stage.STAGE
