"""``python -m initlab.commands.doc_examples --write|--check``: documented commands and shown outputs.

What the README and the pages under docs/ show must be what the code does, so a test checks it:

* **Commands.** :func:`documented_commands` collects every ``initlab ...`` and ``python -m initlab...`` command
  in the pages' code blocks and inline code (a ``$ `` prompt, ``.venv/bin/``, ``torchrun ... -m initlab.cli``,
  ``accelerate launch -m initlab.cli``, environment assignments and ``&&`` chains are unwrapped);
  :func:`initlab.cli.parse_documented` parses one with the real argparse parser of that command (nothing
  runs; it lives beside the command registry, a layer above this module). Usage synopses (``[--opt X]``,
  ``{a,b}``, ``a|b``) and lines with ``<placeholders>`` or ``...`` are not commands and are skipped.
* **Modules.** :func:`named_modules` collects every dotted ``initlab.x.y`` name in the pages; each must import
  (or be an attribute of a module that does).
* **Shown outputs.** A block between ``<!-- BEGIN shown-output NAME -->`` and ``<!-- END shown-output NAME -->``
  holds ``$ initlab ...`` lines, each followed by what the command printed. :func:`regenerate` runs the
  nearest ````python`` block above it (the set-up, e.g. building a tiny model) in a scratch folder, then each
  ``$`` command there as a fresh process (``python -m initlab.cli``), stdout and stderr in one stream as a
  terminal shows them, and rebuilds the block. :func:`same_output` compares a page's block with the regenerated one word for word and number by
  number within :data:`REL_TOL` / :data:`ABS_TOL` (never byte for byte: the last printed digit of a float
  depends on the CPU's rounding).

``--write`` rewrites every shown-output block (after a change of what a command prints, e.g. ``mlmhead
inspect``'s table); ``--check`` rewrites nothing and exits 1 when a block differs beyond the tolerance.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import os
import re
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from initlab.runs import atomic_write_text

__all__ = ["DocCommand", "doc_pages", "documented_commands", "named_modules", "module_exists",
           "shown_outputs", "regenerate", "same_output", "main", "REL_TOL", "ABS_TOL"]

#: the repository root
REPO = Path(__file__).resolve().parents[2]

#: Relative tolerance of a number in a shown output. The outputs print 4 significant digits; another CPU's
#: float rounding can change the last one. Measured on the mlmhead.md block (2026-12-01): runs with torch's
#: kernels emulating AVX2 (``ATEN_CPU_CAPABILITY=avx2``) and without vector units (``=default``) against
#: AVX-512 print every number identically except one at float-noise level (below). 5e-3 allows a last-digit
#: change of a 3-digit number and still catches a changed formula or recipe, which moves numbers by percents.
REL_TOL = 5e-3
#: Absolute tolerance, for quantities at float-noise level: ``dH/H`` of a tied ModernBERT, whose rescale is
#: exact up to rounding, prints 8.6e-08 under AVX-512 and 8.3e-08 without vector units; two such numbers are
#: equal when they differ by less than this.
ABS_TOL = 1e-5

_FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_MODULE = re.compile(r"\binitlab(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_BEGIN = re.compile(r"^<!-- BEGIN shown-output (\S+)")
_END = "<!-- END shown-output {name} -->"


@dataclass(frozen=True)
class DocCommand:
    """One documented command: ``page`` and ``line`` where it stands, ``text`` as written, ``argv`` after
    unwrapping (``["initlab", ...]`` or ``["python", "-m", MODULE, ...]``), ``fenced``: in a code block (a
    command to run) rather than inline code in the text (a reference, which may name a command or an option
    without the rest of the line)."""

    page: str
    line: int
    text: str
    argv: tuple[str, ...]
    fenced: bool = True

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def doc_pages(root: Path = REPO) -> list[Path]:
    """README.md and every page under docs/ (generated pages included: they are shown to users too)."""
    return [root / "README.md"] + sorted((root / "docs").rglob("*.md"))


def _code_lines(text: str) -> Iterator[tuple[int, str, bool]]:
    """``(line number, code, in a fenced block)`` for every command line of a fenced block and every inline code
    span. A fenced line ending in ``\\`` is joined with the next; in a block that shows a session (``$ `` lines),
    only the ``$`` lines are commands (the rest is their output)."""
    lines = text.splitlines()
    fence: str | None = None
    block: list[tuple[int, str]] = []
    for no, line in enumerate(lines, 1):
        m = _FENCE.match(line)
        if m and (fence is None or m.group(2).startswith(fence)):
            if fence is not None:  # a block closes: emit its command lines
                session = any(code.lstrip().startswith("$ ") for _, code in block)
                pending, start = "", 0
                for bno, code in block:
                    if session and not code.lstrip().startswith("$ "):
                        continue
                    if code.rstrip().endswith("\\"):
                        pending, start = pending + code.rstrip()[:-1] + " ", start or bno
                        continue
                    yield (start or bno), pending + code, True
                    pending, start = "", 0
                block = []
            fence = None if fence is not None else m.group(2)[:3]
            continue
        if fence is not None:
            block.append((no, line))
        else:
            for span in _INLINE.findall(line):
                yield no, span, False


def _is_synopsis(text: str) -> bool:
    """A usage synopsis or a sketch, not a command: ``[--x X]``, ``{a,b}``, ``a|b``, ``<x>``, ``...``, ``COMMAND``."""
    try:
        words = shlex.split(text, comments=False)
    except ValueError:
        return True
    unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", "", text)
    return (any(s in unquoted for s in ("[-", "{", "|", "<", "...", "…")) or "COMMAND" in words or "GROUP" in words)


def _unwrap(words: list[str]) -> list[str] | None:
    """The initlab part of a shell command (``None`` if it runs no initlab command)."""
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):  # FOO=bar initlab ...
        words = words[1:]
    if not words:
        return None
    head = words[0].rsplit("/", 1)[-1]
    if head == "initlab":
        return ["initlab"] + words[1:]
    if head in ("python", "python3") and len(words) >= 3 and words[1] == "-m":
        if words[2] == "initlab.cli":
            return ["initlab"] + words[3:]
        if words[2].startswith("initlab."):
            return ["python", "-m"] + words[2:]
        if words[2] in ("torch.distributed.run", "pytest"):
            words = words[2:]
            head = words[0]
        else:
            return None
    if head in ("torchrun", "torch.distributed.run") or words[:2] == ["accelerate", "launch"]:
        if "-m" in words:
            i = words.index("-m")
            return _unwrap(["python"] + words[i:])
    return None


def documented_commands(root: Path = REPO) -> list[DocCommand]:
    """Every initlab command in the pages (see the module docstring)."""
    out = []
    for page in doc_pages(root):
        rel = str(page.relative_to(root))
        for no, code, fenced in _code_lines(page.read_text(encoding="utf-8")):
            code = code.strip()
            if code.startswith("$ "):
                code = code[2:]
            if "initlab" not in code or code.startswith(("#", "from ", "import ", ">>>")):
                continue
            for part in re.split(r"\s*(?:&&|;|\|\|)\s*", code):
                if _is_synopsis(part):
                    continue
                try:
                    words = shlex.split(part, comments=True)
                except ValueError:
                    continue
                argv = _unwrap(words)
                if argv is not None:
                    out.append(DocCommand(rel, no, part, tuple(argv), fenced))
    return out


def module_exists(dotted: str) -> bool:
    """Whether ``dotted`` is an importable module, or an attribute (class, function, constant, method) of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if found:
            obj = importlib.import_module(name)
            for attr in parts[cut:]:
                if not hasattr(obj, attr):
                    return False
                obj = getattr(obj, attr)
            return True
    return False


