"""The ``splade_in_domain`` stage of ``initlab reproduce``: the synthetic SPLADE head-norm effect where the synthetic
shows it, in domain (:data:`STAGE`).

What it runs: the OOD synthetic SPLADE's preregistered confirmation of the 100-step cap (preset
``confirm-v2k-cap100`` of :mod:`initlab.synthetic.splade.ood.config`: 2048 ids, bert as the normal-norm control and
modernbert as the high-norm family, each with its own MLM recipe, k in {1, 4, 16}, cap 100 with the plateau rule, the
fused SPLADE head) on fresh seeds of its own, through :func:`initlab.synthetic.splade.ood.runner.run_ood`. What it
decides: one claim, the head-norm interaction on the in-domain dev queries
(:func:`initlab.synthetic.splade.claims.interaction` on the in-domain rows: the high-norm family's nDCG@10 gain from
its best k over k = 1, minus the control's), alone in its Holm family (:data:`FAMILIES`), declared before any of its
seeds ran; the confirmation decided it with the same function (:func:`confirmed`). The seed count is the power
computation's (:func:`seed_plan`; docs/benchmarks.md) at the per-seed sd of the confirmation (:data:`SIZING_RUNS`)
and the smallest estimate measured for the recipe: the confirmation's, or the interaction read at step 100 of the
two saved 300-step runs of ``confirm-v2k``'s recipe (:data:`READINGS`, descriptive: another schedule), whichever is
smaller. The 300-step recipe took 20-24 minutes of ``initlab reproduce``'s time on 2 idle cores; the 100-step one
needs a third of its training steps (docs/synthetic_splade_ood.md#confirmation-of-the-100-step-cap-preregistered).
The run's other numbers (out of domain, the k rules' regrets) are in its summary, descriptive:
``initlab synthetic splade-ood --preset confirm-v2k`` is the run that reports them.

The OOD experiment's record (:data:`initlab.synthetic.splade.ood.EXPERIMENT`) names :data:`STAGE`; the roof's stage
registry (:data:`initlab.app.stages.REGISTRY`) is built from the records.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping, Sequence

from initlab.config import from_dict
from initlab.evidence import families
from initlab.evidence.families import Family, LeafPlan
from initlab.evidence.rules import Verdict
from initlab.executor import estimate as executor_estimate
from initlab.executor import remaining_cells
from initlab.experiment import text
from initlab.experiment.stage import Stage, StageClaim, check_preset, finished_summary
from initlab.synthetic.splade import claims as splade_claims
from initlab.synthetic.splade.ood import config as ood_config
from initlab.synthetic.splade.ood import runner as ood_runner
from initlab.synthetic.splade.ood.decide import id_rows
from initlab.textio import read_json, read_text

__all__ = ["RUNS", "RECIPE", "SAVED_RUN", "SIZING_RUNS", "READINGS", "CLAIM", "FAMILIES", "stage_config", "in_domain_raw", "pooled",
           "at_step", "seed_plan", "sizing",
           "splade_in_domain", "estimate", "stage_claims", "confirmed", "STAGE"]

#: reproduce preset -> the OOD run the stage runs (a run file of :data:`initlab.synthetic.splade.ood.config.PRESETS`):
#: ``quick`` the OOD experiment's smoke test (numbers not meaningful); ``default`` and ``full`` the recipe of the
#: preregistered 100-step-cap confirmation on fresh seeds (``runs/default.toml``, ``runs/full.toml``: their seeds
#: and count, with the reasons, are in the files)
RUNS: dict[str, str] = {"quick": "tiny", "default": "default", "full": "full"}
#: the preregistered run whose recipe the stage repeats: the base of ``runs/default.toml``
RECIPE: str = ood_config.PRESETS.files()["default"].base
#: that run's saved results (under docs/results): the confirmation whose word the stage repeats
SAVED_RUN = "synthetic_splade_ood_confirm_cap100/results.json"
#: every saved run of the recipe (under docs/results) whose per-seed values size the stage (:func:`seed_plan`)
SIZING_RUNS = (SAVED_RUN,)
#: the saved 300-step runs of ``confirm-v2k``'s recipe (under docs/results) and the step at which each evaluated the
#: in-domain interaction as well: the exploratory basis of the 100-step cap (descriptive: their warm-ups and decay
#: stretch over 300 steps); their estimates bound the estimate :func:`seed_plan` counts seeds at, never their sd
READINGS: tuple[tuple[str, int], ...] = (("synthetic_splade_ood_confirm/results.json", 100),
                                         ("synthetic_splade_ood_reproduce_first/results.json", 100))
#: the claim the stage decides (an id of :data:`initlab.synthetic.splade.claims.CLAIMS`), on the in-domain rows
CLAIM = "interaction"
#: the stage's Holm family: the one claim it decides
FAMILIES: tuple[Family, ...] = (
    Family("primary", (CLAIM,), "the head-norm effect in domain, the one claim initlab reproduce decides on the synthetic "
           "SPLADE"),
)
#: reference seconds a worker process needs to start and import transformers (``run_ood``'s own start-up figure)
WORKER_START_SECONDS = 10.0
def stage_config(preset: str) -> ood_config.OODConfig:
    """The config the stage runs under the reproduce ``preset``: the OOD run :data:`RUNS` names.

    Raises:
        ValueError: unknown ``preset``.
    """
    check_preset(preset)
    return ood_config.PRESETS[RUNS[preset]]


def in_domain_raw(rep: Mapping[str, Any]) -> dict[str, Any]:
    """The claim functions' ``raw`` of an OOD ``results.json`` with the in-domain dev nDCG@10 as the metric, on its
    complete seeds (:func:`initlab.synthetic.splade.claims.on_seeds`)."""
    return splade_claims.on_seeds(splade_claims.as_raw({**rep, "rows": id_rows(rep["rows"])}), [int(s) for s in rep["complete_seeds"]])


def _verdicts(rep: Mapping[str, Any]) -> dict[str, Verdict]:
    th = from_dict(splade_claims.SPLADEThresholds, rep["config"]["claims"])
    return {CLAIM: splade_claims.evaluate_all(in_domain_raw(rep), th)[CLAIM]}


def pooled(reps: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The saved runs ``reps`` (``results.json`` records of the recipe, disjoint seeds) as one: their rows, BM25
    cells and complete seeds together, the first run's config (the recipe).

    Raises:
        ValueError: two runs share a seed, or their configs differ in a field both record, other than the seeds and
            the head's engine.
    """
    first = reps[0]["config"]
    seen: set[int] = set()
    for r in reps:
        s = {int(x) for x in r["complete_seeds"]}
        if s & seen:
            raise ValueError(f"reps: seeds {sorted(s & seen)} appear in two runs; expected disjoint seeds")
        # fields both configs record (a field added later is absent from older records, at its default)
        if any(r["config"][k] != first[k] for k in set(first) & set(r["config"]) - {"seeds", "engine"}):
            raise ValueError("reps: the runs differ in more than their seeds and engine; expected one recipe")
        seen |= s
    return {**reps[0], "rows": [x for r in reps for x in r["rows"]],
            "bm25": {k: v for r in reps for k, v in r.get("bm25", {}).items()},
            "complete_seeds": [s for r in reps for s in r["complete_seeds"]]}


