"""Figures of the LRA ablation sweeps; reads saved results only (no training).

``python -m initlab.paper_figs.lra_figures RESULTS_DIR`` redraws ``<ablation>.png`` from
``RESULTS_DIR/results.json`` (written by ``initlab lra sweep``).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Sequence

__all__ = ["plot_sweep", "main"]


def plot_sweep(rows: Sequence[dict], path: str | Path, title: str = "") -> Path:
    """Bar chart of test accuracy (mean over seeds, points = seeds) per condition, in sweep order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from initlab.runs import atomic_write_bytes

    if not rows:
        raise ValueError("rows: no results to plot")
    by = defaultdict(list)
    for r in rows:
        by[r["condition"]].append(float(r["test_acc"]))
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
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())


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
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
