"""BM25 on the OOD synthetic SPLADE's evaluation sets: the lexical anchor (bm25s, Lucene's BM25 variant).

Role: score every :class:`initlab.synthetic.splade.domains.EvalSet` with BM25 (Robertson & Zaragoza, "The
Probabilistic Relevance Framework: BM25 and Beyond", 2009; the ``bm25s`` library, arXiv:2407.03618) over the
same retrieval corpus and queries as SPLADE, tokenised the same way (the corpus's whitespace-separated words,
no stemming, no stop list), and measure nDCG@10 with ``ir_measures`` as SPLADE is measured
(:func:`initlab.synthetic.splade.ood.evaluate.ndcg_of_run`).
"""

from __future__ import annotations

from typing import Any

from initlab.synthetic.splade.domains import EvalSet

__all__ = ["bm25_run", "bm25_scores"]


def bm25_run(es: EvalSet, docs: dict[str, str], k1: float = 1.2, b: float = 0.75, top_k: int = 10
             ) -> dict[str, dict[str, float]]:
    """``{qid: {doc_id: score}}``: the ``top_k`` BM25 documents of every query of ``es`` among ``es.doc_ids``
    (documents with score 0 are not retrieved). ``k1``, ``b``: BM25's saturation and length normalisation
    (Lucene's defaults 1.2 and 0.75)."""
    import bm25s
    import numpy as np

    corpus_tokens = [docs[d].split() for d in es.doc_ids]
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(w, len(vocab)) for w in toks] for toks in corpus_tokens]
    retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
    retriever.index(bm25s.tokenization.Tokenized(ids=ids, vocab=vocab), show_progress=False)
    qids = list(es.queries)
    q_ids = [[vocab[w] for w in es.queries[q].split() if w in vocab] for q in qids]
    run: dict[str, dict[str, float]] = {}
    for qid, toks in zip(qids, q_ids):
        if not toks:
            run[qid] = {}
            continue
        scores = retriever.get_scores(toks)
        top = np.argsort(-scores, kind="stable")[:top_k]
        run[qid] = {es.doc_ids[j]: float(scores[j]) for j in top if scores[j] > 0}
    return run


def bm25_scores(es: EvalSet, docs: dict[str, str], **kw: Any) -> dict[str, float]:
    """nDCG@10 of BM25 on ``es``: ``{"ndcg@10", "ndcg_select", "ndcg_test"}`` (all queries; even / odd positions)."""
    from initlab.synthetic.splade.ood.evaluate import ndcg_of_run

    return ndcg_of_run(bm25_run(es, docs, **kw), es)
