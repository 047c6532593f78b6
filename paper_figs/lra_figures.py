"""Figures of the LRA ablation sweeps; reads saved results only (no training).

``python -m initlab.paper_figs.lra_figures RESULTS_DIR`` redraws ``<ablation>.png`` from
``RESULTS_DIR/results.json`` (written by ``initlab lra sweep``), and ``listops_plateau.png`` when the
folder holds the ``summary.json`` of the CPU ListOps plateau experiment
(``python -m initlab.realdata.lra.experiment``); at least one of the two.

Colours follow :func:`initlab.paper_figs.common.condition_color`: grey from scratch, blue SPT, orange SPT of
some parameter groups only (hybrids), green SPT on another task's inputs, black uniform attention.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Sequence

from initlab.paper_figs.common import condition_color, legend_below, pyplot, run_figure_cli, save
from initlab.textio import read_json

__all__ = ["plot_sweep", "plot_listops_plateau", "main"]


def plot_listops_plateau(summary: dict, path: str | Path) -> Path:
    """Two panels from the experiment's ``summary.json``: test accuracy per seed (SPT vs scratch, paired)
    and first-layer proximity mass at fine-tuning start (SPT, scratch; uniform attention as a line)."""
    from matplotlib.lines import Line2D

    rows = summary.get("per_seed", [])
    if not rows:
        raise ValueError("summary: no finished seeds to plot")
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.0, 3.6))
    for r in rows:
        a1.plot([0, 1], [100 * r["scratch_test_acc"], 100 * r["spt_test_acc"]], color="0.6", lw=1, zorder=1)
        a1.scatter([0, 1], [100 * r["scratch_test_acc"], 100 * r["spt_test_acc"]], s=30, zorder=2,
                   color=[condition_color("scratch"), condition_color("spt")])
        a1.annotate(f"seed {r['seed']}", (1, 100 * r["spt_test_acc"]), xytext=(7, -3), textcoords="offset points", fontsize=7)
    for x, key in ((0, "scratch_test_acc"), (1, "spt_test_acc")):  # the mean over seeds as a short bar
        m = 100 * sum(r[key] for r in rows) / len(rows)
        a1.plot([x - 0.12, x + 0.12], [m, m], color="k", lw=2)
    a1.set_xticks([0, 1], ["scratch", "SPT"])
    a1.set_xlim(-0.4, 1.5)
    a1.set_xlabel("initialisation")
    a1.set_ylabel("test accuracy (%) at best val. epoch")
    a1.set_title(f"paired by seed; black bar: mean over seeds\n{summary.get('verdict', '')}", fontsize=9)
    x = range(len(rows))
    w = 0.36
    for k, (key, name) in enumerate([("prox_init_spt", "SPT"), ("prox_init_scratch", "scratch")]):
        a2.bar([i + (k - 0.5) * w for i in x], [r[key] or 0.0 for r in rows], width=w, label=name,
               color=condition_color(name))
    for i, r in enumerate(rows):  # uniform attention: a reference value per seed, not a trained model
        if r.get("uniform_proximity") is not None:
            a2.plot([i - w, i + w], [r["uniform_proximity"]] * 2, color=condition_color("uniform"), ls="--", lw=1.2)
    a2.set_xticks(list(x), [f"seed {r['seed']}" for r in rows])
    a2.set_xlabel("seed")
    a2.set_ylabel("layer-1 proximity mass at\nfine-tuning start (fraction)")
    a2.set_title(summary.get("proximity_verdict", ""), fontsize=9)
    handles = a2.get_legend_handles_labels()[0] + [Line2D([], [], color="k", ls="--", label="uniform attention")]
    legend_below(a2, handles, ncol=3, offset=-0.2)
    fig.tight_layout()
    return save(fig, path)[0]


def _row_color(row: dict) -> str:
    """The condition colour of a sweep row, from its initialisation (not its free-form condition name)."""
    if row.get("init") != "spt":
        return condition_color("scratch")
    if row.get("spt_task") and row.get("task") and row["spt_task"] != row["task"]:
        return condition_color("cross")
    if row.get("init_groups") not in (None, "", "all"):
        return condition_color("hybrid")
    return condition_color("spt")


def plot_sweep(rows: Sequence[dict], path: str | Path, title: str = "") -> Path:
    """Bar chart of test accuracy (bar: mean over seeds, dots: seeds) per condition, in sweep order.

    A condition with failed cells (non-finite training) says how many under its name.

    Raises:
        ValueError: ``rows`` is empty or every cell failed.
    """
    if not rows:
        raise ValueError("rows: no results to plot")
    by, failed, color = defaultdict(list), defaultdict(int), {}
    for r in rows:
        color.setdefault(r["condition"], _row_color(r))
        if r.get("failed"):  # failed cells (non-finite training) have no accuracy
            failed[r["condition"]] += 1
        else:
            by[r["condition"]].append(100 * float(r["test_acc"]))
    if not by:
        raise ValueError("rows: every cell failed; nothing to plot")
    names = list(by)
    means = [sum(v) / len(v) for v in by.values()]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(names)), 3.4))
    ax.bar(range(len(names)), means, color=[color[n] for n in names], alpha=0.85)
    for i, v in enumerate(by.values()):
        ax.scatter([i] * len(v), v, color="black", s=10, zorder=3)
    labels = [n + (f"\n({failed[n]} failed)" if failed[n] else "") for n in names]
    ax.set_xticks(range(len(names)), labels, rotation=30, ha="right")
    ax.set_xlabel("condition")
    ax.set_ylabel("test accuracy (%) at best val. epoch")
    ax.set_title((title + "\n" if title else "") + "bar: mean over seeds; dots: seeds", fontsize=9)
    fig.tight_layout()
    return save(fig, path)[0]


def _draw(args) -> list[Path]:
    """The sweep figure when the folder holds ``results.json``, the plateau figure when it holds ``summary.json``."""
    p, summary = args.results_dir / "results.json", args.results_dir / "summary.json"
    if not p.is_file() and not summary.is_file():
        raise FileNotFoundError(f"{p}: not found (expected the results of initlab lra sweep, or the summary.json "
                                "of the CPU ListOps plateau experiment)")
    out = []
    if p.is_file():
        data = read_json(p)
        if not isinstance(data, dict) or "rows" not in data or "ablation" not in data:
            raise ValueError(f"{p}: not the results of `initlab lra sweep` (expected keys 'rows' and 'ablation'; "
                             "a single pretrain/finetune run has no sweep figure)")
        out.append(plot_sweep(data["rows"], args.results_dir / f"{data['ablation']}.png", title=data["ablation"]))
    if summary.is_file():
        out.append(plot_listops_plateau(read_json(summary), args.results_dir / "listops_plateau.png"))
    return out


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    return run_figure_cli("initlab.paper_figs.lra_figures", __doc__, _draw, argv, prog,
                          results_help="a folder written by initlab lra sweep")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
