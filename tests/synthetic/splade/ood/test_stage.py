"""The ``splade_in_domain`` stage of ``initlab reproduce``: the OOD confirmation's recipe on fresh seeds, as many as the power
computation on the saved confirmation asks, deciding the in-domain head-norm interaction in a family of its own."""

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
    assert splade_stage.RECIPE == "confirm-v2k" and splade_stage.SAVED_RUN.startswith("synthetic_splade_ood_confirm/")
    ours = to_dict(splade_stage.stage_config(preset))
    recipe = to_dict(ood_config.PRESETS[splade_stage.RECIPE])
    # only the seeds and the head's engine (the same vectors to rounding) differ from the preregistered recipe
    assert {k for k in {**ours, **recipe} if ours.get(k) != recipe.get(k)} == {"seeds", "engine"}
    assert ours["engine"] == "fused"
    saved = _saved()["config"]
    assert {k: v for k, v in saved.items() if k not in ("seeds", "engine")} == \
        {k: v for k, v in json.loads(json.dumps(ours)).items() if k in saved and k not in ("seeds", "engine")}


def test_the_stage_seeds_are_fresh(saved_run_seeds):
    for cfg in (splade_stage.stage_config("default"), splade_stage.stage_config("full")):
        assert not set(cfg.seeds) & saved_run_seeds, sorted(set(cfg.seeds) & saved_run_seeds)


def _sizing() -> list[dict]:
    return [json.loads((RESULTS / f).read_text(encoding="utf-8")) for f in splade_stage.SIZING_RUNS]


def test_the_seed_count_is_the_power_computation_on_every_saved_seed_of_the_recipe():
    (plan,) = splade_stage.seed_plan(_sizing())
    assert plan.claim == "interaction" and plan.word == "reproduced" and plan.alpha == 0.05
    assert plan.achieved >= 0.9
    assert plan.seeds == len(splade_stage.stage_config("default").seeds)
    # planned at the smallest estimate any sizing run measured, never at a larger pooled one
    ests = [splade_stage.seed_plan([r])[0].estimate for r in _sizing()]
    assert plan.estimate == pytest.approx(min(ests)) and min(ests) < max(ests)


def test_the_sizing_sd_pools_every_seed_of_the_sizing_runs():
    (plan,) = splade_stage.seed_plan(_sizing())
    rep = splade_stage.pooled(_sizing())
    assert sorted(rep["complete_seeds"]) == sorted(s for r in _sizing() for s in r["complete_seeds"])
    assert len(rep["complete_seeds"]) == 6
    (alone,) = splade_stage.seed_plan(_sizing()[:1])
    assert plan.sd > alone.sd  # the first default run's spread widened the sd the count is planned at


def test_pooling_refuses_shared_seeds_and_other_recipes():
    a, b = _sizing()
    with pytest.raises(ValueError, match="two runs"):
        splade_stage.pooled([a, a])
    other = {**b, "config": {**b["config"], "ks": [1.0, 2.0]}}
    with pytest.raises(ValueError, match="one recipe"):
        splade_stage.pooled([a, other])


def test_the_stage_decides_the_in_domain_interaction_of_a_saved_run_alone_in_its_family(tmp_path):
    shutil.copy(RESULTS / splade_stage.SAVED_RUN, tmp_path / "results.json")
    (claim,) = splade_stage.stage_claims(tmp_path)
    v = claim.verdict
    assert claim.title.endswith("(in domain)") and v.family == "primary"
    # the saved confirmation's in-domain record, now corrected in a family of one: the same word and interval
    rec = _saved()["verdicts_in_domain"]["interaction"]
    assert (v.word, v.n) == (rec["word"], rec["n"]) and v.estimate == pytest.approx(rec["estimate"])
    assert stages.claim_line(claim).startswith(f"{claim.title}: reproduced; +0.212 [+0.167, +0.258]; 3 seeds")


def test_the_stage_is_in_the_default_run_and_the_phase_diagram_is_not():
    default = stages.RUNS["default"].stages()
    assert "splade_in_domain" in default and "splade" not in default
    assert "splade" in stages.RUNS["quick"].stages()


def test_the_out_of_domain_record_names_the_stage():
    from initlab.synthetic.splade import ood

    assert ood.EXPERIMENT.stage_records() == [splade_stage.STAGE]
    assert stages.STAGES["splade_in_domain"] is splade_stage.STAGE
