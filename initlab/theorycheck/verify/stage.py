"""The ``theory`` stage of ``initlab reproduce``: the theorem checks, the T2 and T4 curves and their figures
(:data:`STAGE`); its cells, cost model and summary are in :mod:`.experiment`."""

from __future__ import annotations

from pathlib import Path

from initlab.experiment.stage import Stage, StageClaim, run_unless_finished
from initlab.executor import run_cells
from initlab.paper_figs import theory_figures
from initlab.runs import RunDir, atomic_write_text, torch_threads
from initlab.textio import read_json
from initlab.theory.attention import curves
from initlab.theorycheck.verify import claims as theory_claims
from initlab.theorycheck.verify import experiment as theory_stage
from initlab.theorycheck.verify import runner as verify

__all__ = ["theory", "estimate", "stage_claims", "STAGE"]


def theory(out_dir: Path, preset: str = "default", overwrite: bool = False, *, workers: int | None = None,
           scheduler: str | None = None) -> str:
    """The ``theory`` stage: verify every statement, the T2 and T4 curves, two figures; markdown summary.

    Each statement (its sympy derivation and checks) is a cell of :func:`initlab.executor.run_cells`, so the
    statements run in parallel on ``workers`` processes (or on Dask at ``scheduler``) with one bar over them.
    Writes ``config.json``, ``verify.json``, ``t2_curve.json``, ``t4_curve.json``, ``t6_dropout.json``,
    ``t7_table.json``, ``t2_band_ratio.png``, ``t6_dropout_rate.png``, ``t7_depth.png``,
    ``t4_projection_vs_p.png``, ``summary.md``, then ``DONE``; finished pieces are kept as cells.

    Raises:
        ValueError: unknown ``preset``.
    """
    with torch_threads(1):
        return run_unless_finished(out_dir, preset, overwrite, _theory, workers=workers, scheduler=scheduler)


def _theory(out_dir: Path, preset: str, overwrite: bool, workers: int | None = None, scheduler: str | None = None) -> str:
    cfg = verify.PRESETS[preset]
    run = RunDir(out_dir, overwrite=overwrite, config=cfg)  # a resumed folder of another config is refused
    big = preset == "full"
    Ts = [4, 8, 16, 32, 64, 128, 256] + ([512] if big else [])
    t2_args = {"seed": cfg.seed, "Ts": Ts, "widths": [1, 2, 4], "reps": 8 if big else 3}
    t4_args = {"seed": cfg.seed + 1, "ps": [0.0, 0.2, 0.4, 0.6, 0.8, 0.95], "T": 16, "K": 4, "q": 0.15, "w": 2,
               "n": max(2000, cfg.mc_samples)}
    # every cell records the arguments it was computed with: a resume under others raises ConfigMismatchError
    if run.has_cell("verify", key=cfg):  # a folder of an earlier initlab, verified as one cell
        report = run.load_cell("verify", key=cfg)
    else:
        cells = theory_stage.cells(cfg)
        run_cells(run, cells, workers=workers, scheduler=scheduler, desc="theory (statements)",
                  startup=theory_stage.WORKER_START_SECONDS)
        report = verify.merge_reports(cfg, [run.load_cell(c.name, key=c.key) for c in cells])
    run.write_json("verify.json", report)
    if not run.has_cell("t2_curve", key=t2_args):
        run.save_cell("t2_curve", curves.t2_band_curve(**t2_args), key=t2_args)
    if not run.has_cell("t4_curve", key=t4_args):
        run.save_cell("t4_curve", curves.t4_projection_curve(**t4_args), key=t4_args)
    t2, t4 = run.load_cell("t2_curve", key=t2_args), run.load_cell("t4_curve", key=t4_args)
    measured = {r["statement"]: r.get("measured", {}) for r in report["statements"]}
    if measured.get("T6", {}).get("dropout_mc"):
        run.write_json("t6_dropout.json", measured["T6"]["dropout_mc"]["rows"])
    if measured.get("T7", {}).get("table"):
        run.write_json("t7_table.json", measured["T7"]["table"])
    run.write_json("t2_curve.json", t2)
    run.write_json("t4_curve.json", t4)
    theory_figures.draw_all(out_dir)
    md = theory_stage.summary_markdown(report, preset, t2, t4)
    atomic_write_text(out_dir / "summary.md", md)
    run.mark_done()
    return md


def stage_claims(out_dir: Path) -> list[StageClaim]:
    """The theorem claim from ``verify.json`` (:func:`initlab.theorycheck.verify.claims.theorem`)."""
    v = theory_claims.theorem(read_json(Path(out_dir) / "verify.json"))
    return [StageClaim("the attention-gradient theorems hold on fresh random cases", v, counted="statement")]


def estimate(out_dir: Path, preset: str, workers: int) -> tuple[float, float]:
    """``(expected, at most)`` reference seconds of the stage's remaining work in ``out_dir`` (nothing is created
    or checked)."""
    return theory_stage.expected_seconds(out_dir, verify.PRESETS[preset], workers)


#: the stage's record (:class:`initlab.experiment.stage.Stage`)
STAGE = Stage("theory", theory, estimate, claims=stage_claims)
