"""Retrieval evaluation of the OOD synthetic SPLADE: a SPLADE encoder (or a BM25 run) on every evaluation set.

Role: nDCG@10 (``ir_measures``, graded qrels) per :class:`initlab.synthetic.splade.domains.EvalSet`, on all its
queries and on its two halves (``select``: even positions, ``test``: odd positions; the best k is chosen on one
and judged on the other, :mod:`initlab.synthetic.splade.claims`), plus the sparsity of the vectors. Every set's
figures carry ``per_query``, the nDCG@10 of each query in the set's order, for the within-seed bootstrap
(:mod:`initlab.synthetic.splade.ood.noise`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from initlab.synthetic.splade.domains import DomainCorpus, EvalSet

__all__ = ["NDCG_KEYS", "ndcg_of_run", "mean_metrics", "evaluate_sets", "encode_docs", "shift_groups", "shift_means"]

#: the nDCG@10 figures of one evaluation set (:func:`ndcg_of_run`): all queries and the two halves
NDCG_KEYS = ("ndcg@10", "ndcg_select", "ndcg_test")


def ndcg_of_run(run: dict[str, dict[str, float]], es: EvalSet) -> dict[str, Any]:
    """``{"ndcg@10", "ndcg_select", "ndcg_test", "per_query"}`` of ``run`` (``{qid: {doc_id: score}}``) on ``es``; a
    query that retrieves nothing scores 0; ``per_query`` lists each query's nDCG@10 in ``es.queries`` order."""
    import ir_measures
    from ir_measures import nDCG

    qids = list(es.queries)
    qrels = [ir_measures.Qrel(q, d, g) for q, rel in es.qrels.items() for d, g in rel.items()]
    scored = [ir_measures.ScoredDoc(q, d, s) for q, ds in run.items() for d, s in ds.items()]
    per = {q: 0.0 for q in qids}
    for m in ir_measures.iter_calc([nDCG @ 10], qrels, scored):
        per[m.query_id] = float(m.value)
    return {"ndcg@10": float(np.mean([per[q] for q in qids])), "ndcg_select": float(np.mean([per[q] for q in qids[0::2]])),
            "ndcg_test": float(np.mean([per[q] for q in qids[1::2]])) if len(qids) > 1 else float("nan"),
            "per_query": [per[q] for q in qids]}


def mean_metrics(ms: Sequence[dict[str, float]]) -> dict[str, float]:
    """The mean of each :data:`NDCG_KEYS` figure over evaluation sets ``ms`` (BEIR's mean over data sets)."""
    return {k: float(np.mean([m[k] for m in ms])) for k in NDCG_KEYS}


def encode_docs(model, corpus: DomainCorpus, doc_max_len: int, extra: Sequence[EvalSet] = ()) -> dict[str, torch.Tensor]:
    """SPLADE vectors ``(V,)`` of every document any evaluation set (the corpus's and ``extra``) retrieves from,
    by doc id."""
    from initlab.synthetic.splade.measure import splade_vectors

    need = sorted({d for es in [corpus.dev, *corpus.ood, *extra] for d in es.doc_ids})
    vecs = splade_vectors(model, [corpus.docs[d] for d in need], doc_max_len)
    return {d: vecs[i] for i, d in enumerate(need)}


def shift_groups(corpus: DomainCorpus, shifted: Sequence[EvalSet]) -> dict[str, list[str]]:
    """The query-shift sets grouped as the map reads them: ``{"id@p<p>": [dev set name], "ood@p<p>": [the
    out-of-domain sets' names]}`` for each synonym rate p among ``shifted``
    (:func:`initlab.synthetic.splade.domains.query_shift_set`'s names ``<set>@p<p>``)."""
    out: dict[str, list[str]] = {}
    for es in shifted:
        base, p = es.name.split("@p")
        out.setdefault(("id" if base == corpus.dev.name else "ood") + f"@p{p}", []).append(es.name)
    return out


def shift_means(corpus: DomainCorpus, shifted: Sequence[EvalSet], per_set: dict[str, dict[str, float]]
                ) -> dict[str, dict[str, float]]:
    """``{"id@p<p>" | "ood@p<p>": figures}`` from the query-shift sets' figures ``per_set`` (by set name): the
    groups of :func:`shift_groups`, the out-of-domain ones averaged over the held-out domains
    (:func:`mean_metrics`). Used for SPLADE (:func:`evaluate_sets`) and BM25 alike."""
    return {g: mean_metrics([per_set[n] for n in names]) for g, names in shift_groups(corpus, shifted).items()}


def evaluate_sets(model, corpus: DomainCorpus, query_max_len: int, doc_max_len: int,
                  shifted: Sequence[EvalSet] = ()) -> dict[str, Any]:
    """nDCG@10 of the SPLADE ``model`` on the in-domain dev set and each out-of-domain set: ``{"dev": {...},
    "ood": {name: {...}}, "ood_mean": {...}, "d_active_dims", "q_active_dims", "finite_vectors"}``; ``ood_mean``
    averages the held-out domains' nDCG@10 (BEIR's mean over data sets). Non-finite scores count as not
    retrieved; only documents with a positive score are retrieved (an inverted index). With ``shifted`` (query-shift
    sets of the same documents, :func:`initlab.synthetic.splade.domains.query_shift_set`), also ``"shift_sets"``
    ``{name: {...}}`` and ``"shift"`` ``{"id@p<p>" | "ood@p<p>": {...}}`` (the out-of-domain ones averaged over
    the held-out domains, :func:`shift_groups`); the sparsity figures stay the corpus's own sets'."""
    from initlab.synthetic.splade.measure import splade_vectors

    dvec = encode_docs(model, corpus, doc_max_len, shifted)
    out: dict[str, Any] = {"ood": {}}
    finite = all(bool(torch.isfinite(v).all()) for v in dvec.values())
    q_active = []
    own = {corpus.dev.name, *(o.name for o in corpus.ood)}
    shift: dict[str, Any] = {}
    for es in [corpus.dev, *corpus.ood, *shifted]:
        qids = list(es.queries)
        q = splade_vectors(model, [es.queries[i] for i in qids], query_max_len).double()
        d = torch.stack([dvec[x] for x in es.doc_ids]).double()
        finite = finite and bool(torch.isfinite(q).all())
        if es.name in own:
            q_active.append(float((q > 0).sum(1).double().mean()))
        scores = torch.nan_to_num(q @ d.T, nan=0.0, posinf=0.0, neginf=0.0)
        top = torch.topk(scores, k=min(10, len(es.doc_ids)), dim=1)
        run = {qid: {es.doc_ids[j]: float(v) for v, j in zip(top.values[i].tolist(), top.indices[i].tolist()) if v > 0}
               for i, qid in enumerate(qids)}
        m = ndcg_of_run(run, es)
        if es.name not in own:
            shift[es.name] = m
        elif es.name == corpus.dev.name:
            out["dev"] = m
        else:
            out["ood"][es.name] = m
    out["ood_mean"] = mean_metrics(list(out["ood"].values()))
    if shifted:
        out["shift_sets"] = shift
        out["shift"] = shift_means(corpus, shifted, shift)
    allv = torch.stack(list(dvec.values()))
    out["d_active_dims"] = float((allv > 0).sum(1).double().mean())
    out["q_active_dims"] = float(np.mean(q_active))
    out["finite_vectors"] = finite
    return out
