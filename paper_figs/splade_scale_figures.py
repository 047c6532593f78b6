"""Figures of the full-scale SPLADE reproduction (read saved results, draw; no training here).

* :func:`plot_loss_curve` -- training loss (and its base/regulariser parts) against step, from a cell's
  ``loss_curve.csv``;
* :func:`plot_nanobeir_vs_flops` -- NanoBEIR mean nDCG@10 against FLOPS, one line per backbone over k,
  from a sweep's ``summary.json``.

Usage: ``python -m initlab.paper_figs.splade_scale_figures RESULTS_DIR`` (a sweep folder or one cell).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path
from typing import Sequence

__all__ = ["plot_loss_curve", "plot_nanobeir_vs_flops", "main"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def plot_loss_curve(csv_path: str | Path, out_png: str | Path, title: str = "") -> Path:
    """Draw ``loss``, ``base_loss`` and the two regulariser terms against ``step``. Raises FileNotFoundError."""
    csv_path = Path(csv_path)
    if not csv_path.is_file():
        raise FileNotFoundError(f"{csv_path}: loss curve not found (expected loss_curve.csv written by training)")
    with open(csv_path) as fh:
        rows = list(csv.DictReader(fh))
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.2))
    steps = [_num(r["step"]) for r in rows]
    for key in ("loss", "base_loss", "query_regularizer_loss", "document_regularizer_loss"):
        ys = [_num(r.get(key)) for r in rows]
        if any(math.isfinite(y) for y in ys):
            ax.plot(steps, ys, label=key)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    out_png = Path(out_png)
    fig.savefig(out_png, dpi=120)
    plt.close(fig)
    return out_png


def plot_nanobeir_vs_flops(summary_json: str | Path, out_png: str | Path) -> Path:
    """NanoBEIR mean nDCG@10 (y) against mean FLOPS (x, log scale), one line per backbone, points labelled by k."""
    rows = json.loads(Path(summary_json).read_text())
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for bb in sorted({r["backbone"] for r in rows}):
        pts = sorted((_num(r.get("nanobeir_flops")), _num(r.get("nanobeir_nDCG@10")), r["k"]) for r in rows if r["backbone"] == bb)
        pts = [p for p in pts if math.isfinite(p[0]) and math.isfinite(p[1])]
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=bb.split("/")[-1])
        for x, y, k in pts:
            ax.annotate(f"k={k:g}", (x, y), fontsize=6)
    ax.set_xscale("log")
    ax.set_xlabel("FLOPS (expected multiplications per query-document pair)")
    ax.set_ylabel("NanoBEIR mean nDCG@10")
    ax.legend(fontsize=7)
    fig.tight_layout()
    out_png = Path(out_png)
    fig.savefig(out_png, dpi=120)
    plt.close(fig)
    return out_png


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    p = argparse.ArgumentParser(prog=prog or "python -m initlab.paper_figs.splade_scale_figures",
                                description="Redraw the SPLADE-at-scale figures from a sweep folder or one cell folder.")
    p.add_argument("results_dir", type=Path, metavar="RESULTS_DIR",
                   help="folder written by initlab splade sweep (summary.json) or initlab splade train (loss_curve.csv)")
    args = p.parse_args(argv)
    d = args.results_dir
    drawn = []
    if (d / "summary.json").exists():
        drawn.append(plot_nanobeir_vs_flops(d / "summary.json", d / "nanobeir_vs_flops.png"))
    for curve in sorted(d.glob("**/loss_curve.csv")):
        drawn.append(plot_loss_curve(curve, curve.with_suffix(".png"), title=curve.parent.name))
    if not drawn:
        p.error(f"{d}: no summary.json or loss_curve.csv found")
    for x in drawn:
        print(x)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
