"""The ``spt`` stage of ``initlab reproduce``: the synthetic SPT experiments of a preset and their figures
(:data:`STAGE`)."""

from __future__ import annotations

from pathlib import Path

from initlab.config import from_dict
from initlab.experiment.stage import Stage, StageClaim, run_unless_finished
from initlab.paper_figs import spt_figures
from initlab.synthetic import spt as synthetic_spt
from initlab.synthetic.spt import claims as spt_claims
from initlab.textio import read_json

__all__ = ["spt", "estimate", "stage_claims", "STAGE"]


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


def stage_claims(out_dir: Path) -> list[StageClaim]:
    """Every SPT claim from ``metrics.json``'s per-seed numbers, Holm-corrected as the stage's report shows them
    (:func:`initlab.synthetic.spt.claims.evaluate_corrected`)."""
    m = read_json(Path(out_dir) / "metrics.json")
    th = from_dict(spt_claims.SPTThresholds, m["config"]["thresholds"])
    vs = spt_claims.evaluate_corrected(spt_claims.as_raw(m["summary"]["per_seed"]), th)
    unit = {"proximity": "mass"}
    return [StageClaim(c.title, vs[c.id], unit.get(c.id, "share" if vs[c.id].rule == "share" else "points"))
            for c in spt_claims.CLAIMS]


def estimate(out_dir: Path, preset: str, workers: int) -> tuple[float, float]:
    """``(expected, at most)`` reference seconds of the stage's remaining work in ``out_dir`` (nothing is created
    or checked)."""
    return synthetic_spt.expected_seconds(synthetic_spt.PRESETS[preset], out_dir, workers)


#: the stage's record (:class:`initlab.experiment.stage.Stage`)
STAGE = Stage("spt", spt, estimate, claims=stage_claims)
