"""The plan of a synthetic SPT run: every cell receives the run's config object in its arguments, under unchanged keys."""

from __future__ import annotations

import pytest

from initlab.config import derive, to_dict
from initlab.synthetic import spt
from initlab.synthetic.spt import cells as spt_cells
from initlab.synthetic.spt.runner import NOT_IN_KEY, plan
from initlab.synthetic.spt.tasks import TaskConfig

TINY = derive(
    spt.BASE, seeds=(0, 1), task=TaskConfig(T=20), n_train=32, n_val=16, n_test=32, d_model=8, d_ff=8, batch_size=16,
    finetune_max_epochs=3, finetune_patience=2, spt_max_epochs=4, spt_window=2, spt_sweep_epochs=(1, 2), depths=(1, 2),
    probe_size=4,
)


@pytest.mark.parametrize("preset", sorted(spt.PRESETS))
def test_every_cell_carries_the_config_and_keeps_its_key(preset):
    """The key is what it was when cells read ``config.json`` from the run folder: the training config without the
    grid fields and the cell's own arguments, so finished and interrupted runs resume."""
    cfg = spt.PRESETS[preset]
    training = {k: v for k, v in to_dict(cfg).items() if k not in NOT_IN_KEY}
    for c in plan(cfg):
        assert c.args["config"] is cfg and spt_cells.cell_config(c.args) is cfg, c.name  # the object, no dict per cell
        own = {k: v for k, v in c.args.items() if k != "config"}
        assert c.key == {"config": training, "cell": own}, c.name
        assert "config" not in c.key["cell"]


def test_the_keys_of_a_tiny_plan_are_the_former_literal_keys():
    keys = {c.name: c.key["cell"] for c in plan(derive(TINY, conditions=("scratch", "spt")))}
    assert keys["init_grad__seed0"] == {"kind": "init_grad", "seed": 0}
    assert keys["spt_local_full_d1__seed1"] == {"kind": "spt", "source": "local", "variant": "full", "depth": 1,
                                                "seed": 1, "snapshots": [1, 2]}
    assert set(keys["ft_scratch__seed0"]) == {"kind", "condition", "seed", "lr"}


def test_a_cell_runs_from_its_arguments_in_an_empty_folder(tmp_path):
    """No ``config.json`` is read back: a cell gets its config in ``args`` (also with ``--workers 1``)."""
    c = next(c for c in plan(TINY) if c.name == "init_grad__seed0")
    out = spt_cells.init_grad_cell(str(tmp_path), c.name, c.args)
    assert out["kind"] == "init_grad" and out["seed"] == 0 and not (tmp_path / "config.json").exists()
    with pytest.raises(KeyError):
        spt_cells.init_grad_cell(str(tmp_path), c.name, {k: v for k, v in c.args.items() if k != "config"})


def test_a_cell_refuses_a_config_that_is_not_the_typed_object(tmp_path):
    """A dict in place of the config (the former per-cell form) is refused, not silently rebuilt."""
    c = next(c for c in plan(TINY) if c.name == "init_grad__seed0")
    with pytest.raises(TypeError, match="SPTConfig"):
        spt_cells.init_grad_cell(str(tmp_path), c.name, {**c.args, "config": to_dict(TINY)})


def test_the_learning_rate_reaches_the_optimiser_as_planned(tmp_path, monkeypatch):
    """The rate a fine-tuning cell's optimiser gets is the plan's ``lr`` argument (the run's ``label_lr`` entry),
    through the typed config, in this process."""
    import torch

    seen = []
    real = torch.optim.AdamW

    def spy(params, lr, **kw):
        seen.append(lr)
        return real(params, lr=lr, **kw)

    cfg = derive(TINY, seeds=(0,), conditions=("scratch",), label_lr=(("scratch", 0.0123),))
    c = next(c for c in plan(cfg) if c.name == "ft_scratch__seed0")
    assert c.args["lr"] == 0.0123
    monkeypatch.setattr(torch.optim, "AdamW", spy)
    spt_cells.finetune_cell(str(tmp_path), c.name, c.args)
    assert seen == [0.0123]


