"""Figures of the synthetic SPT experiments, drawn only from a saved run folder (no training here).

    python -m initlab.paper_figs.spt_figures RESULTS_DIR      # e.g. results/synthetic_spt/default

Reads ``RESULTS_DIR/metrics.json`` and ``RESULTS_DIR/maps/*.npz`` (written by
:func:`initlab.synthetic.spt.run`) and writes, as PNG and PDF into ``RESULTS_DIR``:

* ``spt_attention_maps``  -- first-layer attention (mean over the probe batch, head 0) over training,
  masked reconstruction (SPT) vs label supervision from scratch;
* ``spt_accuracy``        -- test accuracy per condition, mean ± std over seeds, seeds as dots;
* ``spt_proximity``       -- proximity mass over fine-tuning epochs per condition, and over SPT epochs;
* ``spt_kernel``          -- the positional kernel P P^T beside the learned mean scores.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["make_figures", "attention_maps_figure", "accuracy_figure", "proximity_figure", "kernel_figure", "main"]


def _save(fig, out: Path, name: str) -> list[Path]:
    from initlab.runs import atomic_write_bytes
    import io

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
        raise FileNotFoundError(f"{p}: no metrics.json; pass the folder written by `initlab synthetic run`")
    return json.loads(p.read_text())


def _npz(run_dir: Path, name: str) -> dict[str, np.ndarray] | None:
    p = run_dir / "maps" / f"{name}.npz"
    if not p.exists():
        return None
    with np.load(p) as z:
        return {k: z[k] for k in z.files}


def _epochs(maps: dict[str, np.ndarray]) -> list[int]:
    return sorted(int(k.split("ep")[1]) for k in maps if k.startswith("attn_ep"))


def _pick(eps: list[int], n: int) -> list[int]:
    if len(eps) <= n:
        return eps
    idx = np.unique(np.round(np.linspace(0, len(eps) - 1, n)).astype(int))
    return [eps[i] for i in idx]


def attention_maps_figure(run_dir: Path, metrics: dict) -> list[Path]:
    seed = metrics["config"]["map_seed"]
    spt = _npz(run_dir, f"spt_local_d1_seed{seed}")
    sup = _npz(run_dir, f"ft_scratch_seed{seed}")
    rows = [("SPT (masked reconstruction)", spt, "SPT epoch"), ("supervised from scratch", sup, "epoch")]
    rows = [r for r in rows if r[1] is not None]
    if not rows:
        return []
    ncol = 4
    fig, axes = plt.subplots(len(rows), ncol, figsize=(3.0 * ncol, 3.0 * len(rows)), squeeze=False)
    for r, (title, maps, unit) in enumerate(rows):
        eps = _pick(_epochs(maps), ncol)
        for c in range(ncol):
            ax = axes[r, c]
            ax.set_xticks([])
            ax.set_yticks([])
            if c >= len(eps):
                ax.axis("off")
                continue
            A = maps[f"attn_ep{eps[c]}"]
            ax.imshow(A, cmap="viridis", vmin=0, vmax=max(float(A.max()), 1e-9))
            ax.set_title(f"{unit} {eps[c]}", fontsize=9)
            if c == 0:
                ax.set_ylabel(f"{title}\nquery i", fontsize=9)
    fig.suptitle(f"first-layer attention, mean over probe batch (seed {seed})", fontsize=10)
    return _save(fig, run_dir, "spt_attention_maps")


def accuracy_figure(run_dir: Path, metrics: dict) -> list[Path]:
    rows = metrics["summary"]["conditions"]
    if not rows:
        return []
    cells = [c for c in metrics["cells"].values() if c.get("kind") == "finetune"]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(rows) + 2), 3.6))
    x = np.arange(len(rows))
    means = [100 * r["test_acc_mean"] for r in rows]
    stds = [100 * r["test_acc_std"] for r in rows]
    colors = ["tab:gray" if r["spt"] == "-" else "tab:blue" for r in rows]
    ax.bar(x, means, yerr=stds, color=colors, alpha=0.7, capsize=3)
    for i, r in enumerate(rows):
        accs = [100 * c["test_acc"] for c in cells if c["condition"] == r["condition"]]
        ax.scatter(np.full(len(accs), i) + np.linspace(-0.15, 0.15, len(accs)), accs, s=8, color="k", zorder=3)
    ax.axhline(50, color="r", lw=0.8, ls="--", label="chance")
    ax.set_xticks(x, [r["condition"] for r in rows], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(40, 100)
    ax.set_title("local task: accuracy per condition (grey: no SPT, blue: from an SPT checkpoint)", fontsize=9)
    ax.legend(fontsize=8)
    return _save(fig, run_dir, "spt_accuracy")


def proximity_figure(run_dir: Path, metrics: dict) -> list[Path]:
    cells = list(metrics["cells"].values())
    cfg = metrics["config"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
    conds = [r["condition"] for r in metrics["summary"]["conditions"]]
    for name in [c for c in ("scratch", "spt", "spt_e50", "frozen_attn", "hybrid_qk", "hybrid_qkvo", "hybrid_ffn", "cross_count", "cross_iid") if c in conds]:
        hs = [c["history"] for c in cells if c.get("kind") == "finetune" and c["condition"] == name]
        steps = np.array([h["step"] for h in hs[0]])
        prox = np.array([[h["prox"] for h in hist] for hist in hs])
        a1.plot(steps, prox.mean(0), label=name)
        if len(hs) > 1:
            a1.fill_between(steps, prox.mean(0) - prox.std(0), prox.mean(0) + prox.std(0), alpha=0.15)
    from initlab.nn.attention_metrics import uniform_proximity_mass

    uni = uniform_proximity_mass(cfg["task"]["T"], cfg["proximity_w"])
    a1.axhline(uni, color="k", ls=":", lw=0.8, label="uniform")
    a1.set_xlabel("fine-tuning step")
    a1.set_ylabel(f"proximity mass (|i-j| <= {cfg['proximity_w']})")
    a1.set_title("during label training", fontsize=9)
    a1.legend(fontsize=7, ncol=2)
    for src in ("local", "count", "iid"):
        hs = [c["history"] for c in cells if c.get("kind") == "spt" and c["source"] == src and c["depth"] == 1]
        if not hs:
            continue
        n = min(len(h) for h in hs)
        prox = np.array([[h["prox"] for h in hist[:n]] for hist in hs])
        a2.plot(np.arange(n), prox.mean(0), label=f"SPT on {src} inputs")
    a2.axhline(uni, color="k", ls=":", lw=0.8, label="uniform")
    a2.set_xlabel("SPT epoch")
    a2.set_title("during masked reconstruction (depth 1)", fontsize=9)
    a2.legend(fontsize=7)
    return _save(fig, run_dir, "spt_proximity")


def kernel_figure(run_dir: Path, metrics: dict) -> list[Path]:
    from initlab.nn.encoder import sinusoidal_table

    cfg = metrics["config"]
    seed = cfg["map_seed"]
    T, d = cfg["task"]["T"], cfg["d_model"]
    P = sinusoidal_table(T, d).numpy()
    panels = [("positional kernel P P^T", P @ P.T)]
    spt = _npz(run_dir, f"spt_local_d1_seed{seed}")
    sup = _npz(run_dir, f"ft_scratch_seed{seed}")
    if spt is not None:
        eps = _epochs(spt)
        panels.append(("mean scores S at init", spt["scores_ep0"]))
        for e in sorted({cfg["spt_epochs"] if cfg["spt_epochs"] in eps else eps[-1], eps[-1]}):
            panels.append((f"after SPT ({e} epochs)", spt[f"scores_ep{e}"]))
    if sup is not None:
        e = _epochs(sup)[-1]
        panels.append((f"after supervised ({e} epochs)", sup[f"scores_ep{e}"]))
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.2), squeeze=False)
    for ax, (title, M) in zip(axes[0], panels):
        Mc = M - M.mean(axis=-1, keepdims=True)
        v = float(np.abs(Mc).max()) or 1.0
        ax.imshow(Mc, cmap="RdBu_r", vmin=-v, vmax=v)
        ax.set_title(title + "\n(row-centred)", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    return _save(fig, run_dir, "spt_kernel")


def make_figures(run_dir: str | Path) -> list[Path]:
    """Draw every figure from the saved run in ``run_dir``; returns the written paths.

    Raises:
        FileNotFoundError: ``run_dir/metrics.json`` is missing.
    """
    run_dir = Path(run_dir)
    metrics = _load(run_dir)
    paths: list[Path] = []
    for f in (attention_maps_figure, accuracy_figure, proximity_figure, kernel_figure):
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
        ap.error(f"{args.results_dir}: not a folder written by `initlab synthetic run` (missing entry {err})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
