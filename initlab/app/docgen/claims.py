"""The claims tables, generated from the saved result files in ``docs/results/``: the README's one line per claim
("What reproduces") and the full page ``docs/claims.md`` (every part of every verdict).

Each row (:func:`all_claims`, over the experiments' records with claims :data:`EXPERIMENTS`, in the reading order
of :mod:`initlab.app.experiments`) holds the seed's claim and number (fixed text: the papers' words), the evidence
links, the result files it reads and the function that turns them into the verdict cell; each row lives beside
its verdict function in its experiment's ``claims`` module (:mod:`initlab.synthetic.spt.claims`, ...; a new claim
is one verdict function and one entry in its module's ``CLAIM_ROWS``). Rows for experiments that were
not run carry their reason instead. The README table is written between the markers :data:`BEGIN_MARK` and
:data:`END_MARK` of the README, the full table as the whole of ``docs/claims.md``::

    python -m initlab.app.docgen.claims                  # rewrite the README block and docs/claims.md from docs/results/
    python -m initlab.app.docgen.claims --check          # exit 1 if either is stale
    python -m initlab.app.docgen.claims --collect-spt results/synthetic_spt/full --preset full --preregistration COMMIT

This module only reads saved files (no experiment code); ``docs/results/README.md`` names the command
that made each file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from initlab.app.experiments import EXPERIMENTS as ALL_EXPERIMENTS, reading_order
from initlab.experiment.record import Experiment
from initlab.experiment.rows import Claim, Headline
from initlab.runs import atomic_write_json, atomic_write_text, check_input_path, check_output_path
from initlab.synthetic.spt import claims as spt_claims
from initlab.textio import read_json, read_text

__all__ = ["Claim", "EXPERIMENTS", "claim_experiments", "all_claims", "legend", "BEGIN_MARK", "END_MARK", "ResultsFileError", "load_results", "claims_table", "cached_render",
           "claims_page", "replace_block", "collect_spt", "main"]

BEGIN_MARK, END_MARK = "<!-- BEGIN claims -->", "<!-- END claims -->"
HEADER = ["| seed claim | seed number | our verdict | evidence |", "| --- | --- | --- | --- |"]
SHORT_HEADER = ["| seed claim | seed number | our verdict | headline estimate [interval] (seeds) | evidence |",
                "| --- | --- | --- | --- | --- |"]


class ResultsFileError(ValueError):
    """A saved result file is missing or does not hold what a row needs; the message names the file."""


def claim_experiments(records: Sequence[Experiment] = ALL_EXPERIMENTS) -> tuple[Experiment, ...]:
    """The records of ``records`` that hold claims (a claims module), in table order: the reading order
    (:func:`initlab.app.experiments.reading_order`, each record's ``order``)."""
    return tuple(e for e in reading_order(records) if e.claims is not None)


#: the experiments whose claims the tables show, in table order (each record's claims module holds its verdict
#: functions, its rows and its claim families: a new claim is one verdict function and one ``CLAIM_ROWS`` entry there)
EXPERIMENTS: tuple[Experiment, ...] = claim_experiments()


def all_claims() -> list[Claim]:
    """Every row of the claims tables, in table order, read from the experiments' claims modules now."""
    return [claim for exp in EXPERIMENTS for claim in exp.claim_rows()]


def load_results(results_dir: str | Path, names: Sequence[str] | None = None,
                 hint: str = "; docs/results/README.md names the command that writes it") -> dict[str, Any]:
    """``{name: parsed JSON}`` for every file the rows need (or ``names``) and every optional file present,
    from ``results_dir``.

    Raises:
        ResultsFileError: a needed file is missing, or a file is not valid JSON or not a JSON object (the message
            names it).
    """
    root = Path(results_dir)
    rows = all_claims()
    wanted = list(names) if names is not None else sorted({f for c in rows for f in c.files})
    if names is None:
        wanted += sorted({f for c in rows for f in c.optional if (root / f).is_file()} - set(wanted))
    out: dict[str, Any] = {}
    for name in wanted:
        path = root / name
        if not path.is_file():
            raise ResultsFileError(f"{path}: saved result file not found{hint}")
        try:
            data = read_json(path)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ResultsFileError(f"{path}: not valid JSON ({err})") from err
        if not isinstance(data, dict):
            raise ResultsFileError(f"{path}: expected a JSON object, got {type(data).__name__}")
        out[name] = data
    return out


def _guarded(claim: Claim, results: dict[str, Any], results_dir: str | Path, make: Callable[[dict[str, Any]], Any]) -> Any:
    try:
        return make(results)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
        files = ", ".join(str(Path(results_dir) / f) for f in claim.files + claim.optional if f in results)
        raise ResultsFileError(f"{files}: missing or malformed field for the claims row {claim.claim[:50]!r}: "
                               f"{type(err).__name__}: {err}") from err


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def verdict_cell(claim: Claim, results: dict[str, Any], results_dir: str | Path = "docs/results") -> str:
    """The full verdict cell of one claim (docs/claims.md).

    Raises:
        ResultsFileError: a file lacks a field the row needs or holds a wrong type (names the files).
    """
    if claim.verdict is None:
        return claim.verdict_text
    return _cell(_guarded(claim, results, results_dir, claim.verdict))


def headline_cells(claim: Claim, results: dict[str, Any], results_dir: str | Path = "docs/results") -> Headline:
    """The README's short cells of one claim (its verdict word, its headline estimate).

    Raises:
        ResultsFileError: as :func:`verdict_cell`.
    """
    if claim.headline is None:
        return claim.headline_text
    h = _guarded(claim, results, results_dir, claim.headline)
    return Headline(_cell(h.word), _cell(h.estimate))


def _families_text() -> str:
    return "; ".join(f"{label.upper()} {f.name}: " + ", ".join(f.claims) for exp in EXPERIMENTS
                     for label, fams in exp.families for f in fams if f.name == "primary") + "; every other claim secondary"


def legend() -> str:
    """The claims page's legend: how to read a cell, and the primary claims of every declared family (read now)."""
    return ("Every verdict is computed from the saved per-seed numbers by one function per claim (`initlab.evidence`) "
            "and names the preset and seeds of its run (`full`: the preregistered confirmatory run; `default`: what "
            "`initlab reproduce` runs). Numbers read `estimate [interval] (kind, n seeds)`: a gain is a paired mean "
            "difference in accuracy points with its 95 % t-interval; an equivalence a paired mean difference with its 90 % "
            "TOST interval; a share the ratio of mean gains with its 95 % Fieller interval; `mean ± sd` is the mean over "
            "seeds and the sample standard deviation. An interval that contains its threshold reads **inconclusive**, "
            "with the number of seeds that would decide it. Words are corrected for multiple claims: Holm's procedure "
            "holds the family-wise error at 0.05 within each declared family (`initlab.evidence.families`; " + _families_text()
            + "); a word the correction took back reads **inconclusive** with its uncorrected word and Holm-adjusted p "
            "beside the uncorrected interval.")


SHORT_LEGEND = ("One line per claim, from its strongest preregistered run (in full: [docs/claims.md](docs/claims.md)). "
                "Accuracy in points; 95 % intervals (90 % TOST for an equivalence); words Holm-corrected. "
                "**reproduced**: the interval lies beyond the claim's threshold; **partly**: it excludes 0 but stops "
                "short of the threshold; **not reproduced**: it stops short without excluding 0 (a predicted negative "
                "says what was predicted and whether it held); **inconclusive**: it holds the threshold.")
PAGE_HEAD = ("# Claims: every verdict in full\n\n"
             "Generated by `python -m initlab.app.docgen.claims` from the saved results in [results/](results/README.md); "
             "do not edit by hand (`tests/app/docgen/test_claims.py` fails when this page is stale). The README shows one "
             "line per claim; this page shows every part of every verdict.\n\n")


def _docs_relative(cell: str) -> str:
    """An evidence cell written for the repository root, relinked for a page in docs/."""
    return cell.replace("](docs/", "](")


#: rendered tables by (kind, results folder, the loaded files' contents): the rows are a pure function of the files,
#: so one process that renders the same files again (``main``'s block and page, ``--check`` then a write, the
#: tests) computes them once; an edited file is a new key
_RENDERED: dict[tuple[Any, ...], str] = {}


def cached_render(kind: str, results_dir: str | Path, render: Callable[[dict[str, Any]], str]) -> str:
    """``render(results)`` of the results folder ``results_dir`` (:func:`load_results`), computed once per ``kind``,
    folder, file contents, claim list and families text in this process; an edited file renders anew.

    Raises:
        ResultsFileError: a results file is missing or unreadable (from :func:`load_results`).
    """
    results = load_results(results_dir)
    # the rows and families are read now too: an added claim is a new key
    key = (kind, str(results_dir), json.dumps(results, sort_keys=True), tuple(all_claims()), _families_text())
    if key not in _RENDERED:
        if len(_RENDERED) >= 16:
            _RENDERED.clear()
        _RENDERED[key] = render(results)
    return _RENDERED[key]


def claims_table(results_dir: str | Path = "docs/results") -> str:
    """The README block: markers, a short legend, and one line per claim (verdict word and headline estimate)."""
    return cached_render("table", results_dir, lambda results: _claims_table(results, results_dir))


def _claims_table(results: dict[str, Any], results_dir: str | Path) -> str:
    lines = [BEGIN_MARK, SHORT_LEGEND, "", *SHORT_HEADER]
    for c in all_claims():
        h = headline_cells(c, results, results_dir)
        lines.append(f"| {c.claim} | {c.seed_number} | {h.word} | {h.estimate} | {c.evidence} |")
    return "\n".join(lines + [END_MARK])


def claims_page(results_dir: str | Path = "docs/results") -> str:
    """docs/claims.md: the legend and one row per claim with its full verdict cell."""
    return cached_render("page", results_dir, lambda results: _claims_page(results, results_dir))


def _claims_page(results: dict[str, Any], results_dir: str | Path) -> str:
    lines = [legend(), "", *HEADER]
    for c in all_claims():
        lines.append(f"| {c.claim} | {c.seed_number} | {_docs_relative(verdict_cell(c, results, results_dir))} | "
                     f"{_docs_relative(c.evidence)} |")
    return PAGE_HEAD + "\n".join(lines) + "\n"


def replace_block(text: str, block: str, where: str = "README.md") -> str:
    """``text`` with its claims block (markers included) replaced by ``block``.

    Raises:
        ValueError: ``text`` lacks exactly one pair of markers in order (names ``where``).
    """
    if text.count(BEGIN_MARK) != 1 or text.count(END_MARK) != 1 or text.index(BEGIN_MARK) > text.index(END_MARK):
        raise ValueError(f"{where}: expected one {BEGIN_MARK} ... {END_MARK} block")
    head, rest = text.split(BEGIN_MARK)
    return head + block + rest.split(END_MARK, 1)[1]


def collect_spt(run_dir: str | Path, dest: str | Path, preregistration: str = "") -> Path:
    """Write the summary of a synthetic SPT run folder to ``dest``: the run's ``config``, ``summary`` (the per-seed
    raw numbers and per-condition statistics) and its verdict record, without the per-cell histories;
    ``preregistration`` names the commit that fixed the run's design (empty for an exploratory run).

    Reads ``run_dir/metrics.json`` and ``verdicts.json`` of a finished run (``DONE``), else those under
    ``run_dir/partial/`` (from ``initlab synthetic spt --partial-report``), marked ``"partial": true`` with its
    missing cells.

    A ``dest`` that already holds a run of other seeds is not replaced (a ``default`` run is never filed over the
    ``full`` one).

    Raises:
        ResultsFileError: a file is missing or lacks ``config`` / ``summary``, or ``dest`` holds another run.
    """
    root = Path(run_dir)
    finished = (root / "DONE").exists()
    src = root if finished else root / "partial"
    hint = " (expected a synthetic SPT run folder: metrics.json when finished, else partial/metrics.json)"
    data = load_results(src, ["metrics.json", "verdicts.json"], hint=hint)
    m = data["metrics.json"]
    if "config" not in m or "summary" not in m or "per_seed" not in m["summary"]:
        raise ResultsFileError(f"{src / 'metrics.json'}: expected 'config' and 'summary' (with per_seed) of a synthetic SPT run")
    dest = Path(dest)
    if dest.is_file():  # never silently replace a saved run by another one
        old = read_json(dest).get("config", {})
        if old.get("seeds") != m["config"].get("seeds"):
            raise ResultsFileError(f"{dest}: holds a run of seeds {old.get('seeds')}, this folder a run of seeds "
                                   f"{m['config'].get('seeds')}; collect it under its own --preset, or remove {dest} first")
    missing = read_json(src / "missing.json") if (src / "missing.json").exists() else []
    out = {"source": str((src / "metrics.json").relative_to(root)), "partial": not finished, "missing": missing,
           "preregistration": preregistration, "config": m["config"], "summary": m["summary"],
           "verdicts": data["verdicts.json"]}
    atomic_write_json(Path(dest), out)
    return Path(dest)


def main(argv: list[str] | None = None) -> int:
    """``python -m initlab.app.docgen.claims [--results DIR] [--readme FILE] [--check] [--collect-spt RUN]``."""
    parser = argparse.ArgumentParser(prog="python -m initlab.app.docgen.claims",
                                     description="Write the README's claims table from the saved results.")
    parser.add_argument("--results", type=Path, default=Path("docs/results"),
                        help="folder of the saved result files (default: docs/results)")
    parser.add_argument("--readme", type=Path, default=Path("README.md"), help="file holding the claims block")
    parser.add_argument("--page", type=Path, default=None,
                        help="the full claims page (default: docs/claims.md beside the README)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the block or the page is stale")
    parser.add_argument("--collect-spt", type=Path, metavar="RUN_DIR",
                        help="first copy the summary of this synthetic SPT run folder into the results folder "
                             "(as synthetic_spt_PRESET/summary.json)")
    parser.add_argument("--preset", choices=[p for p, _ in spt_claims.SPT_RUNS], default="full",
                        help="with --collect-spt: the preset the run folder holds (default: full)")
    parser.add_argument("--preregistration", default="", metavar="COMMIT",
                        help="with --collect-spt: the commit that preregistered the run (empty: exploratory)")
    parser.add_argument("--earlier-spt", type=Path, metavar="SUMMARY",
                        help="only print the claims of the earlier (2026-11-30) SPT run's summary file under today's "
                             "interval rules (docs/synthetic_spt.md) and exit")
    parser.add_argument("--compare-spt", nargs="+", metavar="LABEL=SUMMARY",
                        help="only print every SPT claim side by side for these saved summaries (label=path, e.g. "
                             "earlier=docs/results/synthetic_spt_earlier/summary.json), under today's rules, and exit")
    args = parser.parse_args(argv)
    if args.compare_spt:
        try:
            runs = []
            for item in args.compare_spt:
                label, sep, path = item.partition("=")
                if not sep or not label or not path:
                    raise ValueError(f"--compare-spt {item!r}: expected LABEL=PATH")
                check_input_path(Path(path), flag="--compare-spt", kind="file", what="a synthetic SPT summary.json")
                runs.append((label, load_results(Path(path).parent, [Path(path).name])[Path(path).name]))
            print(spt_claims.spt_comparison_table(runs))
        except (ValueError, KeyError) as err:
            print(f"{parser.prog}: error: {err}", file=sys.stderr)
            return 2
        return 0
    if args.earlier_spt is not None:
        try:
            check_input_path(args.earlier_spt, flag="--earlier-spt", kind="file", what="a synthetic SPT summary.json")
            print(spt_claims.earlier_spt_table(load_results(args.earlier_spt.parent, [args.earlier_spt.name])[args.earlier_spt.name]))
        except (ValueError, KeyError) as err:
            print(f"{parser.prog}: error: {args.earlier_spt}: {err}", file=sys.stderr)
            return 2
        return 0
    try:
        check_input_path(args.readme, flag="--readme", kind="file",
                         what="the README holding the claims block; run from the repository root or pass the file")
        check_input_path(args.results, flag="--results", kind="folder", what="the saved result files, docs/results")
        check_input_path(args.collect_spt, flag="--collect-spt", kind="folder", what="an initlab synthetic spt run folder")
        if args.collect_spt is not None:
            if args.preset == "full" and not args.preregistration:
                raise ValueError("--preset full is the preregistered confirmatory run: pass --preregistration COMMIT "
                                 "(a default run: --preset default)")
            collect_spt(args.collect_spt, args.results / dict(spt_claims.SPT_RUNS)[args.preset], args.preregistration)
        old = read_text(args.readme)
        new = replace_block(old, claims_table(args.results), str(args.readme))
        page = args.page if args.page is not None else args.readme.parent / "docs" / "claims.md"
        check_output_path(page, flag="--page", kind="file", overwrite=True)  # a generated page: always rewritten
        old_page = read_text(page) if page.is_file() else ""
        new_page = claims_page(args.results)
    except ValueError as err:  # ResultsFileError, InputPathError and OutputPathError included
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    stale = [str(f) for f, a, b_ in ((args.readme, old, new), (page, old_page, new_page)) if a != b_]
    if args.check:
        if stale:
            print(f"{', '.join(stale)}: stale; run python -m initlab.app.docgen.claims", file=sys.stderr)
            return 1
        return 0
    if new != old:
        atomic_write_text(args.readme, new)
    if new_page != old_page:
        atomic_write_text(page, new_page)
    print(f"{args.readme}: claims block {'rewritten' if new != old else 'already current'}; "
          f"{page}: {'rewritten' if new_page != old_page else 'already current'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
