"""Figures of the synthetic SPT experiments, drawn only from a saved run folder (no training here).

    python -m initlab.paper_figs.spt_figures RESULTS_DIR      # e.g. results/synthetic_spt/default

Reads ``RESULTS_DIR/metrics.json`` and ``RESULTS_DIR/maps/*.npz`` (written by
:func:`initlab.synthetic.spt.run`) and writes, as PNG and PDF into ``RESULTS_DIR``:

* ``spt_accuracy``               -- test accuracy (best validation epoch) per condition: mean, 95 %
  interval of the mean, every seed as a dot;
* ``spt_proximity_vs_accuracy``  -- first-layer proximity mass at the start of fine-tuning vs test
  accuracy, one point per condition and seed;
* ``spt_training_curves``        -- running training accuracy and validation accuracy per epoch for
  ``scratch`` and ``spt`` (each seed a thin line, the mean thick);
* ``spt_attention_maps``         -- first-layer attention of one seed (mean over the probe batch): SPT
  checkpoints, and the start/end of fine-tuning for scratch and SPT.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["make_figures", "accuracy_figure", "proximity_accuracy_figure", "training_curves_figure",
           "attention_maps_figure", "main"]


def _save(fig, out: Path, name: str) -> list[Path]:
    import io

    from initlab.runs import atomic_write_bytes

    paths = []
    for ext in ("png", "pdf"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=130, bbox_inches="tight")
        paths.append(atomic_write_bytes(out / f"{name}.{ext}", buf.getvalue()))
    plt.close(fig)
    return paths


def _load(run_dir: Path) -> dict:
    p = run_dir / "metrics.json"
    if not p.exists():
        raise FileNotFoundError(f"{p}: no metrics.json; pass the folder written by `initlab synthetic spt`")
    return json.loads(p.read_text())


def _seeds_of(metrics: dict) -> dict[str, list[dict]]:
    return {c["condition"]: c["seeds"] for c in metrics["cells"].values() if c.get("kind") == "finetune"}


def _color(name: str) -> str:
    if name.startswith("attn_"):
        return "tab:purple"
    if "scratch" in name or name == "frozen_attn":
        return "tab:gray"
    if name.startswith("hybrid"):
        return "tab:orange"
    if name.startswith("cross"):
        return "tab:green"
    return "tab:blue"


def accuracy_figure(run_dir: Path, metrics: dict) -> list[Path]:
    rows = metrics["summary"]["conditions"]
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(rows) + 2), 3.8))
    for i, r in enumerate(rows):
        accs = 100 * np.asarray(r["test_acc_seeds"])
        h = float(r["test_acc_ci"])  # NaN (saved as "nan") with one seed
        ax.errorbar(i, 100 * r["test_acc_mean"], yerr=None if not math.isfinite(h) else 100 * h, fmt="s",
                    color=_color(r["condition"]), capsize=4, ms=6)
        ax.scatter(np.full(len(accs), i) + np.linspace(-0.2, 0.2, len(accs)), accs, s=9, color="k", zorder=3)
    ax.axhline(50, color="r", lw=0.8, ls="--", label="chance")
    ax.set_xticks(np.arange(len(rows)), [r["condition"] for r in rows], rotation=55, ha="right", fontsize=8)
    ax.set_ylabel("test accuracy (%) at best val. epoch")
    ax.set_title("local task: mean and 95 % interval per condition, dots = seeds", fontsize=9)
    ax.legend(fontsize=8)
    return _save(fig, run_dir, "spt_accuracy")


def proximity_accuracy_figure(run_dir: Path, metrics: dict) -> list[Path]:
    seeds = _seeds_of(metrics)
    if not seeds:
        return []
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, ss in seeds.items():
        ax.scatter([s["prox_start"] for s in ss], [100 * s["test_acc"] for s in ss], s=16, color=_color(name), alpha=0.8)
        ax.annotate(name, (np.mean([s["prox_start"] for s in ss]), 100 * np.mean([s["test_acc"] for s in ss])), fontsize=6, alpha=0.7)
    ax.set_xlabel("first-layer proximity mass at the start of fine-tuning")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("one point per condition and seed (grey: scratch-like, blue: SPT, orange: hybrids,\n"
                 "green: cross-data SPT, purple: attention-only model)", fontsize=8)
    return _save(fig, run_dir, "spt_proximity_vs_accuracy")


def training_curves_figure(run_dir: Path, metrics: dict) -> list[Path]:
    seeds = _seeds_of(metrics)
    names = [n for n in ("scratch", "spt") if n in seeds]
    if not names:
        return []
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, key, title in zip(axes, ("train_acc", "val_acc"), ("training accuracy (running, over the epoch)", "validation accuracy")):
        for name in names:
            curves = np.array([[h[key] for h in s["history"]] for s in seeds[name]], dtype=float)
            ep = np.arange(curves.shape[1])
            if key == "train_acc":  # no training accuracy before the first epoch
                curves, ep = curves[:, 1:], ep[1:]
            for c in curves:
                ax.plot(ep, 100 * c, color=_color(name), lw=0.6, alpha=0.5)
            ax.plot(ep, 100 * np.nanmean(curves, 0), color=_color(name), lw=2, label=name)
        ax.axhline(50, color="r", lw=0.8, ls="--")
        ax.set_xlabel("fine-tuning epoch")
        ax.set_title(title, fontsize=9)
    axes[0].set_ylabel("accuracy (%)")
    axes[0].legend(fontsize=8)
    return _save(fig, run_dir, "spt_training_curves")


def _npz(run_dir: Path, name: str) -> dict[str, np.ndarray] | None:
    p = run_dir / "maps" / f"{name}.npz"
    if not p.exists() and run_dir.name == "partial":  # the partial report of an unfinished run
        p = run_dir.parent / "maps" / f"{name}.npz"
    if not p.exists():
        return None
    with np.load(p) as z:
        return {k: z[k] for k in z.files}


def attention_maps_figure(run_dir: Path, metrics: dict) -> list[Path]:
    cfg = metrics["config"]
    seed = cfg["seeds"][0] if cfg["map_seed"] == -1 else cfg["map_seed"]
    panels = []
    spt = _npz(run_dir, f"spt_local_seed{seed}")
    if spt is not None:
        keys = sorted((k[len("attn_e"):] for k in spt if k.startswith("attn_e")), key=lambda e: (e == "rule", int(e) if e.isdigit() else 0))
        panels += [(f"SPT epoch {e}", spt[f"attn_e{e}"]) for e in keys]
    for name in ("scratch", "spt"):
        ft = _npz(run_dir, f"ft_{name}_seed{seed}")
        if ft is not None:
            panels += [(f"{name}: fine-tune start", ft["attn_start"]), (f"{name}: fine-tune end", ft["attn_end"])]
    if not panels:
        return []
    ncol = min(4, len(panels))
    nrow = math.ceil(len(panels) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.0 * ncol, 3.0 * nrow), squeeze=False)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
        ax.axis("off")
    for ax, (title, A) in zip(axes.flat, panels):
        ax.axis("on")
        ax.imshow(A, cmap="viridis", vmin=0, vmax=max(float(A.max()), 1e-9))
        ax.set_title(title, fontsize=8)
    fig.suptitle(f"first-layer attention (query rows, key columns), mean over the probe batch, seed {seed}", fontsize=9)
    return _save(fig, run_dir, "spt_attention_maps")


def make_figures(run_dir: str | Path) -> list[Path]:
    """Draw every figure from the saved run in ``run_dir``; returns the written paths.

    Raises:
        FileNotFoundError: ``run_dir/metrics.json`` is missing.
    """
    run_dir = Path(run_dir)
    metrics = _load(run_dir)
    paths: list[Path] = []
    for f in (accuracy_figure, proximity_accuracy_figure, training_curves_figure, attention_maps_figure):
        paths += f(run_dir, metrics)
    return paths


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    ap = argparse.ArgumentParser(prog=prog or "python -m initlab.paper_figs.spt_figures", description=__doc__.split("\n\n")[0])
    ap.add_argument("results_dir", type=Path, help="folder written by initlab synthetic spt")
    args = ap.parse_args(argv)
    try:
        for p in make_figures(args.results_dir):
            print(p)
    except FileNotFoundError as err:
        ap.error(str(err))
    except KeyError as err:  # a results folder of another kind of run
        ap.error(f"{args.results_dir}: not a folder written by `initlab synthetic spt` (missing entry {err})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
