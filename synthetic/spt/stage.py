"""The ``spt`` stage of ``initlab reproduce``: the synthetic SPT experiments of a preset and their figures
(:data:`STAGE`)."""

from __future__ import annotations

from pathlib import Path

from initlab.config import from_dict
from initlab.evidence.rules import NOT_RUN, Verdict
from initlab.experiment.stage import Stage, StageClaim, run_unless_finished
from initlab.paper_figs import spt_figures
from initlab.synthetic import spt as synthetic_spt
from initlab.synthetic.spt import claims as spt_claims
from initlab.synthetic.spt import config as spt_config
from initlab.textio import read_json

__all__ = ["spt", "estimate", "stage_claims", "confirmed", "PROXIMITY_PARTS", "STAGE"]


def spt(out_dir: Path, preset: str = "default", overwrite: bool = False, *, workers: int | None = None,
        scheduler: str | None = None) -> str:
    """The ``spt`` stage: the synthetic self-pretraining experiments of ``preset``, figures, summary.

    ``workers``: processes running its cells (default: one per core), one torch thread each.

    Raises:
        ValueError: unknown ``preset``.
    """
    return run_unless_finished(out_dir, preset, overwrite, _spt, workers=workers, scheduler=scheduler)


def _spt(out_dir: Path, preset: str, overwrite: bool, workers: int | None = None, scheduler: str | None = None) -> str:
    return synthetic_spt.run(synthetic_spt.PRESETS[preset], out_dir, overwrite=overwrite, workers=workers,
                             scheduler=scheduler, draw=spt_figures.make_figures)


#: the console titles of the proximity claim's two parts, each decided on its own line
PROXIMITY_PARTS = ("SPT's proximity pattern (SPT − scratch proximity mass at the start of fine-tuning)",
                   "label training leaves proximity unchanged (scratch, end − start of fine-tuning)")


def stage_claims(out_dir: Path) -> list[StageClaim]:
    """Every SPT claim from ``metrics.json``'s per-seed numbers, Holm-corrected as the stage's report shows them
    (:func:`initlab.synthetic.spt.claims.evaluate_corrected`); the proximity claim, where run, as its two parts
    (:data:`PROXIMITY_PARTS`: SPT's pattern, and label training's unchanged one, an equivalence that few seeds
    rarely decide)."""
    m = read_json(Path(out_dir) / "metrics.json")
    return _claims_of(m["summary"]["per_seed"], m["config"]["thresholds"])


def _claims_of(per_seed: dict, thresholds: dict) -> list[StageClaim]:
    th = from_dict(spt_claims.SPTThresholds, thresholds)
    vs = spt_claims.evaluate_corrected(spt_claims.as_raw(per_seed), th)
    out = []
    for c in spt_claims.CLAIMS:
        v = vs[c.id]
        if c.id == "proximity" and len(v.parts) == len(PROXIMITY_PARTS) and v.word != NOT_RUN:
            out += [StageClaim(t, p, "mass") for t, p in zip(PROXIMITY_PARTS, v.parts)]
        else:
            out.append(StageClaim(c.title, v, "mass" if c.id == "proximity" else "share" if v.rule == "share" else "points"))
    return out


def confirmed(results: Path) -> dict[str, Verdict]:
    """The words of the preregistered run the ``default`` preset repeats (its recipe, the base of its run file:
    :func:`initlab.synthetic.spt.config.reproduce_recipe`), recomputed from ``results``'s saved per-seed numbers and
    Holm-corrected as the README shows them, by :func:`stage_claims`'s titles (claims that run did not run left out)."""
    s = read_json(Path(results) / f"synthetic_spt_{spt_config.reproduce_recipe()}" / "summary.json")
    return {c.title: c.verdict for c in _claims_of(s["summary"]["per_seed"], s["config"]["thresholds"])
            if c.verdict.word != NOT_RUN}


def estimate(out_dir: Path, preset: str, workers: int) -> tuple[float, float]:
    """``(expected, at most)`` reference seconds of the stage's remaining work in ``out_dir`` (nothing is created
    or checked)."""
    return synthetic_spt.expected_seconds(synthetic_spt.PRESETS[preset], out_dir, workers)


#: the stage's record (:class:`initlab.experiment.stage.Stage`)
STAGE = Stage("spt", spt, estimate, claims=stage_claims,
              decides="`initlab synthetic spt --preset full` and `--preset causal`", confirmed=confirmed)
