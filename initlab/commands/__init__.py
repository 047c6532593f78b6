"""One module per CLI group; every argparse ``main()`` of initlab lives here.

:func:`add_executor_options` adds the options every sweep shares (``--workers``, ``--scheduler``).
"""

from __future__ import annotations

import argparse


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {n}")
    return n


def _scheduler(text: str) -> str:
    from initlab.executor import check_scheduler

    try:
        return check_scheduler(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).split(": ", 1)[1]) from None


def add_executor_options(parser: argparse.ArgumentParser, *, scheduler: bool = True, gpu: bool = False) -> None:
    """``--workers N`` (default: one per core, or per GPU with ``gpu``) and, with ``scheduler``, ``--scheduler ADDRESS``."""
    default = "one per GPU on a machine with GPUs, else one per core" if gpu else "one per core"
    parser.add_argument("--workers", type=_positive_int, default=None,
                        help=f"worker processes running cells in parallel, one torch thread each (default: {default}; "
                             "1 runs them in this process)")
    if scheduler:
        parser.add_argument("--scheduler", default=None, metavar="ADDRESS", type=_scheduler,
                            help="run the cells on a Dask cluster: its scheduler address (tcp://host:8786; the --out folder "
                                 "must be on a filesystem every worker sees), or local:N for N local Dask worker processes; "
                                 "needs pip install 'initlab[cluster]' (docs/cluster.md)")
