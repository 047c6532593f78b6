"""The README's claims table ("What reproduces"), generated from the saved result files in ``docs/results/``.

Each row of :data:`CLAIMS` holds the seed's claim and number (fixed text: the papers' words), the evidence
links, the result files it reads and the function that turns them into the verdict cell; the rows live in
:mod:`initlab.app.docgen.claim_rows`, one module per evidence module of :mod:`initlab.evidence` (a new claim is
one entry in its module's ``CLAIMS``). Rows for experiments that were
not run carry their reason instead. The table is written between the markers :data:`BEGIN_MARK` and
:data:`END_MARK` of the README::

    python -m initlab.app.docgen.claims                  # rewrite the block of README.md from docs/results/
    python -m initlab.app.docgen.claims --check          # exit 1 if the block is stale
    python -m initlab.app.docgen.claims --collect-spt results/synthetic_spt/full --preset full --preregistration COMMIT

This module only reads saved files (no experiment code); ``docs/results/README.md`` names the command
that made each file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from initlab.app.docgen.claim_rows import Claim, diagnose_claims, lra_claims, splade_claims, spt_claims, theory_claims
from initlab.runs import atomic_write_json, atomic_write_text, check_input_path
from initlab.textio import read_json, read_text

__all__ = ["Claim", "CLAIMS", "BEGIN_MARK", "END_MARK", "ResultsFileError", "load_results", "claims_table",
           "replace_block", "collect_spt", "main"]

BEGIN_MARK, END_MARK = "<!-- BEGIN claims -->", "<!-- END claims -->"
HEADER = ["| seed claim | seed number | our verdict | evidence |", "| --- | --- | --- | --- |"]


class ResultsFileError(ValueError):
    """A saved result file is missing or does not hold what a row needs; the message names the file."""


#: the row modules, in table order; each mirrors its evidence module (a new claim is one entry in its ``CLAIMS``)
ROW_MODULES = (theory_claims, spt_claims, lra_claims, splade_claims, diagnose_claims)
CLAIMS: list[Claim] = [claim for module in ROW_MODULES for claim in module.CLAIMS]


def load_results(results_dir: str | Path, names: Sequence[str] | None = None,
                 hint: str = "; docs/results/README.md names the command that writes it") -> dict[str, Any]:
    """``{name: parsed JSON}`` for every file the rows need (or ``names``) and every optional file present,
    from ``results_dir``.

    Raises:
        ResultsFileError: a needed file is missing, or a file is not valid JSON or not a JSON object (the message
            names it).
    """
    root = Path(results_dir)
    wanted = list(names) if names is not None else sorted({f for c in CLAIMS for f in c.files})
    if names is None:
        wanted += sorted({f for c in CLAIMS for f in c.optional if (root / f).is_file()} - set(wanted))
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


def verdict_cell(claim: Claim, results: dict[str, Any], results_dir: str | Path = "docs/results") -> str:
    """The verdict cell of one row.

    Raises:
        ResultsFileError: a file lacks a field the row needs or holds a wrong type (names the files).
    """
    if claim.verdict is None:
        return claim.verdict_text
    try:
        text = claim.verdict(results)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
        files = ", ".join(str(Path(results_dir) / f) for f in claim.files + claim.optional if f in results)
        raise ResultsFileError(f"{files}: missing or malformed field for the claims row {claim.claim[:50]!r}: "
                               f"{type(err).__name__}: {err}") from err
    return text.replace("|", "\\|").replace("\n", " ")


LEGEND = ("Every verdict is computed from the saved per-seed numbers by one function per claim (`initlab.evidence`) "
          "and names the preset and seeds of its run (`full`: the preregistered confirmatory run; `default`: what "
          "`initlab reproduce` runs). Numbers read `estimate [interval] (kind, n seeds)`: a gain is a paired mean "
          "difference in accuracy points with its 95 % t-interval; an equivalence a paired mean difference with its 90 % "
          "TOST interval; a share the ratio of mean gains with its 95 % Fieller interval; `mean ± sd` is the mean over "
          "seeds and the sample standard deviation. An interval that contains its threshold reads **inconclusive**, "
          "with the number of seeds that would decide it.")


def claims_table(results_dir: str | Path = "docs/results") -> str:
    """The README block: markers, legend, header and one row per claim, from the files in ``results_dir``."""
    results = load_results(results_dir)
    lines = [BEGIN_MARK, LEGEND, "", *HEADER]
    for c in CLAIMS:
        lines.append(f"| {c.claim} | {c.seed_number} | {verdict_cell(c, results, results_dir)} | {c.evidence} |")
    return "\n".join(lines + [END_MARK])


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
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the block is stale")
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
    except ValueError as err:  # ResultsFileError and InputPathError included
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    if args.check:
        if new != old:
            print(f"{args.readme}: claims block is stale; run python -m initlab.app.docgen.claims", file=sys.stderr)
            return 1
        return 0
    if new != old:
        atomic_write_text(args.readme, new)
    print(f"{args.readme}: claims block {'rewritten' if new != old else 'already current'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
