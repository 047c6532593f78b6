"""Measurements of a synthetic SPLADE encoder: vectors, FLOPS, scale at initialisation, dev evaluation, collapse.

Role: everything read off a ``SparseEncoder`` without training it. :func:`measure_init` gives the scale
quantities that :mod:`initlab.theory.score_scale.closed_form` predicts (head norm, logit mean and spread, active
fraction, FLOPS regulariser, score spread, in-batch InfoNCE loss and the two gradient norms w.r.t. the
document logits); :func:`evaluate` gives nDCG@10 / MRR@10 (``ir_measures``), active dims and FLOPS
(expected multiplications per query-document pair, Formal et al. 2021 sec. 4 / Paria et al., ICLR
2020). Collapse is judged by the one detector, :func:`initlab.nn.collapse.detect_collapse`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from initlab.nn.pooling import splade_pool
from initlab.synthetic.splade.config import TrainingRecipe
from initlab.synthetic.splade.data import SyntheticCorpus
from initlab.synthetic.splade.train import quiet
from initlab.theory.score_scale.per_entry import EntryMoments, expected_flops, pooled_active_probability, token_classes

__all__ = ["splade_vectors", "flops_pairs", "batch_features", "measure_init", "evaluate", "inspect_rows"]


@torch.no_grad()
def splade_vectors(model, texts: list[str], max_len: int, batch_size: int = 128) -> torch.Tensor:
    """SPLADE vectors ``a`` of ``texts``, shape ``(N, V)``, float32, in eval mode (non-finite kept)."""
    model.eval()
    old = model.max_seq_length
    model.max_seq_length = max_len
    try:
        with quiet():
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


def batch_features(model, texts: list[str], max_len: int) -> dict[str, torch.Tensor]:
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
def measure_init(model, corpus: SyntheticCorpus, cfg: TrainingRecipe, seed: int) -> dict[str, float]:
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
    * the per-entry Gaussian logit model with position classes
      (:mod:`initlab.theory.score_scale.per_entry`) fitted on the logits of the corpus documents and of the dev
      queries (the same texts as the measured values): ``pred_active_fraction``, ``pred_d_active_dims``,
      ``pred_q_active_dims`` and ``pred_flops`` (dev queries x corpus);
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
    q = splade_vectors(model, [corpus.dev_queries[i] for i in corpus.dev_queries], cfg.query_max_len).double()
    d = splade_vectors(model, docs, cfg.doc_max_len).double()

    feats = batch_features(model, docs[: cfg.init_batch], cfg.doc_max_len)
    logits = hf(input_ids=feats["input_ids"], attention_mask=feats["attention_mask"]).logits.double()
    z = logits[feats["attention_mask"].bool()]  # (tokens, V)
    scores = _dev_score_stats(q, d, corpus)
    batch = _in_batch_gradients(model, corpus, cfg)
    p_d = _per_entry_activity(model, docs, cfg.doc_max_len, b)  # (Nd, V)
    p_q = _per_entry_activity(model, [corpus.dev_queries[i] for i in corpus.dev_queries], cfg.query_max_len, b)
    return {
        "head_norm": float(w.norm()),
        "head_row_norm": float(w.norm(dim=1).mean()),
        "bias_mean": float(b.double().mean()) if b is not None else 0.0,
        "bias_std": float(b.double().std()) if b is not None else 0.0,
        "logit_mean": float(z.mean()),
        "logit_std": float(z.std()),
        "token_active_fraction": float((z > 0).double().mean()),
        "L_q": batch.pop("L_q"),
        "L_d": float(feats["attention_mask"].sum(1).double().mean()),
        "active_fraction": float((d > 0).double().mean()),
        "q_active_dims": float((q > 0).sum(1).double().mean()),
        "d_active_dims": float((d > 0).sum(1).double().mean()),
        "flops": flops_pairs(q, d),
        "flops_reg_d": float((d.mean(0) ** 2).sum()),
        "mean_a": float(d.mean()),
        "mean_a2": float((d ** 2).mean()),
        "mean_a_q": float(q.mean()),
        "pred_active_fraction": float(p_d.mean()),
        "pred_d_active_dims": float(p_d.sum(1).mean()),
        "pred_q_active_dims": float(p_q.sum(1).mean()),
        "pred_flops": expected_flops(p_q, p_d),
        **scores,
        **batch,
    }


def _per_entry_activity(model, texts: list[str], max_len: int, bias: torch.Tensor | None) -> torch.Tensor:
    """``P(a_ij > 0)`` ``(n, V)`` of ``texts`` under the per-entry Gaussian logit model with position classes
    (:mod:`initlab.theory.score_scale.per_entry`), fitted on these texts' own logits (k = 1: the model as it is)."""
    hf = model[0].auto_model
    feats = batch_features(model, texts, max_len)
    mask = feats["attention_mask"].bool()
    z = hf(input_ids=feats["input_ids"], attention_mask=feats["attention_mask"]).logits.double()  # (n, T, V)
    classes = token_classes(feats["input_ids"], model.tokenizer.all_special_ids)
    moments = EntryMoments(bias, z.shape[-1])
    moments.add(z, classes, mask)
    names, mu, tau = moments.fit()
    counts = torch.stack([((classes == c) & mask).sum(1).double() for c in names], 1)  # (n, C)
    return pooled_active_probability(moments.bias, mu, tau, counts, 1.0)


