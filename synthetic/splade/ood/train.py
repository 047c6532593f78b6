"""SPLADE training of one OOD cell until its in-domain dev loss plateaus (the stated rule), with a cap.

Role: the training loop of :mod:`initlab.synthetic.splade.ood`: sentence-transformers' ``SparseEncoderTrainer``
with ``SpladeLoss(SparseMultipleNegativesRankingLoss)`` and the FLOPS regulariser (Paria et al., ICLR 2020;
SPLADE v2, arXiv:2109.10086) at the vocabulary-scaled weights with a quadratic warm-up
(:func:`initlab.synthetic.splade.ood.config.flops_weights`), the finite guard of
:func:`initlab.synthetic.splade.train.finite_guard_callback`, and :class:`PlateauRule` deciding when to stop
(:mod:`initlab.synthetic.splade.ood.config`'s docstring states the rule). With ``cfg.hard_negatives`` n > 0 each
training pair carries n BM25 hard negatives (:func:`bm25_negatives`) as extra columns of the loss.
"""

from __future__ import annotations

import contextlib
import io
import math
import shutil
from pathlib import Path
from typing import Any, Callable

import torch

from initlab.synthetic.splade.domains import DomainCorpus
from initlab.synthetic.splade.ood.config import OODConfig, flops_weights
from initlab.synthetic.splade.train import finite_guard_callback, quiet

__all__ = ["PlateauRule", "dev_loss", "train_to_plateau", "bm25_negatives"]


def bm25_negatives(corpus: DomainCorpus, n: int, depth: int = 50) -> list[list[str]]:
    """Per training pair of ``corpus.train_pairs``, its query's ``n`` highest-scoring BM25 documents
    (:func:`initlab.synthetic.splade.ood.bm25.bm25_run`, Lucene BM25) among the training domains' documents that
    are **not relevant** to it (not its source, and not sharing 2 or more of its source's key concepts: the
    corpus's grade-1 rule), searched to ``depth`` documents; fewer than ``n`` found are filled with the next
    non-relevant documents of the source's domain in id order (a query with no word in the index has no BM25 list).

    Raises:
        ValueError: ``n`` < 1 or ``depth`` < ``n``.
    """
    from initlab.synthetic.splade.domains import EvalSet
    from initlab.synthetic.splade.ood.bm25 import bm25_run

    if n < 1 or depth < n:
        raise ValueError(f"n, depth: expected 1 <= n <= depth, got n={n!r}, depth={depth!r}")
    pool = [d for d in corpus.docs if corpus.doc_domain[d] in set(corpus.train_domains)]
    queries = {f"t{i:06d}": q for i, (q, _) in enumerate(corpus.train_pairs)}
    run = bm25_run(EvalSet("train", queries, {}, pool, list(corpus.train_domains)), corpus.docs, top_k=depth)

    def relevant(src: str, other: str) -> bool:
        mine = {c for c, _ in corpus.doc_keys[src]}
        return other == src or (corpus.doc_domain[other] == corpus.doc_domain[src]
                                and len(mine & {c for c, _ in corpus.doc_keys[other]}) >= 2)

    out = []
    for i, (_, src) in enumerate(corpus.train_pairs):
        ranked = sorted(run[f"t{i:06d}"].items(), key=lambda x: (-x[1], x[0]))
        negs = [d for d, _ in ranked if not relevant(src, d)][:n]
        if len(negs) < n:
            negs += [d for d in pool if corpus.doc_domain[d] == corpus.doc_domain[src] and d not in negs
                     and not relevant(src, d)][: n - len(negs)]
        out.append(negs)
    return out


class PlateauRule:
    """The stopping rule: after ``start`` steps, stop when the dev loss has not gone below ``(1 - rel)`` times its
    best value for ``patience`` evaluations in a row. :meth:`update` takes ``(step, loss)`` and returns True to stop."""

    def __init__(self, patience: int, rel: float, start: int) -> None:
        self.patience, self.rel, self.start = patience, rel, start
        self.best = math.inf
        self.stale = 0

    def update(self, step: int, loss: float) -> bool:
        if loss < (1 - self.rel) * self.best:
            self.best, self.stale = loss, 0
        else:
            self.stale += 1
        return step >= self.start and self.stale >= self.patience


@torch.no_grad()
def dev_loss(model, corpus: DomainCorpus, cfg: OODConfig) -> float:
    """In-batch InfoNCE (nats) of the in-domain dev queries with their source documents, in consecutive batches of
    ``cfg.batch_size`` (the last, shorter batch dropped unless it is the only one), averaged over batches; no FLOPS
    term. The model is left in train mode."""
    from initlab.synthetic.splade.measure import splade_vectors

    qids = list(corpus.dev.queries)
    q = splade_vectors(model, [corpus.dev.queries[i] for i in qids], cfg.query_max_len).double()
    d = splade_vectors(model, [corpus.docs[corpus.dev_source[i]] for i in qids], cfg.doc_max_len).double()
    model.train()
    B = cfg.batch_size
    starts = list(range(0, len(qids) - B + 1, B)) or [0]
    losses = []
    for s in starts:
        qs, ds = q[s:s + B], d[s:s + B]
        scores = torch.nan_to_num(qs @ ds.T, nan=0.0, posinf=1e30, neginf=-1e30)
        losses.append(float(torch.nn.functional.cross_entropy(scores, torch.arange(len(qs)))))
    return float(sum(losses) / len(losses))


