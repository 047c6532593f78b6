"""Exact sparse retrieval, FLOPS and active dimensions for SPLADE vectors.

A SPLADE model maps a query or a document to a non-negative vector over the vocabulary (``V`` term
weights, most of them zero). The score of a query-document pair is the dot product of the two vectors.

* :class:`SparseIndex` -- an inverted index (term -> postings of ``(document, term weight)``) held as
  CSC arrays in torch, on CPU or CUDA. :meth:`SparseIndex.search` is the fast path: exact top-k by
  term-at-a-time accumulation (one ``index_add_`` per query term into a dense score vector of length
  ``N``), chunked over queries, then ``torch.topk``.
* :func:`dense_topk_reference` -- the slow, obvious reference: densify, one matrix product in float64,
  sort. Tests check that both give the same rankings.
* :func:`flops` -- the expected number of multiplications per query-document pair (Paria et al.,
  ICLR 2020, "Minimizing FLOPs to learn efficient sparse representations", eq. 3 and §5):
  ``FLOPS = sum_j p_j^q p_j^d`` where ``p_j^q`` (``p_j^d``) is the fraction of queries (documents)
  whose weight on term ``j`` is non-zero.
* :func:`active_dims` -- the mean number of non-zero terms per vector.
* :func:`seismic_search` -- the optional approximate backend (pyseismic-lsr).

Ties: rankings are ordered by descending score, then ascending document index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

__all__ = [
    "to_scipy_csr",
    "SparseIndex",
    "dense_topk_reference",
    "flops",
    "active_dims",
    "seismic_search",
    "recall_at_k",
]


def to_scipy_csr(x, name: str = "x"):
    """Convert ``x`` to a ``scipy.sparse.csr_matrix`` of float32, shape ``(n, V)``.

    Accepts a scipy sparse matrix, a dense ``numpy.ndarray`` or ``torch.Tensor`` of shape ``(n, V)``,
    or a torch sparse (COO/CSR) tensor of that shape.

    Raises:
        TypeError: ``x`` is none of these.
        ValueError: ``x`` is not two-dimensional, or has negative or non-finite weights
            (SPLADE weights are ``log(1 + ReLU(.))`` >= 0).
    """
    import scipy.sparse as sp

    if isinstance(x, torch.Tensor):
        if x.layout in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc):
            if x.dim() != 2:
                raise ValueError(f"{name}: expected a 2-D (n, V) tensor, got shape {tuple(x.shape)}")
            coo = x.to_sparse_coo().coalesce().cpu()
            idx = coo.indices().numpy()
            mat = sp.csr_matrix((coo.values().float().numpy(), (idx[0], idx[1])), shape=tuple(coo.shape))
        else:
            if x.dim() != 2:
                raise ValueError(f"{name}: expected a 2-D (n, V) tensor, got shape {tuple(x.shape)}")
            mat = sp.csr_matrix(x.detach().float().cpu().numpy())
    elif isinstance(x, np.ndarray):
        if x.ndim != 2:
            raise ValueError(f"{name}: expected a 2-D (n, V) array, got shape {x.shape}")
        mat = sp.csr_matrix(x.astype(np.float32))
    elif sp.issparse(x):
        if x.ndim != 2:
            raise ValueError(f"{name}: expected a 2-D (n, V) matrix")
        mat = sp.csr_matrix(x, dtype=np.float32)
    else:
        raise TypeError(f"{name}: expected a scipy sparse matrix, numpy array or torch tensor of shape (n, V), got {type(x).__name__}")
    mat.eliminate_zeros()
    mat.sum_duplicates()
    if mat.nnz and (not np.isfinite(mat.data).all() or (mat.data < 0).any()):
        raise ValueError(f"{name}: term weights must be finite and >= 0")
    return mat


@dataclass
class SparseIndex:
    """Inverted index over ``N`` document vectors of width ``V``.

    Attributes:
        indptr: ``(V + 1,)`` int64, postings of term ``j`` are ``indptr[j]:indptr[j+1]``.
        doc_ids: ``(nnz,)`` int32 (int64 beyond 2^31 documents) document indices of the postings.
        weights: ``(nnz,)`` float32 document term weights of the postings.
        n_docs: ``N``.
        vocab_size: ``V``.
        head_terms: ``(H,)`` int64 ids of the *head* terms (posting lists covering at least
            ``dense_threshold`` of the documents), whose weights are also kept densely; ``(0,)`` if none.
        head_weights: ``(H, N)`` float32 dense document weights of the head terms.

    Search is hybrid, and exact either way: the head terms' contribution to a chunk of queries is one
    dense matrix product ``Q_head (B, H) @ head_weights (H, N)``; the remaining (tail) terms are added
    term-at-a-time from their postings. With Zipf-like term statistics a few hundred head terms carry
    most of the postings a query touches, where a dense product beats scattered ``index_add_``.
    """

    indptr: torch.Tensor
    doc_ids: torch.Tensor
    weights: torch.Tensor
    n_docs: int
    vocab_size: int
    head_terms: torch.Tensor
    head_weights: torch.Tensor

    @classmethod
    def build(cls, docs, device: str | torch.device = "cpu", *, dense_threshold: float | None = 0.125,
              max_dense_bytes: int = 2**30) -> "SparseIndex":
        """Index ``docs`` (anything :func:`to_scipy_csr` accepts, shape ``(N, V)``) on ``device``.

        Args:
            dense_threshold: a term whose posting list covers at least this fraction of the documents is
                also stored densely (the head); ``None`` keeps every term sparse (the plain inverted index).
            max_dense_bytes: cap on the dense head's memory (the longest posting lists are kept first).
        Raises:
            ValueError: ``dense_threshold`` outside ``(0, 1]`` or negative ``max_dense_bytes``.
        """
        if dense_threshold is not None and not (0.0 < dense_threshold <= 1.0):
            raise ValueError(f"dense_threshold: expected a fraction in (0, 1] or None, got {dense_threshold!r}")
        if max_dense_bytes < 0:
            raise ValueError(f"max_dense_bytes: expected >= 0, got {max_dense_bytes}")
        csc = to_scipy_csr(docs, "docs").tocsc()
        csc.sort_indices()
        n = int(csc.shape[0])
        dev = torch.device(device)
        head = np.zeros(0, dtype=np.int64)
        if dense_threshold is not None and n > 0:
            lengths = np.diff(csc.indptr)
            cand = np.nonzero(lengths >= dense_threshold * n)[0]
            cand = cand[np.argsort(-lengths[cand], kind="stable")][: max_dense_bytes // (4 * n)]
            head = np.sort(cand).astype(np.int64)
        head_w = csc[:, head].T.toarray().astype(np.float32) if head.size else np.zeros((0, n), np.float32)
        return cls(
            indptr=torch.from_numpy(csc.indptr.astype(np.int64)).to(dev),
            # int32 document ids where they fit: less memory traffic per posting in index_add_
            doc_ids=torch.from_numpy(csc.indices.astype(np.int32 if n < 2**31 else np.int64)).to(dev),
            weights=torch.from_numpy(csc.data.astype(np.float32)).to(dev),
            n_docs=n,
            vocab_size=int(csc.shape[1]),
            head_terms=torch.from_numpy(head),
            head_weights=torch.from_numpy(head_w).to(dev),
        )

    @property
    def device(self) -> torch.device:
        return self.weights.device

    def search(self, queries, k: int = 1000, *, chunk_size: int = 64, progress: bool = False,
               workers: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Exact top-``k`` documents for every query by sparse dot product.

        Term-at-a-time: each query's scores ``(N,)`` are accumulated from the postings of its terms
        (``index_add_``), then the top ``k`` are taken. Queries of a chunk are accumulated by ``workers``
        threads (torch releases the GIL inside ``index_add_``), each writing its own row.

        Args:
            queries: ``(Nq, V)`` query vectors (anything :func:`to_scipy_csr` accepts).
            k: number of results per query (clipped to ``N``).
            chunk_size: queries whose ``(chunk, N)`` score block is held at once.
            progress: show a tqdm bar.
            workers: threads accumulating the tail terms (default 1: the head's dense product already
                uses torch's threads, and measured on 2 cores a second accumulation thread was slower).
        Returns:
            ``scores (Nq, k)`` float32 and ``indices (Nq, k)`` int64 (document rows), by descending
            score, ties by ascending document index.
        Raises:
            ValueError: width of ``queries`` is not ``V``, ``k < 1`` or ``workers < 1``.
        """
        q = to_scipy_csr(queries, "queries")
        if q.shape[1] != self.vocab_size:
            raise ValueError(f"queries: expected width V = {self.vocab_size}, got {q.shape[1]}")
        if k < 1:
            raise ValueError(f"k: expected >= 1, got {k}")
        if workers is None:
            workers = 1
        if workers < 1:
            raise ValueError(f"workers: expected >= 1, got {workers}")
        k = min(k, self.n_docs)
        from concurrent.futures import ThreadPoolExecutor

        from tqdm.auto import tqdm

        out_s = torch.empty((q.shape[0], k), dtype=torch.float32)
        out_i = torch.empty((q.shape[0], k), dtype=torch.int64)
        indptr = self.indptr.cpu().numpy()
        head = self.head_terms.cpu().numpy()
        is_head = np.zeros(self.vocab_size, dtype=bool)
        is_head[head] = True

        def accumulate(acc: torch.Tensor, row: int) -> None:
            lo, hi = q.indptr[row], q.indptr[row + 1]
            for term, w in zip(q.indices[lo:hi], q.data[lo:hi]):  # term-at-a-time accumulation (tail terms)
                a, b = int(indptr[term]), int(indptr[term + 1])
                if b > a and not is_head[term]:
                    acc.index_add_(0, self.doc_ids[a:b], self.weights[a:b], alpha=float(w))

        pool = ThreadPoolExecutor(workers) if workers > 1 else None
        try:
            for start in tqdm(range(0, q.shape[0], chunk_size), disable=not progress, desc="retrieve"):
                stop = min(start + chunk_size, q.shape[0])
                if head.size:  # head terms: one dense product for the whole chunk
                    q_head = torch.from_numpy(q[start:stop][:, head].toarray().astype(np.float32)).to(self.device)
                    scores = q_head @ self.head_weights  # (B, N)
                else:
                    scores = torch.zeros((stop - start, self.n_docs), dtype=torch.float32, device=self.device)
                if pool is None:
                    for row in range(start, stop):
                        accumulate(scores[row - start], row)
                else:
                    list(pool.map(lambda row: accumulate(scores[row - start], row), range(start, stop)))
                s, i = _topk_stable(scores, k)
                out_s[start:stop] = s.cpu()
                out_i[start:stop] = i.cpu()
        finally:
            if pool is not None:
                pool.shutdown()
        return out_s, out_i


