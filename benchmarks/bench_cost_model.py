"""Benchmark: the cost models behind ``initlab reproduce``'s expected duration (CPU seconds per work unit).

Runs the cells of the chosen stages in this process, one torch thread, into a temporary folder, through
:func:`initlab.executor.run_cells`, and prints for each kind of cell its CPU seconds per unit: the numbers
``initlab.theorycheck.verify.experiment.THEORY_SECONDS``, ``initlab.synthetic.splade.phase.runner.STEP_SECONDS`` /
``MLM_STEP_SECONDS``, ``initlab.theorycheck.score_scale.experiment.CELL_SECONDS`` and
``initlab.synthetic.spt.runner.REFERENCE_EPOCH_SECONDS`` (``--stages spt``: a few epochs of SPT and of fine-tuning
per model shape, CPU seconds per epoch) hold. CPU seconds, not wall seconds:
on shared cores the wall time of a cell depends on the load, its CPU time much less. Also prints
:func:`initlab.executor.measure_speed` (the fastest and the median repetition) before and after, and the
load average.

Usage: ``python benchmarks/bench_cost_model.py --preset default --stages theory`` or
``--preset quick --stages splade,score_scale``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path


def speed_line() -> str:
    from initlab.executor import measure_speed

    return (f"measure_speed: fastest {measure_speed(2.0, raw='fastest'):.4f} s, median {measure_speed(2.0, raw=True):.4f} s; "
            f"load average {os.getloadavg()[0]:.1f}")


def bench_theory(preset: str, tmp: Path) -> None:
    from initlab.executor import run_cells
    from initlab.runs import RunDir
    from initlab.theorycheck.verify import runner as verify
    from initlab.theorycheck.verify import experiment as theory_stage

    cfg = verify.PRESETS[preset]
    cells = theory_stage.cells(cfg)
    rep = run_cells(RunDir(tmp / "theory"), cells, workers=1, progress=False)
    print(f"theory ({preset}: {cfg.cases} cases, symbolic {cfg.symbolic}): CPU s per statement (derivation, checks "
          "scaled to 20 cases), from the wall split the cell recorded")
    for c in cells:
        r = RunDir(tmp / "theory").load_cell(c.name)
        cpu, wall = rep.cell_cpu_seconds[c.name], r["seconds_symbolic"] + r["seconds_checks"]
        share = cpu / wall if wall > 0 else 1.0
        print(f"  {r['statement']:<4} cpu {cpu:7.2f}  symbolic {r['seconds_symbolic'] * share:7.2f}  "
              f"checks@20 {r['seconds_checks'] * share * 20 / cfg.cases:6.2f}")


def bench_splade(preset: str, tmp: Path) -> None:
    from initlab.executor import run_cells
    from initlab.runs import RunDir
    from initlab.synthetic.splade.phase import runner

    cells = runner.plan(runner.PRESETS[preset])
    rep = run_cells(RunDir(tmp / "splade"), cells, workers=1, progress=False)
    per: dict[str, list[float]] = defaultdict(list)
    for c in cells:
        kind = c.name.split("_")[0] if c.name.split("_")[0] in ("pretrain", "inspect") else "train"
        family = c.args.get("family") or c.args["spec"]["family"]
        per[f"{kind} {family}"].append(rep.cell_cpu_seconds[c.name] / max(c.units, 1))
    print(f"synthetic SPLADE ({preset}): CPU s per unit (training / MLM step; inspect: per cell)")
    for k, v in sorted(per.items()):
        print(f"  {k:<20} median {statistics.median(v):.4f}  ({len(v)} cells)")


def bench_score_scale(preset: str, tmp: Path) -> None:
    from initlab.theorycheck.score_scale import experiment as score_scale_experiment
    from initlab.theorycheck.score_scale import stage

    cfg = score_scale_experiment.PRESETS[preset]
    c0 = time.process_time()
    stage.score_scale_stage(tmp / "score_scale", preset, workers=1)
    n = len(cfg.sigmas) * len(cfg.ks)
    print(f"score_scale ({preset}): {(time.process_time() - c0) / n:.3f} CPU s per cell ({n} cells, figure included)")


def bench_spt(preset: str, tmp: Path, epochs: int = 4) -> None:
    import torch

    from initlab.runs import torch_threads
    from initlab.synthetic import spt
    from initlab.synthetic.spt import runner, training
    from initlab.synthetic.spt.cells import fresh_model, seed_data, spt_inputs
    from initlab.synthetic.spt.tasks import MASK_ID

    cfg = spt.PRESETS["explore" if preset == "quick" else preset]
    d = seed_data(cfg, 0)
    x, xv = spt_inputs(cfg, "local", 0)
    print(f"spt: CPU s per epoch ({epochs} epochs after one warm-up epoch; n_train {cfg.n_train}, n_val {cfg.n_val}); "
          "the table in initlab.synthetic.spt.runner beside it")
    with torch_threads(1):
        for kind, variant, depth in sorted(runner.REFERENCE_EPOCH_SECONDS):
            def once(n: int) -> float:
                m = fresh_model(cfg, depth, variant, 0)
                c0 = time.process_time()
                if kind == "finetune":
                    training.finetune(m, d, torch.Generator().manual_seed(1), lr=cfg.lr, weight_decay=0.0,
                                      batch_size=cfg.batch_size, max_epochs=n, patience=0)
                else:
                    training.pretrain(m, x, xv, torch.Generator().manual_seed(1), 5, lr=cfg.lr, weight_decay=0.0,
                                      batch_size=cfg.batch_size, mask_rate=cfg.mask_rate, mask_id=MASK_ID, window=10 ** 6,
                                      min_rel=0.0, max_epochs=n)
                return time.process_time() - c0
            once(1)
            per = (once(epochs + 1) - once(1)) / epochs  # the fixed per-cell cost (test passes) cancels
            print(f"  {kind:<8} {variant:<9} depth {depth}: {per:6.3f} s/epoch   table {runner.REFERENCE_EPOCH_SECONDS[(kind, variant, depth)]:.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="quick", choices=("quick", "default", "full"))
    p.add_argument("--stages", default="theory,splade,score_scale", help="comma-separated: theory, splade, score_scale, spt")
    args = p.parse_args()
    print(speed_line(), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.stages.split(","):
            {"theory": bench_theory, "splade": bench_splade, "score_scale": bench_score_scale, "spt": bench_spt}[name](
                args.preset, Path(tmp))
    print(speed_line(), flush=True)


if __name__ == "__main__":
    main()