def train_to_plateau(model, corpus: DomainCorpus, cfg: OODConfig, seed: int, work_dir: Path,
                     on_checkpoint: Callable[[int], dict[str, Any]] | None = None, progress: Any = None) -> dict[str, Any]:
    """Train ``model`` (a SparseEncoder) on ``corpus.train_pairs`` until :class:`PlateauRule` stops it or
    ``cfg.max_steps`` is reached; ``on_checkpoint(step)`` is called at each step of ``cfg.checkpoints`` reached and at
    the stop, and its result saved under that step. ``progress``: advanced one unit per step (None: no reports).

    Returns ``{"steps", "stopped_by" ("plateau" or "cap"), "dev_loss": [{step, loss}], "checkpoints": {step: ...},
    "loss_curve": [{step, loss, ranking, flops_q, flops_d}], "lambda_q", "lambda_d"}``.

    Raises:
        initlab.runs.NonFiniteError: a non-finite gradient or logged loss (training stops at that step).
    """
    from datasets import Dataset
    from sentence_transformers.sparse_encoder import SparseEncoderTrainer, SparseEncoderTrainingArguments
    from sentence_transformers.sparse_encoder.callbacks import SpladeRegularizerWeightSchedulerCallback
    from sentence_transformers.sparse_encoder.losses import SparseMultipleNegativesRankingLoss, SpladeLoss
    from transformers import TrainerCallback

    lam_q, lam_d = flops_weights(cfg)
    model.max_seq_length = cfg.doc_max_len
    columns = {"query": [q for q, _ in corpus.train_pairs], "document": [corpus.docs[d] for _, d in corpus.train_pairs]}
    if cfg.hard_negatives:  # extra negative columns: SparseMultipleNegativesRankingLoss scores them with the batch's
        negs = bm25_negatives(corpus, cfg.hard_negatives)
        for j in range(cfg.hard_negatives):
            columns[f"negative_{j + 1}"] = [corpus.docs[x[j]] for x in negs]
    ds = Dataset.from_dict(columns)
    loss = SpladeLoss(model, SparseMultipleNegativesRankingLoss(model), document_regularizer_weight=lam_d,
                      query_regularizer_weight=lam_q)
    args = SparseEncoderTrainingArguments(
        output_dir=str(work_dir), max_steps=cfg.max_steps, per_device_train_batch_size=cfg.batch_size,
        learning_rate=cfg.lr, warmup_steps=max(1, int(round(cfg.lr_warmup_ratio * cfg.max_steps))),
        logging_steps=cfg.log_every, logging_nan_inf_filter=False, save_strategy="no", report_to="none",
        use_cpu=True, seed=seed, data_seed=seed, dataloader_num_workers=0, disable_tqdm=True,
        batch_sampler="no_duplicates",
    )
    rule = PlateauRule(cfg.patience, cfg.plateau_rel, int(math.ceil(cfg.reg_warmup_ratio * cfg.max_steps)))
    out: dict[str, Any] = {"dev_loss": [], "checkpoints": {}, "stopped_by": "cap", "lambda_q": lam_q, "lambda_d": lam_d}

    class Plateau(TrainerCallback):
        def on_step_end(self, a, state, control, **kw):
            step = state.global_step
            if progress is not None:
                progress.advance(1)
            stop = False
            if step % cfg.eval_every == 0 and step < cfg.max_steps:
                v = dev_loss(model, corpus, cfg)
                out["dev_loss"].append({"step": step, "loss": v})
                stop = rule.update(step, v)
            if step in cfg.checkpoints and on_checkpoint is not None:
                out["checkpoints"][step] = on_checkpoint(step)
                model.train()
            if stop:
                out["stopped_by"] = "plateau"
                control.should_training_stop = True

    guard = finite_guard_callback(f"OOD synthetic SPLADE training (seed {seed})")
    with quiet():
        with contextlib.redirect_stderr(io.StringIO()):
            trainer = SparseEncoderTrainer(
                model=model, args=args, train_dataset=ds, loss=loss,
                callbacks=[SpladeRegularizerWeightSchedulerCallback(loss, scheduler_type="quadratic",
                                                                    warmup_ratio=cfg.reg_warmup_ratio), guard, Plateau()])
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        trainer.remove_callback(PrinterCallback)
        trainer.remove_callback(ProgressCallback)
        try:
            trainer.train()
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)
    steps = int(trainer.state.global_step)
    out["steps"] = steps
    if steps not in out["checkpoints"] and on_checkpoint is not None:
        out["checkpoints"][steps] = on_checkpoint(steps)
    out["dev_loss"].append({"step": steps, "loss": dev_loss(model, corpus, cfg)})
    out["loss_curve"] = [{"step": int(r["step"]), "loss": r.get("loss"), "ranking": r.get("base_loss"),
                          "flops_q": r.get("query_regularizer_loss"), "flops_d": r.get("document_regularizer_loss")}
                         for r in trainer.state.log_history if "base_loss" in r]
    out["checkpoints"] = {str(k): v for k, v in sorted(out["checkpoints"].items())}
    return out
