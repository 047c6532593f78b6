"""Synthetic SPLADE on CPU: collapse under an inflated MLM head, recovery by rescaling it by k.

The inflation sweep (one BERT backbone, its tied matrix inflated; the four-family phase diagram that the CLI and
``initlab reproduce`` run is :mod:`initlab.synthetic.splade_phase`, which reuses the pieces here):

1. a synthetic retrieval corpus with known relevance (:mod:`initlab.synthetic.splade_data`);
2. a tiny ``BertForMaskedLM`` (d = 64, 2 layers, a word-level vocabulary of a few hundred words),
   briefly MLM-pretrained on the corpus documents and cached in the run folder
   (:mod:`initlab.synthetic.splade_model`);
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

Collapse (non-finite loss or weights, empty vectors, or vectors active on almost the whole vocabulary)
is recorded in the cell's ``collapse`` field with a warning, never raised.

Outputs in the run folder: ``config.json``, ``cells/*.json`` (one per cell, resumable),
``backbone/seed=S/`` (cached pretrained backbone), ``metrics.json``, ``metrics.csv``, ``summary.md``,
figures ``splade_*.png`` (drawn by :mod:`initlab.paper_figs.synthetic_splade_figures`), ``DONE``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from initlab.config import derive, to_dict
from initlab.nn.collapse import detect_collapse as shared_detect_collapse
from initlab.nn.pooling import splade_pool
from initlab.runs import RunDir, atomic_write_text, torch_threads
from initlab.theory.score_scale import BASE as SCORE_SCALE_BASE, theory_row
from initlab.theory.score_scale_mc import monte_carlo
from initlab.synthetic.splade_data import CorpusConfig, SyntheticCorpus, make_corpus
from initlab.synthetic.splade_model import BackboneConfig, inflate_head, prepare_backbone

__all__ = [
    "SpladeSweepConfig", "PRESETS", "cell_name", "load_encoder", "splade_vectors", "splade_pool", "flops_pairs",
    "measure_init", "evaluate", "detect_collapse", "train_cell", "run_cell", "run_sweep", "collect_rows", "summarize",
    "theory_curves",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SpladeSweepConfig:
    """The sweep: corpus, backbone, the (inflation x k x seed) grid and the SPLADE recipe.

    ``lambda_q`` / ``lambda_d`` are the maximum FLOPS regulariser weights reached after the quadratic
    warm-up over ``reg_warmup_ratio`` of the ``steps``; ``lr`` is AdamW's peak learning rate with
    linear warm-up over ``lr_warmup_ratio`` of the steps, then linear decay (transformers' default).
    Query/document token limits are ``query_max_len`` / ``doc_max_len`` (T, incl. [CLS] and [SEP]).
    ``torch_threads`` intra-op CPU threads during the sweep (1: the models are tiny, and on a shared
    machine extra threads mostly spin).
    """

    corpus: CorpusConfig = CorpusConfig()
    backbone: BackboneConfig = BackboneConfig()
    inflations: tuple[float, ...] = (1.0, 4.0, 16.0)
    ks: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
    seeds: tuple[int, ...] = (0,)
    steps: int = 200
    batch_size: int = 32
    lr: float = 5e-4
    lr_warmup_ratio: float = 0.1
    lambda_q: float = 5e-2
    lambda_d: float = 3e-2
    reg_warmup_ratio: float = 1 / 3
    query_max_len: int = 12
    doc_max_len: int = 32
    log_every: int = 10
    init_batch: int = 64
    dense_fraction: float = 0.9
    torch_threads: int = 1


BASE = SpladeSweepConfig()
PRESETS: dict[str, SpladeSweepConfig] = {
    "quick": derive(
        BASE,
        corpus=derive(BASE.corpus, n_docs=120, n_train_queries=600, n_dev_queries=40),
        backbone=derive(BASE.backbone, mlm_steps=100),
        inflations=(1.0, 16.0), ks=(1.0, 16.0), seeds=(0,), steps=60, log_every=5,
    ),
    "default": BASE,
    "full": derive(BASE, seeds=(0, 1, 2), steps=500, corpus=derive(BASE.corpus, n_train_queries=5000)),
}


def vocab_size(c: CorpusConfig) -> int:
    """V of the corpus: special tokens + background + topic + entity words."""
    return 5 + c.n_background + c.n_topics * c.topic_words + c.n_entities


def cell_name(inflation: float, k: float, seed: int) -> str:
    """File-safe name of one cell, e.g. ``inf=4_k=16_seed=0``."""
    return f"inf={inflation:g}_k={k:g}_seed={seed}"


@contextlib.contextmanager
def _quiet():
    """Silence transformers / sentence-transformers info logs and known-benign warnings inside a cell."""
    import transformers

    old = transformers.logging.get_verbosity()
    st_logger = logging.getLogger("sentence_transformers")
    old_st = st_logger.level
    bars = transformers.logging.is_progress_bar_enabled()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    st_logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*deprecated.*")
            yield
    finally:
        if bars:
            transformers.logging.enable_progress_bar()
        transformers.logging.set_verbosity(old)
        st_logger.setLevel(old_st)


# ------------------------------------------------------------------------------------------------
# model
# ------------------------------------------------------------------------------------------------
def load_encoder(backbone_dir: Path, inflation: float, k: float, cfg: SpladeSweepConfig, seed: int):
    """SparseEncoder = Transformer(fill-mask) + SpladePooling(max) over the cached backbone, with
    ``W_head <- W_head * inflation / k`` (inflation by :func:`inflate_head`, then
    :func:`initlab.mlmhead.rescale_mlm_head`).

    Raises:
        ValueError: inflation or k not finite and > 0.
    """
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    from initlab.mlmhead import rescale_mlm_head

    torch.manual_seed(seed)
    with _quiet():
        tr = Transformer(str(backbone_dir), transformer_task="fill-mask", max_seq_length=cfg.doc_max_len)
        model = SparseEncoder(modules=[tr, SpladePooling(pooling_strategy="max")], device="cpu")
    inflate_head(tr.auto_model, inflation)
    rescale_mlm_head(tr.auto_model, k)
    return model


@torch.no_grad()
def splade_vectors(model, texts: list[str], max_len: int, batch_size: int = 128) -> torch.Tensor:
    """SPLADE vectors ``a`` of ``texts``, shape ``(N, V)``, float32, in eval mode (non-finite kept)."""
    model.eval()
    old = model.max_seq_length
    model.max_seq_length = max_len
    try:
        with _quiet():
            out = model.encode(texts, batch_size=batch_size, convert_to_tensor=True, convert_to_sparse_tensor=False,
                               show_progress_bar=False)
    finally:
        model.max_seq_length = old
    return out.float().cpu()


def flops_pairs(q: torch.Tensor, d: torch.Tensor) -> float:
    """FLOPS: expected multiplications per query-document pair, ``sum_j p_j(q) p_j(d)`` where ``p_j`` is
    the fraction of queries (documents) with ``a_j > 0`` (Paria et al. 2020; Formal et al. 2021).

    Args:
        q: ``(Nq, V)`` query vectors; d: ``(Nd, V)`` document vectors.
    """
    if q.ndim != 2 or d.ndim != 2 or q.shape[1] != d.shape[1]:
        raise ValueError(f"flops_pairs: expected (Nq, V) and (Nd, V), got {tuple(q.shape)} and {tuple(d.shape)}")
    return float(((q > 0).double().mean(0) * (d > 0).double().mean(0)).sum())


def _batch_features(model, texts: list[str], max_len: int) -> dict[str, torch.Tensor]:
    old = model.max_seq_length
    model.max_seq_length = max_len
    try:
        return model.preprocess(texts)
    finally:
        model.max_seq_length = old


def _rms(g: torch.Tensor) -> float:
    """Root mean over the batch of the squared per-text gradient norm ``||g_i||^2`` of ``(B, T, V)``."""
    return float(g.pow(2).sum(dim=(1, 2)).mean().sqrt())


@torch.no_grad()
def measure_init(model, corpus: SyntheticCorpus, cfg: SpladeSweepConfig, seed: int) -> dict[str, float]:
    """Scale quantities at initialization (before any SPLADE step), for comparison with the theory.

    Returns a dict with:

    * ``head_norm`` (Frobenius norm of ``W_head``), ``head_row_norm`` (mean row norm), ``bias_mean``,
      ``bias_std`` (decoder bias ``b``, not rescaled);
    * ``logit_mean`` / ``logit_std`` (of the token logits ``z`` over the non-padding tokens of the
      first ``init_batch`` documents and all V), ``token_active_fraction`` (``P(z > 0)``),
      ``L_q`` / ``L_d`` (mean tokens per query / document, incl. [CLS] and [SEP]);
    * ``active_fraction`` (fraction of document-vector entries > 0), ``q_active_dims`` /
      ``d_active_dims`` (mean non-zeros), ``flops`` (:func:`flops_pairs`, dev queries x corpus),
      ``flops_reg_d`` (``sum_j (mean over the corpus of a_j)^2``), ``mean_a`` / ``mean_a2``
      (E[a], E[a^2] over document entries), ``mean_a_q``;
    * scores of dev queries: ``score_mean`` (all pairs), ``score_pos`` / ``score_neg`` (with the
      source document / other documents), ``score_spread`` (``sqrt(mean (s(q,d+) - s(q,d-))^2)``, the
      theory's definition);
    * on the first ``init_batch`` train pairs (queries B, documents B, in-batch negatives):
      ``ranking_loss`` (InfoNCE in nats), ``softmax_entropy_ratio`` (entropy / ln B of the score
      softmax; 1 = uniform, 0 = one-hot), and the RMS per-document norms of the gradients with respect
      to the document logits z_d of the ranking loss (``grad_rank``) and of ``lambda_d R_d``
      (``grad_flops``) at the full weight ``lambda_d``, by autograd through :func:`splade_pool`.
    """
    from initlab.mlmhead import head_bias, head_projection

    hf = model[0].auto_model
    w = head_projection(hf).detach().double()
    b = head_bias(hf)
    docs = list(corpus.docs.values())
    qids = list(corpus.dev_queries)
    q = splade_vectors(model, [corpus.dev_queries[i] for i in qids], cfg.query_max_len).double()
    d = splade_vectors(model, docs, cfg.doc_max_len).double()

    feats = _batch_features(model, docs[: cfg.init_batch], cfg.doc_max_len)
    logits = hf(input_ids=feats["input_ids"], attention_mask=feats["attention_mask"]).logits.double()
    z = logits[feats["attention_mask"].bool()]  # (tokens, V)

    doc_index = {did: i for i, did in enumerate(corpus.docs)}
    scores = q @ d.T  # (Nq, Nd)
    rows = torch.arange(len(qids))
    src = torch.tensor([doc_index[corpus.dev_source[i]] for i in qids])
    pos = scores[rows, src]
    neg_mask = torch.ones_like(scores, dtype=torch.bool)
    neg_mask[rows, src] = False
    gaps = (pos[:, None] - scores)[neg_mask]

    pairs = corpus.train_pairs[: cfg.init_batch]
    fq = _batch_features(model, [p[0] for p in pairs], cfg.query_max_len)
    fd = _batch_features(model, [corpus.docs[p[1]] for p in pairs], cfg.doc_max_len)
    aq = splade_pool(hf(input_ids=fq["input_ids"], attention_mask=fq["attention_mask"]).logits.double(),
                     fq["attention_mask"])
    zd = hf(input_ids=fd["input_ids"], attention_mask=fd["attention_mask"]).logits.double()
    with torch.enable_grad():
        zd = zd.requires_grad_(True)
        ad = splade_pool(zd, fd["attention_mask"])
        s = aq @ ad.T  # (B, B); SparseEncoder's similarity is the dot product, MNRL scale 1 for it
        ranking = torch.nn.functional.cross_entropy(s, torch.arange(len(pairs)))
        (g_rank,) = torch.autograd.grad(ranking, zd, retain_graph=True)
        (g_flops,) = torch.autograd.grad(cfg.lambda_d * (ad.mean(0) ** 2).sum(), zd)
    logp = torch.log_softmax(s.detach(), dim=1)
    return {
        "head_norm": float(w.norm()),
        "head_row_norm": float(w.norm(dim=1).mean()),
        "bias_mean": float(b.double().mean()) if b is not None else 0.0,
        "bias_std": float(b.double().std()) if b is not None else 0.0,
        "logit_mean": float(z.mean()),
        "logit_std": float(z.std()),
        "token_active_fraction": float((z > 0).double().mean()),
        "L_q": float(fq["attention_mask"].sum(1).double().mean()),
        "L_d": float(feats["attention_mask"].sum(1).double().mean()),
        "active_fraction": float((d > 0).double().mean()),
        "q_active_dims": float((q > 0).sum(1).double().mean()),
        "d_active_dims": float((d > 0).sum(1).double().mean()),
        "flops": flops_pairs(q, d),
        "flops_reg_d": float((d.mean(0) ** 2).sum()),
        "mean_a": float(d.mean()),
        "mean_a2": float((d ** 2).mean()),
        "mean_a_q": float(q.mean()),
        "score_mean": float(scores.mean()),
        "score_pos": float(pos.mean()),
        "score_neg": float(scores[neg_mask].mean()),
        "score_spread": float(gaps.pow(2).mean().sqrt()),
        "ranking_loss": float(ranking),
        "softmax_entropy_ratio": float(-(logp.exp() * logp).sum(1).mean() / math.log(len(pairs))),
        "grad_rank": _rms(g_rank),
        "grad_flops": _rms(g_flops),
    }


def evaluate(model, corpus: SyntheticCorpus, cfg: SpladeSweepConfig, return_vectors: bool = False):
    """nDCG@10 and MRR@10 (``ir_measures``, graded qrels) on the dev queries, active dims and FLOPS.

    As with an inverted index, a query retrieves only documents sharing at least one active term
    (score > 0); a query that retrieves nothing scores 0 (``ir_measures`` counts queries of the qrels
    that are absent from the run as 0). Non-finite scores (a NaN model) are replaced by 0, i.e. not
    retrieved; such a cell is flagged by :func:`detect_collapse`. Relevance: ``RR@10`` counts any
    grade >= 1 (a document of the query's topic) as relevant, ``nDCG@10`` uses the grades.

    Returns the metrics dict, or ``(metrics, q (Nq, V), d (Nd, V), scores (Nq, Nd))`` with
    ``return_vectors`` (for the near-constant collapse rules).
    """
    import ir_measures
    from ir_measures import RR, nDCG

    qids = list(corpus.dev_queries)
    dids = list(corpus.docs)
    q = splade_vectors(model, [corpus.dev_queries[i] for i in qids], cfg.query_max_len)
    d = splade_vectors(model, [corpus.docs[i] for i in dids], cfg.doc_max_len)
    finite = bool(torch.isfinite(q).all() and torch.isfinite(d).all())
    scores = torch.nan_to_num(q.double() @ d.double().T, nan=0.0, posinf=0.0, neginf=0.0)
    top = torch.topk(scores, k=min(10, len(dids)), dim=1)
    run = [
        ir_measures.ScoredDoc(qid, dids[j], float(v))
        for qi, qid in enumerate(qids)
        for v, j in zip(top.values[qi].tolist(), top.indices[qi].tolist())
        if v > 0  # all-zero (empty) vectors retrieve nothing instead of an arbitrary tie order
    ]
    qrels = [ir_measures.Qrel(qid, did, rel) for qid, rels in corpus.qrels.items() for did, rel in rels.items()]
    agg = ir_measures.calc_aggregate([nDCG @ 10, RR @ 10], qrels, run)
    metrics = {
        "ndcg@10": float(agg[nDCG @ 10]),
        "mrr@10": float(agg[RR @ 10]),
        "q_active_dims": float((q > 0).sum(1).double().mean()),
        "d_active_dims": float((d > 0).sum(1).double().mean()),
        "flops": flops_pairs(q, d),
        "finite_vectors": finite,
    }
    return (metrics, q, d, q.double() @ d.double().T) if return_vectors else metrics


def detect_collapse(loss_curve: list[dict[str, float]], q_active: float, d_active: float, vocab_size: int,
                    finite_weights: bool = True, dense_fraction: float = 0.9, **more: Any) -> list[str]:
    """Reasons a trained cell counts as collapsed (empty list: not collapsed), from the one detector
    :func:`initlab.nn.collapse.detect_collapse` (``more``: its ``doc_vectors`` / ``scores`` arguments)."""
    return shared_detect_collapse(losses=loss_curve, q_active=q_active, d_active=d_active, vocab_size=vocab_size,
                                  finite_weights=finite_weights, dense_fraction=dense_fraction, **more).reasons


# ------------------------------------------------------------------------------------------------
# training
# ------------------------------------------------------------------------------------------------
def finite_guard_callback(where: str):
    """A transformers ``TrainerCallback`` that stops training at the first non-finite gradient or logged loss.

    Gradients are checked after the backward pass of every optimizer step (before the update), the
    logged losses at every log; either raises :class:`initlab.runs.NonFiniteError` naming the step
    (1-based optimizer step) and ``where``. A non-finite loss always gives non-finite gradients, so the
    gradient check also stops a NaN/inf loss at the step it occurs.
    """
    from transformers import TrainerCallback

    from initlab.runs import check_finite

    class FiniteGuard(TrainerCallback):
        #: ``{step: {"lambda_q": .., "lambda_d": ..}}`` as set by the regulariser-weight scheduler, which
        #: adds them to the logs after the trainer has copied the logs into ``state.log_history``.
        weights: dict[int, dict[str, float]] = {}

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            for p in model.parameters():
                if p.grad is not None and not bool(torch.isfinite(p.grad).all()):
                    check_finite(float("nan"), where=where, step=state.global_step + 1, what="gradient")

        def on_log(self, args, state, control, logs=None, **kwargs):
            logs = logs or {}
            self.weights[state.global_step] = {"lambda_q": logs.get("query_regularizer_weight"),
                                               "lambda_d": logs.get("document_regularizer_weight")}
            for key, v in (logs or {}).items():
                if "loss" in key and isinstance(v, (int, float)):
                    check_finite(float(v), where=f"{where} ({key})", step=state.global_step, what="loss")

    guard = FiniteGuard()
    guard.weights = {}
    return guard


def train_cell(model, corpus: SyntheticCorpus, cfg: SpladeSweepConfig, seed: int, work_dir: Path) -> list[dict[str, float]]:
    """SPLADE training of ``model`` with SparseEncoderTrainer; returns the logged loss curve.

    Each row: ``step``, ``loss`` (total), ``ranking`` (InfoNCE part), ``flops_q`` / ``flops_d`` (the
    weighted FLOPS parts as added to the loss), ``lambda_q`` / ``lambda_d`` (current weights), all
    averaged over the ``log_every`` steps before ``step`` by the trainer.

    Raises:
        initlab.runs.NonFiniteError: a non-finite gradient or logged loss (training stops at that step;
            see :func:`finite_guard_callback`).
    """
    from datasets import Dataset
    from sentence_transformers.sparse_encoder import SparseEncoderTrainer, SparseEncoderTrainingArguments
    from sentence_transformers.sparse_encoder.callbacks import SpladeRegularizerWeightSchedulerCallback
    from sentence_transformers.sparse_encoder.losses import SparseMultipleNegativesRankingLoss, SpladeLoss

    model.max_seq_length = cfg.doc_max_len
    ds = Dataset.from_dict({
        "query": [q for q, _ in corpus.train_pairs],
        "document": [corpus.docs[d] for _, d in corpus.train_pairs],
    })
    loss = SpladeLoss(model, SparseMultipleNegativesRankingLoss(model),
                      document_regularizer_weight=cfg.lambda_d, query_regularizer_weight=cfg.lambda_q)
    args = SparseEncoderTrainingArguments(
        output_dir=str(work_dir), max_steps=cfg.steps, per_device_train_batch_size=cfg.batch_size,
        learning_rate=cfg.lr, warmup_steps=max(1, int(round(cfg.lr_warmup_ratio * cfg.steps))),
        logging_steps=cfg.log_every, logging_nan_inf_filter=False, save_strategy="no", report_to="none",
        use_cpu=True, seed=seed, data_seed=seed, dataloader_num_workers=0, disable_tqdm=True,
        batch_sampler="no_duplicates",
    )
    guard = finite_guard_callback(f"synthetic SPLADE training (seed {seed})")
    with _quiet():
        import io

        with contextlib.redirect_stderr(io.StringIO()):  # the model card's "Computing widget examples" bar
            trainer = SparseEncoderTrainer(
                model=model, args=args, train_dataset=ds, loss=loss,
                callbacks=[SpladeRegularizerWeightSchedulerCallback(loss, scheduler_type="quadratic",
                                                                    warmup_ratio=cfg.reg_warmup_ratio), guard],
            )
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        trainer.remove_callback(PrinterCallback)  # logs go to the cell's loss curve, not stdout
        trainer.remove_callback(ProgressCallback)
        try:
            trainer.train()
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)
    curve = []
    for row in trainer.state.log_history:
        if "base_loss" not in row:
            continue
        step = int(row["step"])
        curve.append({
            "step": step,
            "loss": _opt(row.get("loss")),
            "ranking": _opt(row["base_loss"]),
            "flops_q": _opt(row.get("query_regularizer_loss")),
            "flops_d": _opt(row.get("document_regularizer_loss")),
            "lambda_q": _opt(guard.weights.get(step, {}).get("lambda_q")),
            "lambda_d": _opt(guard.weights.get(step, {}).get("lambda_d")),
        })
    return curve


def _opt(v: Any) -> float | None:
    """``float(v)``, or None for a missing value (never a made-up number)."""
    return None if v is None else float(v)


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
# sweep, summary, CLI
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
    from tqdm.auto import tqdm

    corpus = make_corpus(cfg.corpus)
    grid = [(s, i, k) for s in cfg.seeds for i in cfg.inflations for k in cfg.ks]
    bar = tqdm(grid, desc="synthetic SPLADE cells", disable=not progress)
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
