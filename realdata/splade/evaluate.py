"""Evaluate a SPLADE model: batched encoding, exact top-k retrieval, ir_measures metrics, FLOPS.

For every evaluation set (:class:`initlab.realdata.splade.evalset.RetrievalSet`):

1. encode queries (``encode_query``) and documents (``encode_document``) in batches; on CUDA under
   ``torch.autocast(bfloat16)``;
2. exact top-``top_k`` retrieval by sparse dot products (:class:`~.retrieval.SparseIndex`, on the
   model's device); for sets under BEIR's ``ignore_identical_ids`` convention (ArguAna, Quora) the queries whose
   identical-id document is a copy of the query (:func:`~.evalset.identical_id_policy`: the same id and the same
   text, never a judged-relevant document) get ``top_k + 1`` documents with that self-hit removed
   (:func:`drop_identical_ids`), as BEIR's exact search does, so exactly ``top_k`` remain and ``R@top_k``
   is measured on ``top_k`` documents; the row's ``identical_ids`` counts what was dropped and kept, and a
   warning says so;
3. metrics with ir_measures: RR@10, nDCG@10, R@top_k (grade >= ``ds.binary_rel`` counts for R: 1 from the data,
   2 on TREC DL 2019 by its documented convention; the row records it as ``recall_rel`` and ``recall_rel_source``);
4. FLOPS (expected multiplications per query-document pair, :func:`~.retrieval.flops`) and average
   active dimensions of queries and documents;
5. collapse check (:func:`~.train.detect_collapse`, the one detector of :mod:`initlab.nn.collapse`): NaN
   vectors, active dims -> 0 or ~V, and near-constant representations (mean pairwise cosine of the
   document vectors, share of queries with one identical top-10 ranking). A model with non-finite vectors
   gets NaN metrics; every collapsed model gets a warning and ``collapsed: true``, not a crash.

Ties: the retrieval orders documents by descending score, then ascending document index (the order of
the corpus); the run handed to ir_measures encodes that rank as its score (``top_k - rank``), so every
measure sees the same order (ir_measures itself breaks score ties by document id, differently per measure).

Evaluated queries follow the data policy of :mod:`.data`: those present in both the queries file and the
qrels; each row reports ``n_queries`` (evaluated) beside the counts in the files.

The NanoBEIR summary is the mean nDCG@10 and mean FLOPS over the ``Nano*`` sets.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any, Sequence

import numpy as np
import torch

from .evalset import RetrievalSet, first_ids, identical_id_policy
from .modeling import text_module, vocab_rows
from .retrieval import SparseIndex, active_dims, flops

__all__ = ["truncation", "encode_texts", "evaluate_set", "evaluate_model", "summarise", "ranked_run", "drop_identical_ids", "count_self_hits"]


def encode_texts(model, texts: Sequence[str], *, kind: str, batch_size: int = 128, progress: bool = False,
                 chunk: int = 50_000, rows=None):
    """Encode ``texts`` as queries (``kind="query"``) or documents (``"document"``).

    Returns a ``scipy.sparse.csr_matrix`` ``(n, V)`` float32 (int32 column indices): ~8 bytes per active
    term, so the 8.8M-passage MS MARCO corpus fits in host memory. Encoded ``chunk`` texts at a time, in
    batches of ``batch_size``; bf16 autocast on CUDA. Non-finite weights are kept (see :func:`evaluate_set`).
    ``rows (V,)`` bool (:func:`~.modeling.vocab_rows`): keep only these vocabulary columns (the rows no token id reaches
    are not terms); the matrix is then ``(n, rows.sum())``.
    """
    import scipy.sparse as sp
    from initlab.executor import progress_bar

    if kind not in ("query", "document"):
        raise ValueError(f"kind: expected 'query' or 'document', got {kind!r}")
    fn = model.encode_query if kind == "query" else model.encode_document
    dev = torch.device(str(model.device))
    texts = list(texts)
    parts = []
    for start in progress_bar(range(0, len(texts), chunk), disable=not progress, desc=f"encode {kind}s"):
        ctx = torch.autocast("cuda", dtype=torch.bfloat16) if dev.type == "cuda" else contextlib.nullcontext()
        with ctx, torch.no_grad():
            emb = fn(texts[start:start + chunk], batch_size=batch_size, convert_to_tensor=True,
                     convert_to_sparse_tensor=True, show_progress_bar=False)
        coo = emb.float().cpu().coalesce()
        idx = coo.indices().numpy()
        parts.append(sp.csr_matrix((coo.values().numpy(), (idx[0], idx[1].astype(np.int32))), shape=tuple(coo.shape)))
    if not parts:
        raise ValueError(f"encode_texts: no {kind} texts")
    out = sp.vstack(parts, format="csr").astype(np.float32)
    return out if rows is None else out[:, np.flatnonzero(rows.numpy())].tocsr()


def _has_nonfinite(x) -> bool:
    return bool(x.nnz) and not bool(np.isfinite(x.data).all())


def evaluate_set(model, ds: RetrievalSet, *, top_k: int = 1000, batch_size: int = 128, progress: bool = False,
                 approx: bool = False) -> dict[str, Any]:
    """Metrics of ``model`` on one set (see module docstring). Returns a flat dict.

    ``approx=True`` also retrieves with pyseismic-lsr (:func:`~.seismic.seismic_search`, default
    parameters) and adds ``seismic_recall@{top_k}`` (overlap with the exact top-k), ``seismic_nDCG@10``
    and its build/search seconds.
    """
    import ir_measures
    from ir_measures import R, RR, nDCG

    from .train import detect_collapse

    t0 = time.perf_counter()
    qids, qtexts = list(ds.queries), list(ds.queries.values())
    dids, dtexts = list(ds.corpus), list(ds.corpus.values())
    rows = vocab_rows(model)  # the vocabulary columns that are terms (None: all)
    if rows is not None:  # the rows past every token id, measured apart: never part of the vectors
        Q_all = encode_texts(model, qtexts, kind="query", batch_size=batch_size, progress=progress)
        D_all = encode_texts(model, dtexts, kind="document", batch_size=batch_size, progress=progress)
        keep = np.flatnonzero(rows.numpy())
        unreached = {"unreached_rows": int((~rows).sum()),
                     "q_active_unreached": float(Q_all[:, np.flatnonzero(~rows.numpy())].getnnz(axis=1).mean()),
                     "d_active_unreached": float(D_all[:, np.flatnonzero(~rows.numpy())].getnnz(axis=1).mean())}
        Q, D = Q_all[:, keep].tocsr(), D_all[:, keep].tocsr()
        del Q_all, D_all
    else:
        Q = encode_texts(model, qtexts, kind="query", batch_size=batch_size, progress=progress)
        D = encode_texts(model, dtexts, kind="document", batch_size=batch_size, progress=progress)
        unreached = {"unreached_rows": 0}
    t_enc = time.perf_counter() - t0
    V = int(D.shape[1])
    row: dict[str, Any] = {"set": ds.name, "n_queries": len(qids), "n_docs": len(dids), "encode_s": t_enc,
                           "ignore_identical_ids": ds.ignore_identical_ids, "recall_rel": ds.binary_rel,
                           "recall_rel_source": ds.binary_rel_source, **unreached,
                           "truncation": truncation(model, ds.name, qtexts, dtexts),
                           **{k: ds.meta[k] for k in ("n_queries_file", "n_queries_judged", "judged_queries_without_text",
                                                      "judged_docs_not_in_corpus") if k in ds.meta}}
    if _has_nonfinite(Q) or _has_nonfinite(D):
        verdict = detect_collapse(losses=[], q_active=float("nan"), d_active=float("nan"), vocab_size=V)
        row.update({"RR@10": math.nan, "nDCG@10": math.nan, f"R@{top_k}": math.nan, "flops": math.nan,
                    "q_active": math.nan, "d_active": math.nan, **verdict})
        return row
    qa, da = active_dims(Q), active_dims(D)
    device = model.device if torch.cuda.is_available() else "cpu"
    index = SparseIndex.build(D, device=device)
    t1 = time.perf_counter()
    drop, id_counts = identical_id_policy(ds)
    depth = top_k + 1 if drop else top_k  # one more, for the self-hit dropped below
    scores, idx = index.search(Q, k=depth, progress=progress, chunk_size=64 if index.device.type == "cuda" else 8)
    if drop:
        id_counts["hits_dropped"] = count_self_hits(qids, dids, idx, drop)
        scores, idx = drop_identical_ids(qids, dids, scores, idx, top_k, queries=drop)
    else:
        id_counts["hits_dropped"] = 0
    row["identical_ids"] = id_counts
    _warn_identical_ids(ds, id_counts)
    t_ret = time.perf_counter() - t1
    verdict = detect_collapse(losses=[], q_active=qa, d_active=da, vocab_size=V, doc_vectors=D,
                              rankings=idx[:, :10].numpy())
    run = ranked_run(qids, dids, scores, idx, drop_self=drop)
    measures = [RR @ 10, nDCG @ 10, R(rel=ds.binary_rel) @ top_k]
    agg = ir_measures.calc_aggregate(measures, ds.qrels, run)
    if approx:
        from .retrieval import recall_at_k
        from .seismic import seismic_search

        a_idx, a_sc, build_s, search_s = seismic_search(Q, D, k=min(depth, len(dids)))
        if drop:
            a_sc_t, a_idx_t = drop_identical_ids(qids, dids, torch.from_numpy(a_sc), torch.from_numpy(a_idx), top_k,
                                                 queries=drop)
            a_sc, a_idx = a_sc_t.numpy(), a_idx_t.numpy()
        exact = idx.numpy()
        a_run = ranked_run(qids, dids, torch.from_numpy(a_sc), torch.from_numpy(a_idx), drop_self=drop)
        row.update({f"seismic_recall@{top_k}": recall_at_k(a_idx, exact), "seismic_build_s": build_s,
                    "seismic_search_s": search_s,
                    "seismic_nDCG@10": float(ir_measures.calc_aggregate([nDCG @ 10], ds.qrels, a_run)[nDCG @ 10])})
    row.update({"RR@10": float(agg[RR @ 10]), "nDCG@10": float(agg[nDCG @ 10]),
                f"R@{top_k}": float(agg[R(rel=ds.binary_rel) @ top_k]),
                "flops": flops(Q, D), "q_active": qa, "d_active": da, "retrieve_s": t_ret, **verdict})
    return row


def truncation(model, name: str, queries: Sequence[str], documents: Sequence[str]) -> dict[str, Any] | None:
    """Per kind (``queries``, ``documents``): how many texts the encoder's length limit cuts and the share of tokens
    cut (:func:`initlab.mlmhead.lengths.truncation_counts`), with a warning above
    :data:`~initlab.mlmhead.lengths.TRUNCATION_WARN_SHARE`; ``None`` for an encoder without a tokenizer."""
    from initlab.mlmhead.lengths import truncation_counts, warn_truncation

    mod = text_module(model)
    if mod is None:
        return None
    tok, q_len, d_len = mod
    out = {"queries": truncation_counts(tok, queries, q_len), "documents": truncation_counts(tok, documents, d_len)}
    for kind, counts in out.items():
        warn_truncation(f"{name} {kind}", counts, stacklevel=3)
    return out


def _warn_identical_ids(ds: RetrievalSet, counts: dict[str, int]) -> None:
    """One warning per kind of identical-id decision of :func:`~.evalset.identical_id_policy` that took place."""
    import warnings

    if counts["hits_dropped"]:
        warnings.warn(f"{ds.name}: dropped {counts['hits_dropped']} hit(s) of a document that is a copy of its query "
                      "(the same id and text), BEIR's ignore_identical_ids; counted in the result row's identical_ids",
                      RuntimeWarning, stacklevel=3)
    if counts["kept_judged_relevant"]:
        ids = first_ids(sorted(q for q in ds.queries if ds.qrels.get(q, {}).get(q, 0) > 0))
        warnings.warn(f"{ds.name}: {counts['kept_judged_relevant']} judged-relevant document(s) share their query's id "
                      f"({ids}); kept in the rankings, a judged document is never dropped", RuntimeWarning, stacklevel=3)
    if counts["kept_other_text"]:
        warnings.warn(f"{ds.name}: {counts['kept_other_text']} document(s) share their query's id but hold other text; "
                      "kept in the rankings (neither ids nor the set's name make a document a copy of its query)",
                      RuntimeWarning, stacklevel=3)


def count_self_hits(qids: Sequence[str], dids: Sequence[str], idx: torch.Tensor, queries) -> int:
    """How many of the rankings ``idx (Nq, m)`` of the queries in ``queries`` hold the document of their own id."""
    row_of = {d: j for j, d in enumerate(dids)}
    own = torch.tensor([row_of.get(q, -2) if q in queries else -2 for q in qids], dtype=idx.dtype)
    return int((idx == own[:, None]).any(dim=1).sum())


def drop_identical_ids(qids: Sequence[str], dids: Sequence[str], scores: torch.Tensor, idx: torch.Tensor,
                       k: int, *, queries=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Remove from each query's ranking the document whose id is the query's id, keeping the first ``k`` others.

    ``queries`` (a collection of query ids, default all) limits the removal to those queries: the ones whose
    own document is the query (:func:`~.evalset.identical_id_policy`).

    BEIR's exact search (``DenseRetrievalExactSearch.search``) retrieves ``top_k + 1`` documents and skips the
    one with the query's id, so that ``top_k`` remain; ``EvaluateRetrieval.evaluate(ignore_identical_ids=True)``
    then scores them. Pass ``k + 1`` columns to get exactly ``k`` (fewer only when the corpus is that small).

    Args:
        qids: the ``Nq`` query ids; dids: the ``N`` document ids (row ``j`` of the index is ``dids[j]``).
        scores: ``(Nq, m)`` scores; idx: ``(Nq, m)`` document rows, ranked; ``-1`` marks padding.
        k: the number of documents to keep per query.
    Returns:
        ``scores (Nq, min(k, m))`` and ``idx (Nq, min(k, m))``: the order of the other documents unchanged; a
        row that lost its self-hit and has fewer than ``k`` others left ends in padding (``-1``, ``-inf``).
    Raises:
        ValueError: ``scores`` and ``idx`` differ in shape, or ``k < 1``.
    """
    if scores.shape != idx.shape or idx.dim() != 2 or len(qids) != idx.shape[0]:
        raise ValueError(f"scores {tuple(scores.shape)}, idx {tuple(idx.shape)}: expected the same (Nq, m) shape "
                         f"with Nq = {len(qids)} queries")
    if k < 1:
        raise ValueError(f"k: expected >= 1, got {k}")
    row_of = {d: j for j, d in enumerate(dids)}
    own = torch.tensor([row_of.get(q, -2) if queries is None or q in queries else -2 for q in qids],
                       dtype=idx.dtype)  # -2: the query is not a document (or its own document stays)
    hit = idx == own[:, None]  # (Nq, m), at most one True per row
    order = torch.argsort(hit.to(torch.int8), dim=1, stable=True)  # the self-hit moves last, the rest keep order
    idx2, scores2, hit2 = (torch.gather(t, 1, order) for t in (idx, scores, hit))
    idx2 = idx2.masked_fill(hit2, -1)
    scores2 = scores2.masked_fill(hit2, -math.inf)
    return scores2[:, :k].contiguous(), idx2[:, :k].contiguous()


