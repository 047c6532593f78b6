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
from initlab.synthetic.splade.phase.report import (inspect_rows, mean_sd, phase_rows, recommended_table,
                                                   stability_table, theory_agreement, theory_rows)
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
    ``theory.json`` and ``summary.md`` from the saved cells of ``rd``; returns the ``phase.json`` dict.

    ``phase.json`` holds the raw per-seed numbers (``rows``, ``inspect``) every verdict is computed from, and
    ``verdicts``, a record of the verdicts of :mod:`initlab.synthetic.splade.claims` at writing time (checked
    against a recomputation by every reader, never read as words)."""
    from initlab.synthetic.splade import claims as sc
    from initlab.synthetic.splade.phase.config import cell_key, cell_spec, inspect_name

    cells = {}
    for p in points:
        if p["cell"] not in cells:
            spec = cell_spec(p["family"], p["mode"], p["s"], p["k"], p["seed"])
            cells[p["cell"]] = rd.load_cell(p["cell"], key=cell_key(cfg, spec))
    inspects = [rd.load_cell(inspect_name(f, s, seed)) for f in cfg.families for s in cfg.head_scales for seed in cfg.seeds]
    natural = {}
    for f in cfg.families:
        for seed in cfg.seeds:
            path = rd.root / "backbone" / f"{f}_seed={seed}" / "natural_scale.json"
            natural[f"{f}_seed={seed}"] = {"family": f, "seed": seed, **read_json(path)}
    rows = phase_rows(points, cells, cfg)
    insp = inspect_rows(inspects)
    rec = recommended_table(rows, inspects, cfg)
    stab = stability_table(rows, cfg)
    raw = {"rows": rows, "inspect": insp, "batch": cfg.init_batch}
    verdicts = sc.evaluate_all(raw, cfg.claims)
    vocab = 5 + cfg.corpus.n_background + cfg.corpus.n_topics * cfg.corpus.topic_words + cfg.corpus.n_entities
    posthoc = [{"cell": name, "family": c["family"], "tied": c["tied"], "e": c["e"], "h": c["h"], "seed": c["seed"], **ph}
               for name, c in sorted(cells.items()) for ph in c.get("posthoc") or []]
    report = {"config": to_dict(cfg), "natural_scale": natural, "rows": rows, "inspect": insp, "recommended": rec,
              "stability": stab, "posthoc": posthoc, "verdicts": {k: v.to_dict() for k, v in verdicts.items()},
              "failed_cells": sorted(n for n, c in cells.items() if c["failed"]),
              "distinct_cells": len(cells), "grid_points": len(points), "sweep_seconds": seconds,
              "cell_cpu_seconds": {f: sorted(c["cpu_seconds"] for c in cells.values() if c["family"] == f)
                                   for f in cfg.families}}
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


def _ms(values: list[Any], spec: str = ".3f") -> str:
    m, sd, n = mean_sd(values)
    if m is None:
        return "-"
    return format(m, spec) + ("" if sd is None else " ± " + format(sd, spec))


def summary_markdown(rep: dict[str, Any], cfg) -> str:
    """The human-readable summary: natural scales, nDCG@10 per k (mean ± sd over seeds), the claim verdicts
    (recomputed from the rows by :mod:`initlab.synthetic.splade.claims`), recommended k, stability."""
    from initlab.synthetic.splade import claims as sc

    raw = sc.as_raw(rep)
    verdicts = sc.evaluate_all(raw, cfg.claims)
    n_seeds = len(cfg.seeds)
    L = ["## Synthetic SPLADE: MLM-head scale x rescaling k, tiny backbone families", "",
         f"{cfg.corpus.n_docs} documents, {cfg.corpus.n_dev_queries} dev queries (best k chosen on the "
         f"{(cfg.corpus.n_dev_queries + 1) // 2} at even positions, every nDCG@10 below on the other "
         f"{cfg.corpus.n_dev_queries // 2}); SPLADE {cfg.steps} steps, batch {cfg.batch_size}, lr {cfg.lr:g}, "
         f"lambda_q {cfg.lambda_q:g}, lambda_d {cfg.lambda_d:g}; seeds {list(cfg.seeds)} (each: backbone pretraining "
         f"and SPLADE training); {rep['distinct_cells']} distinct trained cells for {rep['grid_points']} grid points"
         + (f"; sweep {rep['sweep_seconds']:.0f} s." if rep.get("sweep_seconds") else "."), "",
         "### Natural scale of the pretrained backbones (measured, mean ± sd over seeds)", "",
         "| family | MLM steps / lr / weight decay | head Frobenius | logit std | score sd k=1 | initial InfoNCE k=1 "
         "| dH/H tied k=16 |", "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    from initlab.synthetic.splade.phase.config import backbone_for

    ln_b = math.log(cfg.init_batch)
    for f in cfg.families:
        nat = [n for n in rep["natural_scale"].values() if n["family"] == f]
        bb = backbone_for(cfg, f)
        sd1 = [next((t["score_sd"] for t in i["table"] if t["k"] == 1.0), None) for i in rep["inspect"]
               if i["family"] == f and i["s"] == 1.0]
        init1 = [r["init_infonce"] for r in rep["rows"] if r["family"] == f and r["mode"] == "tied" and r["s"] == 1.0
                 and r["k"] == 1.0]
        L.append(f"| {f} | {bb.mlm_steps} / {bb.mlm_lr:g} / {bb.mlm_weight_decay:g}"
                 f"{'' if bb.decay_embeddings else ' (not on embeddings)'} | {_ms([n['head_frobenius'] for n in nat], '.3g')} "
                 f"| {_ms([n['logit_std'] for n in nat], '.3g')} | {_ms(sd1, '.3g')} | {_ms(init1, '.2f')} "
                 f"| {_ms([n['hidden_change_k16'] for n in nat], '.2g')} |")
    L += ["", f"Initial InfoNCE: in nats on the first {cfg.init_batch} training pairs (chance ln B = {ln_b:.2f}); score sd: "
              f"`mlmhead inspect`'s per-query score sd at k = 1 (its rule's edge sqrt(2 ln B) = {math.sqrt(2 * ln_b):.2f})."]
    for f in cfg.families:
        for s in cfg.head_scales:
            rs = [r for r in rep["rows"] if r["family"] == f and r["s"] == s]
            if not rs:
                continue
            ks = sorted({r["k"] for r in rs})
            modes = [m for m in cfg.modes if any(r["mode"] == m for r in rs)]
            L += ["", f"### {f}" + (f", s = {s:g}" if s != 1.0 else "") + f": nDCG@10 (test queries; mean ± sd over "
                  f"{n_seeds} seed{'s' if n_seeds != 1 else ''}; C = cells flagged collapsed, F = failed)", "",
                  "| k | " + " | ".join(modes) + " |", "| ---: |" + " ---: |" * len(modes)]
            for k in ks:
                cells = []
                for m in modes:
                    sel = [r for r in rs if r["mode"] == m and r["k"] == k]
                    if not sel:
                        cells.append("-")
                        continue
                    txt = _ms([0.0 if r["ndcg_test"] is None else r["ndcg_test"] for r in sel])
                    nc, nf = sum(r["collapsed"] and not r["failed"] for r in sel), sum(r["failed"] for r in sel)
                    cells.append(txt + (f" {nc}C" if nc else "") + (f" {nf}F" if nf else ""))
                L.append(f"| {k:g} | " + " | ".join(cells) + " |")
    L += ["", "### Claim verdicts (rules of `initlab.synthetic.splade.claims`, recomputed from the rows above)", "",
          "Each interval is the 95 % t-interval of the per-seed paired difference (90 % TOST for an equivalence), "
          "over the seeds of the run; thresholds: "
          f"δ = {cfg.claims.min_gain:g} nDCG@10, initial InfoNCE > ln B + {cfg.claims.min_init_excess:g} nats, "
          f"poor minimum > {cfg.claims.min_poor_minimum:g} nats, regret margin ± {cfg.claims.regret_margin:g}, "
          f"k_far = {cfg.claims.k_far:g}; high-norm recipe: {', '.join(cfg.claims.high_norm)}; "
          f"standard recipe: {', '.join(cfg.claims.normal_norm)}.", "", "| claim | verdict |", "| --- | --- |"]
    for c in sc.CLAIMS:
        L.append(f"| {c.title} | {sc.describe_claim(verdicts[c.id]).replace('|', '/')} |")
    L += ["", "### Regrets against the landscape (range: best − worst nDCG@10 over tied k in "
              f"1..{cfg.claims.landscape_k_max:g}; k matters where it is at least {cfg.claims.landscape_factor:g} × "
              f"{cfg.claims.regret_margin:g}; fixed k = {cfg.claims.fixed_k:g}; none: k = 1)", "",
          sc.landscape_markdown(raw, cfg.claims)]
    L += ["", "### Recommended k against the best k (tied; best k chosen on the select queries, nDCG@10 on the test "
              "queries)", "", "| family | s | seed | best k | inspect k (regret) | edge k (regret) | BERT-scale k (regret) |",
          "| --- | ---: | ---: | ---: | --- | --- | --- |"]
    for r in rep["recommended"]:
        L.append(f"| {r['family']} | {r['s']:g} | {r['seed']} | {r['best_k']:g} | "
                 + " | ".join(f"{_fmt(r[f'k_{rule}'], 'g')} ({_fmt(r[f'regret_{rule}'])})" for rule in sc.RULES) + " |")
    L += ["", "### Training stability (tied; k = 1 against the best k, equal steps; mean ± sd over seeds)", "",
          "| family | s | initial InfoNCE k=1 / best | final InfoNCE k=1 / best | roughness k=1 / best | nDCG@10 k=1 / best |",
          "| --- | ---: | --- | --- | --- | --- |"]
    for f in cfg.families:
        for s in cfg.head_scales:
            st = [r for r in rep["stability"] if r["family"] == f and r["s"] == s]
            if not st:
                continue
            pair = lambda key, spec: f"{_ms([r[key + '_k1'] for r in st], spec)} / {_ms([r[key + '_best'] for r in st], spec)}"  # noqa: E731
            L.append(f"| {f} | {s:g} | {pair('init_infonce', '.2f')} | {pair('final_infonce', '.2f')} | "
                     f"{pair('roughness', '.2f')} | {pair('ndcg_test', '.3f')} |")
    flagged = [r for r in rep["rows"] if r["collapsed"]]
    L += ["", f"Collapse flags (the detector's thresholds: mean document cosine > {cfg.max_mean_cosine:g}, one top-10 "
              f"shared by > {cfg.max_same_ranking:g} of the queries, < 1 or > {cfg.dense_fraction:g} V active dims): "
              f"{len({r['cell'] for r in flagged})} of {rep['distinct_cells']} trained cells."]
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
