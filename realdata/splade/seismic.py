"""Approximate retrieval with Seismic (pyseismic-lsr): build an index of sparse document vectors, search it, time
both; beside the exact :class:`initlab.realdata.splade.retrieval.SparseIndex` it is compared with
(:func:`initlab.realdata.splade.retrieval.recall_at_k`)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from initlab.realdata.splade.retrieval import to_scipy_csr

__all__ = ["seismic_search", "seismic_build", "seismic_query"]


def seismic_search(queries, docs, k: int = 10, *, n_postings: int = 3500, query_cut: int = 20,
                   heap_factor: float = 0.8, summary_energy: float = 0.4, vocab: Sequence[str] | None = None,
                   num_threads: int = 0):
    """Approximate top-``k`` with pyseismic-lsr (Bruch et al., SIGIR 2024, "Efficient inverted indexes for
    approximate retrieval over learned sparse representations").

    Terms are passed to seismic as strings (``vocab[j]`` or ``str(j)``). Returns
    ``(indices (Nq, k) int64 with -1 padding, scores (Nq, k) float32 with -inf padding, build_seconds,
    search_seconds)``.

    Raises:
        ImportError: pyseismic-lsr is not installed (``pip install pyseismic-lsr``).
    """
    import time

    q = to_scipy_csr(queries, "queries")
    t0 = time.perf_counter()
    index = seismic_build(docs, n_postings=n_postings, summary_energy=summary_energy, vocab=vocab,
                           num_threads=num_threads)
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    out, scores = seismic_query(index, q, k, query_cut=query_cut, heap_factor=heap_factor, num_threads=num_threads)
    search_s = time.perf_counter() - t0
    return out, scores, build_s, search_s


def seismic_build(docs, *, n_postings: int, summary_energy: float, vocab: Sequence[str] | None, num_threads: int):
    """Build a seismic index of ``docs (N, V)``; returns ``(index, term names)`` for :func:`seismic_query`."""
    try:
        import seismic
    except ImportError as err:  # pragma: no cover - optional dependency
        raise ImportError("seismic backend: pip install pyseismic-lsr") from err
    d = to_scipy_csr(docs, "docs")
    st = seismic.get_seismic_string()
    names = np.array(list(vocab) if vocab is not None else [str(j) for j in range(d.shape[1])], dtype=st)
    ds = seismic.SeismicDataset()
    for row in range(d.shape[0]):
        lo, hi = d.indptr[row], d.indptr[row + 1]
        ds.add_document(str(row), names[d.indices[lo:hi]], d.data[lo:hi].astype(np.float32))
    index = seismic.SeismicIndex.build_from_dataset(ds, n_postings=n_postings, summary_energy=summary_energy,
                                                     num_threads=num_threads)
    return index, names


def seismic_query(built, q, k: int, *, query_cut: int = 20, heap_factor: float = 0.8, num_threads: int = 0):
    """Search a :func:`seismic_build` index with ``q (Nq, V)`` CSR; ``(indices (Nq, k), scores (Nq, k))``
    padded with -1 / -inf."""
    import seismic

    index, names = built
    st = seismic.get_seismic_string()
    qids = np.array([str(i) for i in range(q.shape[0])], dtype=st)
    comps = [names[q.indices[q.indptr[i]:q.indptr[i + 1]]] for i in range(q.shape[0])]
    vals = [q.data[q.indptr[i]:q.indptr[i + 1]].astype(np.float32) for i in range(q.shape[0])]
    res = index.batch_search(qids, comps, vals, k=k, query_cut=query_cut, heap_factor=heap_factor, num_threads=num_threads)
    out = np.full((q.shape[0], k), -1, dtype=np.int64)
    scores = np.full((q.shape[0], k), -np.inf, dtype=np.float32)
    # batch_search does not keep the query order (it depends on a hash seed): place each hit list by the
    # query id carried in its tuples, never by position.
    for hits in res:
        for j, (qid, score, doc) in enumerate(hits[:k]):
            i = int(qid)
            out[i, j] = int(doc)
            scores[i, j] = score
    return out, scores
