"""Figures of the synthetic SPLADE sweep, drawn from its saved results only (no training here).

``python -m initlab.paper_figs.synthetic_splade_figures RESULTS_DIR [--out DIR]`` reads ``RESULTS_DIR/config.json``
and ``RESULTS_DIR/cells/*.json`` (written by ``initlab synthetic splade``) and writes:

* ``splade_effectiveness_flops.png`` -- nDCG@10 against FLOPS (multiplications per query-document
  pair), one panel per head inflation, one colour per k; collapsed cells drawn as crosses;
* ``splade_loss_curves.png`` -- ranking (InfoNCE) part and FLOPS part (lambda_q R_q + lambda_d R_d)
  of the training loss against the step, one row per inflation, one line per k (seed mean);
* ``splade_init_scale.png`` -- scale quantities measured on the tiny model at initialization against
  k, beside the Gaussian-logit theory (:func:`initlab.theory.score_scale.closed_form.theory_row`, lines) and its
  Monte Carlo (:func:`initlab.theory.score_scale.monte_carlo.monte_carlo`, open markers), whose parameters
  (mu_b, mu_h, sigma, V, L_q, L_d, B, lambda_d) are taken from the measured k = 1 cell of each
  inflation: ``mu_b`` = mean decoder bias, ``mu_h`` = mean logit - mu_b, ``sigma`` = logit std. The active
  dimensions and FLOPS panels show the per-entry Gaussian logit model with position classes instead
  (:mod:`initlab.theory.score_scale.per_entry`, at each cell's own logits, dashed lines): the i.i.d. model
  predicts nearly every entry active after max pooling, which the measured backbones are not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from initlab.paper_figs.common import legend_below, plain_log_ticks, plain_number, pyplot, run_figure_cli, save
from initlab.textio import read_json

__all__ = ["load_cells", "plot_effectiveness_flops", "plot_loss_curves", "plot_init_scale", "draw_all", "draw_phase", "main"]


def load_cells(results_dir: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(config dict, list of cell dicts)`` of a synthetic SPLADE run folder.

    Raises:
        FileNotFoundError: ``results_dir`` has no ``config.json`` or no ``cells/*.json``.
    """
    root = Path(results_dir)
    cfg_path = root / "config.json"
    if not cfg_path.exists():
        raise FileNotFoundError(f"{cfg_path}: not found; expected a folder written by `initlab synthetic splade`")
    cfg = read_json(cfg_path)["config"]
    cells = [read_json(p) for p in sorted((root / "cells").glob("*.json"))]
    if not cells:
        raise FileNotFoundError(f"{root / 'cells'}: no cell results (*.json)")
    return cfg, cells


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _k_colors(ks: Sequence[float]):
    plt = pyplot()
    cmap = plt.get_cmap("viridis")
    return {k: cmap(i / max(len(ks) - 1, 1)) for i, k in enumerate(sorted(ks))}


#: log-axis floors: a zero (all-zero vectors, vanished regulariser) is drawn at the floor and the figure says so
FLOPS_FLOOR, LOSS_FLOOR = 1e-3, 1e-6


def plot_effectiveness_flops(cells: list[dict[str, Any]], path: str | Path) -> Path:
    """nDCG@10 vs FLOPS per inflation (panels) and k (colours); one point per cell (seed), crosses = collapsed;
    legend beside the last panel."""
    from matplotlib.lines import Line2D

    plt = pyplot()
    infs = sorted({c["inflation"] for c in cells})
    ks = sorted({c["k"] for c in cells})
    colors = _k_colors(ks)
    fig, axes = plt.subplots(1, len(infs), figsize=(4.2 * len(infs), 3.6), squeeze=False, sharey=True)
    floored = False
    for ax, inf in zip(axes[0], infs):
        for c in cells:
            if c["inflation"] == inf:
                floored |= _num(c["flops"]) < FLOPS_FLOOR
                ax.scatter(max(_num(c["flops"]), FLOPS_FLOOR), _num(c["ndcg@10"]), color=colors[c["k"]],
                           marker="x" if c["collapse"] else "o", s=40)
        ax.set_xscale("log")
        plain_log_ticks(ax, "x")
        ax.set_title(f"head inflation x{inf:g}")
        ax.set_xlabel("FLOPS (mult. per query-document pair)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("nDCG@10 (dev queries)")
    handles = [Line2D([], [], marker="o", ls="none", color=colors[k], label=f"k = {k:g}") for k in ks]
    handles.append(Line2D([], [], marker="x", ls="none", color="k", label="collapsed"))
    axes[0][-1].legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False,
                       title="rescaling", title_fontsize=8)
    fig.suptitle("Synthetic SPLADE: effectiveness vs FLOPS, one point per cell"
                 + (f"\n(FLOPS below {FLOPS_FLOOR:g}, e.g. all-zero vectors, drawn at {FLOPS_FLOOR:g})" if floored else ""))
    fig.tight_layout()
    return save(fig, path)[0]