def named_modules(root: Path = REPO) -> list[tuple[str, str]]:
    """``(page:line, dotted name)`` of every ``initlab.x...`` name in the pages' code and text."""
    out = []
    for page in doc_pages(root):
        rel = str(page.relative_to(root))
        for no, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for m in _MODULE.finditer(line):
                name = m.group(0).rstrip(".")
                if line[m.end():m.end() + 1] == "/" or line[max(0, m.start() - 1):m.start()] in ("/", "-"):
                    continue  # a path (docs/...initlab...) or a file name, not a dotted name
                out.append((f"{rel}:{no}", name))
    return out


# ------------------------------------------------------------------------------------------------ shown outputs
@dataclass(frozen=True)
class ShownOutput:
    """One shown-output block of ``page``: its ``name``, the line span ``(start, end)`` of its fenced block's
    content, the set-up ``python`` code above it and the block's text."""

    page: Path
    name: str
    start: int
    end: int
    setup: str
    text: str


def shown_outputs(root: Path = REPO) -> list[ShownOutput]:
    """Every shown-output block of the pages.

    Raises:
        ValueError: a BEGIN marker without its END marker or without a fenced block between them.
    """
    out = []
    for page in doc_pages(root):
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            m = _BEGIN.match(line)
            if not m:
                continue
            name = m.group(1)
            try:
                end = lines.index(_END.format(name=name), i)
            except ValueError:
                raise ValueError(f"{page}:{i + 1}: shown-output {name} has no {_END.format(name=name)!r}") from None
            fences = [k for k in range(i + 1, end) if _FENCE.match(lines[k])]
            if len(fences) != 2:
                raise ValueError(f"{page}:{i + 1}: shown-output {name}: expected one fenced block before its END marker")
            setup, k = "", i
            while k > 0:
                k -= 1
                if lines[k].strip() == "```python":
                    close = next(j for j in range(k + 1, len(lines)) if lines[j].strip() == "```")
                    setup = "\n".join(lines[k + 1:close])
                    break
            out.append(ShownOutput(page, name, fences[0] + 1, fences[1], setup, "\n".join(lines[fences[0] + 1:fences[1]])))
    return out


