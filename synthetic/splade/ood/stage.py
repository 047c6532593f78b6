"""The ``splade_in_domain`` stage of ``initlab reproduce``: the synthetic SPLADE head-norm effect where the synthetic
shows it, in domain (:data:`STAGE`).

What it runs: the OOD synthetic SPLADE's preregistered confirmation (preset ``confirm-v2k`` of
:mod:`initlab.synthetic.splade.ood.config`: 2048 ids, bert as the normal-norm control and modernbert as the
high-norm family, each with its own MLM recipe, k in {1, 4, 16}, cap 300 with the plateau rule) on fresh seeds of
its own, with the fused SPLADE head (the same vectors to rounding, :mod:`initlab.mlmhead.fused`), through
:func:`initlab.synthetic.splade.ood.runner.run_ood`. What it decides: one claim, the head-norm interaction on the
in-domain dev queries (:func:`initlab.synthetic.splade.claims.interaction` on the in-domain rows: the high-norm
family's nDCG@10 gain from its best k over k = 1, minus the control's), alone in its Holm family
(:data:`FAMILIES`), declared before any of its seeds ran. The confirmation measured it at +0.212 [+0.167, +0.258]
on 3 seeds (docs/results/synthetic_splade_ood_confirm/results.json). The seed count is the power computation's
(:func:`seed_plan`; docs/benchmarks.md) at the per-seed sd of every saved seed of the recipe and the smallest estimate
they measured: the default's first run, sized on the confirmation's sd alone (3 seeds), measured +0.196 [+0.042,
+0.350] on seeds 9301-9303 (inconclusive; its sd 0.062 against the confirmation's 0.018), so it joined the sizing
runs (:data:`SIZING_RUNS`) and the default moved to fresh seeds. The run's other numbers (out of domain, the k rules' regrets) are
in its summary, descriptive: ``initlab synthetic splade-ood --preset confirm-v2k`` is the run that reports them.

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
from initlab.synthetic.splade.ood import claims as ood_claims
from initlab.synthetic.splade.ood import config as ood_config
from initlab.synthetic.splade.ood import runner as ood_runner
from initlab.synthetic.splade.ood.decide import id_rows
from initlab.textio import read_json, read_text

__all__ = ["RUNS", "RECIPE", "SAVED_RUN", "SIZING_RUNS", "CLAIM", "FAMILIES", "stage_config", "in_domain_raw", "pooled",
           "seed_plan",
           "splade_in_domain", "estimate", "stage_claims", "confirmed", "STAGE"]

#: reproduce preset -> the OOD run the stage runs (a run file of :data:`initlab.synthetic.splade.ood.config.PRESETS`):
#: ``quick`` the OOD experiment's smoke test (numbers not meaningful); ``default`` and ``full`` the recipe of the
#: preregistered confirmation on fresh seeds, the fused head (``runs/default.toml``, ``runs/full.toml``: their seeds
#: and count, with the reasons, are in the files)
RUNS: dict[str, str] = {"quick": "tiny", "default": "default", "full": "full"}
#: the preregistered run whose recipe the stage repeats: the base of ``runs/default.toml``
RECIPE: str = ood_config.PRESETS.files()["default"].base
#: that run's saved results (under docs/results): the confirmation whose word the stage repeats
SAVED_RUN = "synthetic_splade_ood_confirm/results.json"
#: every saved run of the recipe (under docs/results) whose per-seed values size the stage (:func:`seed_plan`): the
#: confirmation (seeds 9201-9203) and the default's first run (seeds 9301-9303, 2026-12-06 at 7dfeb52: +0.196
#: [+0.042, +0.350], inconclusive; sized on the confirmation's sd alone, 0.018, against its own 0.062)
SIZING_RUNS = (SAVED_RUN, "synthetic_splade_ood_reproduce_first/results.json")
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


def seed_plan(reps: Sequence[Mapping[str, Any]], power: float = 0.9) -> list[LeafPlan]:
    """The power computation behind the seed count of ``runs/default.toml``: the seeds a fresh run needs for the
    in-domain interaction to reach the confirmation's word with ``power``, in :data:`FAMILIES`, at the per-seed sd of
    every saved seed of the recipe (``reps``: the ``results.json`` of :data:`SIZING_RUNS`, pooled) and at the
    smallest estimate any of them measured (never a hoped-for one): :func:`initlab.evidence.families.seeds_for_words`
    on the pooled verdict with its estimate replaced by that smallest one.

    Raises:
        ValueError: as :func:`pooled`.
    """
    v = _verdicts(pooled(reps))[CLAIM]
    smallest = min(_verdicts(r)[CLAIM].estimate for r in reps)
    return families.seeds_for_words({CLAIM: dataclasses.replace(v, estimate=smallest)}, FAMILIES[0].claims,
                                    power=power)


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
    """The in-domain interaction's word in the saved confirmation (:data:`SAVED_RUN` under ``results``), recomputed
    from its rows and Holm-corrected as its own report does (every in-domain claim in one secondary family,
    :func:`initlab.synthetic.splade.ood.claims.load_confirm`), under :func:`stage_claims`'s title."""
    c = ood_claims.load_confirm({ood_claims.CONFIRM: read_json(Path(results) / SAVED_RUN)})
    return {} if c is None else {_title(): c.v_id[CLAIM]}


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
