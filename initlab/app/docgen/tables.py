"""Markdown result tables of a finished ``initlab reproduce`` folder, read from the stages' saved summaries.

Every stage of ``initlab reproduce`` writes ``OUT/<stage>/summary.md``, whose tables are rendered from
that stage's saved JSON/CSV; this module only reads those files (no experiment code is imported) and
writes one page per stage holding each table with the sentence that introduces it, plus the command and
the start date of the run they come from. Regenerate the committed quick-preset copies with::

    initlab reproduce --preset quick --out /tmp/quick && python -m initlab.app.docgen.tables /tmp/quick --out docs/generated/quick

:func:`compare_tables` is what ``tests/app/docgen/test_tables.py`` uses to decide whether committed tables are
stale: same tables, same text, and every number of an untrained computation equal to within one unit of its last
printed digit; the numbers (and verdicts) of trained models, which move with the CPU, are not compared across
machines (:data:`TRAINED_STAGES`).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Sequence

from initlab.paper_figs.common import run_figure_cli
from initlab.textio import read_text

__all__ = ["STAGE_TITLES", "TRAINED_STAGES", "extract_tables", "render_stage", "write_tables", "compare_tables", "main"]

#: stage folder -> page title, in the order of the report
STAGE_TITLES: dict[str, str] = {
    "theory": "Theory: attention-gradient statements T1-T7",
    "spt": "Synthetic self-pretraining (local task, T = 100)",
    "score_scale": "MLM-head score scale: theory vs Monte Carlo",
    "splade": "Synthetic SPLADE: collapse and recovery under MLM-head rescaling",
    "splade_in_domain": "Synthetic SPLADE in domain: the head-norm effect on fresh seeds",
    "lra_listops": "ListOps on CPU: self-pretraining vs from scratch",
}
_STARTED = re.compile(r"preset `(?P<preset>[\w-]+)`.*?started (?P<date>\d{4}-\d{2}-\d{2})")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
#: below this, numbers are rounding-level errors of float64 checks and depend on the CPU's kernels
ROUNDING_FLOOR = 1e-6
#: numbers of seeded, untrained computations (theory checks, the score-scale Monte Carlo) differ across CPUs only by
#: float rounding; a cell agrees within one printed unit or this relative tolerance, and its words must match exactly
RELATIVE_TOLERANCE = 0.05
#: stages whose tables hold numbers of trained models. Those numbers move with the CPU's kernels by more than any
#: fixed tolerance (the quick SPLADE table's modernbert best k - k = 1: +0.057 on one machine, +0.053 on a 2-core
#: AVX-512 one; the 2-seed regret interval -0.151 against -0.154 under AVX2), and so do verdict words whose estimate
#: lies near its threshold. Across machines only their structure and the words of cells without an estimate are
#: compared (:func:`compare_tables` with ``trained=True``).
TRAINED_STAGES = ("spt", "splade", "splade_in_domain", "lra_listops")
_VERDICT = re.compile(r"\*\*(?:reproduced|not reproduced|partly|inconclusive)\*\*")
_FLAG = re.compile(r"\s*\b\d+C\b")  # a collapse flag ("1C": one seed's model collapsed), an outcome of training


def extract_tables(markdown: str) -> list[tuple[str, list[str]]]:
    """``(caption, table lines)`` for every pipe table in ``markdown``; the caption is the paragraph before it."""
    out: list[tuple[str, list[str]]] = []
    last, current, table = "", [], []  # last finished paragraph, the one being read, the table being read
    for line in markdown.splitlines() + [""]:
        if line.startswith("|"):
            if current:
                last, current = " ".join(current), []
            table.append(line.rstrip())
            continue
        if table:
            out.append((last, table))
            last, table = "", []
        if not line.strip():
            if current:
                last, current = " ".join(current), []
        elif line.startswith(("#", "!", "_")):  # headings, images, stage timings: never a caption
            last, current = "", []
        else:
            current.append(line.strip())
    return out


def _run_info(results_dir: Path) -> tuple[str, str]:
    report = results_dir / "report.md"
    if not report.is_file():
        raise FileNotFoundError(f"{report}: not found; expected a folder written by initlab reproduce")
    match = _STARTED.search(read_text(report))
    if match is None:
        raise ValueError(f"{report}: no 'preset `P` ... started YYYY-MM-DD' line; not an initlab reproduce report")
    return match["preset"], match["date"]


def render_stage(stage_dir: Path, preset: str, date: str) -> str:
    """The page of one stage: title, provenance line, then each table under its caption.

    Raises:
        FileNotFoundError: ``stage_dir`` has no ``summary.md`` or no ``DONE`` (an unfinished stage).
    """
    summary = stage_dir / "summary.md"
    if not (stage_dir / "DONE").exists() or not summary.is_file():
        raise FileNotFoundError(f"{stage_dir}: not a finished stage (needs summary.md and DONE)")
    lines = [
        f"# {STAGE_TITLES.get(stage_dir.name, stage_dir.name)} (preset {preset})",
        "",
        f"Generated from `initlab reproduce --preset {preset}` (run started {date}) by "
        f"`python -m initlab.app.docgen.tables RESULTS_DIR --out DIR`, which reads `{stage_dir.name}/summary.md`. "
        "Do not edit by hand.",
        "",
    ]
    for caption, table in extract_tables(read_text(summary)):
        lines += ([caption, ""] if caption else []) + table + [""]
    return "\n".join(lines)


def write_tables(results_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Write ``<stage>.md`` for every finished stage of ``results_dir`` into ``out_dir``; returns the paths.

    Raises:
        FileNotFoundError: no ``report.md`` or no finished stage in ``results_dir``.
    """
    from initlab.runs import atomic_write_text

    results_dir, out_dir = Path(results_dir), Path(out_dir)
    preset, date = _run_info(results_dir)
    stages = [s for s in STAGE_TITLES if (results_dir / s / "DONE").exists()]
    if not stages:
        raise FileNotFoundError(f"{results_dir}: no finished stage folder ({', '.join(STAGE_TITLES)})")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [atomic_write_text(out_dir / f"{s}.md", render_stage(results_dir / s, preset, date)) for s in stages]
    for path in paths:
        path.chmod(0o644)  # a page of the docs, not a private temporary file
    return paths


