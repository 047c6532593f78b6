"""``initlab reproduce``: the CPU reproduction of both phenomena, one report.

The stages (theory, spt, score_scale, splade, splade_in_domain; optional lra_listops) are run by
:mod:`initlab.app.stages`; ``--preset`` names a run file of ``initlab/app/runs/`` (quick, default, full) or gives the path
of one: the size every stage runs at and the stages it skips.
Each writes into ``OUT/<stage>/``; a finished stage (its folder holds ``DONE``) is not redone, so an
interrupted ``initlab reproduce`` resumes where it stopped; a finished one (every requested stage done, its report
written) is refused unless ``--overwrite``. ``OUT/report.md`` collects the stages'
summaries, every figure the stages drew, the warnings they raised, and each stage's wall time, CPU seconds and
cores used. The expected duration is printed first (the stages' cost models times this machine's measured
speed), and the verdicts last, one line per claim. ``--workers`` (default: one per core) and ``--scheduler`` go to every stage's cells.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from initlab.experiment.options import add_executor_options, add_preset_option, fail, preset_config
from initlab.runs import RunExistsError, check_output_path
from initlab.app.stages import OPTIONAL_STAGES, RUNS, run_reproduce

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog or "initlab reproduce", description="The CPU reproduction of both phenomena, one report.")
    parser.add_argument("--out", type=Path, default=Path("results/reproduce"), help="output folder (default: results/reproduce)")
    add_preset_option(parser, RUNS, "default", "the run: the size every stage runs at and the stages it skips (quick: "
                      "smoke test; default: the CPU reproduction; full: larger grids and more seeds, still CPU)")
    parser.add_argument("--only", default=None, help="comma-separated stages (default: the preset's: "
                        + "; ".join(f"{p} {','.join(RUNS[p].stages())}" for p in RUNS.named())
                        + f"; optional: {','.join(OPTIONAL_STAGES)})")
    parser.add_argument("--overwrite", action="store_true", help="redo finished stages (old folders are moved aside); without it a finished run is refused")
    add_executor_options(parser)
    args = parser.parse_args(argv)
    preset_config(parser, RUNS, args.preset)  # a bad run file: one line, exit 2, before the report folder is made
    stages = None if args.only is None else [s.strip() for s in args.only.split(",") if s.strip()]
    try:
        # the report folder itself is never "finished": each stage folder is (its DONE), checked by the stage
        check_output_path(args.out, flag="--out", kind="folder", overwrite=True)
        run_reproduce(args.out, args.preset, stages, args.overwrite, workers=args.workers, scheduler=args.scheduler)
    except (ValueError, RunExistsError, ImportError) as err:
        fail(parser, err)
    return 0
