"""The synthetic SPT preset ``initlab reproduce`` runs: derived from a preregistered run's recipe, on fresh seeds, as
many as the power computation on that run's saved per-seed numbers asks."""

from __future__ import annotations

import json
from pathlib import Path

from initlab.config import to_dict
from initlab.evidence.families import seeds_for_words
from initlab.synthetic.spt import claims as spt_claims
from initlab.synthetic.spt import config as spt_config
from initlab.synthetic.spt.claims import SPT_FAMILIES

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "results"


def _saved(preset: str) -> dict:
    return json.loads((RESULTS / f"synthetic_spt_{preset}" / "summary.json").read_text(encoding="utf-8"))


def test_the_default_is_the_recipe_of_its_preregistered_run_on_other_seeds():
    assert spt_config.reproduce_recipe() == "causal"  # the preregistered causal round (docs/synthetic_spt.md 9.4)
    default = to_dict(spt_config.PRESETS["default"])
    recipe = to_dict(spt_config.PRESETS[spt_config.reproduce_recipe()])
    assert {k for k in {**default, **recipe} if default.get(k) != recipe.get(k)} == {"seeds", "conditions"}
    assert set(default["conditions"]) <= set(recipe["conditions"])
    # the saved run ran this very recipe: every training field its config saved is the preset's
    saved = _saved(spt_config.reproduce_recipe())["config"]
    assert {k: v for k, v in saved.items() if k not in ("seeds", "conditions")} == \
        {k: v for k, v in json.loads(json.dumps(default)).items() if k in saved and k not in ("seeds", "conditions")}
    assert "engine" not in saved


def test_the_default_runs_every_arm_its_claims_need_and_they_are_primary():
    primary = next(f for f in SPT_FAMILIES if f.name == "primary").claims
    assert set(spt_config.REPRODUCE_CLAIMS) <= set(primary)
    raw = {c: {s: {"test_acc": 0.5, "prox_start": 0.05, "prox_end": 0.05} for s in (1, 2)}
           for c in spt_config.PRESETS["default"].conditions}
    vs = spt_claims.evaluate_all(raw, spt_config.PRESETS["default"].thresholds)
    assert all(vs[c].word != "not run" for c in spt_config.REPRODUCE_CLAIMS)


def test_the_default_seeds_are_fresh(saved_run_seeds):
    seeds = set(spt_config.PRESETS["default"].seeds)
    assert seeds and not seeds & saved_run_seeds, sorted(seeds & saved_run_seeds)


def test_the_seed_count_is_the_power_computation_on_the_saved_run():
    plan = spt_claims.seed_plan(_saved(spt_config.reproduce_recipe()), spt_config.REPRODUCE_CLAIMS)
    decided = [p for p in plan if p.seeds is not None]
    # every claim the stage must decide has a decided leaf; only proximity's "scratch unchanged" part may not
    assert {p.claim for p in decided} == set(spt_config.REPRODUCE_CLAIMS)
    assert all(p.seeds is not None for p in plan if not (p.claim == "proximity" and p.part == 1))
    assert len(spt_config.PRESETS["default"].seeds) == max(p.seeds for p in decided)
    assert all(p.achieved >= 0.9 and p.alpha == 0.05 / len(plan) for p in decided)


def test_seed_plan_is_seeds_for_words_on_the_recomputed_verdicts():
    s = _saved("causal")
    th = spt_config.PRESETS["causal"].thresholds
    vs = spt_claims.evaluate_all(spt_claims.as_raw(s["summary"]["per_seed"]), th)
    assert spt_claims.seed_plan(s, ("spt_gain", "causal_prior")) == seeds_for_words(vs, ("spt_gain", "causal_prior"))
