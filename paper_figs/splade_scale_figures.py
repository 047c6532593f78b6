"""Figures of the full-scale SPLADE reproduction (read saved results, draw; no training here).

* :func:`plot_loss_curve` -- training loss (and its base/regulariser parts) against step, from a cell's
  ``loss_curve.csv``;
* :func:`plot_nanobeir_vs_flops` -- NanoBEIR mean nDCG@10 against FLOPS, one line per backbone over k,
  from a sweep's ``summary.json``.

Usage: ``python -m initlab.paper_figs.splade_scale_figures RESULTS_DIR`` (a sweep folder or one cell).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Sequence

from initlab.paper_figs.common import DPI, family_color, label_points, legend_below, pyplot, run_figure_cli, save
from initlab.textio import open_text, read_json

__all__ = ["DPI", "LOSS_TERMS", "plot_loss_curve", "plot_nanobeir_vs_flops", "main"]


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


#: loss_curve.csv column -> legend label
LOSS_TERMS = {
    "loss": "total loss",
    "base_loss": "ranking loss (InfoNCE)",
    "query_regularizer_loss": "lambda_q x FLOPS regulariser (queries)",
    "document_regularizer_loss": "lambda_d x FLOPS regulariser (documents)",
}


def plot_loss_curve(csv_path: str | Path, out_png: str | Path, title: str = "") -> Path:
    """Draw the total loss, its ranking part and the two weighted regulariser terms against the step.

    The legend sits below the axes, never over the curves; written at :data:`DPI` dots per inch.

    Raises:
        FileNotFoundError: ``csv_path`` does not exist (it is written by ``initlab splade train``).
    """
    csv_path = Path(csv_path)
    if not csv_path.is_file():
        raise FileNotFoundError(f"{csv_path}: loss curve not found (expected loss_curve.csv written by training)")
    with open_text(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.2))
    steps = [_num(r["step"]) for r in rows]
    for key, label in LOSS_TERMS.items():
        ys = [_num(r.get(key)) for r in rows]
        if any(math.isfinite(y) for y in ys):
            ax.plot(steps, ys, label=label, lw=1.4)
    ax.set_xlabel("training step")
    ax.set_ylabel("loss per batch (nats; regularisers weighted)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    legend_below(ax, ncol=2, offset=-0.18)
    return save(fig, out_png)[0]


def plot_nanobeir_vs_flops(summary_json: str | Path, out_png: str | Path) -> Path:
    """NanoBEIR mean nDCG@10 (y) against mean FLOPS (x, log scale), one line per backbone over k.

    Each point is labelled with its k, placed so that labels overlap neither markers nor each other; the
    legend is outside the axes on the right. Without a finite point (no NanoBEIR evaluation) the axes say so and
    draw no legend. Written at :data:`DPI` dots per inch.
    """
    rows = read_json(Path(summary_json))
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    markers = "osD^vP*X"
    lines = []
    for i, bb in enumerate(sorted({r["backbone"] for r in rows})):
        pts = sorted((_num(r.get("nanobeir_flops")), _num(r.get("nanobeir_nDCG@10")), r["k"]) for r in rows if r["backbone"] == bb)
        pts = [p for p in pts if math.isfinite(p[0]) and math.isfinite(p[1])]
        if not pts:
            continue
        line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=markers[i % len(markers)], label=bb.split("/")[-1],
                        color=family_color(bb, default=f"C{4 + i}"))
        lines.append((line, pts))
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.margins(x=0.08, y=0.1)
    fig.canvas.draw()  # final limits before the k labels are placed
    every = [(x, y) for _, pts in lines for x, y, _ in pts]
    for line, pts in lines:  # labels beside the markers, never on a marker or another label
        label_points(ax, [(x, y) for x, y, _ in pts], [f"k={k:g}" for _, _, k in pts], avoid=every,
                     color=line.get_color())
    ax.set_xlabel("FLOPS (expected multiplications per query-document pair, log scale)")
    ax.set_ylabel("NanoBEIR mean nDCG@10")
    ax.grid(True, which="major", alpha=0.3)
    if lines:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, title="backbone",
                  title_fontsize=8)
    else:  # e.g. a sweep whose preset evaluates no NanoBEIR set: say so instead of an empty legend
        ax.text(0.5, 0.5, "no cell has finite NanoBEIR nDCG@10 and FLOPS\n(was NanoBEIR evaluated?)",
                transform=ax.transAxes, ha="center", va="center", fontsize=9, color="0.3")
    return save(fig, out_png)[0]


def _draw(args) -> list[Path]:
    d = args.results_dir
    drawn = []
    if (d / "summary.json").exists():
        drawn.append(plot_nanobeir_vs_flops(d / "summary.json", d / "nanobeir_vs_flops.png"))
    for curve in sorted(d.glob("**/loss_curve.csv")):
        drawn.append(plot_loss_curve(curve, curve.with_suffix(".png"), title=curve.parent.name))
    if not drawn:
        raise FileNotFoundError(f"{d}: no summary.json or loss_curve.csv found")
    return drawn


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    return run_figure_cli(
        "initlab.paper_figs.splade_scale_figures",
        "Redraw the SPLADE-at-scale figures from a sweep folder or one cell folder.", _draw, argv, prog,
        metavar="RESULTS_DIR",
        results_help="folder written by initlab splade sweep (summary.json) or initlab splade train (loss_curve.csv)")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