def plot_loss_curves(cells: list[dict[str, Any]], path: str | Path) -> Path:
    """Ranking and FLOPS parts of the loss vs step; rows = inflation, lines = k (mean over seeds); legend below."""
    from matplotlib.lines import Line2D

    plt = pyplot()
    infs = sorted({c["inflation"] for c in cells})
    ks = sorted({c["k"] for c in cells})
    colors = _k_colors(ks)
    fig, axes = plt.subplots(len(infs), 2, figsize=(9, 2.8 * len(infs) + 0.6), squeeze=False, sharex=True)
    floored = False
    for row, inf in zip(axes, infs):
        for k in ks:
            curves = [c["loss_curve"] for c in cells if c["inflation"] == inf and c["k"] == k and c["loss_curve"]]
            if not curves:
                continue
            n = min(len(cv) for cv in curves)
            steps = [cv["step"] for cv in curves[0][:n]]
            rank = np.mean([[_num(r["ranking"]) for r in cv[:n]] for cv in curves], axis=0)
            flops = np.mean([[_num(r["flops_q"]) + _num(r["flops_d"]) for r in cv[:n]] for cv in curves], axis=0)
            row[0].plot(steps, rank, color=colors[k])
            floored |= bool((flops < LOSS_FLOOR).any())
            row[1].plot(steps, np.maximum(flops, LOSS_FLOOR), color=colors[k])
        row[0].set_ylabel(f"inflation x{inf:g}:\nranking loss (nats)")
        row[1].set_ylabel("FLOPS part (loss units)")
        row[1].set_yscale("log")
        plain_log_ticks(row[1], "y")
        for ax in row:
            ax.grid(alpha=0.3)
    axes[0][0].set_title("InfoNCE ranking loss")
    axes[0][1].set_title("FLOPS part: lambda_q R_q + lambda_d R_d"
                         + (f"\n(values below {plain_number(LOSS_FLOOR)} drawn at {plain_number(LOSS_FLOOR)})" if floored else ""))
    axes[-1][0].set_xlabel("training step")
    axes[-1][1].set_xlabel("training step")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    handles = [Line2D([], [], color=colors[k], label=f"k = {k:g}") for k in ks]
    legend_below(fig, handles, ncol=len(handles), offset=0.04, title="rescaling factor k (mean over seeds)",
                 title_fontsize=8)
    return save(fig, path)[0]


#: (measured key in a cell's ``init``, theory_row / monte_carlo key or None, panel title, y-axis label with unit,
#: log y, the per-entry model's key in ``init`` or None)
INIT_PANELS = (
    ("token_active_fraction", "active_logit", "P(z > 0) per token", "probability", False, None),
    ("d_active_dims", None, "active dims per document", "terms with a > 0 (count)", False, "pred_d_active_dims"),
    ("flops", None, "FLOPS", "multiplications per pair", True, "pred_flops"),
    ("mean_a", "Ea_d", "E[a] (documents)", "term weight (dimensionless)", True, None),
    ("score_spread", "score_spread", "score spread sd(s+ - s-)", "score units", True, None),
    ("grad_ratio", "grad_ratio", "|grad FLOPS| / |grad ranking| (w.r.t. z_d)", "ratio (dimensionless)", True, None),
)


def load_theory_curves(results_dir: str | Path) -> tuple[dict[float, list], dict[float, list], str]:
    """Read ``theory_curves.json`` (written by the synthetic SPLADE run): ``({inflation: rows}, {inflation: rows}, note)``."""
    path = Path(results_dir) / "theory_curves.json"
    if not path.exists():
        return {}, {}, f"theory not drawn ({path.name} missing)"
    data = read_json(path)
    theory = {float(k): v for k, v in data.get("theory", {}).items()}
    mc = {float(k): v for k, v in data.get("monte_carlo", {}).items()}
    return theory, mc, data.get("note", "")


