"""Files of the synthetic SPLADE phase diagram: ``phase.json``, ``phase.csv``, ``recommended_k.csv``,
``theory.json`` and ``summary.md``, computed from the saved cells by :mod:`initlab.synthetic.splade.phase.report`.

``python -m initlab.synthetic.splade.phase.summary RESULTS_DIR`` rewrites them for a finished run.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from initlab.config import to_dict
from initlab.runs import RunDir, atomic_write_text
from initlab.synthetic.splade.phase.report import (_row, phase_rows, recommended_table, regret_summary,
                                                   stability_table, theory_agreement, theory_rows, verdicts)
from initlab.textio import read_json, read_text

__all__ = ["write_report", "summary_markdown", "rewrite_report", "main"]


# ------------------------------------------------------------------------------------------------
# files
# ------------------------------------------------------------------------------------------------
def _fmt(v: Any, spec: str = ".3f") -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float) and not math.isfinite(v):
        return "non-finite"
    return format(v, spec) if isinstance(v, (int, float)) else str(v)


def write_report(rd: RunDir, cfg, points: list[dict[str, Any]], seconds: float | None = None) -> dict[str, Any]:
    """Write ``phase.json`` (everything), ``phase.csv`` (one row per grid point), ``recommended_k.csv``,
    ``theory.json`` and ``summary.md`` from the saved cells of ``rd``; returns the ``phase.json`` dict."""
    from initlab.synthetic.splade.phase.config import cell_key, cell_spec

    cells = {}
    for p in points:
        if p["cell"] not in cells:
            spec = cell_spec(p["family"], p["mode"], p["s"], p["k"], p["seed"])
            cells[p["cell"]] = rd.load_cell(p["cell"], key=cell_key(cfg, spec))
    inspects = [rd.load_cell(f"inspect_{f}_s={s:g}") for f in cfg.families for s in cfg.head_scales]
    natural = {}
    for f in cfg.families:
        natural[f] = read_json(rd.root / "backbone" / f"{f}_seed={cfg.seeds[0]}" / "natural_scale.json")
    rows = phase_rows(points, cells, cfg)
    rec = recommended_table(rows, inspects, cfg)
    stab = stability_table(rows, cfg)
    vocab = 5 + cfg.corpus.n_background + cfg.corpus.n_topics * cfg.corpus.topic_words + cfg.corpus.n_entities
    report = {"config": to_dict(cfg), "natural_scale": natural, "rows": rows, "recommended": rec,
              "regret": regret_summary(rec, cfg.hit_tolerance),
              "regret_edge": regret_summary(rec, cfg.hit_tolerance, rule="edge"), "stability": stab, "verdicts": verdicts(rows, stab, cfg),
              "failed_cells": sorted(n for n, c in cells.items() if c["failed"]),
              "distinct_cells": len(cells), "grid_points": len(points), "sweep_seconds": seconds}
    rd.write_json("phase.json", report)
    rd.write_csv("phase.csv", rows)
    rd.write_csv("recommended_k.csv", rec)
    trows = theory_rows(cells, vocab, cfg)
    rd.write_json("theory.json", {"rows": trows, "agreement": theory_agreement(trows),
                                  "note": "at each cell's own logits (k = 1): InfoNCE from the i.i.d. Gaussian logit "
                                          "model's score spread (theory_row at the measured logit mean and std) and "
                                          "i.i.d. Gaussian scores; active fraction and FLOPS from the per-entry "
                                          "Gaussian logit model with position classes (iid_*: the i.i.d. model's, "
                                          "which does not hold for these backbones); agreement: measured / predicted"})
    atomic_write_text(rd.root / "summary.md", summary_markdown(report, cfg))
    return report


def summary_markdown(rep: dict[str, Any], cfg) -> str:
    """The human-readable summary: natural scales, phase tables per family, stability, recommended k, verdicts."""
    L = ["## Synthetic SPLADE phase diagram: head scale s x rescaling k, four families", "",
         f"{cfg.corpus.n_docs} documents, {cfg.corpus.n_dev_queries} dev queries; backbones d={cfg.backbone.d}, "
         f"{cfg.backbone.layers} layers, {cfg.backbone.mlm_steps} MLM steps; SPLADE {cfg.steps} steps, batch "
         f"{cfg.batch_size}, lr {cfg.lr:g}, lambda_q {cfg.lambda_q:g}, lambda_d {cfg.lambda_d:g}; seeds {list(cfg.seeds)}; "
         f"{rep['distinct_cells']} distinct trained cells for {rep['grid_points']} grid points"
         + (f"; sweep {rep['sweep_seconds']:.0f} s." if rep.get("sweep_seconds") else "."), "",
         "### Natural scale after pretraining (s = 1)", "",
         "| family | head Frobenius | mean row norm | logit std | logit mean | dH/H tied k=2 | dH/H tied k=16 |",
         "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for f, n in rep["natural_scale"].items():
        L.append(f"| {f} | {n['head_frobenius']:.3g} | {n['head_row_norm']:.3g} | {n['logit_std']:.3g} | "
                 f"{n['logit_mean']:.3g} | {n['hidden_change_k2']:.2g} | {n['hidden_change_k16']:.2g} |")
    for f in cfg.families:
        for mode in cfg.modes:
            rs = [r for r in rep["rows"] if r["family"] == f and r["mode"] == mode and r["seed"] == cfg.seeds[0]]
            if not rs:
                continue
            ks = sorted({r["k"] for r in rs})
            L += ["", f"### {f}, mode `{mode}`: nDCG@10 (seed {cfg.seeds[0]}; C = collapsed, F = failed)", "",
                  "| s \\ k | " + " | ".join(f"{k:g}" for k in ks) + " |", "| --- |" + " ---: |" * len(ks)]
            for s in cfg.head_scales:
                cells = []
                for k in ks:
                    r = _row(rs, f, mode, s, k)
                    cells.append("-" if r is None else _fmt(r["ndcg@10"]) + (" F" if r["failed"] else (" C" if r["collapsed"] else "")))
                L.append(f"| {s:g} | " + " | ".join(cells) + " |")
    L += ["", "### Training stability (tied; k = 1 vs the best k, equal steps)", "",
          "| family | s | best k | init InfoNCE k=1 / best | steps to threshold k=1 / best | final InfoNCE k=1 / best "
          "| roughness k=1 / best | nDCG k=1 / best | poor minimum |", "| --- | ---: | ---: | --- | --- | --- | --- | --- | --- |"]
    for r in rep["stability"]:
        L.append(f"| {r['family']} | {r['s']:g} | {r['best_k']:g} | {_fmt(r['init_infonce_k1'], '.2f')} / "
                 f"{_fmt(r['init_infonce_best'], '.2f')} | {_fmt(r['steps_to_threshold_k1'], 'd')} / "
                 f"{_fmt(r['steps_to_threshold_best'], 'd')} | {_fmt(r['final_infonce_k1'], '.2f')} / "
                 f"{_fmt(r['final_infonce_best'], '.2f')} | {_fmt(r['roughness_k1'], '.3f')} / {_fmt(r['roughness_best'], '.3f')} "
                 f"| {_fmt(r['ndcg@10_k1'])} / {_fmt(r['ndcg@10_best'])} | {_fmt(r['poor_minimum'])} |")
    g = rep["regret"]
    L += ["", "### `initlab mlmhead inspect` recommended k vs the grid's best k (tied)", "",
          "| family | s | recommended k | best k | nDCG best | nDCG at recommended | regret | edge k (regret) "
          "| best k output-only (nDCG) |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in rep["recommended"]:
        L.append(f"| {r['family']} | {r['s']:g} | {r['recommended_k']:g} | {_fmt(r['best_k'], 'g')} | {_fmt(r['ndcg_best'])} "
                 f"| {_fmt(r['ndcg_recommended'])} | {_fmt(r['regret'])} | {r['edge_k']:g} ({_fmt(r['regret_edge'])}) "
                 f"| {_fmt(r['best_k_output'], 'g')} "
                 f"({_fmt(r['ndcg_best_output'])}) |")
    L += ["", f"Hit rate {_fmt(g['hit_rate'], '.2f')}, near-hit rate (regret <= {cfg.hit_tolerance:g}) "
              f"{_fmt(g['near_hit_rate'], '.2f')}, mean regret {_fmt(g['mean_regret'])}, max regret {_fmt(g['max_regret'])} "
              f"over {g['rows']} (family, s) rows. Edge rule: hit rate {_fmt(rep['regret_edge']['hit_rate'], '.2f')}, "
              f"mean regret {_fmt(rep['regret_edge']['mean_regret'])}.", "", "### Claim verdicts (rules fixed before the run)", "",
          "| claim | overall | " + " | ".join(cfg.families) + " |", "| --- | --- |" + " --- |" * len(cfg.families)]
    v = rep["verdicts"]
    for key, val in v.items():
        if key == "input_side":
            continue
        L.append(f"| {key} | {val['overall']} | " + " | ".join(_fmt(val["per_family"][f]) for f in cfg.families) + " |")
    for point in next(iter(v["input_side"].values())):
        L.append(f"| input_side ({point}) | - | " + " | ".join(
            v["input_side"][f][point]["verdict"] + (f" ({v['input_side'][f][point]['harm_tied']:+.2f} / "
                                                    f"{v['input_side'][f][point]['harm_output']:+.2f})"
                                                    if "harm_tied" in v["input_side"][f][point] else "")
            for f in cfg.families) + " |")
    if rep["failed_cells"]:
        L += ["", "Failed cells (non-finite gradient or loss): " + ", ".join(rep["failed_cells"])]
    return "\n".join(L) + "\n"


def rewrite_report(results_dir: str | Path) -> dict[str, Any]:
    """Rewrite the tables and ``summary.md`` of a finished run folder from its saved cells (no training;
    cells are checked against their keys). Used to regenerate the results page.

    Raises:
        FileNotFoundError: no finished run (``DONE`` and ``config.json``) in ``results_dir``.
    """
    from initlab.config import from_dict
    from initlab.synthetic.splade.phase.config import PhaseConfig, grid

    root = Path(results_dir)
    if not (root / "DONE").exists() or not (root / "config.json").exists():
        raise FileNotFoundError(f"{root}: expected a finished `initlab synthetic splade` run (DONE, config.json)")
    cfg = from_dict(PhaseConfig, read_json(root / "config.json")["config"])
    rd = object.__new__(RunDir)  # a finished folder, opened read-only for its cells (RunDir() refuses it)
    rd.root, rd.config_record = root, None
    old = read_json(root / "phase.json") if (root / "phase.json").exists() else {}
    return write_report(rd, cfg, grid(cfg), seconds=old.get("sweep_seconds"))


def main(argv: list[str] | None = None) -> int:
    """``python -m initlab.synthetic.splade.phase.summary RESULTS_DIR``: :func:`rewrite_report`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m initlab.synthetic.splade.phase.summary",
                                     description="Rewrite the tables of a finished synthetic SPLADE phase run.")
    parser.add_argument("results_dir", type=Path)
    args = parser.parse_args(argv)
    try:
        rewrite_report(args.results_dir)
    except FileNotFoundError as err:
        parser.error(str(err))
    print(read_text(args.results_dir / "summary.md"))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
