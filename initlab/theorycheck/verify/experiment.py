"""The ``theory`` stage's own pieces: one executor cell per statement, its cost model and its markdown summary.

The stage itself (:func:`.stage.theory`) runs these cells, the curves of
:mod:`initlab.theory.attention.curves` and the figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from initlab.config import to_dict
from initlab.executor import Cell, estimate, remaining_cells
from initlab.runs import cell_file
from initlab.theorycheck.verify import runner as verify

__all__ = ["THEORY_SECONDS", "WORKER_START_SECONDS", "cells", "expected_seconds", "summary_markdown"]

#: The theory stage's cost model: CPU seconds of (sympy derivation, checks at 20 cases) per statement on one
#: core of the reference machine (``python benchmarks/bench_cost_model.py --preset default --stages theory``,
#: load 8 on 2 shared cores; docs/cluster.md#cost-model). Checks scale with the number of cases.
THEORY_SECONDS: dict[str, tuple[float, float]] = {
    "T1": (1.9, 0.1), "T1'": (10.7, 0.5), "T2": (0.05, 0.2), "T3": (2.8, 0.2), "T3'": (17.6, 0.25), "T4": (0.6, 1.95),
    "T5": (4.8, 0.3), "T6": (1.2, 0.35), "T7": (2.7, 0.85),
}


#: CPU seconds a worker needs to import the verify runner (torch, sympy): 2.85 s measured at load 8
WORKER_START_SECONDS = 3.0


def cells(cfg: Any) -> list[Cell]:
    """One cell per statement (registry order, the longest first in the schedule's order kept): derivation + checks."""
    conf = to_dict(cfg)
    out = []
    for name in verify.checkers():
        sym, chk = THEORY_SECONDS.get(name, (10.0, 1.0))
        units = 2.0 if cfg.symbolic else 1.0
        work = (sym if cfg.symbolic else 0.0) + chk * cfg.cases / 20
        out.append(Cell(f"verify_{name}", verify.statement_cell, {"config": conf, "statement": name},
                        {"config": conf, "statement": name}, units=units, unit_seconds=work / units))
    return sorted(out, key=lambda c: -c.expected_seconds)  # longest first: the best list schedule


def expected_seconds(out_dir: Path, cfg: Any, workers: int) -> tuple[float, float]:
    """``(expected, at most)`` reference seconds of the statements not yet verified in ``out_dir`` (nothing is
    created or checked; a folder of an earlier initlab, verified as one cell, counts as done)."""
    if cell_file(out_dir, "verify").exists():
        return (0.0, 0.0)
    return estimate(remaining_cells(out_dir, cells(cfg)), workers, startup=WORKER_START_SECONDS)


def summary_markdown(report: dict[str, Any], preset: str, t2: list[dict], t4: list[dict]) -> str:
    lines = [
        "## Theory: attention-gradient theorems T1, T1', T2, T3, T3', T4, T5, T6, T7",
        "",
        f"`initlab theory verify` (preset `{preset}`, {report['config']['cases']} cases per statement, "
        f"seed {report['config']['seed']}, symbolic derivations {'on' if report['config']['symbolic'] else 'off'}): "
        f"**{'all PASS' if report['passed'] else 'FAIL'}** ({report['seconds']:.1f} s of derivations and checks).",
        "",
        "| statement | cases | max abs err | max rel err | verdict |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for r in report["statements"]:
        lines.append(f"| {r['statement']} | {r['cases']} | {r['max_abs_error']:.2e} | {r['max_rel_error']:.2e} | {r['verdict']} |")
    fails = [f"- {r['statement']} failure: {f}" for r in report["statements"] for f in r["failures"][:5]]
    if fails:
        lines += [""] + fails
    lines += ["", "T2 band derivative relative to the gradient norm (mean over random cases; bound ||d||/sqrt(T)):", ""]
    for w in sorted({row["w"] for row in t2}):
        sub = sorted((row for row in t2 if row["w"] == w), key=lambda row: row["T"])
        a, b = sub[0], sub[-1]
        lines.append(f"- w = {a['w']}: T = {a['T']}: {a['mean_ratio']:.3g} (bound {a['bound']:.3g}); T = {b['T']}: {b['mean_ratio']:.3g} (bound {b['bound']:.3g})")
    lines += ["", "T4 expected descent projection on the off-diagonal band, copy path (closed form / MC linearised / MC cross-entropy at beta = 1):", ""]
    for row in t4:
        lines.append(f"- p = {row['p']:.2f}: {row['closed_form']:.4g} / {row['mc_linear']:.4g} ± {row['mc_linear_se']:.1g} / {row['mc_ce']:.4g} ± {row['mc_ce_se']:.1g}")
    lines += ["", "Figures: `t2_band_ratio.png`, `t4_projection_vs_p.png`, `t6_dropout_rate.png`, `t7_depth.png`; "
                  "full report: `verify.json`; statements, derivations and checks: docs/theory.md."]
    return "\n".join(lines) + "\n"
