"""``initlab synthetic spt|splade|splade-ood``: thin argparse layers over :mod:`initlab.synthetic`.

``initlab synthetic run`` is the former name of ``initlab synthetic spt``, kept for one release.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from initlab.app.commands import add_executor_options, fail, int_at_least
from initlab.executor import default_workers
from initlab.paper_figs import spt_figures, synthetic_splade_phase_figures
from initlab.runs import NonFiniteError, RunExistsError, check_input_path, check_output_path
from initlab.synthetic.splade.phase import runner as splade_phase
from initlab.synthetic import spt as synthetic_spt
from initlab.textio import read_text

__all__ = ["spt_main", "run_main", "splade_main", "splade_ood_main"]

T = TypeVar("T")


def _preset_parser(prog: str, description: str, presets: Sequence[str], default: str, preset_help: str,
                   out_help: str) -> argparse.ArgumentParser:
    """The options every synthetic sweep opens with: ``--preset``, ``--out`` and ``--overwrite``."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--preset", choices=list(presets), default=default, help=preset_help)
    parser.add_argument("--out", type=Path, default=None, help=out_help)
    parser.add_argument("--overwrite", action="store_true", help="redo a finished run (the old folder is moved aside)")
    return parser


def _checked_run(parser: argparse.ArgumentParser, out: Path, overwrite: bool, run: Callable[[], T],
                 errors: tuple[type[BaseException], ...]) -> T:
    """``run()`` after checking ``--out``; an error of ``errors`` is one line on stderr and exit 2 (:func:`fail`)."""
    try:
        check_output_path(out, flag="--out", kind="folder", overwrite=overwrite)
        return run()
    except errors as err:
        fail(parser, err)


def spt_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    parser = _preset_parser(prog or "initlab synthetic spt", synthetic_spt.__doc__.split("\n\n")[0], synthetic_spt.PRESETS,
                            "default", "experiment size (default: default)",
                            "output folder (default: results/synthetic_spt/<preset>)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_executor_options(parser, scheduler=True)
    parser.add_argument("--partial-report", action="store_true",
                        help="only write report_partial.md from the cells an unfinished run has finished (trains nothing)")
    args = parser.parse_args(argv)
    out = args.out or Path("results/synthetic_spt") / args.preset
    if args.partial_report:
        try:  # a report of a run that exists: never a fresh folder with an empty report
            check_input_path(out, flag="--out", kind="folder", what="the folder of an unfinished initlab synthetic spt run")
            print(synthetic_spt.partial_report(synthetic_spt.PRESETS[args.preset], out))
        except (ValueError, RunExistsError) as err:
            fail(parser, err)
        return 0
    try:
        md = _checked_run(parser, out, args.overwrite, lambda: synthetic_spt.run(
            synthetic_spt.PRESETS[args.preset], out, overwrite=args.overwrite, progress=not args.no_progress,
            workers=args.workers, scheduler=args.scheduler, draw=spt_figures.make_figures), (ValueError, RunExistsError))
    except NonFiniteError as err:  # training diverged: no DONE was written; say so without a traceback
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 1
    print(md)
    print(f"results: {out}")
    return 0


def run_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Deprecated alias of :func:`spt_main` (``initlab synthetic run``); kept for one release."""
    print("initlab synthetic run: deprecated, use `initlab synthetic spt` (same options); `run` will be removed "
          "in the next release", file=sys.stderr)
    return spt_main(argv, prog="initlab synthetic spt")


def _sweep_main(parser: argparse.ArgumentParser, argv: Sequence[str] | None, results: str,
                run: Callable[[argparse.Namespace, Path], Any]) -> int:
    """Add ``--workers``, ``--scheduler`` and ``--no-progress``, parse, run ``run(args, out)`` (it returns the run
    folder) into ``--out`` (default ``results/PRESET``) and print the run's ``summary.md`` and where it is."""
    add_executor_options(parser)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    args = parser.parse_args(argv)
    out = args.out or Path(results) / args.preset
    t0 = time.perf_counter()
    rd = _checked_run(parser, out, args.overwrite, lambda: run(args, out), (FileExistsError, ValueError, ImportError))
    print(read_text(rd.root / "summary.md"))
    print(f"results in {rd.root} ({time.perf_counter() - t0:.0f} s)")
    return 0


def splade_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``initlab synthetic splade``: the per-family phase diagram (head scale s x rescaling k), its tables and figures."""
    parser = _preset_parser(prog or "initlab synthetic splade", splade_phase.__doc__.split("\n\n")[0], splade_phase.PRESETS,
                            "default",
                            "quick (smoke test); default (what initlab reproduce runs: bert and modernbert, seeds "
                            "9101-9102, tied k in 1, 4, 16, 64, output-only k = 64); explore (the exploratory natural-norm "
                            "run, seeds 0-2); full (the preregistered confirmatory run: 4 families, seeds 9101-9105); "
                            "imposed-s* (the earlier runs with an imposed head scale s; docs/synthetic_splade.md)",
                            "output folder (default: results/synthetic_splade/PRESET)")
    return _sweep_main(parser, argv, "results/synthetic_splade", lambda args, out: splade_phase.run_phase(
        out, splade_phase.PRESETS[args.preset], overwrite=args.overwrite, progress=not args.no_progress,
        draw=synthetic_splade_phase_figures.draw_phase, workers=args.workers, scheduler=args.scheduler))


def splade_ood_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``initlab synthetic splade-ood``: the out-of-domain synthetic SPLADE (a generated multi-domain corpus with a
    real-sized vocabulary, BM25, SPLADE to a dev-loss plateau); exploratory presets."""
    from initlab.synthetic.splade.ood import runner as ood

    parser = _preset_parser(prog or "initlab synthetic splade-ood", ood.__doc__.split("\n\n")[0], ood.PRESETS, "tiny",
                            "tiny (smoke test); map-v2k, map-v8k (the exploratory map at 2048 and 8192 ids); v30k (the "
                            "30000-id vocabulary, costed in docs/synthetic_splade_ood.md)",
                            "output folder (default: results/synthetic_splade_ood/PRESET)")
    return _sweep_main(parser, argv, "results/synthetic_splade_ood", lambda args, out: ood.run_ood(
        out, ood.PRESETS[args.preset], workers=args.workers, scheduler=args.scheduler, progress=not args.no_progress,
        overwrite=args.overwrite))