def at_step(rep: Mapping[str, Any], step: int) -> dict[str, Any]:
    """The saved run ``rep`` (a ``results.json`` record) with its in-domain metrics read at retrieval checkpoint
    ``step`` (each row's ``id_select_at`` / ``id_at``) instead of at the stop.

    Raises:
        ValueError: a row without an evaluation at ``step``.
    """
    key = str(int(step))
    if any(key not in r.get("id_at", {}) or key not in r.get("id_select_at", {}) for r in rep["rows"]):
        raise ValueError(f"step: expected a retrieval checkpoint of every row, got {step!r}")
    return {**rep, "rows": [dict(r, id_select=r["id_select_at"][key], id_test=r["id_at"][key]) for r in rep["rows"]]}


def seed_plan(reps: Sequence[Mapping[str, Any]], power: float = 0.9,
              readings: Sequence[Mapping[str, Any]] = ()) -> list[LeafPlan]:
    """The power computation behind the seed count of ``runs/default.toml``: the seeds a fresh run needs for the
    in-domain interaction to reach the confirmation's word with ``power``, in :data:`FAMILIES`, at the per-seed sd of
    every saved seed of the recipe (``reps``: the ``results.json`` of :data:`SIZING_RUNS`, pooled) and at the
    smallest estimate measured (never a hoped-for one): any of ``reps``' or of ``readings`` (saved runs already read
    at a checkpoint, :func:`at_step` on :data:`READINGS`; their sd is not used).
    :func:`initlab.evidence.families.seeds_for_words` on the pooled verdict with its estimate replaced by that
    smallest one.

    Raises:
        ValueError: as :func:`pooled`.
    """
    v = _verdicts(pooled(reps))[CLAIM]
    smallest = min(_verdicts(r)[CLAIM].estimate for r in [*reps, *readings])
    return families.seeds_for_words({CLAIM: dataclasses.replace(v, estimate=smallest)}, FAMILIES[0].claims,
                                    power=power)


