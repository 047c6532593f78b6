"""The command line every template-rendered page shares: ``--docs OUT [--template PATH]``, render, write atomically.

Used by :mod:`~initlab.app.docgen.theory_doc` (``docs/theory.md``) and :mod:`~initlab.app.docgen.architecture`
(``docs/architecture.md``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from initlab.runs import atomic_write_text
from initlab.textio import read_text

__all__ = ["render_page_main"]


def render_page_main(argv: Sequence[str] | None, *, module: str, description: str, docs: str, template: Path,
                     template_help: str, render: Callable[[str], str]) -> int:
    """Parse ``--docs OUT [--template PATH]`` for ``python -m MODULE`` (``docs``: the usual output, shown in the
    help), render the template's text with ``render`` and write the page atomically; exit 0.

    A missing template stops with argparse's usage error (exit 2) naming ``--template``; nothing is written.
    """
    ap = argparse.ArgumentParser(prog=f"python -m {module}", description=description)
    ap.add_argument("--docs", type=Path, required=True, help=f"output markdown path (e.g. {docs})")
    ap.add_argument("--template", type=Path, default=template, help=template_help)
    args = ap.parse_args(argv)
    if not args.template.exists():
        ap.error(f"argument --template: {args.template} does not exist")
    atomic_write_text(args.docs, render(read_text(args.template)))
    print(f"wrote {args.docs}")
    return 0
