"""Figures of the LRA ablation sweeps; reads saved results only (no training).

``python -m initlab.paper_figs.lra_figures RESULTS_DIR`` redraws ``<ablation>.png`` from
``RESULTS_DIR/results.json`` (written by ``initlab lra sweep``), and ``listops_plateau.png`` when the
folder also holds the ``summary.json`` of the CPU ListOps plateau experiment
(``python -m initlab.realdata.lra.experiment``).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Sequence

__all__ = ["plot_sweep", "plot_listops_plateau", "main"]


def _save(fig, path: str | Path) -> Path:
    import io

    import matplotlib.pyplot as plt

    from initlab.runs import atomic_write_bytes

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())


def plot_listops_plateau(summary: dict, path: str | Path) -> Path:
    """Two panels from the experiment's ``summary.json``: test accuracy per seed (SPT vs scratch, paired)
    and first-layer proximity mass at fine-tuning start (SPT, scratch, uniform attention)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary.get("per_seed", [])
    if not rows:
        raise ValueError("summary: no finished seeds to plot")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(8.0, 3.2))
    for r in rows:
        a1.plot([0, 1], [r["scratch_test_acc"], r["spt_test_acc"]], marker="o", color="#4C72B0")
        a1.annotate(str(r["seed"]), (1.03, r["spt_test_acc"]), fontsize=7)
    a1.set_xticks([0, 1], ["scratch", "SPT"])
    a1.set_xlim(-0.3, 1.3)
    a1.set_ylabel("test accuracy (best val epoch)")
    a1.set_title(f"paired by seed: {summary.get('verdict', '')}", fontsize=9)
    x = range(len(rows))
    w = 0.27
    for k, (key, name) in enumerate([("prox_init_spt", "SPT"), ("prox_init_scratch", "scratch"), ("uniform_proximity", "uniform")]):
        a2.bar([i + (k - 1) * w for i in x], [r[key] or 0.0 for r in rows], width=w, label=name)
    a2.set_xticks(list(x), [f"seed {r['seed']}" for r in rows])
    a2.set_ylabel("proximity mass at FT start (layer 1)")
    a2.set_title(summary.get("proximity_verdict", ""), fontsize=9)
    a2.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def plot_sweep(rows: Sequence[dict], path: str | Path, title: str = "") -> Path:
    """Bar chart of test accuracy (mean over seeds, points = seeds) per condition, in sweep order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise ValueError("rows: no results to plot")
    by = defaultdict(list)
    for r in rows:
        if not r.get("failed"):  # failed cells (non-finite training) have no accuracy
            by[r["condition"]].append(float(r["test_acc"]))
    if not by:
        raise ValueError("rows: every cell failed; nothing to plot")
    names = list(by)
    means = [sum(v) / len(v) for v in by.values()]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.1 * len(names)), 3.2))
    ax.bar(range(len(names)), means, color="#4C72B0")
    for i, v in enumerate(by.values()):
        ax.scatter([i] * len(v), v, color="black", s=10, zorder=3)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_ylabel("test accuracy (best val epoch)")
    ax.set_title(title)
    fig.tight_layout()
    return _save(fig, path)


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog or "python -m initlab.paper_figs.lra_figures", description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dir", type=Path, help="a folder written by initlab lra sweep")
    args = parser.parse_args(argv)
    p = args.results_dir / "results.json"
    if not p.is_file():
        parser.error(f"{p}: not found (expected the results of initlab lra sweep)")
    data = json.loads(p.read_text())
    if not isinstance(data, dict) or "rows" not in data or "ablation" not in data:
        parser.error(f"{p}: not the results of `initlab lra sweep` (expected keys 'rows' and 'ablation'; "
                     "a single pretrain/finetune run has no sweep figure)")
    out = plot_sweep(data["rows"], args.results_dir / f"{data['ablation']}.png", title=data["ablation"])
    print(out)
    summary = args.results_dir / "summary.json"
    if summary.is_file():
        print(plot_listops_plateau(json.loads(summary.read_text()), args.results_dir / "listops_plateau.png"))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