def _close(a: str, b: str) -> bool:
    """Equal numbers as printed: within one unit of the coarser last printed digit, or both rounding-level."""
    x, y = float(a), float(b)
    if abs(x) < ROUNDING_FLOOR and abs(y) < ROUNDING_FLOOR:
        return True

    def unit(s: str) -> float:
        mantissa, _, exp = s.lower().partition("e")
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        return 10.0 ** (-decimals + (int(exp) if exp else 0))

    return abs(x - y) <= max(max(unit(a), unit(b)) * 1.0000001, RELATIVE_TOLERANCE * max(abs(x), abs(y)))


def _trained_words(cell: str) -> str:
    """What of a trained stage's cell is compared across machines: its words with every number masked, its
    collapse flags dropped, and a cell holding a verdict (an estimate against its threshold) reduced to a marker."""
    if _VERDICT.search(cell):
        return "<verdict>"
    return _NUMBER.sub("#", _FLAG.sub("", cell))


def _cells_agree(a: str, b: str, trained: bool = False) -> bool:
    if trained:
        return _trained_words(a) == _trained_words(b)
    if a == b:
        return True
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False
    return all(_close(x, y) for x, y in zip(_NUMBER.findall(a), _NUMBER.findall(b)))


def compare_tables(committed: str, fresh: str, *, trained: bool = False) -> list[str]:
    """Differences between the tables of two pages (captions and provenance lines are not compared).

    Returns an empty list when both pages hold the same tables, cell by cell: identical text, and numbers
    equal to within one unit of the last printed digit or :data:`RELATIVE_TOLERANCE` of their size (values
    below :data:`ROUNDING_FLOOR` are rounding-level errors and compare equal). With ``trained=True`` (a stage of
    :data:`TRAINED_STAGES`, pages made on different machines) only the structure (tables, rows, columns) and the
    words of each cell are compared: numbers masked, collapse flags dropped, verdict cells not compared (a trained
    estimate near its threshold may flip its word on another CPU).
    """
    old, new = extract_tables(committed), extract_tables(fresh)
    if len(old) != len(new):
        return [f"{len(old)} tables committed, {len(new)} regenerated"]
    diffs = []
    for i, ((_, t_old), (_, t_new)) in enumerate(zip(old, new)):
        if len(t_old) != len(t_new):
            diffs.append(f"table {i + 1}: {len(t_old)} lines committed, {len(t_new)} regenerated")
            continue
        for row_old, row_new in zip(t_old, t_new):
            c_old, c_new = row_old.split("|"), row_new.split("|")
            if len(c_old) != len(c_new) or not all(_cells_agree(a.strip(), b.strip(), trained)
                                                   for a, b in zip(c_old, c_new)):
                diffs.append(f"table {i + 1}:\n  committed:   {row_old}\n  regenerated: {row_new}")
    return diffs


def _options(parser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="folder for one page per stage, e.g. docs/generated/quick")


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Returns 0, or 2 (after a message on stderr) when RESULTS_DIR is not a finished reproduce folder."""
    return run_figure_cli("initlab.app.docgen.tables",
                          "Write the result tables of a finished initlab reproduce folder as markdown pages.",
                          lambda a: write_tables(a.results_dir, a.out), argv, prog, metavar="RESULTS_DIR",
                          results_help="folder written by initlab reproduce", options=_options, raise_on_error=False)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
