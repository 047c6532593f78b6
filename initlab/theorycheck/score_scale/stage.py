"""The ``score_scale`` stage of ``initlab reproduce``: the score-scale table, theory against Monte Carlo, and its
figure (:data:`STAGE`); its cells, cost model and summary are in :mod:`.experiment`."""

from __future__ import annotations

from pathlib import Path

from initlab.config import to_dict
from initlab.experiment.stage import Stage, run_unless_finished
from initlab.executor import run_cells
from initlab.paper_figs import score_scale_figures
from initlab.runs import RunDir, atomic_write_text, revive_nonfinite
from initlab.theory.score_scale import closed_form as score_scale
from initlab.theorycheck.score_scale import experiment as score_scale_stage_

__all__ = ["score_scale_stage", "estimate", "STAGE"]


def score_scale_stage(out_dir: Path, preset: str = "default", overwrite: bool = False, *, workers: int | None = None,
                      scheduler: str | None = None) -> str:
    """The ``score_scale`` stage: theory + Monte Carlo table for k in {1, ..., 32} at a few sigma.

    Writes JSON/CSV/config, a figure and ``summary.md``; each (sigma, k) is a cell of
    :func:`initlab.executor.run_cells` (``workers`` processes or Dask at ``scheduler``), saved as it finishes.

    Raises:
        ValueError: unknown ``preset``.
    """
    return run_unless_finished(out_dir, preset, overwrite, _score_scale, workers=workers, scheduler=scheduler)


def _score_scale(out_dir: Path, preset: str, overwrite: bool, workers: int | None = None, scheduler: str | None = None) -> str:
    cfg = score_scale_stage_.PRESETS[preset]
    run = RunDir(out_dir, overwrite=overwrite, config=cfg)  # a resumed folder of another config is refused
    cells = score_scale_stage_.cells(cfg, preset)  # a cell of another config is never reused (its key holds the config)
    run_cells(run, cells, workers=workers, scheduler=scheduler, desc="score scale (sigma, k)",
              startup=score_scale_stage_.WORKER_START_SECONDS)
    rows = [revive_nonfinite(run.load_cell(c.name, key=c.key)) for c in cells]  # saved "inf" strings back to floats
    mech = score_scale.mechanism(cfg)
    run.write_json("score_scale.json", {"config": to_dict(cfg), "rows": rows, "mechanism": mech})
    run.write_csv("score_scale.csv", rows)
    fig = score_scale_figures.plot_theory_vs_mc(rows, out_dir / "score_scale_theory_vs_mc.png").name
    md = score_scale_stage_.summary_markdown(cfg, rows, mech, fig)
    atomic_write_text(out_dir / "summary.md", md)
    run.mark_done()
    return md


def estimate(out_dir: Path, preset: str, workers: int) -> tuple[float, float]:
    """``(expected, at most)`` reference seconds of the stage's remaining work in ``out_dir`` (nothing is created
    or checked)."""
    return score_scale_stage_.expected_seconds(out_dir, score_scale_stage_.PRESETS[preset], preset, workers)


#: the stage's record (:class:`initlab.experiment.stage.Stage`); it decides no claim
STAGE = Stage("score_scale", score_scale_stage, estimate)
