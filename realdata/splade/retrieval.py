"""Exact sparse retrieval, FLOPS and active dimensions for SPLADE vectors.

A SPLADE model maps a query or a document to a non-negative vector over the vocabulary (``V`` term
weights, most of them zero). The score of a query-document pair is the dot product of the two vectors.

* :class:`SparseIndex` -- an inverted index (term -> postings of ``(document, term weight)``) held as
  CSC arrays in torch, on CPU or CUDA, plus dense rows for the most frequent (head) terms.
  :meth:`SparseIndex.search` is the fast path: exact top-k for blocks of queries, each block's scores
  ``(B, N)`` being a dense product over the head terms its queries use most plus term-at-a-time
  accumulation (``index_add_``) of the other terms' postings, then a top-k pruned by segment maxima;
  on CPU the blocks are shared out to worker threads with one torch thread each.
* :func:`dense_topk_reference` -- the slow, obvious reference: densify, one matrix product in float64,
  sort. Tests check that both give the same rankings.
* :func:`flops` -- the expected number of multiplications per query-document pair (Paria et al.,
  ICLR 2020, "Minimizing FLOPs to learn efficient sparse representations", eq. 3 and §5):
  ``FLOPS = sum_j p_j^q p_j^d`` where ``p_j^q`` (``p_j^d``) is the fraction of queries (documents)
  whose weight on term ``j`` is non-zero.
* :func:`active_dims` -- the mean number of non-zero terms per vector.
* :func:`initlab.realdata.splade.seismic.seismic_search` -- the optional approximate backend (pyseismic-lsr).

Ties: rankings are ordered by descending score, then ascending document index.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "to_scipy_csr",
    "SparseIndex",
    "dense_topk_reference",
    "flops",
    "active_dims",
    "SearchPlan",
    "topk_stable",
    "dense_prefix",
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
            :meth:`build` orders them by decreasing posting-list length.
        head_weights: ``(H, N)`` float32 dense document weights of the head terms (row ``h`` is term
            ``head_terms[h]``).

    Search is hybrid, and exact either way: for a block of ``B`` queries, the first ``H'`` head terms
    contribute by one dense matrix product ``Q_head (B, H') @ head_weights[:H'] (H', N)``; every other
    term of the block's queries is added term-at-a-time from its postings (``index_add_``). ``H'`` is
    chosen per block from a cost model (see :func:`dense_prefix`): a head term is worth its ``N``
    multiply-adds per query of the block only when enough of the block's queries use it. With Zipf-like
    term statistics a few dozen head terms carry most of the postings a query touches, where a dense
    product beats scattered ``index_add_``.
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
            # longest posting lists first: search takes a prefix of the head into its dense product
            head = cand[np.argsort(-lengths[cand], kind="stable")][: max_dense_bytes // (4 * n)].astype(np.int64)
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

        The queries are cut into blocks of ``chunk_size``. A block's scores ``(B, N)`` are the dense
        product of its head terms plus the term-at-a-time accumulation (``index_add_``) of its other
        terms' postings; the top ``k`` of each row are then taken, pruned by segment maxima (exact; see
        :func:`topk_stable`). On CPU, ``workers`` threads each take the next unscored block and score
        it alone with one torch thread (torch releases the GIL inside its kernels), so a worker whose
        core is busy with other programs simply scores fewer blocks: nothing waits on a descheduled
        thread at the end of every kernel, as torch's own multi-threaded kernels do on a loaded machine.

        Args:
            queries: ``(Nq, V)`` query vectors (anything :func:`to_scipy_csr` accepts).
            k: number of results per query (clipped to ``N``).
            chunk_size: queries per block; each worker holds one ``(chunk_size, N)`` float32 block. On
                CPU, fewer than ``workers * chunk_size`` queries are cut into ``workers`` smaller blocks.
            progress: show a tqdm bar.
            workers: scoring threads on CPU, each with one torch thread (default:
                ``torch.get_num_threads()``, the cores torch would use). Ignored on CUDA (one stream of
                blocks from the calling thread).
        Returns:
            ``scores (Nq, k)`` float32 and ``indices (Nq, k)`` int64 (document rows), by descending
            score, ties by ascending document index. Scores are float32 sums: their last bits can
            depend on ``chunk_size`` and ``workers`` (summation order), never the exactness of the search.
        Raises:
            ValueError: width of ``queries`` is not ``V``, ``k < 1``, ``chunk_size < 1`` or ``workers < 1``.
        """
        q = to_scipy_csr(queries, "queries")
        if q.shape[1] != self.vocab_size:
            raise ValueError(f"queries: expected width V = {self.vocab_size}, got {q.shape[1]}")
        if k < 1:
            raise ValueError(f"k: expected >= 1, got {k}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size: expected >= 1, got {chunk_size}")
        if workers is None:
            workers = torch.get_num_threads()
        if workers < 1:
            raise ValueError(f"workers: expected >= 1, got {workers}")
        k = min(k, self.n_docs)
        n_q = q.shape[0]
        out_s = torch.empty((n_q, k), dtype=torch.float32)
        out_i = torch.empty((n_q, k), dtype=torch.int64)
        if n_q == 0:
            return out_s, out_i
        on_cpu = self.device.type == "cpu"
        # on CPU, fewer queries than workers x chunk_size are cut into smaller blocks so every worker gets one
        per = min(chunk_size, -(-n_q // workers)) if on_cpu else chunk_size
        blocks = [(a, min(a + per, n_q)) for a in range(0, n_q, per)]
        plan = SearchPlan(self, q, k)

        from initlab.executor import progress_bar

        bar = progress_bar(total=n_q, disable=not progress, desc="retrieve")
        try:
            if on_cpu:
                _run_single_threaded_workers(min(workers, len(blocks)), blocks, plan, out_s, out_i, bar)
            else:  # CUDA: one stream of blocks from the calling thread
                block = torch.empty((per, self.n_docs), dtype=torch.float32, device=self.device)
                for a, b in blocks:
                    plan.score_block(a, b, block, out_s, out_i)
                    bar.update(b - a)
        finally:
            bar.close()
        return out_s, out_i


class SearchPlan:
    """What :meth:`SparseIndex.search` precomputes once for a query set, and the scoring of one block."""

    # Cost model of dense_prefix, measured on a 2-core AVX-512 CPU (benchmarks/bench_retrieval.py's
    # collection): one multiply-add of the dense head product per (query, head term, document) costs
    # about 1/100 of adding one posting with index_add_. It only moves work between two exact paths.
    DENSE_PER_POSTING = 0.01
    # Posting lists shorter than this are added together, one index_add_ per block (see __init__).
    SHORT_POSTINGS = 1024

    def __init__(self, index: SparseIndex, q, k: int):
        self.index, self.q, self.k = index, q, k
        indptr = index.indptr.cpu().numpy()
        self.head = index.head_terms.cpu().numpy()
        self.head_len = (indptr[self.head + 1] - indptr[self.head]).astype(np.float64)  # postings per head term
        self.head_a = indptr[self.head].tolist()
        self.head_b = indptr[self.head + 1].tolist()
        is_head = np.zeros(index.vocab_size, dtype=bool)
        is_head[self.head] = True
        # The tail work list, built once with numpy: every (query, non-head term) pair with postings, by
        # query. Long posting lists get one index_add_ each (plain Python lists: no numpy scalars in the
        # loop); the short ones of a block are gathered into one index_add_ on the flattened block (CPU),
        # as a call costs about as much as adding SHORT_POSTINGS postings.
        rows = np.repeat(np.arange(q.shape[0]), np.diff(q.indptr))
        a_all, b_all = indptr[q.indices], indptr[q.indices + 1]
        keep = ~is_head[q.indices] & (b_all > a_all)
        short = (b_all - a_all < self.SHORT_POSTINGS) if index.device.type == "cpu" else np.zeros_like(keep)
        long_ = keep & ~short
        self.tail_a, self.tail_b = a_all[long_].tolist(), b_all[long_].tolist()
        self.tail_w = q.data[long_].astype(np.float64).tolist()
        self.row_start = np.searchsorted(rows[long_], np.arange(q.shape[0] + 1)).tolist()
        short &= keep
        self.short_row, self.short_a = rows[short], a_all[short]
        self.short_len, self.short_w = (b_all - a_all)[short], q.data[short].astype(np.float32)
        self.short_start = np.searchsorted(self.short_row, np.arange(q.shape[0] + 1))
        if short.any():
            self.doc_np, self.weight_np = index.doc_ids.numpy(), index.weights.numpy()
        self.segment = _topk_segment(index.n_docs, k)

    def score_block(self, a: int, b: int, block: torch.Tensor, out_s: torch.Tensor, out_i: torch.Tensor) -> None:
        """Score queries ``a:b`` into ``block[: b - a]`` and write their top k into ``out_s/out_i[a:b]``."""
        index = self.index
        scores = block[: b - a]  # (B, N), reused: no fresh (page-faulting) allocation per block
        extra: list[list[tuple[int, int, float]]] = [[] for _ in range(b - a)]  # head terms left out of the product
        if self.head.size:
            q_head = self.q[a:b][:, self.head].toarray().astype(np.float32)  # (B, H)
            used = q_head != 0
            h = dense_prefix(used.sum(axis=0), self.head_len, b - a, index.n_docs, self.DENSE_PER_POSTING)
            if h:
                torch.mm(torch.from_numpy(np.ascontiguousarray(q_head[:, :h])).to(index.device),
                         index.head_weights[:h], out=scores)
            else:
                scores.zero_()
            for r, j in zip(*np.nonzero(used[:, h:])):
                extra[r].append((self.head_a[h + j], self.head_b[h + j], float(q_head[r, h + j])))
        else:
            scores.zero_()
        s0, s1 = int(self.short_start[a]), int(self.short_start[b])
        if s1 > s0:  # the block's short posting lists: one index_add_ into the flattened (B * N,) block
            lens = self.short_len[s0:s1]
            pos = np.repeat(self.short_a[s0:s1] - (np.cumsum(lens) - lens), lens) + np.arange(int(lens.sum()))
            flat = self.doc_np[pos].astype(np.int64) + np.repeat((self.short_row[s0:s1] - a) * index.n_docs, lens)
            vals = self.weight_np[pos] * np.repeat(self.short_w[s0:s1], lens)
            scores.view(-1).index_add_(0, torch.from_numpy(flat), torch.from_numpy(vals))
        doc_ids, weights = index.doc_ids, index.weights
        tail_a, tail_b, tail_w, row_start = self.tail_a, self.tail_b, self.tail_w, self.row_start
        for r in range(b - a):  # term-at-a-time accumulation, one score row at a time
            acc = scores[r]
            for lo, hi, w in extra[r]:
                acc.index_add_(0, doc_ids[lo:hi], weights[lo:hi], alpha=w)
            for j in range(row_start[a + r], row_start[a + r + 1]):
                lo, hi = tail_a[j], tail_b[j]
                acc.index_add_(0, doc_ids[lo:hi], weights[lo:hi], alpha=tail_w[j])
        s, i = topk_stable(scores, self.k, segment=self.segment)
        out_s[a:b] = s.cpu()
        out_i[a:b] = i.cpu()


def dense_prefix(users: np.ndarray, lengths: np.ndarray, B: int, n_docs: int, dense_per_posting: float) -> int:
    """How many leading head terms a block's dense product should take: the ``H'`` minimising the
    modelled cost ``H' B N c + sum_{h >= H'} users_h lengths_h`` (in postings added by ``index_add_``),
    where the product costs ``c = dense_per_posting`` per multiply-add and head term ``h`` (posting list
    of ``lengths_h`` documents, used by ``users_h`` of the block's ``B`` queries) costs its postings once
    per query using it otherwise. Any ``H'`` gives the same exact scores; this only picks the cheaper path."""
    sparse = users * lengths  # (H,) cost of leaving each head term to the term-at-a-time path
    suffix = np.concatenate([np.cumsum(sparse[::-1])[::-1], [0.0]])  # cost of leaving h.. out
    cost = np.arange(len(users) + 1) * (B * n_docs * dense_per_posting) + suffix
    return int(np.argmin(cost))


def _run_single_threaded_workers(workers: int, blocks, plan: SearchPlan, out_s, out_i, bar) -> None:
    """Score ``blocks`` with ``workers`` threads, each with one torch thread and its own score block.

    torch's intra-op thread count is per thread under OpenMP (``torch.set_num_threads`` in a thread sets
    that thread's count) but also stored process-wide for threads that start later; each worker first
    finishes torch's lazy per-thread set-up, then sets its own count to 1, and the calling thread puts
    the process-wide value back as soon as every worker has done so."""
    import threading

    restore = torch.get_num_threads()
    lock = threading.Lock()
    ready = threading.Barrier(workers + 1)
    todo = iter(blocks)
    errors: list[BaseException] = []
    rows = max(b - a for a, b in blocks)

    def work() -> None:
        try:
            torch.get_num_threads()  # torch's per-thread lazy initialisation happens here ...
            torch.set_num_threads(1)  # ... so this thread's count stays 1 once the value is restored
        finally:
            ready.wait()
        try:
            block = torch.empty((rows, plan.index.n_docs), dtype=torch.float32)
            while not errors:
                with lock:
                    nxt = next(todo, None)
                if nxt is None:
                    return
                plan.score_block(nxt[0], nxt[1], block, out_s, out_i)
                with lock:
                    bar.update(nxt[1] - nxt[0])
        except BaseException as err:  # re-raised in the calling thread
            errors.append(err)

    threads = [threading.Thread(target=work, name=f"initlab-search-{w}", daemon=True) for w in range(workers)]
    try:
        for t in threads:
            t.start()
        ready.wait()
    except BaseException:
        ready.abort()  # a worker that could not start must not leave the others waiting
        raise
    finally:
        torch.set_num_threads(restore)
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _topk_segment(n: int, k: int) -> int | None:
    """Segment length for :func:`topk_stable`'s pruning on rows of ``n`` scores, or ``None`` where
    pruning cannot pay (fewer than ``2k`` segments). About ``sqrt(n / k)``, which balances the segment
    maxima (``n / s`` of them) against the candidates kept (about ``k s``)."""
    s = math.isqrt(max(n // max(k, 1), 0))
    return s if s >= 2 and n // s >= 2 * k else None


def _topk_full(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
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


def topk_stable(scores: torch.Tensor, k: int, *, segment: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_topk_full` of ``scores (B, N)``, first pruned by segment maxima when ``segment`` is given.

    The first ``G = N // segment`` segments of ``segment`` consecutive documents each get their maximum
    ``(B, G)``; ``tau`` = the k-th largest of these maxima is a lower bound on the k-th largest score (the
    ``k`` largest maxima are ``k`` distinct scores). A document of the exact top k scores at least the
    k-th score >= ``tau``, so its segment's maximum is >= ``tau``: only those segments (at least ``k``;
    more where maxima tie at ``tau``) and the ``N - G segment`` documents after the last full segment can
    hold the top k. They are gathered in ascending document order, so :func:`_topk_full`'s tie rule on
    the candidates is the tie rule on the documents. Rows tied so widely that the candidates would be
    more than half of the row (e.g. an empty query: every score 0) take the full path."""
    B, n = scores.shape
    if segment is None or segment < 1 or n // segment <= k:
        return _topk_full(scores, k)
    G = n // segment
    m = G * segment
    seg_max = scores[:, :m].reshape(B, G, segment).amax(dim=2)  # (B, G)
    tau = torch.topk(seg_max, k, dim=1, largest=True, sorted=True).values[:, -1:]  # (B, 1)
    c = int((seg_max >= tau).sum(dim=1).max())  # most segments any row needs
    if c * segment > m // 2:
        return _topk_full(scores, k)
    segs = torch.topk(seg_max, c, dim=1, largest=True, sorted=False).indices.sort(dim=1).values  # (B, c) ascending
    offsets = torch.arange(segment, device=scores.device)
    cols = (segs.unsqueeze(2) * segment + offsets).reshape(B, c * segment)  # ascending document indices
    if m < n:
        cols = torch.cat([cols, torch.arange(m, n, device=scores.device).expand(B, n - m)], dim=1)
    s, j = _topk_full(torch.gather(scores, 1, cols), k)
    return s, torch.gather(cols, 1, j)


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


def recall_at_k(approx: np.ndarray, exact: np.ndarray) -> float:
    """Mean fraction of each row of ``exact (Nq, k)`` found in the same row of ``approx (Nq, k)``."""
    if approx.shape[0] != exact.shape[0]:
        raise ValueError("recall_at_k: row counts differ")
    hits = [len(set(a.tolist()) & set(e.tolist())) / max(len(e), 1) for a, e in zip(approx, exact)]
    return float(np.mean(hits)) if hits else math.nan
