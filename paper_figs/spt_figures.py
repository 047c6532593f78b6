"""Figures of the synthetic SPT experiments, drawn only from a saved run folder (no training here).

    python -m initlab.paper_figs.spt_figures RESULTS_DIR      # e.g. results/synthetic_spt/default

Reads ``RESULTS_DIR/metrics.json``, ``RESULTS_DIR/history.csv`` and ``RESULTS_DIR/maps/*.npz`` (written by
:func:`initlab.synthetic.spt.run`) and writes, as PNG (:data:`initlab.paper_figs.common.DPI` dots per
inch) and vector PDF into ``RESULTS_DIR``:

* ``spt_accuracy``               -- test accuracy (best validation epoch) per condition: mean ± sd over
  seeds, every seed as a dot;
* ``spt_epoch_curve``            -- test accuracy against the number of SPT epochs before fine-tuning
  (0 = scratch, the fixed snapshots, and the stopping rule's epoch), every seed as a dot;
* ``spt_proximity_vs_accuracy``  -- first-layer proximity mass at the start of fine-tuning vs test
  accuracy, one point per condition and seed, with uniform attention's proximity mass for reference;
* ``spt_training_curves``        -- running training accuracy and validation accuracy per epoch for
  ``scratch`` and ``spt`` (each seed a thin line, the mean thick);
* ``spt_attention_maps``         -- first-layer attention of one seed (mean over the probe batch): SPT
  checkpoints, and the start/end of fine-tuning for scratch and SPT; each panel with its colour bar.

Colours are the run's own: ``summary.arms`` of ``metrics.json`` (each arm's ``colour``: grey label-only, blue SPT,
orange hybrids, green cross-data SPT, purple attention-only model; ``curve_colour`` for the learning-curve
figure), saved by the run from the arms table :mod:`initlab.synthetic.spt.arms`. A folder written before runs
saved it is drawn with :func:`initlab.paper_figs.common.condition_color` and learning curves of ``scratch`` and
``spt`` only.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np

from initlab.paper_figs.common import condition_color, legend_below, pyplot, run_figure_cli, save
from initlab.textio import open_text, read_json

__all__ = ["make_figures", "saved_arms", "accuracy_figure", "epoch_curve_figure", "proximity_accuracy_figure",
           "training_curves_figure", "attention_maps_figure", "main"]

CHANCE = 50.0  # per cent: the local task is a balanced binary classification
_MARKERS = "os^DvP*Xh<>p"
#: legend order of the condition groups, by colour (a colour not listed comes after these)
_GROUP_ORDER = ("tab:gray", "tab:blue", "tab:orange", "tab:green", "tab:purple", "black")


def _save(fig, out: Path, name: str) -> list[Path]:
    return save(fig, out / f"{name}.png", pdf=True)


def _load(run_dir: Path) -> dict:
    p = run_dir / "metrics.json"
    if not p.exists():
        raise FileNotFoundError(f"{p}: no metrics.json; pass the folder written by `initlab synthetic spt`")
    return read_json(p)


def saved_arms(metrics: dict) -> dict[str, dict]:
    """condition -> its saved arm row (``colour``, ``curve_colour``, ``label_only``), from ``summary.arms``; for a
    folder written before runs saved it, colours by name (:func:`condition_color`) and curves of scratch and spt."""
    rows = metrics["summary"].get("arms")
    if rows is not None:
        return {r["name"]: r for r in rows}
    names = list(metrics["summary"]["per_seed"]) + [r["condition"] for r in metrics["summary"]["conditions"]]
    return {n: {"name": n, "colour": condition_color(n),
                "curve_colour": condition_color(n) if n in ("scratch", "spt") else ""} for n in dict.fromkeys(names)}


def _group_rank(colour: str) -> int:
    return _GROUP_ORDER.index(colour) if colour in _GROUP_ORDER else len(_GROUP_ORDER)


def _seeds_of(metrics: dict) -> dict[str, list[dict]]:
    """condition -> its per-seed raw records (``summary.per_seed`` of ``metrics.json``)."""
    return metrics["summary"]["per_seed"]


def _histories(run_dir: Path) -> dict[str, dict[int, list[dict]]]:
    """condition -> seed -> per-epoch rows, from ``history.csv`` (empty if the file is missing)."""
    import csv

    p = run_dir / "history.csv"
    out: dict[str, dict[int, list[dict]]] = {}
    if not p.exists():
        return out
    with open_text(p, newline="") as f:
        for row in csv.DictReader(f):
            rows = out.setdefault(row["condition"], {}).setdefault(int(row["seed"]), [])
            rows.append({k: float(row[k]) for k in ("epoch", "train_acc", "val_acc")})
    return out


def _chance_line(ax) -> None:
    ax.axhline(CHANCE, color="r", lw=0.8, ls="--", zorder=1)


def accuracy_figure(run_dir: Path, metrics: dict) -> list[Path]:
    rows = metrics["summary"]["conditions"]
    if not rows:
        return []
    arms = saved_arms(metrics)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(rows) + 2), 3.8))
    for i, r in enumerate(rows):
        accs = 100 * np.asarray(r["test_acc_seeds"])
        h = float(r["test_acc_sd"])  # NaN (saved as "nan") with one seed
        ax.errorbar(i, 100 * r["test_acc_mean"], yerr=None if not math.isfinite(h) else 100 * h, fmt="s",
                    color=arms[r["condition"]]["colour"], capsize=4, ms=6)
        jitter = np.linspace(-0.2, 0.2, len(accs)) if len(accs) > 1 else np.zeros(len(accs))
        ax.scatter(np.full(len(accs), i) + jitter, accs, s=9, color="k", zorder=3)
    _chance_line(ax)
    ax.set_xticks(np.arange(len(rows)), [r["condition"] for r in rows], rotation=55, ha="right", fontsize=8)
    ax.set_xlabel("condition")
    ax.set_ylabel("test accuracy (%) at best val. epoch")
    one_seed = all(len(r["test_acc_seeds"]) < 2 for r in rows)
    ax.set_title("local task: mean ± sd over seeds per condition"
                 + (" (one seed: no sd)" if one_seed else "") + ";\ndots = seeds; "
                 "red dashed line = chance (50 %)", fontsize=9)
    ax.set_xlim(-0.6, len(rows) - 0.4)
    return _save(fig, run_dir, "spt_accuracy")


def _uniform_proximity(metrics: dict) -> float | None:
    cfg = metrics.get("config", {})
    T, w = cfg.get("task", {}).get("T"), cfg.get("proximity_w")
    if not T or w is None:
        return None
    from initlab.nn.attention_metrics import uniform_proximity_mass

    return uniform_proximity_mass(int(T), int(w))


def proximity_accuracy_figure(run_dir: Path, metrics: dict) -> list[Path]:
    seeds = _seeds_of(metrics)
    if not seeds:
        return []
    arms = saved_arms(metrics)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    used: dict[str, int] = {}  # colour -> markers used so far: each condition gets its own (colour, marker)
    for name, ss in sorted(seeds.items(), key=lambda kv: _group_rank(arms[kv[0]]["colour"])):
        color = arms[name]["colour"]
        marker = _MARKERS[used.get(color, 0) % len(_MARKERS)]
        used[color] = used.get(color, 0) + 1
        ax.scatter([s["prox_start"] for s in ss], [100 * s["test_acc"] for s in ss], s=22, color=color,
                   marker=marker, alpha=0.8, edgecolors="none", label=name)
    _chance_line(ax)
    u = _uniform_proximity(metrics)
    if u is not None:
        ax.axvline(u, color="k", lw=0.8, ls=":", zorder=1)
    w = metrics.get("config", {}).get("proximity_w", "w")
    ax.set_xlabel("first-layer proximity mass at the start of fine-tuning\n"
                  f"(attention weight on keys with |i - j| <= {w}, fraction of 1)")
    ax.set_ylabel("test accuracy (%) at best val. epoch")
    ax.set_title("one point per condition and seed; red dashed: chance"
                 + ("; dotted: uniform attention" if u is not None else ""), fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, title="condition",
              title_fontsize=8, ncol=1 if len(seeds) <= 16 else 2)
    return _save(fig, run_dir, "spt_proximity_vs_accuracy")


def epoch_curve_figure(run_dir: Path, metrics: dict) -> list[Path]:
    """Test accuracy against SPT epochs before fine-tuning: scratch (0), each fixed snapshot, the rule's epoch."""
    seeds = _seeds_of(metrics)
    fixed = sorted(int(c[len("spt_e"):]) for c in seeds if c.startswith("spt_e") and c[len("spt_e"):].isdigit())
    if "scratch" not in seeds or not fixed:
        return []
    runs = [r for r in metrics["summary"]["spt_runs"] if (r["source"], r["variant"], r["depth"]) == ("local", "full", 1)]
    pts = [(0.0, "scratch", seeds["scratch"])] + [(float(e), f"spt_e{e}", seeds[f"spt_e{e}"]) for e in fixed]
    arms = saved_arms(metrics)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    xs = [max(x, 0.5) for x, _, _ in pts]  # log axis: scratch (0 epochs) drawn at 0.5
    for x, (_, name, ss) in zip(xs, pts):
        acc = [100 * s["test_acc"] for s in ss]
        ax.scatter([x] * len(acc), acc, s=12, color="k", zorder=3)
        ax.plot([x * 0.85, x / 0.85], [np.mean(acc)] * 2, color=arms[name]["colour"], lw=2.5)
    if "spt" in seeds and runs:
        rule = [r["rule_epoch"] for r in runs]
        acc = {s["seed"]: 100 * s["test_acc"] for s in seeds["spt"]}
        ax.scatter(rule, [acc.get(r["seed"], np.nan) for r in runs], s=16, marker="D", color=arms["spt"]["colour"],
                   zorder=4, label="spt: at the stopping rule's epoch (one diamond per seed)")
        legend_below(ax, offset=-0.2, ncol=1)
    _chance_line(ax)
    ax.set_xscale("log")
    ticks = [0.5] + [float(e) for e in fixed]
    ax.set_xticks(ticks, ["0 (scratch)"] + [str(e) for e in fixed], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("SPT epochs before fine-tuning (log scale)")
    ax.set_ylabel("test accuracy (%) at best val. epoch")
    ax.set_title("depth 1: dots = seeds, bars = mean; red dashed = chance", fontsize=9)
    fig.tight_layout()
    return _save(fig, run_dir, "spt_epoch_curve")


def training_curves_figure(run_dir: Path, metrics: dict) -> list[Path]:
    """Training and validation accuracy per fine-tuning epoch of every arm of the run with a ``curve_colour`` (its
    own colour: scratch and SPT, and the causal round's arms, which the shared grey would not tell apart), at its
    run's learning rate: the mean over seeds and every seed (faint)."""
    hist = _histories(run_dir)
    colour = {n: r["curve_colour"] for n, r in saved_arms(metrics).items() if r["curve_colour"]}
    names = [n for n in colour if n in hist]
    if not names:
        return []
    plt = pyplot()
    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, key, title in zip(axes, ("train_acc", "val_acc"), ("training accuracy (running, over the epoch)", "validation accuracy")):
        for name in names:
            per_seed = [[h[key] for h in rows] for rows in hist[name].values()]
            width = max(len(c) for c in per_seed)  # early stopping: seeds ran different numbers of epochs
            curves = np.array([c + [np.nan] * (width - len(c)) for c in per_seed], dtype=float)
            ep = np.arange(curves.shape[1])
            if key == "train_acc":  # no training accuracy before the first epoch
                curves, ep = curves[:, 1:], ep[1:]
            for c in curves:
                ax.plot(ep, 100 * c, color=colour[name], lw=0.6, alpha=0.35)
            ax.plot(ep, 100 * np.nanmean(curves, 0), color=colour[name], lw=2)
        _chance_line(ax)
        ax.set_xlabel("fine-tuning epoch")
        ax.set_title(title, fontsize=9)
    axes[0].set_ylabel("accuracy (%)")
    handles = [Line2D([], [], color=colour[n], lw=2, label=f"{n}: mean over seeds") for n in names]
    handles += [Line2D([], [], color="0.5", lw=0.6, label="one seed"), Line2D([], [], color="r", lw=0.8, ls="--", label="chance")]
    legend_below(fig, handles, ncol=min(len(handles), 4), offset=0.0)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return _save(fig, run_dir, "spt_training_curves")


def _npz(run_dir: Path, name: str) -> dict[str, np.ndarray] | None:
    p = run_dir / "maps" / f"{name}.npz"
    if not p.exists() and run_dir.name == "partial":  # the partial report of an unfinished run
        p = run_dir.parent / "maps" / f"{name}.npz"
    if not p.exists():
        return None
    with np.load(p) as z:
        return {k: z[k] for k in z.files}


def _rule_epoch(metrics: dict, seed: int) -> int | None:
    """The epoch of the stopping rule's checkpoint of the local, full, depth-1 SPT run of ``seed``."""
    for r in metrics["summary"]["spt_runs"]:
        if (r["source"], r["variant"], r["depth"], r["seed"]) == ("local", "full", 1, seed):
            return r["rule_epoch"]
    return None


def _attention_panels(run_dir: Path, metrics: dict, seed: int) -> list[tuple[str, np.ndarray]]:
    panels = []
    spt = _npz(run_dir, f"spt_local_seed{seed}")
    if spt is not None:
        keys = sorted((k[len("attn_e"):] for k in spt if k.startswith("attn_e")), key=lambda e: (e == "rule", int(e) if e.isdigit() else 0))
        rule = _rule_epoch(metrics, seed)
        for e in keys:
            title = (f"SPT stopping rule's checkpoint{f' (epoch {rule})' if rule is not None else ''}" if e == "rule"
                     else f"SPT epoch {e}")
            panels.append((title, spt[f"attn_e{e}"]))
    for name in ("scratch", "spt"):
        ft = _npz(run_dir, f"ft_{name}_seed{seed}")
        if ft is not None:
            panels += [(f"{name}: fine-tuning start", ft["attn_start"]), (f"{name}: fine-tuning end", ft["attn_end"])]
    return panels


def attention_maps_figure(run_dir: Path, metrics: dict) -> list[Path]:
    cfg = metrics["config"]
    seed = cfg["seeds"][0] if cfg["map_seed"] == -1 else cfg["map_seed"]
    panels = _attention_panels(run_dir, metrics, seed)
    if not panels:
        return []
    plt = pyplot()
    ncol = min(4, len(panels))
    nrow = math.ceil(len(panels) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.4 * ncol, 3.2 * nrow), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    for i, (ax, (title, A)) in enumerate(zip(axes.flat, panels)):
        T = A.shape[-1]
        im = ax.imshow(A, cmap="viridis", vmin=0, vmax=max(float(A.max()), 1e-9), interpolation="nearest")
        cb = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
        cb.set_label("attention weight", fontsize=7)
        cb.ax.tick_params(labelsize=7)
        ax.set_xticks([0, T // 2, T - 1])
        ax.set_yticks([0, T // 2, T - 1])
        ax.tick_params(labelsize=7)
        ax.set_xlabel("key position j", fontsize=8)
        ax.set_ylabel("query position i", fontsize=8)
        ax.set_title(title, fontsize=8)
    T = panels[0][1].shape[-1]
    fig.suptitle(f"first-layer attention A_ij, mean over the probe batch, seed {seed} "
                 f"(uniform attention: 1/T = {1 / T:.3g}); each panel has its own colour scale", fontsize=9)
    fig.tight_layout()
    return _save(fig, run_dir, "spt_attention_maps")


def make_figures(run_dir: str | Path) -> list[Path]:
    """Draw every figure from the saved run in ``run_dir``; returns the written paths.

    Raises:
        FileNotFoundError: ``run_dir/metrics.json`` is missing.
        ValueError: ``metrics.json`` is not the metrics of ``initlab synthetic spt`` (a key is missing).
    """
    run_dir = Path(run_dir)
    metrics = _load(run_dir)
    paths: list[Path] = []
    try:
        for f in (accuracy_figure, epoch_curve_figure, proximity_accuracy_figure, training_curves_figure, attention_maps_figure):
            paths += f(run_dir, metrics)
    except KeyError as err:  # a results folder of another kind of run
        raise ValueError(f"{run_dir}: not a folder written by `initlab synthetic spt` (missing entry {err})") from None
    return paths


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    return run_figure_cli("initlab.paper_figs.spt_figures", __doc__,
                          lambda a: make_figures(a.results_dir), argv, prog,
                          results_help="folder written by initlab synthetic spt")


if __name__ == "__main__":
    raise SystemExit(main())
