"""Figures of the synthetic SPLADE phase diagram, drawn from its saved results only (no training here).

``python -m initlab.paper_figs.synthetic_splade_phase_figures RESULTS_DIR [--out DIR]`` reads
``RESULTS_DIR/phase.json`` and ``RESULTS_DIR/theory.json`` (written by ``initlab synthetic splade``) and writes:

* ``splade_phase_<family>.png`` -- nDCG@10 over head scale s (rows) x rescaling k (columns), one panel
  per mode (tied; k on the output projection only; s and k on the output projection only); collapsed
  cells hatched and marked ``C``, failed cells (non-finite) marked ``F``;
* ``splade_init_vs_final_loss.png`` -- initial against final InfoNCE (same fixed batch of training
  pairs, equal steps) per cell, colour = log2 of the head scale at the output (s / k), marker = family;
* ``splade_recommended_vs_best_k.png`` -- ``initlab mlmhead inspect``'s recommended k (and the edge
  rule's k) against the grid's best k per (family, s), log2 axes, with the diagonal;
* ``splade_theory_vs_measured.png`` -- measured initial InfoNCE, active fraction and FLOPS per cell
  against :func:`initlab.theory.score_scale.theory_row` at the cell's measured logit mean and sigma.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["load_phase", "plot_phase_family", "plot_init_vs_final", "plot_recommended_vs_best", "plot_theory",
           "draw_phase", "main"]

_MARKERS = {"bert": "o", "roberta": "s", "albert": "^", "modernbert": "D"}
_MODE_TITLES = {"tied": "tied: s and k on the tied matrix", "k_output": "s tied, k on output only",
                "s_output": "s and k on output only (untied)"}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def load_phase(results_dir: str | Path) -> dict[str, Any]:
    """The ``phase.json`` of a run folder.

    Raises:
        FileNotFoundError: no ``phase.json`` (the run has not finished its tables).
    """
    path = Path(results_dir) / "phase.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: not found; expected a folder written by `initlab synthetic splade`")
    return json.loads(path.read_text())


def plot_phase_family(rep: dict[str, Any], family: str, path: str | Path) -> Path:
    """Heatmaps of nDCG@10 (first seed) over s x k for ``family``, one panel per mode."""
    plt = _plt()
    seed = rep["config"]["seeds"][0]
    modes = [m for m in rep["config"]["modes"] if any(r["family"] == family and r["mode"] == m for r in rep["rows"])]
    fig, axes = plt.subplots(1, len(modes), figsize=(4.2 * len(modes), 3.6), squeeze=False)
    for col, (ax, mode) in enumerate(zip(axes[0], modes)):
        rs = [r for r in rep["rows"] if r["family"] == family and r["mode"] == mode and r["seed"] == seed]
        ss, ks = sorted({r["s"] for r in rs}), sorted({r["k"] for r in rs})
        M = np.full((len(ss), len(ks)), np.nan)
        for r in rs:
            M[ss.index(r["s"]), ks.index(r["k"])] = 0.0 if r["ndcg@10"] is None else r["ndcg@10"]
        im = ax.imshow(M, vmin=0, vmax=1, cmap="viridis", origin="lower", aspect="auto")
        for r in rs:
            i, j = ss.index(r["s"]), ks.index(r["k"])
            mark = " F" if r["failed"] else (" C" if r["collapsed"] else "")
            ax.text(j, i, f"{M[i, j]:.2f}{mark}", ha="center", va="center", fontsize=7,
                    color="white" if M[i, j] < 0.6 else "black")
            if r["collapsed"]:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///", edgecolor="red", lw=0))
        ax.set_xticks(range(len(ks)), [f"{k:g}" for k in ks])
        ax.set_yticks(range(len(ss)), [f"{s:g}" for s in ss])
        ax.set_xlabel("rescaling k")
        if col == 0:
            ax.set_ylabel("head scale s")
        ax.set_title(_MODE_TITLES.get(mode, mode), fontsize=9)
    fig.colorbar(im, ax=axes[0].tolist(), label="nDCG@10", shrink=0.85)
    fig.suptitle(f"{family}: nDCG@10 (seed {seed}); C = collapsed (hatched), F = non-finite", fontsize=10)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return Path(path)


def _plain_log_ticks(axis) -> None:
    """Major ticks of a log axis as plain numbers, no minor labels (they overlap on short ranges)."""
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(ScalarFormatter())
    axis.set_minor_formatter(NullFormatter())


def _unique_cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for r in rows:
        if r["cell"] not in seen:
            seen.add(r["cell"])
            out.append(r)
    return out


def plot_init_vs_final(rep: dict[str, Any], path: str | Path) -> Path:
    """Initial vs final InfoNCE per distinct cell; colour log2(h) (output scale), marker family; x: collapsed."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    cells = [r for r in _unique_cells(rep["rows"]) if r["final_infonce"] is not None and r["init_infonce"] is not None]
    for fam in rep["config"]["families"]:
        rs = [r for r in cells if r["family"] == fam]
        if not rs:
            continue
        sc = ax.scatter([r["init_infonce"] for r in rs], [r["final_infonce"] for r in rs],
                        c=[math.log2(r["h"]) for r in rs], cmap="coolwarm", vmin=-8, vmax=8,
                        marker=_MARKERS.get(fam, "o"), edgecolors=["red" if r["collapsed"] else "k" for r in rs],
                        linewidths=[1.5 if r["collapsed"] else 0.4 for r in rs], label=fam)
    if cells:
        fig.colorbar(sc, ax=ax, label="log2 output-head scale h = s / k")
    B = rep["config"]["init_batch"]
    ax.axvline(math.log(B), color="grey", ls=":", lw=1)
    ax.text(math.log(B), ax.get_ylim()[1], " ln B", va="top", fontsize=8, color="grey")
    ax.set_xlabel("initial InfoNCE (nats, fixed batch)")
    ax.set_ylabel(f"final InfoNCE after {rep['config']['steps']} steps (same batch)")
    ax.set_xscale("log")
    _plain_log_ticks(ax.xaxis)
    ax.legend(fontsize=8, title="family (red edge: collapsed)", title_fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def plot_recommended_vs_best(rep: dict[str, Any], path: str | Path) -> Path:
    """Recommended k (filled) and edge-rule k (open) against the grid's best k, log2 axes, small jitter."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 4.5))
    rng = np.random.default_rng(0)
    for i, fam in enumerate(rep["config"]["families"]):
        rs = [r for r in rep["recommended"] if r["family"] == fam and r["best_k"] is not None]
        if not rs:
            continue
        x = np.log2([r["best_k"] for r in rs]) + 0.08 * (i - 1.5)
        ax.scatter(x, np.log2([r["recommended_k"] for r in rs]) + rng.uniform(-0.05, 0.05, len(rs)),
                   marker=_MARKERS.get(fam, "o"), label=f"{fam}: inspect", s=40)
        ax.scatter(x, np.log2([r["edge_k"] for r in rs]) + rng.uniform(-0.05, 0.05, len(rs)),
                   marker=_MARKERS.get(fam, "o"), facecolors="none", edgecolors="k", s=40,
                   label=f"{fam}: edge rule" if i == 0 else None)
    ks = np.log2(rep["config"]["ks"])
    ax.plot([ks.min(), ks.max()], [ks.min(), ks.max()], color="grey", lw=1, ls="--")
    ax.set_xlabel("grid's best k (log2)")
    ax.set_ylabel("recommended k (log2)")
    g, e = rep["regret"], rep.get("regret_edge", {})
    ax.set_title(f"inspect: hit {g['hit_rate'] or 0:.2f}, mean regret {g['mean_regret'] or 0:.3f}; "
                 f"edge: hit {e.get('hit_rate') or 0:.2f}, regret {e.get('mean_regret') or 0:.3f}", fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def plot_theory(theory: dict[str, Any], families: Sequence[str], path: str | Path) -> Path:
    """Measured vs predicted initial InfoNCE, active fraction and FLOPS per cell (log-log, diagonal)."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    rows = theory["rows"]
    for ax, (key, label) in zip(axes, [("infonce", "initial InfoNCE (nats)"), ("active_fraction", "active fraction (documents)"),
                                       ("flops", "FLOPS (multiplications per pair)")]):
        lo, hi = np.inf, -np.inf
        for fam in families:
            rs = [r for r in rows if r["family"] == fam]
            xs = np.array([r[f"predicted_{key}"] for r in rs], dtype=float)
            ys = np.array([r[f"measured_{key}"] for r in rs], dtype=float)
            ok = np.isfinite(xs) & np.isfinite(ys) & (xs > 0) & (ys > 0)
            if ok.any():
                ax.scatter(xs[ok], ys[ok], marker=_MARKERS.get(fam, "o"), label=fam, s=25)
                lo, hi = min(lo, xs[ok].min(), ys[ok].min()), max(hi, xs[ok].max(), ys[ok].max())
        if np.isfinite(lo):
            ax.plot([lo, hi], [lo, hi], color="grey", ls="--", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log_ticks(ax.xaxis)
        _plain_log_ticks(ax.yaxis)
        ax.set_xlabel(f"theory: {label}")
        ax.set_ylabel(f"measured: {label}")
    axes[0].legend(fontsize=8)
    fig.suptitle("initialisation: measured vs Gaussian-logit theory at each cell's measured logit mean and sigma", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def draw_phase(results_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Draw every phase-diagram figure of a run folder into ``out_dir`` (default: the run folder)."""
    rep = load_phase(results_dir)
    out = Path(out_dir) if out_dir is not None else Path(results_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [plot_phase_family(rep, f, out / f"splade_phase_{f}.png") for f in rep["config"]["families"]]
    paths += [plot_init_vs_final(rep, out / "splade_init_vs_final_loss.png"),
              plot_recommended_vs_best(rep, out / "splade_recommended_vs_best_k.png")]
    tpath = Path(results_dir) / "theory.json"
    if tpath.exists():
        paths.append(plot_theory(json.loads(tpath.read_text()), rep["config"]["families"],
                                 out / "splade_theory_vs_measured.png"))
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m initlab.paper_figs.synthetic_splade_phase_figures",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("results_dir", type=Path, help="folder written by `initlab synthetic splade`")
    parser.add_argument("--out", type=Path, default=None, help="where to write the PNGs (default: RESULTS_DIR)")
    args = parser.parse_args(argv)
    try:
        paths = draw_phase(args.results_dir, args.out)
    except FileNotFoundError as err:
        parser.error(str(err))
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
