"""The README's claims table ("What reproduces"), generated from the saved result files in ``docs/results/``.

Each row of :data:`CLAIMS` holds the seed's claim and number (fixed text: the papers' words), the evidence
links, the result files it reads and the function of :mod:`initlab.paper_figs.claims_rows` that turns them
into the verdict cell (the verdict rules are in that module's docstring). Rows for experiments that were
not run carry their reason instead. The table is written between the markers :data:`BEGIN_MARK` and
:data:`END_MARK` of the README::

    python -m initlab.paper_figs.claims                  # rewrite the block of README.md from docs/results/
    python -m initlab.paper_figs.claims --check          # exit 1 if the block is stale
    python -m initlab.paper_figs.claims --collect-spt results/synthetic_spt/full --preset full --preregistration COMMIT

This module only reads saved files (no experiment code); ``docs/results/README.md`` names the command
that made each file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from initlab.paper_figs import claims_rows as rows
from initlab.paper_figs import claims_splade as splade_rows
from initlab.runs import atomic_write_json, atomic_write_text, check_input_path
from initlab.textio import read_json, read_text

__all__ = ["Claim", "CLAIMS", "BEGIN_MARK", "END_MARK", "ResultsFileError", "load_results", "claims_table",
           "replace_block", "collect_spt", "main"]

BEGIN_MARK, END_MARK = "<!-- BEGIN claims -->", "<!-- END claims -->"
HEADER = ["| seed claim | seed number | our verdict | evidence |", "| --- | --- | --- | --- |"]
SPT_DOCS, SPLADE_DOCS = "[synthetic SPT](docs/synthetic_spt.md)", "[synthetic SPLADE](docs/synthetic_splade.md"


class ResultsFileError(ValueError):
    """A saved result file is missing or does not hold what a row needs; the message names the file."""


@dataclass(frozen=True)
class Claim:
    """One row: ``claim`` and ``seed_number`` are the seed's words; ``evidence`` a markdown link cell;
    ``files`` the result files (relative to the results folder) that ``verdict`` needs, ``optional`` those it
    uses when present (the runs of the presets behind a row); a row that was not run has no files and its fixed
    ``verdict_text``."""

    claim: str
    seed_number: str
    evidence: str
    files: tuple[str, ...] = ()
    verdict: Callable[[dict[str, Any]], str] | None = None
    verdict_text: str = ""
    optional: tuple[str, ...] = ()


_SPT_FILES = tuple(f for _, f in rows.SPT_RUNS) + (rows.SPT_EARLIER,)

CLAIMS: list[Claim] = [
    Claim("At uniform attention the label-loss score gradient under mean pooling is query-blind (`1 g^T`); masked "
          "reconstruction's is not", "theorem", "[theory](docs/theory.md)", (rows.THEORY,), rows.theory_row),
    Claim("Self-pretraining learns a proximity (relative-position) attention pattern from sinusoidal positions; label "
          "training does not", "mechanism", SPT_DOCS, (), rows.proximity_row, optional=_SPT_FILES),
    Claim("Self-pretraining gives a large accuracy gain over training from scratch, already at one layer",
          "LRA: +17 (Pathfinder) to +34 points (Image)", SPT_DOCS, (), rows.spt_gain_row, optional=_SPT_FILES),
    Claim("Initialising W_Q, W_K (or all attention weights) from SPT recovers most of the gain", "most of the gain",
          SPT_DOCS, (), rows.attention_weights_row, optional=_SPT_FILES),
    Claim("The gain appears after few SPT epochs, and with SPT on other data", "gains in the ablations", SPT_DOCS,
          (), rows.few_epochs_other_data_row, optional=_SPT_FILES),
    Claim("Attention frozen at init fine-tunes about as well as attention trained from labels; the FFN alone carries "
          "nothing", "ablations", SPT_DOCS, (), rows.frozen_ffn_row, optional=_SPT_FILES),
    Claim("SPT vs from scratch on the five LRA tasks (Transformer)",
          "from scratch 36.4/64.3/57.5/42.4/71.4, SPT 59.2/88.8/90.4/76.0/88.5", "[LRA](docs/lra.md)", (rows.LRA,),
          rows.lra_row),
    Claim("A large MLM-head norm degrades SPLADE, starting from a very high loss and ending in a poor minimum",
          "BEIR-13 nDCG@10: ModernBERT 0.127 vs BERT 0.370", SPLADE_DOCS + "#confirmatory-run-full-seeds-9101-9105)",
          splade_rows.FILES, splade_rows.degradation_row),
    Claim("Dividing W_head by k before training fixes it", "ModernBERT 0.405 at k = 16",
          SPLADE_DOCS + "#confirmatory-run-full-seeds-9101-9105), [at scale](docs/splade_at_scale.md)",
          splade_rows.FILES, splade_rows.fix_row),
    Claim("Rescaling a normal-norm head too far hurts or collapses retrieval (RoBERTa best k = 2; ALBERT hurt by "
          "rescaling)", "no number", SPLADE_DOCS + "#confirmatory-run-full-seeds-9101-9105)",
          splade_rows.FILES, splade_rows.over_rescaling_row),
    Claim("initlab's diagnosis predicts SPT's gain", "no seed number (initlab's own claim)",
          "[diagnose](docs/diagnose.md)", (rows.DIAGNOSE,), rows.diagnose_row),
    Claim("The SPLADE grid: 7 backbones × k in {1, ..., 32} on MS MARCO, BEIR-13", "table of the seed",
          "[SPLADE at scale](docs/splade_at_scale.md)",
          verdict_text="**not run** (needs GPUs this project did not have); pipeline tested end to end on fixtures"),
]


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
    """``python -m initlab.paper_figs.claims [--results DIR] [--readme FILE] [--check] [--collect-spt RUN]``."""
    parser = argparse.ArgumentParser(prog="python -m initlab.paper_figs.claims",
                                     description="Write the README's claims table from the saved results.")
    parser.add_argument("--results", type=Path, default=Path("docs/results"),
                        help="folder of the saved result files (default: docs/results)")
    parser.add_argument("--readme", type=Path, default=Path("README.md"), help="file holding the claims block")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the block is stale")
    parser.add_argument("--collect-spt", type=Path, metavar="RUN_DIR",
                        help="first copy the summary of this synthetic SPT run folder into the results folder "
                             "(as synthetic_spt_PRESET/summary.json)")
    parser.add_argument("--preset", choices=[p for p, _ in rows.SPT_RUNS], default="full",
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
            print(rows.spt_comparison_table(runs))
        except (ValueError, KeyError) as err:
            print(f"{parser.prog}: error: {err}", file=sys.stderr)
            return 2
        return 0
    if args.earlier_spt is not None:
        try:
            check_input_path(args.earlier_spt, flag="--earlier-spt", kind="file", what="a synthetic SPT summary.json")
            print(rows.earlier_spt_table(load_results(args.earlier_spt.parent, [args.earlier_spt.name])[args.earlier_spt.name]))
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
            collect_spt(args.collect_spt, args.results / dict(rows.SPT_RUNS)[args.preset], args.preregistration)
        old = read_text(args.readme)
        new = replace_block(old, claims_table(args.results), str(args.readme))
    except ValueError as err:  # ResultsFileError and InputPathError included
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    if args.check:
        if new != old:
            print(f"{args.readme}: claims block is stale; run python -m initlab.paper_figs.claims", file=sys.stderr)
            return 1
        return 0
    if new != old:
        atomic_write_text(args.readme, new)
    print(f"{args.readme}: claims block {'rewritten' if new != old else 'already current'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
