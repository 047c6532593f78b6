"""``initlab synthetic spt`` (and its former name ``initlab synthetic run``): a thin argparse layer over
:mod:`initlab.synthetic.spt`.

``initlab synthetic run`` is the former name of ``initlab synthetic spt``, kept for one release.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

from initlab.experiment.options import add_executor_options, fail, preset_name, preset_parser
from initlab.paper_figs import spt_figures
from initlab.runs import NonFiniteError, RunExistsError, check_input_path, check_output_path
from initlab.synthetic import spt as synthetic_spt
from initlab.synthetic.spt.config import PRESETS
from initlab.synthetic.spt.runner import partial_report, run

__all__ = ["spt_main", "run_main"]


def spt_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    parser = preset_parser(prog or "initlab synthetic spt", synthetic_spt.__doc__.split("\n\n")[0], PRESETS,
                            "default", "the run (quick: smoke test; default: what initlab reproduce runs; full: the "
                            "preregistered confirmatory run; causal, causal-tuned: the causal round's preregistered runs)",
                            "output folder (default: results/synthetic_spt/<preset>)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_executor_options(parser, scheduler=True)
    parser.add_argument("--partial-report", action="store_true",
                        help="only write report_partial.md from the cells an unfinished run has finished (trains nothing)")
    args = parser.parse_args(argv)
    out = args.out or Path("results/synthetic_spt") / preset_name(args.preset)
    try:  # a bad run file or path is one line and exit 2, before anything is written
        cfg = PRESETS.resolve(args.preset)
        if args.partial_report:  # a report of a run that exists: never a fresh folder with an empty report
            check_input_path(out, flag="--out", kind="folder", what="the folder of an unfinished initlab synthetic spt run")
            print(partial_report(cfg, out))
            return 0
        check_output_path(out, flag="--out", kind="folder", overwrite=args.overwrite)
        md = run(cfg, out, overwrite=args.overwrite, progress=not args.no_progress, workers=args.workers,
                 scheduler=args.scheduler, draw=spt_figures.make_figures)
    except NonFiniteError as err:  # training diverged: no DONE was written; say so without a traceback
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 1
    except (ValueError, RunExistsError) as err:  # RunFileError is a ValueError
        fail(parser, err)
    print(md)
    print(f"results: {out}")
    return 0


def run_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Deprecated alias of :func:`spt_main` (``initlab synthetic run``); kept for one release."""
    print("initlab synthetic run: deprecated, use `initlab synthetic spt` (same options); `run` will be removed "
          "in the next release", file=sys.stderr)
    return spt_main(argv, prog="initlab synthetic spt")
