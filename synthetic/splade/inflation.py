"""Synthetic SPLADE on CPU: collapse under an inflated MLM head, recovery by rescaling it by k.

The inflation sweep (one BERT backbone, its tied matrix inflated; the four-family phase diagram that the CLI and
``initlab reproduce`` run is :mod:`initlab.synthetic.splade.phase.runner`, which reuses the pieces here):

1. a synthetic retrieval corpus with known relevance (:mod:`initlab.synthetic.splade.data`);
2. a tiny ``BertForMaskedLM`` (d = 64, 2 layers, a word-level vocabulary of a few hundred words),
   briefly MLM-pretrained on the corpus documents and cached in the run folder
   (:mod:`initlab.synthetic.splade.model`);
3. per cell (inflation, k, seed): the pretrained head projection ``W_head`` is multiplied by the
   inflation factor (imitating a high-norm backbone; tied input embeddings move with it), then
   divided by k with :func:`initlab.mlmhead.rescale_mlm_head`, so the logits are
   ``z = H W_head^T * inflation / k + b``;
4. scale quantities at initialization are measured (head norm, logit mean/std, active fraction,
   active dims, FLOPS, score spread, initial ranking loss);
5. SPLADE training with sentence-transformers' SparseEncoder: ``Transformer(fill-mask)`` +
   ``SpladePooling("max")`` (term weight ``a_j = max_t log(1 + ReLU(z_tj))``, Formal et al. 2021,
   SPLADE v2 eq. 1), ``SpladeLoss(SparseMultipleNegativesRankingLoss)`` with query/document FLOPS
   regulariser weights ``lambda_q``, ``lambda_d`` (Paria et al. 2020: ``sum_j (batch mean of a_j)^2``)
   and the quadratic regulariser-weight warm-up ``SpladeRegularizerWeightSchedulerCallback``, driven by
   ``SparseEncoderTrainer`` on CPU;
6. evaluation on the dev queries: nDCG@10 and MRR@10 (``ir_measures``), mean active dims of queries
   and documents, FLOPS (expected number of multiplications per query-document pair,
   ``sum_j p_j(q) p_j(d)``, Formal et al. 2021 sec. 4 / Paria et al. 2020), and the loss curve
   (ranking and FLOPS parts).

Role of this module: one cell (:func:`run_cell`) and the sweep around it (resumable cells, metrics, the
theory curves, the summary). The pieces: configuration :mod:`initlab.synthetic.splade.config`, model and
training (steps 3 and 5) :mod:`initlab.synthetic.splade.train`, measurements (steps 4 and 6)
:mod:`initlab.synthetic.splade.measure`.

Collapse (non-finite loss or weights, empty vectors, or vectors active on almost the whole vocabulary)
is recorded in the cell's ``collapse`` field with a warning, never raised.

Outputs in the run folder: ``config.json``, ``cells/*.json`` (one per cell, resumable),
``backbone/seed=S/`` (cached pretrained backbone), ``metrics.json``, ``metrics.csv``, ``summary.md``,
figures ``splade_*.png`` (drawn by :mod:`initlab.paper_figs.synthetic_splade_figures`), ``DONE``.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from initlab.config import derive, to_dict
from initlab.runs import RunDir, atomic_write_text, torch_threads
from initlab.theory.score_scale.closed_form import BASE as SCORE_SCALE_BASE, theory_row
from initlab.theory.score_scale.monte_carlo import monte_carlo
from initlab.synthetic.splade.config import SpladeSweepConfig, cell_name, vocab_size
from initlab.synthetic.splade.data import SyntheticCorpus, make_corpus
from initlab.synthetic.splade.measure import detect_collapse, evaluate, measure_init
from initlab.synthetic.splade.model import prepare_backbone
from initlab.synthetic.splade.train import load_encoder, train_cell

__all__ = ["run_cell", "sweep_cell_key", "run_sweep", "collect_rows", "summarize", "theory_curves"]

# ------------------------------------------------------------------------------------------------
# one cell
# ------------------------------------------------------------------------------------------------
def run_cell(backbone_dir: Path, corpus: SyntheticCorpus, cfg: SpladeSweepConfig, inflation: float, k: float,
             seed: int, work_dir: Path) -> dict[str, Any]:
    """One (inflation, k, seed) cell: load, inflate, rescale, measure at init, train, evaluate.

    Returns a JSON-ready dict: ``inflation``, ``k``, ``seed``, ``init`` (:func:`measure_init`),
    ``loss_curve`` (:func:`train_cell`), the metrics of :func:`evaluate`, ``collapse`` (list of
    reasons, see :func:`detect_collapse`, with the near-constant rules on the document vectors and
    scores), ``failed`` (the :class:`initlab.runs.NonFiniteError` message that stopped training, or None;
    a failed cell has no metrics and counts as collapsed) and ``seconds``. A collapsed cell issues a
    ``RuntimeWarning``.
    """
    from initlab.runs import NonFiniteError

    t0 = time.perf_counter()
    model = load_encoder(backbone_dir, inflation, k, cfg, seed)
    init = measure_init(model, corpus, cfg, seed)
    try:
        curve = train_cell(model, corpus, cfg, seed, work_dir)
    except NonFiniteError as err:
        warnings.warn(f"SPLADE cell {cell_name(inflation, k, seed)} failed: {err}", RuntimeWarning, stacklevel=2)
        return {"inflation": inflation, "k": k, "seed": seed, "failed": str(err), "collapse": [str(err)],
                "init": init, "loss_curve": [], "seconds": time.perf_counter() - t0,
                **{m: None for m in ("ndcg@10", "mrr@10", "q_active_dims", "d_active_dims", "flops")}}
    metrics, _, d, scores = evaluate(model, corpus, cfg, return_vectors=True)
    finite_weights = all(bool(torch.isfinite(p).all()) for p in model.parameters())
    reasons = detect_collapse(curve, metrics["q_active_dims"], metrics["d_active_dims"], len(corpus.vocab),
                              finite_weights, cfg.dense_fraction, doc_vectors=d, scores=scores)
    if reasons:
        warnings.warn(f"SPLADE cell {cell_name(inflation, k, seed)} collapsed: {'; '.join(reasons)}",
                      RuntimeWarning, stacklevel=2)
    return {"inflation": inflation, "k": k, "seed": seed, **metrics, "failed": None, "collapse": reasons,
            "init": init, "loss_curve": curve, "seconds": time.perf_counter() - t0}


def sweep_cell_key(cfg: SpladeSweepConfig, inflation: float, k: float, seed: int) -> dict[str, Any]:
    """The config one sweep cell depends on: its grid point and the recipe (not the grid lists)."""
    recipe = {key: v for key, v in to_dict(cfg).items() if key not in ("inflations", "ks", "seeds")}
    return {"inflation": inflation, "k": k, "seed": seed, "recipe": recipe}


# ------------------------------------------------------------------------------------------------
# sweep and summary
# ------------------------------------------------------------------------------------------------
def run_sweep(out: Path, cfg: SpladeSweepConfig, overwrite: bool = False, progress: bool = True,
              draw: Callable[[Path], Any] | None = None) -> RunDir:
    """Run (or resume) every cell of ``cfg`` into ``out``; finished cells are not redone.

    Writes ``config.json`` first, each cell as it finishes, then ``metrics.json`` / ``metrics.csv`` /
    ``summary.md`` / ``theory_curves.json``, calls ``draw(out)`` (the figures, drawn from those files),
    then writes ``DONE``.

    Raises:
        initlab.runs.RunExistsError: ``out`` holds a finished run and ``overwrite`` is False.
        initlab.runs.ConfigMismatchError: ``out`` holds an unfinished run of a different config.
    """
    rd = RunDir(out, overwrite=overwrite, resume=True, config=cfg)
    with torch_threads(cfg.torch_threads):
        _run_cells(rd, cfg, progress, draw)
    return rd


def _run_cells(rd: RunDir, cfg: SpladeSweepConfig, progress: bool, draw: Callable[[Path], Any] | None) -> None:
    from initlab.executor import progress_bar

    corpus = make_corpus(cfg.corpus)
    grid = [(s, i, k) for s in cfg.seeds for i in cfg.inflations for k in cfg.ks]
    bar = progress_bar(grid, desc="synthetic SPLADE cells", disable=not progress)
    for seed, inflation, k in bar:
        name = cell_name(inflation, k, seed)
        bar.set_postfix_str(name)
        if rd.has_cell(name, key=sweep_cell_key(cfg, inflation, k, seed)):
            continue
        backbone = prepare_backbone(rd.root / "backbone" / f"seed={seed}", corpus, cfg.backbone, seed, progress=progress)
        rd.save_cell(name, run_cell(backbone, corpus, cfg, inflation, k, seed, rd.root / "trainer_tmp"),
                     key=sweep_cell_key(cfg, inflation, k, seed))
    rows = collect_rows(rd)
    cells = [rd.load_cell(cell_name(i, k, s)) for s, i, k in grid]
    rd.write_json("metrics.json", {"cells": cells, "table": rows})
    rd.write_csv("metrics.csv", rows)
    atomic_write_text(rd.root / "summary.md", summarize(rows, cfg))
    if not (rd.root / "theory_curves.json").exists():
        theory, mc, note = theory_curves(to_dict(cfg), cells, sorted({c["k"] for c in cells}))
        rd.write_json("theory_curves.json", {"theory": theory, "monte_carlo": mc, "note": note})
    if draw is not None:
        try:
            draw(rd.root)
        except Exception as err:  # a figure must never lose the results; say so loudly
            warnings.warn(f"synthetic SPLADE figures failed: {type(err).__name__}: {err}", RuntimeWarning)
    rd.mark_done()


def collect_rows(rd: RunDir) -> list[dict[str, Any]]:
    """Flat per-cell rows (metrics, init scale quantities with an ``init_`` prefix, final losses)."""
    rows = []
    for name in rd.cells():
        c = rd.load_cell(name)
        last = c["loss_curve"][-1] if c["loss_curve"] else {}
        row = {key: c[key] for key in ("inflation", "k", "seed", "ndcg@10", "mrr@10", "q_active_dims",
                                       "d_active_dims", "flops")}
        row["collapsed"] = bool(c["collapse"])
        row["collapse"] = "; ".join(c["collapse"])
        row["final_ranking"] = last.get("ranking")
        row["final_flops_q"] = last.get("flops_q")
        row["final_flops_d"] = last.get("flops_d")
        row.update({f"init_{key}": v for key, v in c["init"].items()})
        row["seconds"] = c["seconds"]
        rows.append(row)
    rows.sort(key=lambda r: (r["inflation"], r["k"], r["seed"]))
    return rows


def _f(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def theory_curves(cfg: dict[str, Any], cells: list[dict[str, Any]], ks: Sequence[float], with_mc: bool = True):
    """Theory (and Monte Carlo) rows per inflation, parameterised by the measured k = 1 cell.

    Returns ``({inflation: [theory_row per k]}, {inflation: [monte_carlo per k]}, note)``; empty dicts
    and a note if there is no k = 1 cell. Saved by :func:`run_sweep` as ``theory_curves.json`` for the figures.
    """
    vocab = 5 + cfg["corpus"]["n_background"] + cfg["corpus"]["n_topics"] * cfg["corpus"]["topic_words"] + cfg["corpus"]["n_entities"]
    theory, mc = {}, {}
    for inf in sorted({c["inflation"] for c in cells}):
        ref = [c["init"] for c in cells if c["inflation"] == inf and c["k"] == 1.0]
        if not ref:
            continue
        m = {key: float(np.mean([r[key] for r in ref])) for key in ("bias_mean", "logit_mean", "logit_std", "L_q", "L_d")}
        tcfg = derive(SCORE_SCALE_BASE, vocab=vocab, L_q=max(1, round(m["L_q"])), L_d=max(1, round(m["L_d"])),
                      batch=int(cfg["init_batch"]), lambda_q=float(cfg["lambda_q"]), lambda_d=float(cfg["lambda_d"]),
                      mu_b=m["bias_mean"], mu_h=m["logit_mean"] - m["bias_mean"], pooling="max", mc_batches=2)
        theory[inf] = [theory_row(tcfg, m["logit_std"], float(k)) for k in ks]
        if with_mc:
            rows = []
            for k in ks:
                r = monte_carlo(tcfg, m["logit_std"], float(k))
                r["grad_ratio"] = r["grad_flops"] / r["grad_rank"] if r.get("grad_rank", 0) > 0 else float("nan")
                rows.append(r)
            mc[inf] = rows
    return theory, mc, ""


def summarize(rows: list[dict[str, Any]], cfg: SpladeSweepConfig) -> str:
    """Markdown table: per (inflation, k), seed mean (and min-max) of the metrics, collapsed seeds."""
    lines = [
        "## Synthetic SPLADE: collapse and recovery under MLM-head rescaling",
        "",
        f"{cfg.corpus.n_docs} documents, {cfg.corpus.n_dev_queries} dev queries, "
        f"vocabulary V = {vocab_size(cfg.corpus)}; tiny BERT d={cfg.backbone.d}, {cfg.backbone.layers} layers; "
        f"{cfg.steps} steps, batch {cfg.batch_size}, lr {cfg.lr:g}, lambda_q {cfg.lambda_q:g}, lambda_d {cfg.lambda_d:g} "
        f"(quadratic warm-up over {cfg.reg_warmup_ratio:.2f} of the steps); seeds {list(cfg.seeds)}.",
        "Means over seeds (min-max in brackets); `init` columns are measured before training.",
        "",
        "| inflation | k | nDCG@10 | MRR@10 | q dims | d dims | FLOPS | init head norm | init d dims | init loss | collapsed |",
        "| ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    groups: dict[tuple[float, float], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["inflation"], r["k"]), []).append(r)
    for (inf, k), rs in sorted(groups.items()):
        def m(key: str) -> np.ndarray:
            return np.array([_f(r[key]) for r in rs])

        nd, mr = m("ndcg@10"), m("mrr@10")
        coll = sum(r["collapsed"] for r in rs)
        lines.append(
            f"| {inf:g} | {k:g} | {nd.mean():.3f} [{nd.min():.3f}-{nd.max():.3f}] | {mr.mean():.3f} [{mr.min():.3f}-{mr.max():.3f}] "
            f"| {m('q_active_dims').mean():.1f} | {m('d_active_dims').mean():.1f} | {m('flops').mean():.1f} "
            f"| {m('init_head_norm').mean():.1f} | {m('init_d_active_dims').mean():.1f} | {m('init_ranking_loss').mean():.2f} "
            f"| {coll}/{len(rs)} |"
        )
    return "\n".join(lines) + "\n"
