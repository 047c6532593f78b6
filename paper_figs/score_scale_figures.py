"""Figures of the SPLADE score-scale analysis: theory vs Monte Carlo against the rescaling factor k.

Reads the ``score_scale.json`` written by :func:`initlab.theorycheck.score_scale.stage.score_scale_stage` and draws;
no computation beyond plotting. Usage::

    python -m initlab.paper_figs.score_scale_figures RESULTS_DIR [--out FILE]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

from initlab.paper_figs.common import pyplot, run_figure_cli, save
from initlab.textio import read_json

__all__ = ["PANELS", "plot_theory_vs_mc", "main"]

#: (row key without th_/mc_ prefix, panel title, y-axis label with unit)
PANELS: tuple[tuple[str, str, str], ...] = (
    ("active_dims_d", "active dimensions per document", "terms with a > 0 (count)"),
    ("Ea_d", "mean document term weight", "E[a_d] (dimensionless)"),
    ("flops_reg_d", "FLOPS regulariser", "R_d (dimensionless)"),
    ("score_spread", "positive-minus-negative score spread", "sd(s+ - s-) (score units)"),
    ("grad_rank", "ranking gradient (linearised)", "||grad_z L_rank|| per logit"),
    ("grad_flops", "FLOPS gradient", "||grad_z lambda_d R_d|| per logit"),
)


def plot_theory_vs_mc(rows: Sequence[dict[str, Any]], out: str | Path) -> Path:
    """Six panels (quantity vs k, log-log): theory lines per sigma, Monte Carlo points with 2-se bars.

    One legend below the panels (never over the data); k ticks are the grid values themselves.

    Args:
        rows: the ``rows`` of ``score_scale.json`` (keys ``sigma``, ``k``, ``th_*``, ``mc_*``).
        out: PNG path (written atomically via a temporary file, at :data:`initlab.paper_figs.common.DPI` dots per inch).
    Returns:
        the written path.
    Raises:
        ValueError: ``rows`` is empty or lacks the theory/Monte Carlo columns.
    """
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, NullLocator

    if not rows or "th_Ea_d" not in rows[0] or "mc_Ea_d" not in rows[0]:
        raise ValueError("rows: expected score-scale rows with th_* and mc_* columns (score_scale.json)")
    sigmas = sorted({r["sigma"] for r in rows})
    ks = sorted({r["k"] for r in rows})
    plt = pyplot()
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.8))
    colors = plt.cm.viridis([0.8 * i / max(1, len(sigmas) - 1) for i in range(len(sigmas))])
    for ax, (key, title, ylabel) in zip(axes.flat, PANELS):
        if f"th_{key}" not in rows[0]:
            ax.set_visible(False)
            continue
        for c, sigma in zip(colors, sigmas):
            sub = sorted((r for r in rows if r["sigma"] == sigma), key=lambda r: r["k"])
            kk = [r["k"] for r in sub]
            ax.plot(kk, [r[f"th_{key}"] for r in sub], "-", color=c, lw=1.6)
            mc = [r.get(f"mc_{key}", float("nan")) for r in sub]
            se = [2 * r.get(f"mc_{key}_se", 0.0) for r in sub]
            ax.errorbar(kk, mc, yerr=se, fmt="o", ms=5, color=c, mfc="none", mew=1.3)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(FixedLocator(ks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([f"{k:g}" for k in ks])
        top = max((r[f"th_{key}"] for r in rows if r[f"th_{key}"] == r[f"th_{key}"]), default=1.0)
        if top > 0:  # show six decades below the largest value; vanishing values fall off the bottom
            ax.set_ylim(bottom=top * 1e-6, top=top * 3)
        ax.set_xlabel("rescaling factor k (W_head / k)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    handles = [Line2D([], [], color=c, lw=2, label=f"sigma = {s:g}") for c, s in zip(colors, sigmas)]
    handles += [Line2D([], [], color="0.3", lw=1.6, label="theory (Gaussian logits)"),
                Line2D([], [], color="0.3", marker="o", mfc="none", ls="none", label="Monte Carlo, ± 2 s.e.")]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False, fontsize=9)
    fig.suptitle("SPLADE score scale at initialisation against the rescaling factor k: theory vs Monte Carlo")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return save(fig, out)[0]


def _draw(args) -> list[Path]:
    src = args.results_dir / "score_scale.json"
    if not src.is_file():
        raise FileNotFoundError(f"{src}: no such file (run `initlab reproduce --only score_scale` first)")
    rows = read_json(src)["rows"]
    return [plot_theory_vs_mc(rows, args.out or args.results_dir / "score_scale_theory_vs_mc.png")]


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Returns 0, or 2 (after a message on stderr) when RESULTS_DIR holds no score_scale.json."""
    return run_figure_cli(
        "initlab.paper_figs.score_scale_figures", "Draw theory vs Monte Carlo from RESULTS_DIR/score_scale.json.",
        _draw, argv, prog, metavar="RESULTS_DIR", results_help="folder holding score_scale.json", raise_on_error=False,
        options=lambda p: p.add_argument("--out", type=Path, default=None,
                                         help="PNG path (default RESULTS_DIR/score_scale_theory_vs_mc.png)"))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
