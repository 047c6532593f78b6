"""The preregistered CPU ListOps experiment: self-pretraining vs from scratch under the plateau rule.

Rule, seeds and thresholds were committed (``docs/lra.md``, this module, and the preset
:data:`~initlab.realdata.lra.config.LISTOPS_PLATEAU`) before the confirmatory run:

* data: ListOps from LRA's generator (2000 / 1000 / 1000 trees, lengths 10-60, data seed 1);
* model: 2 layers, d = 64, 4 heads, d_ff = 128, AdamW lr 1e-3, 50 warm-up steps, batch 32;
* SPT (masked, 10 % of tokens): until the validation loss has not improved by 0.5 % for 5 epochs
  (cap 100 epochs); the best-validation checkpoint initialises fine-tuning;
* fine-tuning: until validation accuracy has not improved for 8 epochs (cap 50); test accuracy is read
  at the best validation epoch; attention metrics of the initial model (proximity mass, first layer,
  ``|i - j| <= 2``) on the first 64 validation sequences;
* seeds 10, 11, 12 (fresh), SPT and scratch paired by seed;
* verdicts (:func:`verdict`): "SPT gain" when the paired mean difference is >= +2.0 points and SPT wins
  on every seed; "SPT loss" when <= -2.0 points and SPT loses on every seed; otherwise "no difference
  detected". Proximity bias "formed" when SPT's mean first-layer proximity mass at fine-tuning start is
  >= 2 x the uniform baseline and >= 1.5 x scratch's.

``run_listops_plateau(out)`` runs the SPT-vs-scratch sweep (:func:`initlab.realdata.lra.sweep.run_sweep`,
resumable cells) and writes ``summary.md`` and ``summary.json`` beside its results.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Sequence

from initlab.runs import atomic_write_json, atomic_write_text

__all__ = ["GAIN_POINTS", "PROX_UNIFORM_FACTOR", "PROX_SCRATCH_FACTOR", "verdict", "summarise", "run_listops_plateau",
           "summary_markdown", "expected_seconds"]

GAIN_POINTS = 2.0  # percentage points of test accuracy, paired mean over seeds
PROX_UNIFORM_FACTOR = 2.0  # SPT proximity mass at fine-tuning start vs the uniform-attention baseline
PROX_SCRATCH_FACTOR = 1.5  # ... and vs scratch's


def verdict(spt_acc: Sequence[float], scratch_acc: Sequence[float]) -> str:
    """The preregistered accuracy verdict from per-seed test accuracies (fractions, paired by seed)."""
    diffs = [100.0 * (a - b) for a, b in zip(spt_acc, scratch_acc)]
    if not diffs:
        raise ValueError("spt_acc/scratch_acc: expected at least one paired seed")
    mean = statistics.fmean(diffs)
    if mean >= GAIN_POINTS and all(d > 0 for d in diffs):
        return "SPT gain"
    if mean <= -GAIN_POINTS and all(d < 0 for d in diffs):
        return "SPT loss"
    return "no difference detected"


def summarise(rows: list[dict]) -> dict:
    """Paired per-seed table, means, the accuracy verdict and the proximity verdict from sweep rows."""
    ok = [r for r in rows if not r.get("failed")]
    by = {(r["condition"], r["seed"]): r for r in ok}
    seeds = sorted({r["seed"] for r in ok if ("spt", r["seed"]) in by and ("scratch", r["seed"]) in by})
    spt = [by["spt", s] for s in seeds]
    scr = [by["scratch", s] for s in seeds]
    out = {"seeds": seeds, "failed_cells": [f"{r['condition']}-seed{r['seed']}" for r in rows if r.get("failed")],
           "per_seed": [{"seed": s, "spt_test_acc": a["test_acc"], "scratch_test_acc": b["test_acc"],
                         "spt_epochs_run": a.get("spt_epochs_run"), "spt_best_epoch": a.get("spt_best_epoch"),
                         "spt_ft_best_epoch": a["best_epoch"], "scratch_best_epoch": b["best_epoch"],
                         "prox_init_spt": a.get("prox_first_init"), "prox_init_scratch": b.get("prox_first_init"),
                         "uniform_proximity": a.get("uniform_proximity")} for s, a, b in zip(seeds, spt, scr)]}
    if not seeds:
        out["verdict"] = "no paired seeds finished"
        return out
    out["spt_mean"] = statistics.fmean(r["test_acc"] for r in spt)
    out["scratch_mean"] = statistics.fmean(r["test_acc"] for r in scr)
    out["mean_diff_points"] = 100.0 * (out["spt_mean"] - out["scratch_mean"])
    out["verdict"] = verdict([r["test_acc"] for r in spt], [r["test_acc"] for r in scr])
    prox = [(r.get("prox_first_init"), q.get("prox_first_init"), r.get("uniform_proximity")) for r, q in zip(spt, scr)]
    if all(p is not None for t in prox for p in t):
        ps, pc, pu = (statistics.fmean(t[i] for t in prox) for i in range(3))
        out.update(prox_init_spt_mean=ps, prox_init_scratch_mean=pc, uniform_proximity_mean=pu)
        formed = ps >= PROX_UNIFORM_FACTOR * pu and ps >= PROX_SCRATCH_FACTOR * pc
        out["proximity_verdict"] = "proximity bias formed" if formed else "no proximity bias at fine-tuning start"
    return out


def summary_markdown(summary: dict, seconds: float | None) -> str:
    lines = ["## CPU ListOps under the plateau rule: SPT vs from scratch", "",
             "| seed | SPT test acc | scratch test acc | SPT epochs run | prox. mass at FT start (SPT / scratch / uniform) |",
             "| --- | --- | --- | --- | --- |"]
    for r in summary["per_seed"]:
        p = "n/a" if r["prox_init_spt"] is None else (f"{r['prox_init_spt']:.3f} / {r['prox_init_scratch']:.3f} / "
                                                        f"{r['uniform_proximity']:.3f}")
        lines.append(f"| {r['seed']} | {r['spt_test_acc']:.3f} | {r['scratch_test_acc']:.3f} | {r['spt_epochs_run']} | {p} |")
    if "spt_mean" in summary:
        lines += ["", f"Mean test accuracy: SPT {summary['spt_mean']:.3f}, scratch {summary['scratch_mean']:.3f} "
                      f"(paired difference {summary['mean_diff_points']:+.1f} points). Verdict: **{summary['verdict']}**."]
    if "proximity_verdict" in summary:
        lines.append(f"Proximity: **{summary['proximity_verdict']}**.")
    if summary["failed_cells"]:
        lines.append(f"Failed cells (non-finite loss or gradient): {', '.join(summary['failed_cells'])}.")
    if seconds is not None:
        lines.append(f"Wall time of this call: {seconds:.0f} s.")
    return "\n".join(lines) + "\n"


#: seconds of the whole run on the reference machine: the toy preset (``initlab reproduce --preset quick``), else the
#: preregistered CPU ListOps run ("about 8 CPU-minutes", docs/lra.md)
EXPECTED_SECONDS = {"toy": 30.0, "preregistered": 480.0}


def expected_seconds(out: str | Path, toy: bool = False) -> tuple[float, float]:
    """``(expected, at most)`` reference seconds of the run still to do in ``out`` (0 when finished: ``DONE``)."""
    t = 0.0 if (Path(out) / "DONE").exists() else EXPECTED_SECONDS["toy" if toy else "preregistered"]
    return (t, t)


def run_listops_plateau(out: str | Path, seeds: Sequence[int] | None = None, *, overwrite: bool = False,
                        progress: bool = False, preset: str = "cpu-listops-plateau") -> dict:
    """Run (or resume) the experiment into ``out``; returns the summary (also ``summary.json``/``summary.md``).

    ``preset`` ``toy`` with the same rule is for tests. Raises what :func:`run_sweep` raises.
    """
    from initlab.realdata.lra.config import LISTOPS_PLATEAU_SEEDS, get_preset
    from initlab.realdata.lra.sweep import run_sweep

    seeds = tuple(LISTOPS_PLATEAU_SEEDS if seeds is None else seeds)
    t0 = time.perf_counter()
    rows = run_sweep("spt-vs-scratch", get_preset(preset), out, seeds, overwrite=overwrite, progress=progress)
    seconds = time.perf_counter() - t0
    summary = summarise(rows)
    summary.update(preset=preset, seconds_this_call=seconds)
    atomic_write_json(Path(out) / "summary.json", summary)
    atomic_write_text(Path(out) / "summary.md", summary_markdown(summary, seconds))
    if summary.get("per_seed"):
        from initlab.paper_figs.lra_figures import plot_listops_plateau

        plot_listops_plateau(summary, Path(out) / "listops_plateau.png")
    return summary
