"""The ``score_scale`` stage's own pieces: one executor cell per (sigma, k), its cost model and its markdown summary.

The stage itself (:func:`.stage.score_scale_stage`) runs these cells and draws the figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from initlab.config import to_dict
from initlab.executor import Cell, estimate, remaining_cells
from initlab.runfile import RunFiles
from initlab.theory.score_scale.closed_form import ScoreScaleConfig, describe_mechanism
from initlab.theorycheck.score_scale.table import table_cell

__all__ = ["PRESETS", "CELL_SECONDS", "WORKER_START_SECONDS", "cells", "expected_seconds", "summary_markdown"]

#: the stage's runs of ``initlab reproduce`` (``quick``, ``default``, ``full``), one file each in ``runs/``
#: (:class:`initlab.runfile.RunFiles`; docs/runs.md lists them)
PRESETS: RunFiles[ScoreScaleConfig] = RunFiles(ScoreScaleConfig, Path(__file__).with_name("runs"))
#: CPU seconds per (sigma, k) cell on the reference machine, per preset: quick 0.84 and default 3.55 measured
#: (``python benchmarks/bench_cost_model.py --preset P --stages score_scale``, load 8-10); full scaled from default by
#: its vocabulary (30522 / 2048) and Monte Carlo batches (8 / 4), not measured
CELL_SECONDS = {"quick": 0.84, "default": 3.55, "full": 106.0}
#: CPU seconds a worker needs before its first cell (importing torch): the theory stage's measured start-up
#: (:data:`initlab.theorycheck.verify.experiment.WORKER_START_SECONDS`, 2.85 s at load 8), not measured separately
WORKER_START_SECONDS = 3.0


def cells(cfg: Any, preset: str) -> list[Cell]:
    """One cell per (sigma, k): closed forms and Monte Carlo (:func:`initlab.theorycheck.score_scale.table.table_cell`)."""
    conf = to_dict(cfg)
    return [Cell(f"sigma={sigma:g}_k={k:g}", table_cell,
                 {"config": conf, "sigma": sigma, "k": k}, {"config": conf, "sigma": sigma, "k": k},
                 unit_seconds=CELL_SECONDS[preset]) for sigma in cfg.sigmas for k in cfg.ks]


def expected_seconds(out_dir: Path, cfg: ScoreScaleConfig, preset: str, workers: int) -> tuple[float, float]:
    """``(expected, at most)`` reference seconds of the (sigma, k) cells not yet saved in ``out_dir`` (nothing is
    created or checked)."""
    return estimate(remaining_cells(out_dir, cells(cfg, preset)), workers, startup=WORKER_START_SECONDS)


def summary_markdown(cfg: ScoreScaleConfig, rows: list[dict[str, Any]], mech: dict[str, Any], fig: str | None) -> str:
    lines = [
        "## MLM-head score scale: theory vs Monte Carlo",
        "",
        f"Gaussian logit model z ~ N(mu_b + mu_h/k, (sigma/k)^2), mu_b = {cfg.mu_b:g}, V = {cfg.vocab}, "
        f"L_q = {cfg.L_q}, L_d = {cfg.L_d}, B = {cfg.batch}, lambda_d = {cfg.lambda_d:g}, {cfg.pooling} pooling; "
        f"Monte Carlo: {cfg.mc_batches} batches of B queries and B documents over all V entries per cell. "
        "mu_h is the mean of the head's logit without its bias (the part divided by k). grad FLOPS / grad rank is the "
        "ratio of the FLOPS regulariser's gradient norm to the ranking loss's; it is inf in theory when the ranking "
        "gradient underflows to 0 and nan in the Monte Carlo when no dimension is active (both gradients exactly 0).",
        "",
        "| sigma | k | active dims d (th / MC) | E[a_d] (th / MC) | FLOPS reg d (th / MC) | score spread (th / MC) | "
        "grad FLOPS / grad rank (th / MC) | softmax entropy / ln B (MC) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        ratio_mc = r.get("mc_grad_flops", float("nan")) / r.get("mc_grad_rank", float("nan")) if r.get("mc_grad_rank") else float("nan")
        lines.append(
            f"| {r['sigma']:g} | {r['k']:g} | {r['th_active_dims_d']:.4g} / {r['mc_active_dims_d']:.4g} | "
            f"{r['th_Ea_d']:.4g} / {r['mc_Ea_d']:.4g} | {r['th_flops_reg_d']:.4g} / {r['mc_flops_reg_d']:.4g} | "
            f"{r['th_score_spread']:.4g} / {r['mc_score_spread']:.4g} | {r.get('th_grad_ratio', float('nan')):.3g} / "
            f"{ratio_mc:.3g} | {r['mc_softmax_entropy_ratio']:.3f} |"
        )
    lines += [
        "",
        "Mechanism (theory): " + describe_mechanism(mech),
    ]
    if fig:
        lines += ["", f"![theory vs Monte Carlo]({fig})"]
    return "\n".join(lines) + "\n"
