"""Calling the ``initlab`` console script in-process, for tests and notebooks: :func:`run_cli` returns its exit code
and what it printed, :func:`one_line` checks that an error is the one clear line the CLI promises (no traceback).
"""

from __future__ import annotations

import contextlib
import io
from typing import Sequence

__all__ = ["run_cli", "one_line"]


def run_cli(argv: Sequence[str]) -> tuple[int, str, str]:
    """Run ``initlab ARGV`` in this process: ``(exit code, stdout, stderr)``. A ``SystemExit`` (argparse's errors,
    ``--help``) is caught and its code returned, as the shell would see it (``None`` reads 0)."""
    from initlab.app import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main(list(argv))
        except SystemExit as e:
            rc = e.code
    return int(rc or 0), out.getvalue(), err.getvalue()


def one_line(err: str, skip: tuple[str, ...] = ()) -> str:
    """The one non-empty line of ``err`` (stderr of a refused command), lines starting with any of ``skip`` (e.g.
    warning categories) left out.

    Raises:
        AssertionError: ``err`` holds a traceback or more or fewer than one such line (the message shows ``err``).
    """
    lines = [ln for ln in err.strip().splitlines() if ln.strip() and not (skip and ln.startswith(skip))]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]
