"""The command-line options every ``initlab`` command shares, and the bad-input rules it follows.

The rules every command follows for bad input (docs/conventions.md, "Bad input"), in one place:

* a malformed command line (an unknown option, a value of the wrong type or range) is argparse's error:
  usage, then ``PROG: error: argument --flag: ...`` naming that one argument, exit 2. The range checks are
  the ``type=`` functions below (:func:`int_at_least`, :func:`finite_float`, :func:`positive_float`,
  :func:`int_list`), so each message names only the argument at fault;
* anything found after parsing (a missing or wrong-kind path, an unreadable file, a config value that does
  not fit) is :func:`fail`: one line ``PROG: error: MESSAGE`` on stderr, exit 2, no traceback;
* a diverged training exits 1 (:class:`initlab.runs.NonFiniteError`), Ctrl-C 130 (:mod:`initlab.app.cli`).

:func:`add_executor_options` adds the options every sweep shares (``--workers``, ``--scheduler``); :func:`preset_parser`,
:func:`checked_run` and :func:`sweep_main` are the opening, the guarded run and the ending every synthetic sweep's
command shares.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence, TypeVar

from initlab.runfile import RunFileError, RunFiles
from initlab.runs import check_output_path
from initlab.textio import read_text

T = TypeVar("T")

__all__ = ["fail", "int_at_least", "finite_float", "positive_float", "int_list", "add_executor_options",
           "preset_parser", "add_preset_option", "preset_config", "preset_name", "checked_run", "sweep_main"]


def fail(parser: argparse.ArgumentParser, err: BaseException | str) -> NoReturn:
    """Exit 2 with ``PROG: error: MESSAGE`` on one line of stderr (raises ``SystemExit(2)``)."""
    print(f"{parser.prog}: error: {err}", file=sys.stderr)
    raise SystemExit(2)


def int_at_least(low: int, below: int | None = None, *, bound_text: str | None = None) -> Callable[[str], int]:
    """An argparse ``type=``: an integer >= ``low`` (and < ``below`` when given); the error names the argument
    and the bounds (``bound_text`` replaces the ``>= low`` wording, e.g. ``"in [0, 2^40)"``)."""
    want = bound_text or (f">= {low}" if below is None else f"in [{low}, {below})")

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer {want}, got {text!r}") from None
        if value < low or (below is not None and value >= below):
            raise argparse.ArgumentTypeError(f"expected an integer {want}, got {value}")
        return value

    parse.__name__ = f"int {want}"
    return parse


def finite_float(text: str) -> float:
    """An argparse ``type=``: a finite float (not nan or inf)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """An argparse ``type=``: a finite float > 0."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def int_list(low: int) -> Callable[[str], list[int]]:
    """An argparse ``type=``: comma-separated integers >= ``low`` (at least one), e.g. ``0,1,2``."""

    def parse(text: str) -> list[int]:
        try:
            values = [int(x) for x in text.split(",") if x.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers >= {low} such as {low},{low + 1}; "
                                             f"got {text!r}") from None
        if not values or any(v < low for v in values):
            raise argparse.ArgumentTypeError(f"expected comma-separated integers >= {low} such as {low},{low + 1}; "
                                             f"got {text!r}")
        return values

    parse.__name__ = f"ints>={low}"
    return parse


def _scheduler(text: str) -> str:
    from initlab.executor import check_scheduler

    try:
        return check_scheduler(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).split(": ", 1)[1]) from None


def add_executor_options(parser: argparse.ArgumentParser, *, scheduler: bool = True, gpu: bool = False) -> None:
    """``--workers N`` (default: one per core, or per GPU with ``gpu``) and, with ``scheduler``, ``--scheduler ADDRESS``."""
    default = "one per GPU on a machine with GPUs, else one per core" if gpu else "one per core"
    parser.add_argument("--workers", type=int_at_least(1), default=None,
                        help=f"worker processes running cells in parallel, one torch thread each (default: {default}; "
                             "1 runs them in this process)")
    if scheduler:
        parser.add_argument("--scheduler", default=None, metavar="ADDRESS", type=_scheduler,
                            help="run the cells on a Dask cluster: its scheduler address (tcp://host:8786; the --out folder "
                                 "must be on a filesystem every worker sees), or local:N for N local Dask worker processes; "
                                 "needs pip install 'initlab[cluster]' (docs/cluster.md)")


def preset_parser(prog: str, description: str, presets: RunFiles | Sequence[str], default: str, preset_help: str,
                  out_help: str) -> argparse.ArgumentParser:
    """The options every synthetic sweep opens with: ``--preset``, ``--out`` and ``--overwrite``.

    ``presets`` is the experiment's run files (:class:`initlab.runfile.RunFiles`: ``--preset`` takes a name or the
    path of a run file, and its help lists the named choices only; resolve it with :func:`preset_config`) or a plain
    list of names (argparse's choices)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    if isinstance(presets, RunFiles):
        add_preset_option(parser, presets, default, preset_help)
    else:
        parser.add_argument("--preset", choices=list(presets), default=default, help=preset_help)
    parser.add_argument("--out", type=Path, default=None, help=out_help)
    parser.add_argument("--overwrite", action="store_true", help="redo a finished run (the old folder is moved aside)")
    return parser


def add_preset_option(parser: argparse.ArgumentParser, presets: RunFiles, default: str, preset_help: str) -> None:
    """``--preset NAME|FILE``: a run's name or the path of a run file (resolve it with :func:`preset_config`); its help
    lists the named choices of ``presets`` only (:meth:`initlab.runfile.RunFiles.named`)."""
    others = [n for n in presets if n not in presets.named()]
    parser.add_argument("--preset", default=default, metavar="NAME|FILE",
                        help=f"{preset_help}; one of {', '.join(presets.named())} (default: {default}), or the "
                             f"{'name or ' if others else ''}path of {'another' if others else 'a'} run file (docs/runs.md "
                             "lists every run with its purpose)")


def preset_config(parser: argparse.ArgumentParser, presets: RunFiles[T], preset: str) -> T:
    """The config of ``--preset`` (a run's name or a run file's path), or :func:`fail` (exit 2) naming the file and the
    field at fault (:class:`initlab.runfile.RunFileError`)."""
    try:
        return presets.resolve(preset)
    except RunFileError as err:
        fail(parser, err)


def preset_name(preset: str) -> str:
    """The name of a run given by ``--preset``: the name itself, or a run file's name without ``.toml``, for the default
    output folder ``results/.../NAME``."""
    return Path(preset).stem if preset.endswith(".toml") else preset


def checked_run(parser: argparse.ArgumentParser, out: Path, overwrite: bool, run: Callable[[], T],
                errors: tuple[type[BaseException], ...]) -> T:
    """``run()`` after checking ``--out``; an error of ``errors`` is one line on stderr and exit 2 (:func:`fail`)."""
    try:
        check_output_path(out, flag="--out", kind="folder", overwrite=overwrite)
        return run()
    except errors as err:
        fail(parser, err)


def sweep_main(parser: argparse.ArgumentParser, argv: Sequence[str] | None, results: str,
               run: Callable[[argparse.Namespace, Path], Any],
               report_partial: Callable[[argparse.Namespace, Path], Any] | None = None) -> int:
    """Add ``--workers``, ``--scheduler`` and ``--no-progress``, parse, run ``run(args, out)`` (it returns the run
    folder) into ``--out`` (default ``results/PRESET``) and print the run's ``summary.md`` and where it is.

    With ``report_partial`` the command also takes ``--report-partial``: then ``report_partial(args, out)`` (it
    returns the run folder) writes the report of the cells an existing run folder holds so far, with no output-path
    check and no lock (it trains nothing; the folder may be a live run's), and its ``summary.md`` is printed."""
    add_executor_options(parser)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    if report_partial is not None:
        parser.add_argument("--report-partial", action="store_true",
                            help="only write the report of --out from the cells finished so far (a run cut short or "
                                 "still running; trains nothing)")
    args = parser.parse_args(argv)
    out = args.out or Path(results) / preset_name(args.preset)
    t0 = time.perf_counter()
    if report_partial is not None and args.report_partial:
        try:
            rd = report_partial(args, out)
        except (FileExistsError, ValueError) as err:
            fail(parser, err)
        print(read_text(rd.root / "summary.md"))
        return 0
    rd = checked_run(parser, out, args.overwrite, lambda: run(args, out), (FileExistsError, ValueError, ImportError))
    print(read_text(rd.root / "summary.md"))
    print(f"results in {rd.root} ({time.perf_counter() - t0:.0f} s)")
    return 0
