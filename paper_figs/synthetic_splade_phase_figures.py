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
  against :func:`initlab.theory.score_scale.closed_form.theory_row` at the cell's measured logit mean and sigma.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from initlab.paper_figs.common import family_color, legend_below, plain_log_ticks, pyplot, run_figure_cli, save
from initlab.textio import read_json

__all__ = ["load_phase", "plot_phase_family", "plot_init_vs_final", "plot_recommended_vs_best", "plot_theory",
           "draw_phase", "main"]

_MARKERS = {"bert": "o", "roberta": "s", "albert": "^", "modernbert": "D"}
_MODE_TITLES = {"tied": "tied: s and k on the tied matrix", "k_output": "s tied, k on output only",
                "s_output": "s and k on output only (untied)"}


def load_phase(results_dir: str | Path) -> dict[str, Any]:
    """The ``phase.json`` of a run folder.

    Raises:
        FileNotFoundError: no ``phase.json`` (the run has not finished its tables).
    """
    path = Path(results_dir) / "phase.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: not found; expected a folder written by `initlab synthetic splade`")
    return read_json(path)


def plot_phase_family(rep: dict[str, Any], family: str, path: str | Path) -> Path:
    """Heatmaps of nDCG@10 (first seed) over s x k for ``family``, one panel per mode."""
    plt = pyplot()
    seed = rep["config"]["seeds"][0]
    modes = [m for m in rep["config"]["modes"] if any(r["family"] == family and r["mode"] == m for r in rep["rows"])]
    fig, axes = plt.subplots(1, len(modes), figsize=(4.2 * len(modes) + 0.8, 3.8), squeeze=False, layout="constrained")
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
            ax.text(j, i, f"{M[i, j]:.2f}{mark}", ha="center", va="center", fontsize=8,
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
    return save(fig, path)[0]


def _unique_cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen, out = set(), []
    for r in rows:
        if r["cell"] not in seen:
            seen.add(r["cell"])
            out.append(r)
    return out


def plot_init_vs_final(rep: dict[str, Any], path: str | Path) -> Path:
    """Initial vs final InfoNCE per distinct cell; colour log2(h) (output scale, colour bar), marker family,
    red edge collapsed; ln B (the InfoNCE of uniform scores over the batch) dotted; legend below the axes."""
    from matplotlib.lines import Line2D

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.8, 5.0))
    cells = [r for r in _unique_cells(rep["rows"]) if r["final_infonce"] is not None and r["init_infonce"] is not None]
    sc = None
    handles = []
    for fam in rep["config"]["families"]:
        rs = [r for r in cells if r["family"] == fam]
        if not rs:
            continue
        sc = ax.scatter([r["init_infonce"] for r in rs], [r["final_infonce"] for r in rs],
                        c=[math.log2(r["h"]) for r in rs], cmap="coolwarm", vmin=-8, vmax=8,
                        marker=_MARKERS.get(fam, "o"), edgecolors=["red" if r["collapsed"] else "k" for r in rs],
                        linewidths=[1.5 if r["collapsed"] else 0.4 for r in rs])
        handles.append(Line2D([], [], marker=_MARKERS.get(fam, "o"), ls="none", mfc="0.8", mec="k", label=fam))
    if sc is not None:
        fig.colorbar(sc, ax=ax, label="log2 of the output-head scale h = s / k")
    B = rep["config"]["init_batch"]
    ax.axvline(math.log(B), color="grey", ls=":", lw=1)
    handles += [Line2D([], [], marker="o", ls="none", mfc="0.8", mec="red", mew=1.5, label="collapsed"),
                Line2D([], [], color="grey", ls=":", label=f"ln B = ln {B} (uniform scores)")]
    ax.set_xlabel("initial InfoNCE (nats, fixed batch, log scale)")
    ax.set_ylabel(f"final InfoNCE after {rep['config']['steps']} steps (nats, same batch)")
    ax.set_xscale("log")
    plain_log_ticks(ax, "x")
    ax.set_title("initial vs final ranking loss per cell", fontsize=10)
    legend_below(ax, handles, ncol=3, offset=-0.14)
    return save(fig, path)[0]


def plot_recommended_vs_best(rep: dict[str, Any], path: str | Path) -> Path:
    """Recommended k (filled, family colour) and edge-rule k (open black ring, larger, drawn on top so that a
    ring around a filled marker shows that both rules agree) against the grid's best k,
    log2 axes labelled with k itself, small deterministic jitter; legend beside the axes."""
    from matplotlib.lines import Line2D

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.6, 4.5))
    rng = np.random.default_rng(0)
    handles = []
    fams = rep["config"]["families"]
    for i, fam in enumerate(fams):
        rs = [r for r in rep["recommended"] if r["family"] == fam and r["best_k"] is not None]
        if not rs:
            continue
        m, col = _MARKERS.get(fam, "o"), family_color(fam, default=f"C{i}")
        x = np.log2([r["best_k"] for r in rs]) + 0.08 * (i - (len(fams) - 1) / 2)
        ax.scatter(x, np.log2([r["recommended_k"] for r in rs]) + rng.uniform(-0.05, 0.05, len(rs)),
                   marker=m, color=col, s=40, zorder=3)
        ax.scatter(x, np.log2([r["edge_k"] for r in rs]) + rng.uniform(-0.05, 0.05, len(rs)),
                   marker=m, facecolors="none", edgecolors="k", s=90, zorder=4)  # larger: a ring when both agree
        handles.append(Line2D([], [], marker=m, ls="none", color=col, label=fam))
    handles += [Line2D([], [], marker="o", ls="none", color="0.5", label="filled: mlmhead inspect"),
                Line2D([], [], marker="o", ls="none", mfc="none", mec="k", ms=9, label="open ring: edge rule"),
                Line2D([], [], color="grey", ls="--", label="recommended = best")]
    ks = sorted(rep["config"]["ks"])
    lk = np.log2(ks)
    ax.plot([lk.min(), lk.max()], [lk.min(), lk.max()], color="grey", lw=1, ls="--", zorder=1)
    ax.margins(0.08)
    ax.set_xticks(lk, [f"{k:g}" for k in ks])
    ax.set_yticks(lk, [f"{k:g}" for k in ks])
    ax.set_xlabel("grid's best k (log2 scale)")
    ax.set_ylabel("recommended k (log2 scale)")
    g, e = rep["regret"], rep.get("regret_edge", {})
    ax.set_title(f"inspect: hit rate {g['hit_rate'] or 0:.2f}, mean regret {g['mean_regret'] or 0:.3f} nDCG@10\n"
                 f"edge rule: hit rate {e.get('hit_rate') or 0:.2f}, mean regret {e.get('mean_regret') or 0:.3f} nDCG@10",
                 fontsize=9)
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    return save(fig, path)[0]


