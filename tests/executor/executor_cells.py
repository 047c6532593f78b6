"""Cell functions for tests/executor/test_executor.py, importable by name in worker processes (the tests put this folder
on PYTHONPATH). Each is a real cell: it writes into the run folder, reports progress and returns JSON."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from initlab.runs import NonFiniteError, atomic_write_json


def square(root, name, args, progress):
    """x**2 and a seeded torch draw (the same in every process with one thread); reports ``units`` advances."""
    for _ in range(int(args.get("units", 1))):
        progress.advance(1)
        if args.get("sleep"):
            import time

            time.sleep(float(args["sleep"]))
    g = torch.Generator().manual_seed(int(args["x"]))
    w = torch.randn(16, 16, generator=g)
    return {"x": args["x"], "square": args["x"] ** 2, "draw": float((w @ w.T).trace()), "threads": torch.get_num_threads(),
            "deterministic": torch.are_deterministic_algorithms_enabled()}


def uses(root, name, args, progress):
    """Reads the results of the cells it needs from the run folder (so it must run after them)."""
    got = [json.loads((Path(root) / "cells" / f"{n}.json").read_text())["square"] for n in args["needs"]]
    return {"sum": sum(got)}


def receives(root, name, args, progress):
    """Sums the ``square`` of the results the executor hands it in ``args["a"]`` and ``args["b"]`` (reads no file)."""
    return {"sum": args["a"]["square"] + args["b"]["square"], "args": sorted(args)}


def diverge(root, name, args, progress):
    raise NonFiniteError("test loop", 3, "loss", float("nan"), last_checkpoint="ckpt/x")


def grows(root, name, args, progress):
    from initlab.runs import DivergenceError

    raise DivergenceError("test loop", 5, 2.0e5, 0.7, 1e4)


def broken(root, name, args, progress):
    raise RuntimeError("broken cell")


def writes_artifact(root, name, args, progress):
    """Writes ``artifact/<name>.txt`` (a stand-in checkpoint) and counts its runs in ``runs.txt`` beside it."""
    folder = Path(root) / "artifact"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.txt").write_text(str(args["x"]))
    with open(Path(root) / "runs.txt", "a") as f:
        f.write(name + "\n")
    return {"x": args["x"]}


def reads_artifact(root, name, args, progress):
    """Reads the artifact of the cell it needs (fails if it is missing) and records its own run."""
    with open(Path(root) / "runs.txt", "a") as f:
        f.write(name + "\n")
    return {"read": (Path(root) / "artifact" / f"{args['of']}.txt").read_text()}


def exit_worker(root, name, args, progress):
    """Ends the worker process that runs it, as a machine taken away or a killed worker would (no result)."""
    import os

    os._exit(3)