def test_the_default_cost_model_expects_the_epochs_its_recipes_saved_run_took():
    """``initlab reproduce`` prints the SPT stage's duration from the plan's expected epochs: for each kind of cell the
    default runs (SPT per source, label-only and SPT-initialised fine-tuning), their mean lies within 25 % of the
    mean epochs the saved run of the default's recipe took in those cells (the tolerance the printed estimate is held
    to against the measured wall time)."""
    import json
    from pathlib import Path
    from statistics import mean

    from initlab.synthetic.spt.config import condition_spec, reproduce_recipe

    cfg = spt.PRESETS["default"]
    root = Path(__file__).resolve().parents[3] / "docs" / "results" / f"synthetic_spt_{reproduce_recipe()}"
    saved = json.loads((root / "summary.json").read_text(encoding="utf-8"))["summary"]
    spec = condition_spec(cfg)
    took: dict[str, list[float]] = {}
    for r in saved["spt_runs"]:
        took.setdefault(f"spt {r['source']}", []).append(r["stop_epoch"])
    for cond, rows in saved["per_seed"].items():
        if cond in cfg.conditions:
            kind = "label-only" if spec[cond]["spt"] is None else "spt-initialised"
            took.setdefault(f"finetune {kind}", []).extend(x["epochs_run"] for x in rows)
    expect: dict[str, list[float]] = {}
    for c in plan(cfg):
        a = c.args
        if a["kind"] == "spt":
            expect.setdefault(f"spt {a['source']}", []).append(c.units)
        elif a["kind"] == "finetune":
            kind = "label-only" if spec[a["condition"]]["spt"] is None else "spt-initialised"
            expect.setdefault(f"finetune {kind}", []).append(c.units)
    assert set(expect) == {"spt local", "spt nopos", "finetune label-only", "finetune spt-initialised"}
    for kind, units in expect.items():
        assert 0.75 <= mean(units) / mean(took[kind]) <= 1.25, (kind, mean(units), mean(took[kind]))


def test_the_compute_matched_arm_receives_its_budget_s_results_not_files(tmp_path):
    """scratch_matched's budget is its seed's SPT epochs plus its spt fine-tuning's: the executor hands it those two
    cells' results (one seed per cell, or the groups of the batched engine), and a cell called without them says so
    instead of reading the run folder."""
    cfg = derive(TINY, conditions=("scratch", "spt", "scratch_matched"))
    for c in plan(cfg):
        if c.args.get("condition") == "scratch_matched":
            s = c.args["seed"]
            assert dict(c.receives) == {"spt_run": spt_cells.spt_cell_name("local", "full", 1, s),
                                        "spt_finetune": spt_cells.ft_cell_name("spt", s)}
            assert set(dict(c.receives).values()) <= set(c.needs)
        else:
            assert c.receives == ()
    (group,) = [c for c in plan(derive(cfg, engine="batched")) if c.args.get("condition") == "scratch_matched"]
    assert dict(group.receives) == {g: g for g in group.args["matched_from"]} and group.args["matched_from"]
    assert spt_cells.matched_epochs({"stop_epoch": 7}, {"epochs_run": 5}) == 12
    c = next(c for c in plan(cfg) if c.name == "ft_scratch_matched__seed0")
    with pytest.raises(KeyError, match="spt_run"):
        spt_cells.finetune_cell(str(tmp_path), c.name, c.args)


def _saved_spt_runs() -> list[str]:
    """The runs whose results are saved in docs/results (``synthetic_spt_NAME/summary.json``) and that have a run file."""
    from pathlib import Path

    results = Path(__file__).resolve().parents[3] / "docs" / "results"
    return sorted(p.parent.name.removeprefix("synthetic_spt_") for p in results.glob("synthetic_spt_*/summary.json")
                  if p.parent.name.removeprefix("synthetic_spt_") in spt.PRESETS)


@pytest.mark.parametrize("name", _saved_spt_runs())
def test_the_plan_of_a_saved_run_has_the_keys_its_saved_cells_were_computed_under(name):
    """A saved run resumes only if today's plan of its run file keys its cells as they were: every cell's config part
    is the saved config without :data:`NOT_IN_KEY` (a field the config gained since at its default), and the
    fine-tuning cells are the saved ones, each with the condition, seed and learning rate it was trained at (a
    learning-rate selection: each rate of each condition on as many seeds as the saved selection rows; a partial run:
    the saved rows plus the cells it names missing)."""
    import json
    from collections import Counter
    from pathlib import Path

    saved = json.loads((Path(__file__).resolve().parents[3] / "docs" / "results" / f"synthetic_spt_{name}"
                        / "summary.json").read_text(encoding="utf-8"))
    cfg = spt.PRESETS[name]
    defaults = to_dict(spt.SPTConfig())
    training = {k: v for k, v in saved["config"].items() if k not in NOT_IN_KEY}
    cells = plan(cfg)
    for c in cells:
        assert {k: v for k, v in c.key["config"].items() if k in training} == training, c.name
        assert {k: v for k, v in c.key["config"].items() if k not in training} == \
            {k: defaults[k] for k in c.key["config"] if k not in training}, c.name
    missing = set(saved["missing"])
    assert missing <= {c.name for c in cells}
    ft = [c.key["cell"] for c in cells if c.key["cell"]["kind"] == "finetune" and c.name not in missing]
    summary = saved["summary"]
    if cfg.lr_sweep:
        assert Counter((k["condition"], k["lr"]) for k in ft) == {
            (cond, float(lr)): row["n"] for cond, sel in summary["lr_selection"].items() for lr, row in sel["rows"].items()}
    else:
        assert sorted((k["condition"], k["seed"], k["lr"]) for k in ft) == sorted(
            (cond, r["seed"], r["lr"]) for cond, rows in summary["per_seed"].items() for r in rows)
