"""A torch-free demo sweep for the Ctrl-C test of tests/executor/test_executor.py (its workers start in about a second):
cells of slow epochs with a per-epoch checkpoint, and a command that runs them in 2 worker processes."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from initlab.runs import atomic_write_json


def epochs(root, name, args, progress):
    """``epochs`` slow epochs with a per-epoch checkpoint: a rerun resumes after the last finished epoch."""
    ckpt = Path(root) / "ckpt" / f"{name}.json"
    done = json.loads(ckpt.read_text())["epoch"] if ckpt.exists() else 0
    progress.start(done, args["epochs"])
    hold = Path(root) / "HOLD"  # the SIGINT test: each cell waits after epoch 2 while this file exists
    for e in range(done, args["epochs"]):
        time.sleep(args.get("sleep", 0.2))
        atomic_write_json(ckpt, {"epoch": e + 1})
        progress.advance(1)
        while e + 1 == 2 and hold.exists():  # mid-cell until interrupted: no race with the cell's end
            time.sleep(0.05)
    return {"epochs": args["epochs"], "resumed_from": done, "pid": os.getpid()}


def demo_sweep_main(argv, prog=None):
    """A command (registered by the SIGINT test's driver in initlab.app.cli.COMMANDS): 4 cells of 6 slow epochs in 2
    worker processes, resumable."""
    from initlab.executor import Cell, run_cells
    from initlab.runs import RunDir

    rd = RunDir(argv[0], resume=True)
    cells = [Cell(f"e{i}", "executor_sweep:epochs", {"epochs": 6, "sleep": 0.4}, key={"i": i}, units=6, unit_seconds=0.4)
             for i in range(4)]
    run_cells(rd, cells, workers=2, progress=True, desc="demo")
    return 0