def _dev_score_stats(q: torch.Tensor, d: torch.Tensor, corpus: SyntheticCorpus) -> dict[str, float]:
    """Scores ``q d^T`` of the dev queries ``q : (Nq, V)`` against the corpus ``d : (Nd, V)``: ``score_mean``
    (all pairs), ``score_pos`` / ``score_neg`` (source document / the others), ``score_spread``
    (``sqrt(mean (s(q,d+) - s(q,d-))^2)``, the theory's definition)."""
    qids = list(corpus.dev_queries)
    doc_index = {did: i for i, did in enumerate(corpus.docs)}
    scores = q @ d.T  # (Nq, Nd)
    rows = torch.arange(len(qids))
    src = torch.tensor([doc_index[corpus.dev_source[i]] for i in qids])
    pos = scores[rows, src]
    neg_mask = torch.ones_like(scores, dtype=torch.bool)
    neg_mask[rows, src] = False
    gaps = (pos[:, None] - scores)[neg_mask]
    return {"score_mean": float(scores.mean()), "score_pos": float(pos.mean()),
            "score_neg": float(scores[neg_mask].mean()), "score_spread": float(gaps.pow(2).mean().sqrt())}


def _in_batch_gradients(model, corpus: SyntheticCorpus, cfg: TrainingRecipe) -> dict[str, float]:
    """On the first ``init_batch`` train pairs (B queries, B documents, in-batch negatives): ``L_q`` (mean
    query tokens), ``ranking_loss`` (InfoNCE, nats), ``softmax_entropy_ratio`` (entropy / ln B of the score
    softmax) and the RMS per-document norms of the gradients w.r.t. the document logits ``z_d : (B, T, V)``
    of the ranking loss (``grad_rank``) and of ``lambda_d R_d`` (``grad_flops``), by autograd through
    :func:`splade_pool`."""
    hf = model[0].auto_model
    pairs = corpus.train_pairs[: cfg.init_batch]
    fq = batch_features(model, [p[0] for p in pairs], cfg.query_max_len)
    fd = batch_features(model, [corpus.docs[p[1]] for p in pairs], cfg.doc_max_len)
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
        "L_q": float(fq["attention_mask"].sum(1).double().mean()),
        "ranking_loss": float(ranking),
        "softmax_entropy_ratio": float(-(logp.exp() * logp).sum(1).mean() / math.log(len(pairs))),
        "grad_rank": _rms(g_rank),
        "grad_flops": _rms(g_flops),
    }


def evaluate(model, corpus: SyntheticCorpus, cfg: TrainingRecipe, return_vectors: bool = False):
    """nDCG@10 and MRR@10 (``ir_measures``, graded qrels) on the dev queries, active dims and FLOPS.

    As with an inverted index, a query retrieves only documents sharing at least one active term
    (score > 0); a query that retrieves nothing scores 0 (``ir_measures`` counts queries of the qrels
    that are absent from the run as 0). Non-finite scores (a NaN model) are replaced by 0, i.e. not
    retrieved; such a cell is flagged by :func:`detect_collapse`. Relevance: ``RR@10`` counts any
    grade >= 1 (a document of the query's topic) as relevant, ``nDCG@10`` uses the grades.

    ``ndcg_select`` / ``ndcg_test``: nDCG@10 averaged over the dev queries at even / odd positions (the two
    halves on which the best k is chosen and judged, :mod:`initlab.synthetic.splade.claims`).

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
    per_query = {qid: 0.0 for qid in qids}  # a query that retrieves nothing scores 0, as in calc_aggregate
    for m in ir_measures.iter_calc([nDCG @ 10], qrels, run):
        per_query[m.query_id] = float(m.value)
    metrics = {
        "ndcg@10": float(agg[nDCG @ 10]),
        "ndcg_select": float(np.mean([per_query[q] for q in qids[0::2]])),
        "ndcg_test": float(np.mean([per_query[q] for q in qids[1::2]])) if len(qids) > 1 else float("nan"),
        "mrr@10": float(agg[RR @ 10]),
        "q_active_dims": float((q > 0).sum(1).double().mean()),
        "d_active_dims": float((d > 0).sum(1).double().mean()),
        "flops": flops_pairs(q, d),
        "finite_vectors": finite,
    }
    return (metrics, q, d, q.double() @ d.double().T) if return_vectors else metrics


def inspect_rows(inspects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-backbone ``mlmhead inspect`` numbers the claims use: family, s, seed, recommended k and, per k,
    the score sd, logit std, active dims and the detector's flag (the full reports stay in the cells)."""
    out = []
    for rep in inspects:
        out.append({"family": rep["family"], "s": float(rep["s"]), "seed": int(rep.get("seed", 0)),
                    "recommended_k": float(rep["recommended"]["k"]), "rule": rep["recommended"]["rule"],
                    "head_frobenius": rep["head"]["frobenius"],
                    "table": [{key: t.get(key) for key in ("k", "score_sd", "logit_std", "active_dims_per_text",
                                                           "mean_pairwise_cosine", "collapsed")} for t in rep["table"]]})
    return out
