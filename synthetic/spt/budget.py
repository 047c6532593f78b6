"""The fine-tuning budget rule of the synthetic SPT experiments (exploratory seeds only).

Rule (fixed before the confirmatory run): train the ``scratch`` condition (label training from a random
init) on the exploratory seeds for ``max_epochs`` epochs and record the running training accuracy per
epoch, averaged over seeds. Smooth it with a centred-trailing 5-epoch moving average ``a(e)``. The
*plateau epoch* is the first epoch ``e >= window + lag`` with ``a(e) - a(e - lag) < min_gain`` (defaults:
lag 10 epochs, gain below 1 percentage point). The fine-tuning budget is the plateau epoch rounded up to
a multiple of 10. Test accuracy plays no part; validation accuracy plays no part either (it selects the
reported epoch inside that budget, see :mod:`initlab.synthetic.spt.ensemble`).

    python -m initlab.synthetic.spt.budget --out results/synthetic_spt/budget_exploratory [--epochs 100]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Sequence

import numpy as np

__all__ = ["moving_average", "plateau_epoch", "budget_from_curve", "main"]


def moving_average(curve: Sequence[float], window: int = 5) -> np.ndarray:
    """Trailing moving average: ``out[e] = mean(curve[max(0, e - window + 1) : e + 1])``."""
    c = np.asarray(curve, dtype=float)
    return np.array([c[max(0, e - window + 1) : e + 1].mean() for e in range(len(c))])


def plateau_epoch(curve: Sequence[float], lag: int = 10, min_gain: float = 0.01, window: int = 5) -> int | None:
    """First epoch ``e`` (``curve[e]`` = mean train accuracy after epoch e, ``curve[0]`` unused, may be NaN)
    with ``a(e) - a(e - lag) < min_gain`` on the moving average ``a`` of epochs 1..; None if none."""
    c = np.asarray(curve, dtype=float)[1:]  # epochs 1..E
    a = moving_average(c, window)
    for i in range(window - 1 + lag, len(a)):
        if a[i] - a[i - lag] < min_gain:
            return i + 1
    return None


def budget_from_curve(curve: Sequence[float], max_epochs: int, **kw) -> tuple[int, int | None]:
    """``(budget, plateau)``: the plateau epoch rounded up to a multiple of 10 (``max_epochs`` if none)."""
    p = plateau_epoch(curve, **kw)
    return (max_epochs if p is None else min(max_epochs, 10 * math.ceil(p / 10))), p


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    from initlab.config import derive
    from initlab.runs import RunDir, torch_threads
    from initlab.synthetic import spt

    ap = argparse.ArgumentParser(description="fine-tuning budget rule: scratch train-accuracy curve on the exploratory seeds")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--seeds", default="0,1,2,3,4", help="exploratory seeds (default 0,1,2,3,4)")
    args = ap.parse_args(argv)
    seeds = tuple(int(s) for s in args.seeds.split(","))
    cfg = derive(spt.PRESETS["default"], seeds=seeds, finetune_epochs=args.epochs, conditions=("scratch",))
    rd = RunDir(args.out, config=cfg)
    with torch_threads(1):
        torch.use_deterministic_algorithms(True, warn_only=True)
        res = spt.finetune_condition(cfg, "scratch", rd, progress=True)
    curve = np.mean([[h["train_acc"] for h in r["history"]] for r in res], axis=0)
    budget, plateau = budget_from_curve(curve, args.epochs)
    rows = [{"epoch": e, "train_acc_mean": float(curve[e]),
             "val_acc_mean": float(np.mean([r["history"][e]["val_acc"] for r in res]))} for e in range(len(curve))]
    rd.write_csv("scratch_curve.csv", rows)
    rd.write_json("budget.json", {"seeds": list(seeds), "label": "exploratory", "epochs_run": args.epochs,
                                  "plateau_epoch": plateau, "finetune_epochs": budget, "curve": rows})
    print(f"plateau epoch {plateau}; fine-tuning budget {budget} epochs (exploratory seeds {seeds})")
    rd.mark_done()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