def _run(argv: list[str], cwd: str) -> str:
    """What ``initlab ARGV`` prints in a fresh process run in ``cwd`` (stdout and stderr in one stream, as a
    terminal shows them; progress bars off, as in a pipe)."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}  # a plain shell's warning filters
    env.update(TQDM_DISABLE="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
    proc = subprocess.run([sys.executable, "-m", "initlab.cli", *argv], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)
    return proc.stdout


def regenerate(block: ShownOutput) -> str:
    """The block's text rebuilt: its set-up run in a scratch folder, then each ``$ initlab ...`` line run there.

    Raises:
        ValueError: a ``$`` line that is not an initlab command.
    """
    commands = [line[2:] for line in block.text.splitlines() if line.startswith("$ ")]
    out: list[str] = []
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            if block.setup:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    exec(compile(block.setup, f"{block.page}:{block.name} set-up", "exec"), {"__name__": "__doc__"})
        finally:
            os.chdir(here)
        for command in commands:
            argv = _unwrap(shlex.split(command))
            if not argv or argv[0] != "initlab":
                raise ValueError(f"{block.page}: shown-output {block.name}: `$ {command}` is not an initlab command")
            out.append(f"$ {command}")
            out.append(_run(argv[1:], tmp).rstrip("\n"))
    return "\n".join(out)


def _parts(text: str) -> tuple[list[str], list[float]]:
    """The text's words (numbers replaced by ``#``, whitespace runs collapsed) and its numbers."""
    nums = [float(x) for x in _NUMBER.findall(text)]
    skeleton = " ".join(_NUMBER.sub("#", text).split())
    return skeleton.split(" "), nums


def same_output(shown: str, now: str, rel: float = REL_TOL, abs_: float = ABS_TOL) -> str | None:
    """None if ``now`` is ``shown`` up to whitespace and numbers within the tolerances, else the first
    difference, described."""
    words_a, nums_a = _parts(shown)
    words_b, nums_b = _parts(now)
    if words_a != words_b:
        k = next((i for i, (a, b) in enumerate(zip(words_a, words_b)) if a != b), min(len(words_a), len(words_b)))
        return (f"text differs at word {k}: shown {' '.join(words_a[max(0, k - 6):k + 6])!r}, "
                f"now {' '.join(words_b[max(0, k - 6):k + 6])!r}")
    for i, (a, b) in enumerate(zip(nums_a, nums_b)):
        if abs(a - b) > max(rel * max(abs(a), abs(b)), abs_):
            return f"number {i} differs: shown {a:g}, now {b:g} (tolerance {rel:g} relative, {abs_:g} absolute)"
    return None


def _write(block: ShownOutput, text: str) -> None:
    lines = block.page.read_text(encoding="utf-8").splitlines()
    lines[block.start:block.end] = text.splitlines()
    atomic_write_text(block.page, "\n".join(lines) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m initlab.commands.doc_examples",
                                description="Regenerate (--write) or check (--check) the shown-output blocks of the "
                                            "README and docs/ pages.")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite every shown-output block from a fresh run")
    mode.add_argument("--check", action="store_true", help="write nothing; exit 1 if a block differs beyond the tolerance")
    p.add_argument("--root", type=Path, default=REPO, help="repository root (default: this checkout)")
    args = p.parse_args(argv)
    stale = 0
    for block in sorted(shown_outputs(args.root), key=lambda b: (str(b.page), -b.start)):  # bottom up: lines stay put
        now = regenerate(block)
        diff = same_output(block.text, now)
        if args.write:
            if now != block.text:
                _write(block, now)
            print(f"{block.page}: shown-output {block.name} {'rewritten' if now != block.text else 'unchanged'}")
        elif diff is not None:
            stale += 1
            print(f"{block.page}: shown-output {block.name} is stale ({diff}); run "
                  "python -m initlab.commands.doc_examples --write", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
