"""The README's headline figures, drawn from the saved results in ``docs/results`` (the files behind the claims
table), never from a new run::

    python -m initlab.app.docgen.headline_figures docs/results --out docs/figures/headline          # redraw
    python -m initlab.app.docgen.headline_figures docs/results --out docs/figures/headline --check  # exit 1 if stale

* ``spt_proximity.png`` -- first-layer attention after SPT against scratch: the proximity mass (attention
  within the task's window) at the start and the end of fine-tuning, one dot per seed, the uniform-attention
  level as a line (``synthetic_spt_full/summary.json``, its ``per_seed`` ``prox_start`` / ``prox_end``);
* ``spt_accuracy.png`` -- test accuracy by condition, one dot per seed and the seed mean as a bar (the same file,
  ``per_seed`` ``test_acc``);
* ``spt_causal.png`` -- the causal round's interventions, the same chart over the preregistered ``causal`` run's
  conditions (``synthetic_spt_causal/summary.json``): scratch, SPT, label-only training with a fixed proximity
  (ALiBi) prior, SPT without position codes, a non-uniform start, last-token pooling;
* ``splade_ndcg_vs_k.png`` -- nDCG@10 against the rescaling factor k per backbone family (tied heads, each
  family's own head norm), the seed mean as a line and every seed as a faint dot
  (``synthetic_splade_full/phase.json``, its ``rows``).

The numbers behind each figure are written to ``data.json`` beside the PNGs, and each PNG carries the SHA-256 of
its numbers in a PNG text chunk (:data:`initlab.paper_figs.headline_figures.HASH_KEY`; the drawing lives in that
module, below the experiments). A staleness check therefore recomputes the numbers from ``docs/results`` (plain
Python arithmetic on saved JSON: the same on every CPU, no training) and compares them and the hashes, never pixels
(they move with the matplotlib version).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Sequence

from initlab.paper_figs.headline_figures import (HASH_KEY, data_hash, draw_accuracy, draw_ndcg, draw_proximity,
                                                 png_text, with_hash)
from initlab.runs import atomic_write_text, check_input_path
from initlab.synthetic.spt.arms import headline_conditions
from initlab.textio import read_json

__all__ = ["SPT", "SPT_CAUSAL", "SPLADE", "FIGURES", "headline_data", "draw_all", "stale", "main"]

SPT = "synthetic_spt_full/summary.json"
SPT_CAUSAL = "synthetic_spt_causal/summary.json"
SPLADE = "synthetic_splade_full/phase.json"
#: figure name -> the result file it reads (relative to the results folder)
FIGURES = {"spt_proximity": SPT, "spt_accuracy": SPT, "spt_causal": SPT_CAUSAL, "splade_ndcg_vs_k": SPLADE}


# ------------------------------------------------------------------------------------------------
# the numbers (plain arithmetic on the saved JSON)
# ------------------------------------------------------------------------------------------------
def _seeds_label(seeds: Sequence[int]) -> str:
    s = sorted(seeds)
    return f"seeds {s[0]}-{s[-1]}" if s == list(range(s[0], s[-1] + 1)) else "seeds " + ", ".join(map(str, s))


def proximity_data(s: dict[str, Any]) -> dict[str, Any]:
    """Per seed, the first-layer proximity mass at fine-tuning start and end of ``scratch`` and ``spt``."""
    per = s["summary"]["per_seed"]
    out = {"run": f"synthetic SPT, preset full, {_seeds_label(s['config']['seeds'])}",
           "uniform": s["summary"]["uniform_proximity"], "conditions": {}}
    for cond in ("scratch", "spt"):
        rows = sorted(per[cond], key=lambda r: r["seed"])
        out["conditions"][cond] = {"seeds": [r["seed"] for r in rows], "start": [r["prox_start"] for r in rows],
                                   "end": [r["prox_end"] for r in rows]}
    return out


def accuracy_data(s: dict[str, Any], chart: str = "accuracy", preset: str = "full") -> dict[str, Any]:
    """Per arm the headline ``chart`` shows (:data:`initlab.synthetic.spt.arms.HEADLINE`, in its order, under the
    arm's ``label``; among the arms of the saved run's config) that the run trained, every seed's test accuracy and
    their mean, and whether it is label-only (its saved condition row names no SPT checkpoint: ``spt`` is ``"-"``;
    grey in the charts)."""
    cfg = s["config"]
    conditions = headline_conditions(chart, tuple(cfg.get("spt_sweep_epochs", ())), tuple(cfg.get("depths", (1,))))
    per = s["summary"]["per_seed"]
    label_only = {r["condition"]: r["spt"] == "-" for r in s["summary"]["conditions"]}
    conds = []
    for name, label in conditions:
        if name in per:
            rows = sorted(per[name], key=lambda r: r["seed"])
            acc = [r["test_acc"] for r in rows]
            conds.append({"condition": name, "label": label, "seeds": [r["seed"] for r in rows], "test_acc": acc,
                          "mean": statistics.fmean(acc), "label_only": label_only[name]})
    return {"run": f"synthetic SPT, preset {preset}, {_seeds_label(s['config']['seeds'])}", "conditions": conds}


def causal_data(s: dict[str, Any]) -> dict[str, Any]:
    """:func:`accuracy_data` over the ``causal`` chart's arms of the ``causal`` run."""
    return accuracy_data(s, "causal", preset="causal")