def plot_init_scale(cfg: dict[str, Any], cells: list[dict[str, Any]], path: str | Path, with_theory: bool = True,
                    results_dir: str | Path | None = None) -> Path:
    """Measured scale quantities at init vs k (filled markers, seed mean) beside theory (lines) and Monte Carlo."""
    plt = pyplot()
    infs = sorted({c["inflation"] for c in cells})
    ks = sorted({c["k"] for c in cells})
    theory, mc, note = (load_theory_curves(results_dir) if (with_theory and results_dir is not None)
                        else ({}, {}, "theory not drawn"))
    from matplotlib.lines import Line2D

    cmap = plt.get_cmap("plasma")
    colors = {inf: cmap(0.8 * i / max(len(infs) - 1, 1)) for i, inf in enumerate(infs)}
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.4))
    per_entry = False
    for ax, (mkey, tkey, title, ylabel, logy, pkey) in zip(axes.flat, INIT_PANELS):
        for inf in infs:
            meas, pred = [], []
            for k in ks:
                vals, pvals = [], []
                for c in cells:
                    if c["inflation"] == inf and c["k"] == k:
                        i = c["init"]
                        v = i["grad_flops"] / i["grad_rank"] if mkey == "grad_ratio" and i["grad_rank"] > 0 else i.get(mkey)
                        vals.append(_num(v))
                        pvals.append(_num(i.get(pkey)) if pkey else float("nan"))
                meas.append(np.mean(vals) if vals else float("nan"))
                pred.append(np.mean(pvals) if pvals else float("nan"))
            ax.plot(ks, meas, "o", color=colors[inf])
            if pkey is not None and with_theory and np.isfinite(pred).any():
                ax.plot(ks, pred, "--", color=colors[inf], alpha=0.8)
                per_entry = True
            if tkey is not None and inf in theory:
                ax.plot(ks, [_num(r.get(tkey)) for r in theory[inf]], "-", color=colors[inf], alpha=0.8)
            if tkey is not None and inf in mc:
                ax.plot(ks, [_num(r.get(tkey)) for r in mc[inf]], "s", mfc="none", color=colors[inf], ms=7)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [f"{k:g}" for k in ks])
        ax.minorticks_off()
        if logy:
            ax.set_yscale("log")
            plain_log_ticks(ax, "y")
        ax.set_xlabel("rescaling factor k")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    handles = [Line2D([], [], color=colors[inf], lw=2, label=f"head inflation x{inf:g}") for inf in infs]
    handles += [Line2D([], [], color="0.3", marker="o", ls="none", label="measured (seed mean)")]
    if theory:
        handles.append(Line2D([], [], color="0.3", ls="-", label="i.i.d. Gaussian-logit theory"))
    if per_entry:
        handles.append(Line2D([], [], color="0.3", ls="--", label="per-entry Gaussian logits (active dims, FLOPS)"))
    if mc:
        handles.append(Line2D([], [], color="0.3", marker="s", mfc="none", ls="none", label="Monte Carlo"))
    title = "Tiny-model scale quantities at initialization vs k (measured) and Gaussian-logit theory"
    fig.suptitle(title + (f" -- {note}" if note else ""), fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    legend_below(fig, handles, ncol=len(handles), offset=0.04, fontsize=9)
    return save(fig, path)[0]


def draw_all(results_dir: str | Path, out_dir: str | Path | None = None, with_theory: bool = True) -> list[Path]:
    """Draw the three figures of a run folder into ``out_dir`` (default: the run folder)."""
    cfg, cells = load_cells(results_dir)
    out = Path(out_dir) if out_dir is not None else Path(results_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [
        plot_effectiveness_flops(cells, out / "splade_effectiveness_flops.png"),
        plot_loss_curves(cells, out / "splade_loss_curves.png"),
        plot_init_scale(cfg, cells, out / "splade_init_scale.png", with_theory=with_theory, results_dir=results_dir),
    ]


def _options(parser) -> None:
    parser.add_argument("--out", type=Path, default=None, help="where to write the PNGs (default: RESULTS_DIR)")
    parser.add_argument("--no-theory", action="store_true", help="draw measured quantities only")


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    return run_figure_cli("initlab.paper_figs.synthetic_splade_figures", __doc__,
                          lambda a: draw_all(a.results_dir, a.out, with_theory=not a.no_theory), argv, prog,
                          results_help="folder written by initlab synthetic splade", options=_options)


def draw_phase(results_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """The phase-diagram figures (:func:`initlab.paper_figs.synthetic_splade_phase_figures.draw_phase`)."""
    from initlab.paper_figs.synthetic_splade_phase_figures import draw_phase as _draw

    return _draw(results_dir, out_dir)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
