"""The commands and module names the README and docs/ pages show, collected to be checked against the code.

What the README and the pages under docs/ show must be what the code does, so a test checks it:

* **Commands.** :func:`documented_commands` collects every ``initlab ...`` and ``python -m initlab...`` command
  in the pages' code blocks and inline code (a ``$ `` prompt, ``.venv/bin/``, ``torchrun ... -m initlab.app.cli``,
  ``accelerate launch -m initlab.app.cli``, environment assignments and ``&&`` chains are unwrapped);
  :func:`initlab.app.docgen.cli_docs.parse_documented` parses one with the real argparse parser of that command (nothing
  runs; it lives beside the command registry, a layer above this module). Usage synopses (``[--opt X]``,
  ``{a,b}``, ``a|b``) and lines with ``<placeholders>`` or ``...`` are not commands and are skipped.
* **Modules.** :func:`named_modules` collects every dotted ``initlab.x.y`` name in the pages; each must import
  (or be an attribute of a module that does).
* **Shown outputs** (a command's printed output copied into a page) are regenerated and compared, numbers within
  a tolerance, by the page's own generator: :mod:`initlab.app.docgen.mlmhead_doc` for the ``inspect``/``rescale``
  session of docs/mlmhead.md (the only shown output of the pages).

``tests/app/docgen/test_doc_examples.py`` runs both checks (and shows that each kind of staleness is caught).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from initlab.textio import read_text

__all__ = ["DocCommand", "doc_pages", "documented_commands", "named_modules", "module_exists"]

#: the repository root
REPO = Path(__file__).resolve().parents[3]

_FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_MODULE = re.compile(r"\binitlab(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


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
        if words[2] == "initlab.app.cli":
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
        for no, code, fenced in _code_lines(read_text(page)):
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
        for no, line in enumerate(read_text(page).splitlines(), 1):
            for m in _MODULE.finditer(line):
                name = m.group(0).rstrip(".")
                if line[m.end():m.end() + 1] == "/" or line[max(0, m.start() - 1):m.start()] in ("/", "-"):
                    continue  # a path (docs/...initlab...) or a file name, not a dotted name
                out.append((f"{rel}:{no}", name))
    return out
