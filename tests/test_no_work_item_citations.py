"""Docs and code speak of the project, never of the work items that changed it.

A sentence such as "(issue 28)" or "item 4 of the issue" means nothing to a reader of the package: the tracker is
not shipped, its numbers are not stable, and the sentence around it usually says what the item asked for anyway.
This test reads the README, every markdown page under docs/ and every Python file of the package folders, the
benchmarks and the tests (this file excepted: it holds the examples the patterns must catch), and fails on any
line that cites a work item, naming the file and line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[1]

#: the folders whose Python files are read (the package folders of pyproject's package-dir, benchmarks, tests)
CODE_DIRS = ("initlab", "theory", "synthetic", "realdata", "paper_figs", "benchmarks", "tests")

#: one pattern per way a work item has been cited; case-insensitive
CITATION = re.compile(
    r"\bissues?\s*#?\s*\d+"  # "issue 28", "Issue #25", "issues 25 and 28"
    r"|\bitems?\s+\d+(?:\s*(?:,|and|-)\s*\d+)*\s+of\s+(?:the|this|that)\s+issue"  # "item 4 of the issue"
    r"|\b(?:the|this|that)\s+issue's\b"  # "the target"
    r"|\b(?:in|of|by|from)\s+the\s+issue\b"  # "quoted in the issue"
    r"|\bround\s+\d+\s+of\b",  # "round 3 of ..."
    re.IGNORECASE,
)


def scanned_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for d in CODE_DIRS:
        files += sorted((ROOT / d).rglob("*.py"))
    here = Path(__file__).resolve()
    return [f for f in files if f.resolve() != here and ".venv" not in f.parts]


@pytest.mark.parametrize("text", [
    "exploratory map (issue 28)", "issue 28, item 4", "Issue #25: a row", "round 2 of issue 27",
    "Item 4 of the issue asks", "The issue's target (64 x 512 tokens)", "quoted in the issue: 0.90",
    "(issues 25 and 28)",
])
def test_pattern_catches_each_known_form(text):
    assert CITATION.search(text), text


@pytest.mark.parametrize("text", [
    "a warning issued at step 3", "an issue of scale", "the first round of the map",
    "item 4 of the list", "SPLADE seed 9203",
])
def test_pattern_leaves_ordinary_prose_alone(text):
    assert not CITATION.search(text), text


def test_scan_reads_the_docs_and_the_package():
    names = {f.relative_to(ROOT).as_posix() for f in scanned_files()}
    assert "README.md" in names and "docs/synthetic_spt.md" in names
    assert "initlab/app/cli.py" in names and "synthetic/splade/claims.py" in names


def test_no_doc_or_source_line_cites_a_work_item():
    found = []
    for f in scanned_files():
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            m = CITATION.search(line)
            if m:
                found.append(f"{f.relative_to(ROOT)}:{n}: {m.group(0)!r} in {line.strip()[:100]!r}")
    assert not found, "work-item citations (say what the project does instead):\n" + "\n".join(found)
