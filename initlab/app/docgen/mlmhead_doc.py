"""``python -m initlab.app.docgen.mlmhead_doc --docs docs/mlmhead.md``: regenerate the page's ``inspect``/``rescale`` example.

The example builds the tiny random ModernBERT of docs/mlmhead.md (head x 100) in a temporary folder, runs
``initlab mlmhead inspect tiny-modernbert``, ``initlab mlmhead rescale tiny-modernbert --k 16 --out
tiny-modernbert-k16`` and ``initlab mlmhead rescale tiny-modernbert --k 0 --out x`` there, and writes what a
terminal shows (standard output, then standard error, of each command) between the page's
``<!-- BEGIN inspect-example -->`` and ``<!-- END inspect-example -->`` lines. With ``--check`` nothing is written
and the exit status is 1 when the page differs from a fresh run by more than float rounding
(:func:`same_output`: every number within 2 % or 1e-5, every other character identical), so the check does
not depend on the CPU's float noise.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Sequence

from initlab.runs import atomic_write_text
from initlab.textio import read_text

__all__ = ["BEGIN", "END", "COMMANDS", "build_example_model", "render_example", "same_output", "replace_block", "main"]

BEGIN = "<!-- BEGIN inspect-example -->"
END = "<!-- END inspect-example -->"
#: the commands of the example, as typed (run from the folder holding ``tiny-modernbert``)
COMMANDS = ("initlab mlmhead inspect tiny-modernbert",
            "initlab mlmhead rescale tiny-modernbert --k 16 --out tiny-modernbert-k16",
            "initlab mlmhead rescale tiny-modernbert --k 0 --out x")


def build_example_model(folder: str | Path) -> Path:
    """The page's tiny random ModernBERT with its head multiplied by 100, saved with its tokenizer in ``folder``."""
    from initlab.mlmhead.tiny import tiny_masked_lm, tiny_tokenizer

    folder = Path(folder)
    tok = tiny_tokenizer(folder)
    model = tiny_masked_lm("modernbert", tok.vocab_size, head_scale=100)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def render_example() -> str:
    """The example block (a fenced console transcript): each command after ``$ ``, then what it printed."""
    from initlab.app.commands.mlmhead import inspect_main, rescale_main

    mains = {"inspect": inspect_main, "rescale": rescale_main}
    out = ["```"]
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            os.chdir(tmp)
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                build_example_model("tiny-modernbert")
            for cmd in COMMANDS:
                stdout, stderr = io.StringIO(), io.StringIO()
                with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), warnings.catch_warnings():
                    warnings.simplefilter("default")
                    words = cmd.split()  # "initlab mlmhead <command> ARGS": the command's own main, as the CLI runs it
                    mains[words[2]](words[3:])
                out.append(f"$ {cmd}")
                out += [line for line in (stdout.getvalue() + stderr.getvalue()).rstrip("\n").splitlines()]
        finally:
            os.chdir(cwd)
    out.append("```")
    return "\n".join(out) + "\n"


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def same_output(a: str, b: str, rel: float = 0.02, abs_tol: float = 1e-5) -> bool:
    """Whether two transcripts agree up to float rounding: the same text outside numbers, and every number pair
    within ``rel`` (relative) or ``abs_tol``."""
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False
    for x, y in zip(_NUMBER.findall(a), _NUMBER.findall(b)):
        fx, fy = float(x), float(y)
        if abs(fx - fy) > max(rel * max(abs(fx), abs(fy)), abs_tol):
            return False
    return True


def replace_block(page: str, block: str) -> str:
    """``page`` with the text between :data:`BEGIN` and :data:`END` replaced by ``block``.

    Raises:
        ValueError: the page lacks exactly one pair of markers.
    """
    if page.count(BEGIN) != 1 or page.count(END) != 1 or page.index(BEGIN) > page.index(END):
        raise ValueError(f"expected one '{BEGIN}' line followed by one '{END}' line")
    head, rest = page.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{block}{END}{tail}"


def current_block(page: str) -> str:
    """The text between the markers of ``page`` (see :func:`replace_block`)."""
    replace_block(page, "")  # validates the markers
    return page.split(BEGIN)[1].split(END)[0].lstrip("\n")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m initlab.app.docgen.mlmhead_doc --docs docs/mlmhead.md [--check]``."""
    ap = argparse.ArgumentParser(prog="python -m initlab.app.docgen.mlmhead_doc",
                                 description="regenerate (or --check) the inspect/rescale example of docs/mlmhead.md")
    ap.add_argument("--docs", type=Path, required=True, help="the page holding the example markers (docs/mlmhead.md)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if the page's example is stale")
    args = ap.parse_args(argv)
    if not args.docs.is_file():
        ap.error(f"argument --docs: {args.docs} is not a file")
    page = read_text(args.docs)
    try:
        old = current_block(page)
    except ValueError as err:
        ap.error(f"argument --docs: {args.docs}: {err}")
    new = render_example()
    if args.check:
        if same_output(old, new):
            return 0
        print(f"{args.docs}: the inspect example is stale; run python -m initlab.app.docgen.mlmhead_doc --docs {args.docs}",
              file=sys.stderr)
        return 1
    atomic_write_text(args.docs, replace_block(page, new))
    print(f"wrote {args.docs}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