def _topk_stable(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k of each row of ``scores (B, N)`` ordered exactly by (-score, index), ties at the k-th place
    included: the documents scoring as much as the k-th one are taken in ascending index order, as a
    full stable sort would (``torch.topk`` picks among them arbitrarily).

    A row can only need that correction when its (k+1)-th largest score equals its k-th, so ``topk`` is
    asked for ``k + 1`` values and only such rows are re-scanned in full."""
    n = scores.shape[1]
    s, i = torch.topk(scores, min(k + 1, n), dim=1, largest=True, sorted=True)
    if s.shape[1] > k:
        suspect = torch.nonzero(s[:, k] == s[:, k - 1]).flatten().tolist()
        s, i = s[:, :k].clone(), i[:, :k].clone()
    else:
        suspect = []
    kth = s[:, -1:]  # (B, 1) the k-th largest score of each row
    for r in suspect:  # rows where topk had to choose among ties at the k-th place
        above = torch.nonzero(scores[r] > kth[r, 0]).flatten()
        tied = torch.nonzero(scores[r] == kth[r, 0]).flatten()[: k - above.numel()]  # ascending indices
        i[r] = torch.cat([above, tied])
        s[r] = scores[r, i[r]]
    # re-sort the k winners by (score desc, index asc)
    order = torch.argsort(i, dim=1, stable=True)
    s2, i2 = torch.gather(s, 1, order), torch.gather(i, 1, order)
    order = torch.argsort(-s2, dim=1, stable=True)
    return torch.gather(s2, 1, order), torch.gather(i2, 1, order)


def dense_topk_reference(queries, docs, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Slow, obvious reference: dense float64 ``Q D^T`` and a full stable sort.

    Args:
        queries: ``(Nq, V)``; docs: ``(N, V)`` (anything :func:`to_scipy_csr` accepts).
    Returns:
        ``scores (Nq, k)`` float64 and ``indices (Nq, k)`` int64, by descending score, ties by index.
    """
    q = torch.from_numpy(to_scipy_csr(queries, "queries").toarray()).double()
    d = torch.from_numpy(to_scipy_csr(docs, "docs").toarray()).double()
    if q.shape[1] != d.shape[1]:
        raise ValueError(f"queries and docs: widths differ ({q.shape[1]} vs {d.shape[1]})")
    scores = q @ d.T  # (Nq, N)
    k = min(k, d.shape[0])
    idx = torch.arange(d.shape[0]).expand_as(scores)
    order = torch.argsort(-scores, dim=1, stable=True)[:, :k]  # stable: ties keep ascending index
    return torch.gather(scores, 1, order), torch.gather(idx, 1, order)


def flops(queries, docs) -> float:
    """Expected multiplications per query-document pair, ``sum_j p_j^q p_j^d``.

    ``p_j^q`` = fraction of the ``(Nq, V)`` queries with a non-zero weight on term ``j``; ``p_j^d`` the
    same over the ``(N, V)`` documents (Paria et al. 2020, eq. 3; SPLADE, Formal et al. SIGIR 2021, §4).
    Raises ValueError for empty inputs or different widths.
    """
    q = to_scipy_csr(queries, "queries")
    d = to_scipy_csr(docs, "docs")
    if q.shape[0] == 0 or d.shape[0] == 0:
        raise ValueError("flops: queries and docs must be non-empty")
    if q.shape[1] != d.shape[1]:
        raise ValueError(f"flops: widths differ ({q.shape[1]} vs {d.shape[1]})")
    pq = np.bincount(q.indices, minlength=q.shape[1]) / q.shape[0]
    pd = np.bincount(d.indices, minlength=d.shape[1]) / d.shape[0]
    return float(np.dot(pq, pd))


def active_dims(x) -> float:
    """Mean number of non-zero term weights per row of ``x (n, V)``."""
    m = to_scipy_csr(x)
    if m.shape[0] == 0:
        raise ValueError("active_dims: empty input")
    return float(m.nnz / m.shape[0])


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

    try:
        import seismic
    except ImportError as err:  # pragma: no cover - optional dependency
        raise ImportError("seismic backend: pip install pyseismic-lsr") from err
    q = to_scipy_csr(queries, "queries")
    d = to_scipy_csr(docs, "docs")
    st = seismic.get_seismic_string()
    names = np.array(list(vocab) if vocab is not None else [str(j) for j in range(d.shape[1])], dtype=st)
    t0 = time.perf_counter()
    ds = seismic.SeismicDataset()
    for row in range(d.shape[0]):
        lo, hi = d.indptr[row], d.indptr[row + 1]
        ds.add_document(str(row), names[d.indices[lo:hi]], d.data[lo:hi].astype(np.float32))
    index = seismic.SeismicIndex.build_from_dataset(ds, n_postings=n_postings, summary_energy=summary_energy,
                                                     num_threads=num_threads)
    build_s = time.perf_counter() - t0
    qids = np.array([str(i) for i in range(q.shape[0])], dtype=st)
    comps = [names[q.indices[q.indptr[i]:q.indptr[i + 1]]] for i in range(q.shape[0])]
    vals = [q.data[q.indptr[i]:q.indptr[i + 1]].astype(np.float32) for i in range(q.shape[0])]
    t0 = time.perf_counter()
    res = index.batch_search(qids, comps, vals, k=k, query_cut=query_cut, heap_factor=heap_factor, num_threads=num_threads)
    search_s = time.perf_counter() - t0
    out = np.full((q.shape[0], k), -1, dtype=np.int64)
    scores = np.full((q.shape[0], k), -np.inf, dtype=np.float32)
    # batch_search does not keep the query order (it depends on a hash seed): place each hit list by the
    # query id carried in its tuples, never by position.
    for hits in res:
        for j, (qid, score, doc) in enumerate(hits[:k]):
            i = int(qid)
            out[i, j] = int(doc)
            scores[i, j] = score
    return out, scores, build_s, search_s


def recall_at_k(approx: np.ndarray, exact: np.ndarray) -> float:
    """Mean fraction of each row of ``exact (Nq, k)`` found in the same row of ``approx (Nq, k)``."""
    if approx.shape[0] != exact.shape[0]:
        raise ValueError("recall_at_k: row counts differ")
    hits = [len(set(a.tolist()) & set(e.tolist())) / max(len(e), 1) for a, e in zip(approx, exact)]
    return float(np.mean(hits)) if hits else math.nan
