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
        doc_ids: ``(nnz,)`` int64 document indices of the postings.
        weights: ``(nnz,)`` float32 document term weights of the postings.
        n_docs: ``N``.
        vocab_size: ``V``.
    """

    indptr: torch.Tensor
    doc_ids: torch.Tensor
    weights: torch.Tensor
    n_docs: int
    vocab_size: int

    @classmethod
    def build(cls, docs, device: str | torch.device = "cpu") -> "SparseIndex":
        """Index ``docs`` (anything :func:`to_scipy_csr` accepts, shape ``(N, V)``) on ``device``."""
        csc = to_scipy_csr(docs, "docs").tocsc()
        csc.sort_indices()
        dev = torch.device(device)
        return cls(
            indptr=torch.from_numpy(csc.indptr.astype(np.int64)).to(dev),
            doc_ids=torch.from_numpy(csc.indices.astype(np.int64)).to(dev),
            weights=torch.from_numpy(csc.data.astype(np.float32)).to(dev),
            n_docs=int(csc.shape[0]),
            vocab_size=int(csc.shape[1]),
        )

    @property
    def device(self) -> torch.device:
        return self.weights.device

    def search(self, queries, k: int = 1000, *, chunk_size: int = 64, progress: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Exact top-``k`` documents for every query by sparse dot product.

        Args:
            queries: ``(Nq, V)`` query vectors (anything :func:`to_scipy_csr` accepts).
            k: number of results per query (clipped to ``N``).
            chunk_size: queries whose ``(chunk, N)`` score block is held at once.
            progress: show a tqdm bar.
        Returns:
            ``scores (Nq, k)`` float32 and ``indices (Nq, k)`` int64 (document rows), by descending
            score, ties by ascending document index.
        Raises:
            ValueError: width of ``queries`` is not ``V``, or ``k < 1``.
        """
        q = to_scipy_csr(queries, "queries")
        if q.shape[1] != self.vocab_size:
            raise ValueError(f"queries: expected width V = {self.vocab_size}, got {q.shape[1]}")
        if k < 1:
            raise ValueError(f"k: expected >= 1, got {k}")
        k = min(k, self.n_docs)
        from tqdm.auto import tqdm

        out_s = torch.empty((q.shape[0], k), dtype=torch.float32)
        out_i = torch.empty((q.shape[0], k), dtype=torch.int64)
        indptr = self.indptr.cpu().numpy()
        for start in tqdm(range(0, q.shape[0], chunk_size), disable=not progress, desc="retrieve"):
            stop = min(start + chunk_size, q.shape[0])
            scores = torch.zeros((stop - start, self.n_docs), dtype=torch.float32, device=self.device)
            for row in range(start, stop):
                lo, hi = q.indptr[row], q.indptr[row + 1]
                acc = scores[row - start]
                for term, w in zip(q.indices[lo:hi], q.data[lo:hi]):  # term-at-a-time accumulation
                    a, b = int(indptr[term]), int(indptr[term + 1])
                    if b > a:
                        acc.index_add_(0, self.doc_ids[a:b], self.weights[a:b], alpha=float(w))
            s, i = _topk_stable(scores, k)
            out_s[start:stop] = s.cpu()
            out_i[start:stop] = i.cpu()
        return out_s, out_i


def _topk_stable(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k of each row of ``scores (B, N)`` ordered exactly by (-score, index), ties at the k-th place
    included: the documents scoring as much as the k-th one are taken in ascending index order, as a
    full stable sort would (``torch.topk`` picks among them arbitrarily)."""
    s, i = torch.topk(scores, k, dim=1, largest=True, sorted=True)
    kth = s[:, -1:]  # (B, 1) the k-th largest score of each row
    n_above = (s > kth).sum(dim=1)  # these are certainly in the top-k
    n_tied = (scores == kth).sum(dim=1)  # all documents tied with the k-th, over the whole row
    for r in torch.nonzero(n_above + n_tied > k).flatten().tolist():  # rows where topk had to choose among ties
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