def ranked_run(qids: Sequence[str], dids: Sequence[str], scores: torch.Tensor, idx: torch.Tensor, *,
               drop_self=()) -> dict[str, dict[str, float]]:
    """The run handed to ir_measures: ``{query id: {doc id: top_k - rank}}`` from ``scores (Nq, k)`` and
    ``idx (Nq, k)`` (document rows, already ordered by descending score then ascending index).

    The score of each entry is its rank, not the raw dot product, so that every measure sees our
    order (ir_measures/trec_eval break score ties by document id, and RR and nDCG differently).
    Documents sharing no active term with the query (score <= 0) and padding (index < 0) are not
    retrieved, as with an inverted index; for a query id in ``drop_self`` the document of the same id is dropped
    (BEIR's ``ignore_identical_ids`` where :func:`~.evalset.identical_id_policy` says that document is the query).
    """
    k = idx.shape[1]
    run: dict[str, dict[str, float]] = {}
    for i, qid in enumerate(qids):
        kept = [dids[j] for s, j in zip(scores[i].tolist(), idx[i].tolist())
                if j >= 0 and s > 0 and not (qid in drop_self and dids[j] == qid)]
        run[qid] = {d: float(k - r) for r, d in enumerate(kept)}
    return run


def evaluate_model(model, sets: Sequence[RetrievalSet], *, top_k: int = 1000, batch_size: int = 128,
                   progress: bool = True) -> list[dict[str, Any]]:
    """:func:`evaluate_set` for every set, with a tqdm bar over sets."""
    from initlab.executor import progress_bar

    return [evaluate_set(model, ds, top_k=top_k, batch_size=batch_size, progress=False)
            for ds in progress_bar(list(sets), desc="eval sets", disable=not progress)]


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Headline numbers: MS MARCO dev RR@10, DL19 nDCG@10, BEIR-13 mean nDCG@10, NanoBEIR mean nDCG@10 and
    mean FLOPS (each present only when its sets were evaluated), ``sets`` (RR@10, nDCG@10, FLOPS and
    evaluated queries of every set, e.g. a ``beir:FOLDER`` set), and whether any set collapsed (with the
    reasons, prefixed by the set).

    A row counts toward a named collection by the ``--sets`` name it was evaluated under (``spec``: ``msmarco-dev``,
    a BEIR-13 name, ``nano:<Name>``), never by its set's name: a ``beir:FOLDER`` whose folder is called
    ``NanoFoo`` or ``scifact`` is its own set. Rows saved without ``spec`` fall back to their set's name."""
    from .data import BEIR13

    by = {r.get("spec", r["set"]): r for r in rows}

    def mean(names, key):
        vals = [by[n][key] for n in names if n in by]
        return float(np.mean(vals)) if vals and len(vals) == len(names) else math.nan

    nano = [n for n in by if n.startswith("nano:") or ("spec" not in by[n] and n.startswith("Nano"))]
    headline = {
        "msmarco_dev_RR@10": by.get("msmarco-dev", {}).get("RR@10"),
        "dl19_nDCG@10": by.get("trec-dl-2019", {}).get("nDCG@10"),
        "beir13_nDCG@10": mean(list(BEIR13), "nDCG@10") if all(n in by for n in BEIR13) else None,
        "nanobeir_nDCG@10": mean(nano, "nDCG@10") if nano else None,
        "nanobeir_flops": mean(nano, "flops") if nano else None,
    }
    # Only the headline numbers whose sets were evaluated (no NaN placeholders), then every set's own numbers.
    out = {k: v for k, v in headline.items() if v is not None}
    out["sets"] = {r["set"]: {m: r.get(m) for m in ("RR@10", "nDCG@10", "flops", "n_queries")} for r in rows}
    out["collapsed"] = any(r.get("collapsed") for r in rows)
    out["collapse_reasons"] = sorted({f"{r['set']}: {x}" for r in rows for x in r.get("reasons", [])})
    return out