#: (key, axis label, the model the prediction comes from, the i.i.d. model's key drawn beside it or None)
_THEORY_PANELS = (("infonce", "initial InfoNCE (nats)", "i.i.d. Gaussian logits and scores (score spread)", None),
                  ("active_fraction", "active fraction (documents)", "per-entry Gaussian logits, position classes",
                   "iid_active_fraction"),
                  ("flops", "FLOPS (multiplications per pair)", "per-entry Gaussian logits, position classes", "iid_flops"))


def plot_theory(theory: dict[str, Any], families: Sequence[str], path: str | Path) -> Path:
    """Measured vs predicted initial InfoNCE, active fraction and FLOPS per cell (log-log, diagonal = agreement);
    one colour and marker per family, legend below the panels. Each panel names the model of its prediction; the
    active-fraction and FLOPS panels also show the i.i.d. Gaussian logit model's values (grey crosses), which do
    not hold for these backbones (one N(mu, sigma^2) for every entry and token makes max pooling activate nearly
    every entry; docs/synthetic_splade.md). A panel whose cells carry no prediction says so."""
    from matplotlib.lines import Line2D

    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.8))
    rows = theory["rows"]
    agree = theory.get("agreement", {})
    for n, (ax, (key, label, model, iid)) in enumerate(zip(axes, _THEORY_PANELS)):
        lo, hi = np.inf, -np.inf
        if iid is not None:
            xs = np.array([_nan(r.get(iid)) for r in rows], dtype=float)
            ys = np.array([_nan(r.get(f"measured_{key}")) for r in rows], dtype=float)
            ok = np.isfinite(xs) & np.isfinite(ys) & (xs > 0) & (ys > 0)
            if ok.any():
                ax.scatter(xs[ok], ys[ok], marker="x", color="0.65", s=18, lw=0.8, zorder=1)
                lo, hi = min(lo, xs[ok].min(), ys[ok].min()), max(hi, xs[ok].max(), ys[ok].max())
        drawn = 0
        for i, fam in enumerate(families):
            rs = [r for r in rows if r["family"] == fam]
            xs = np.array([_nan(r.get(f"predicted_{key}")) for r in rs], dtype=float)
            ys = np.array([_nan(r.get(f"measured_{key}")) for r in rs], dtype=float)
            ok = np.isfinite(xs) & np.isfinite(ys) & (xs > 0) & (ys > 0)
            if ok.any():
                drawn += int(ok.sum())
                ax.scatter(xs[ok], ys[ok], marker=_MARKERS.get(fam, "o"), color=family_color(fam, default=f"C{i}"), s=25,
                           zorder=2)
                lo, hi = min(lo, xs[ok].min(), ys[ok].min()), max(hi, xs[ok].max(), ys[ok].max())
        if np.isfinite(lo):
            ax.plot([lo, hi], [lo, hi], color="grey", ls="--", lw=1)
        if not drawn:
            ax.text(0.5, 0.5, "no prediction in these cells\n(measured before the per-entry model)", ha="center",
                    va="center", transform=ax.transAxes, fontsize=9)
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain_log_ticks(ax)
        ax.set_xlabel(f"predicted: {label}")
        ax.set_ylabel(f"measured: {label}")
        a = agree.get(f"predicted_{key}") or {}
        ratio = (f"\nmeasured / predicted: median {a['median']:.2f} ({a['min']:.2f} to {a['max']:.2f})"
                 if a.get("median") is not None else "")
        ax.set_title(f"({'abc'[n]}) {label.split(' (')[0]}: {model}{ratio}", fontsize=9)
    handles = [Line2D([], [], marker=_MARKERS.get(f, "o"), ls="none", color=family_color(f, default=f"C{i}"), label=f)
               for i, f in enumerate(families)]
    handles += [Line2D([], [], marker="x", ls="none", color="0.65", label="i.i.d. Gaussian logits (does not hold)"),
                Line2D([], [], color="grey", ls="--", label="measured = predicted")]
    fig.suptitle("initialisation: measured vs predicted at each cell's own logits", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    legend_below(fig, handles, ncol=len(handles), offset=0.06, fontsize=9)
    return save(fig, path)[0]


def _nan(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else float("nan")


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
        paths.append(plot_theory(read_json(tpath), rep["config"]["families"],
                                 out / "splade_theory_vs_measured.png"))
    return paths


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    return run_figure_cli(
        "initlab.paper_figs.synthetic_splade_phase_figures", __doc__, lambda a: draw_phase(a.results_dir, a.out),
        argv, prog, results_help="folder written by initlab synthetic splade",
        options=lambda p: p.add_argument("--out", type=Path, default=None,
                                         help="where to write the PNGs (default: RESULTS_DIR)"))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