def ndcg_data(phase: dict[str, Any]) -> dict[str, Any]:
    """Per family: k, every seed's nDCG@10 (tied heads, s = 1) and the seed mean at each k; the family's mean
    W_head Frobenius norm."""
    rows = [r for r in phase["rows"] if r["mode"] == "tied" and r["s"] == 1.0 and not r.get("failed")]
    fams = {}
    for f in phase["config"]["families"]:
        mine = [r for r in rows if r["family"] == f]
        ks = sorted({r["k"] for r in mine})
        seeds = sorted({r["seed"] for r in mine})
        by = {(r["k"], r["seed"]): r["ndcg@10"] for r in mine}
        norms = [n["head_frobenius"] for n in phase["natural_scale"].values() if n["family"] == f]
        fams[f] = {"k": ks, "seeds": seeds, "ndcg": [[by.get((k, sd)) for sd in seeds] for k in ks],
                   "mean": [statistics.fmean([by[(k, sd)] for sd in seeds if (k, sd) in by]) for k in ks],
                   "head_norm": statistics.fmean(norms) if norms else None}
    return {"run": f"synthetic SPLADE, preset full, {_seeds_label(phase['config']['seeds'])}", "families": fams}


def headline_data(results_dir: str | Path) -> dict[str, Any]:
    """Figure name -> its numbers, from the saved files in ``results_dir``.

    Raises:
        FileNotFoundError: a result file is missing (names it).
        ValueError: a file lacks a field a figure needs (names it).
    """
    root = Path(results_dir)
    loaded = {}
    for name in sorted(set(FIGURES.values())):
        path = root / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: saved result file not found; docs/results/README.md names the command that writes it")
        loaded[name] = read_json(path)
    makers = {"spt_proximity": proximity_data, "spt_accuracy": accuracy_data, "spt_causal": causal_data,
              "splade_ndcg_vs_k": ndcg_data}
    out = {}
    for fig, name in FIGURES.items():
        try:
            out[fig] = makers[fig](loaded[name])
        except (KeyError, TypeError, IndexError, statistics.StatisticsError) as err:
            raise ValueError(f"{root / name}: missing or malformed field for the figure {fig}: {type(err).__name__}: {err}") from err
    return out


def draw_all(results_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Draw every headline figure from ``results_dir`` into ``out_dir`` and write ``out_dir/data.json``."""
    data = headline_data(results_dir)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    drawers = {"spt_proximity": draw_proximity, "spt_accuracy": draw_accuracy, "spt_causal": draw_accuracy,
               "splade_ndcg_vs_k": draw_ndcg}
    paths = []
    for fig, numbers in data.items():
        paths += with_hash(drawers[fig](numbers, out / f"{fig}.png"), data_hash(numbers))
    paths.append(atomic_write_text(out / "data.json", json.dumps(data, indent=1, sort_keys=True) + "\n"))
    return paths


def stale(results_dir: str | Path, out_dir: str | Path) -> list[str]:
    """What is out of date in ``out_dir`` against ``results_dir`` (empty: current): ``data.json`` differing from
    the recomputed numbers, a missing figure, or a figure whose embedded hash is not that of its numbers."""
    data, out = headline_data(results_dir), Path(out_dir)
    problems = []
    saved = read_json(out / "data.json") if (out / "data.json").is_file() else None
    if saved != json.loads(json.dumps(data)):
        problems.append(f"{out / 'data.json'}: differs from the numbers in {results_dir}")
    for fig, numbers in data.items():
        png = out / f"{fig}.png"
        if not png.is_file():
            problems.append(f"{png}: missing")
        elif png_text(png).get(HASH_KEY) != data_hash(numbers):
            problems.append(f"{png}: drawn from other numbers than {results_dir} holds")
    return problems


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``python -m initlab.app.docgen.headline_figures RESULTS_DIR [--out DIR] [--check]``."""
    parser = argparse.ArgumentParser(prog=prog or "python -m initlab.app.docgen.headline_figures",
                                     description="draw the README's headline figures from the saved results in docs/results")
    parser.add_argument("results_dir", type=Path, help="folder of the saved result files (docs/results)")
    parser.add_argument("--out", type=Path, default=Path("docs/figures/headline"),
                        help="folder of the figures and their data.json (default: docs/figures/headline)")
    parser.add_argument("--check", action="store_true", help="draw nothing; exit 1 if the committed figures are stale")
    args = parser.parse_args(argv)
    try:
        check_input_path(args.results_dir, flag="results_dir", kind="folder", what="the saved result files, docs/results")
        if args.check:
            problems = stale(args.results_dir, args.out)
            for p in problems:
                print(f"{parser.prog}: stale: {p}", file=sys.stderr)
            return 1 if problems else 0
        paths = draw_all(args.results_dir, args.out)
    except (FileNotFoundError, ValueError) as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