def sizing(results: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(reps, readings)`` for :func:`seed_plan` from the saved runs under ``results`` (docs/results):
    :data:`SIZING_RUNS` and :data:`READINGS` read at their steps."""
    return ([read_json(Path(results) / f) for f in SIZING_RUNS],
            [at_step(read_json(Path(results) / f), step) for f, step in READINGS])


def splade_in_domain(out_dir: Path, preset: str = "default", overwrite: bool = False, *, workers: int | None = None,
                     scheduler: str | None = None) -> str:
    """The ``splade_in_domain`` stage (module docstring): run :func:`stage_config` ``(preset)`` into ``out_dir`` and
    return its summary, led by the one claim it decides.

    Raises:
        ValueError: unknown ``preset``.
    """
    out_dir = Path(out_dir)
    cfg = stage_config(preset)
    if finished_summary(out_dir, preset, overwrite) is None:
        ood_runner.run_ood(out_dir, cfg, workers=workers, progress=True, overwrite=overwrite, scheduler=scheduler)
    (claim,) = stage_claims(out_dir)
    lead = ("## Synthetic SPLADE, in domain\n\n"
            f"`initlab synthetic splade-ood --preset {RECIPE}`'s recipe on seeds {', '.join(map(str, cfg.seeds))}, "
            f"the fused head. Decided here (one claim, its own Holm family): **{claim.title}**: "
            f"{text.describe(claim.verdict, claim.unit)}.\n\n"
            "Everything below is the OOD run's own summary, descriptive here (its words are uncorrected); "
            f"`initlab synthetic splade-ood --preset {RECIPE}` is the run that reports them.\n\n")
    return lead + read_text(out_dir / "summary.md")


def stage_claims(out_dir: Path) -> list[StageClaim]:
    """The in-domain interaction from ``results.json``'s raw rows, Holm-corrected in :data:`FAMILIES`."""
    rep = read_json(Path(out_dir) / "results.json")
    v = families.corrected(_verdicts(rep), FAMILIES)[CLAIM]
    return [StageClaim(_title(), v, splade_claims.by_id(CLAIM).unit)]


def confirmed(results: Path) -> dict[str, Verdict]:
    """The in-domain interaction's word in the saved confirmation (:data:`SAVED_RUN` under ``results``), decided as
    its preregistration says: :func:`stage_claims` on it (the same claim, alone in its family), under its title."""
    path = Path(results) / SAVED_RUN
    if not path.exists():
        return {}
    (claim,) = stage_claims(path.parent)
    return {claim.title: claim.verdict}


def _title() -> str:
    return f"{splade_claims.by_id(CLAIM).title} (in domain)"


def estimate(out_dir: Path, preset: str, workers: int) -> tuple[float, float]:
    """``(expected, at most)`` reference seconds of the stage's remaining cells in ``out_dir`` from the OOD cost
    model (nothing is created or checked)."""
    cells = ood_runner.plan(stage_config(preset))
    return executor_estimate(remaining_cells(out_dir, cells), workers, startup=WORKER_START_SECONDS)


#: the stage's record (:class:`initlab.experiment.stage.Stage`); ``initlab reproduce``'s ``quick`` run skips it
STAGE = Stage("splade_in_domain", splade_in_domain, estimate, claims=stage_claims,
              decides=f"`initlab synthetic splade-ood --preset {RECIPE}`", confirmed=confirmed)
