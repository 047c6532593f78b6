"""Figures of the theory stage, drawn only from saved results (no computation of gradients here).

``python -m initlab.paper_figs.theory_figures RESULTS_DIR`` reads ``RESULTS_DIR/t2_curve.json`` and
``RESULTS_DIR/t4_curve.json`` (written by :func:`initlab.theorycheck.verify.stage.theory`) and writes

* ``t2_band_ratio.png``: |<grad_S L, P^(w)>| / ||grad_S L||_F against T (log-log), measured mean and max
  with the data-free bound ||d||_2 / sqrt(T) of T2, for band widths w;
* ``t4_projection_vs_p.png``: E<-grad_S L, band> against the Markov repeat probability p, closed form
  kappa(C) Psi(P) of T4 against Monte Carlo (linearised loss, and cross-entropy at beta = 1);
* ``t6_dropout_rate.png`` (when ``t6_dropout.json`` exists: the rows of
  :func:`initlab.theory.attention.padding_dropout.dropout_blind_fraction_curve`): blind fraction of the Monte Carlo mean
  gradient over n dropout masks against n (log-log) with an n^{-1/2} reference, and the per-mask median;
* ``t7_depth.png`` (when ``t7_table.json`` exists: the rows of
  :func:`initlab.theory.attention.depth.blind_fraction_table`): first-layer blind fraction per stack.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from initlab.paper_figs.common import legend_below, pyplot, run_figure_cli, save
from initlab.textio import read_json

__all__ = ["plot_t2", "plot_t4", "plot_t6", "plot_t7", "draw_all", "main"]


def _load(path: Path):
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing; run `initlab reproduce --only theory` first")
    return read_json(path)


def plot_t2(rows: list[dict], out: Path) -> Path:
    """Band-derivative / gradient-norm ratio vs T, one colour per width w; legend below the axes."""
    from matplotlib.lines import Line2D

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.6))
    handles = []
    for k, w in enumerate(sorted({r["w"] for r in rows})):
        sub = sorted((r for r in rows if r["w"] == w), key=lambda r: r["T"])
        Ts = [r["T"] for r in sub]
        col = f"C{k}"
        ax.plot(Ts, [r["mean_ratio"] for r in sub], "o-", color=col)
        ax.plot(Ts, [r["max_ratio"] for r in sub], "x:", color=col, alpha=0.7)
        ax.plot(Ts, [r["bound"] for r in sub], "--", color=col, alpha=0.8)
        handles.append(Line2D([], [], color=col, lw=2, label=f"band width w = {w}"))
    handles += [Line2D([], [], color="0.3", marker="o", ls="-", label="measured mean"),
                Line2D([], [], color="0.3", marker="x", ls=":", label="measured max"),
                Line2D([], [], color="0.3", ls="--", label="bound ||d||_2 / sqrt(T)")]
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("sequence length T (tokens)")
    ax.set_ylabel("|<grad_S L, band>| / ||grad_S L||_F\n(dimensionless)")
    ax.set_title("T2: band derivative at uniform attention", fontsize=10)
    legend_below(ax, handles, ncol=3, offset=-0.2)
    return save(fig, out)[0]


def plot_t4(rows: list[dict], out: Path) -> Path:
    """Expected descent projection on the off-diagonal band vs p: closed form and Monte Carlo; legend below."""
    plt = pyplot()
    rows = sorted(rows, key=lambda r: r["p"])
    ps = [r["p"] for r in rows]
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.plot(ps, [r["closed_form"] for r in rows], "-", color="k", label="closed form kappa(C) Psi(P)")
    ax.errorbar(ps, [r["mc_linear"] for r in rows], yerr=[2 * r["mc_linear_se"] for r in rows], fmt="o", capsize=3,
                label="Monte Carlo, linearised loss (± 2 s.e.)")
    ax.errorbar(ps, [r["mc_ce"] for r in rows], yerr=[2 * r["mc_ce_se"] for r in rows], fmt="s", mfc="none", capsize=3,
                label="Monte Carlo, cross-entropy at beta = 1 (± 2 s.e.)")
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xlabel("Markov repeat probability p")
    ax.set_ylabel("E <-grad_S L, band>\n(loss units per unit score)")
    ax.set_title("T4: masked reconstruction, copy path", fontsize=10)
    legend_below(ax, ncol=1, offset=-0.2)
    return save(fig, out)[0]


def plot_t6(rows: list[dict], out: Path) -> Path:
    """Dropout: blind fraction of the mean gradient over n masks vs n, with an n^{-1/2} reference; legend below."""
    plt = pyplot()
    rows = sorted(rows, key=lambda r: r["n"])
    ns = [r["n"] for r in rows]
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.plot(ns, [r["blind_fraction"] for r in rows], "o-", label="mean gradient over n masks")
    ax.plot(ns, [r["per_mask_median"] for r in rows], "s:", label="one mask (median)")
    ref = rows[0]["blind_fraction"] * (ns[0] / ns[-1]) ** 0.5
    ax.plot([ns[0], ns[-1]], [rows[0]["blind_fraction"], ref], "k--", lw=0.8, label="reference slope n^(-1/2)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of dropout masks n")
    ax.set_ylabel("blind fraction ||P_B(G)||_F / ||G||_F\n(dimensionless)")
    ax.set_title("T6: dropout is blind in expectation", fontsize=10)
    legend_below(ax, ncol=2, offset=-0.2)
    return save(fig, out)[0]


def plot_t7(rows: list[dict], out: Path) -> Path:
    """Depth: first-layer blind fraction (median, min-max bar) per stack specification."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 0.3 * len(rows) + 1.4))
    y = list(range(len(rows)))
    med = [r["median"] for r in rows]
    err = [[m - r["min"] for m, r in zip(med, rows)], [r["max"] - m for m, r in zip(med, rows)]]
    ax.barh(y, med, xerr=err, color="C0", alpha=0.8, capsize=2)
    for yi, r in zip(y, rows):  # the median as a number: a zero bar is otherwise invisible
        ax.text(r["max"] + 0.01, yi, f"{r['median']:.2f}", va="center", fontsize=7)
    ax.set_yticks(y, [r["label"] for r in rows], fontsize=7)
    ax.set_xlim(0, max(1.0, max(r["max"] for r in rows) + 0.1))
    ax.invert_yaxis()  # the first row of the table on top
    ax.set_xlabel("first-layer blind fraction, uniform first layer\n(bar and number: median; whiskers: min to max)")
    ax.set_ylabel("stack")
    ax.set_title("T7: depth and residuals", fontsize=10)
    return save(fig, out)[0]


def draw_all(results_dir: Path) -> list[Path]:
    """Draw both figures into ``results_dir`` from its saved JSON; returns the paths.

    Raises:
        FileNotFoundError: a results file is missing.
    """
    results_dir = Path(results_dir)
    paths = [
        plot_t2(_load(results_dir / "t2_curve.json"), results_dir / "t2_band_ratio.png"),
        plot_t4(_load(results_dir / "t4_curve.json"), results_dir / "t4_projection_vs_p.png"),
    ]
    if (results_dir / "t6_dropout.json").exists():  # optional: written by newer theory stages
        paths.append(plot_t6(_load(results_dir / "t6_dropout.json"), results_dir / "t6_dropout_rate.png"))
    if (results_dir / "t7_table.json").exists():
        paths.append(plot_t7(_load(results_dir / "t7_table.json"), results_dir / "t7_depth.png"))
    return paths


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    return run_figure_cli("initlab.paper_figs.theory_figures", __doc__, lambda a: draw_all(a.results_dir), argv, prog,
                          results_help="folder written by the theory stage of initlab reproduce")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
