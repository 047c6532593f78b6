"""Benchmark: exact top-10 SPLADE retrieval, ours vs a plain scipy sparse-matrix-product baseline.

Synthetic SPLADE-like collection: N documents (default 500,000) over V = 30,522 terms
(BERT's vocabulary), about 120 active terms per document and 30 per query. Term ids are drawn from a
Zipf law (p_j ~ 1/j over term ranks j = 1..V, with replacement; the number of draws is calibrated once
so the mean number of DISTINCT terms hits the target), weights are log(1 + X) with X lognormal(0, 0.5)
(the SPLADE activation of a positive logit). Queries are drawn the same way with their own seed.

Measured in the same run, on the same queries:

* ``scipy``  -- the plain baseline: ``S = Q_chunk @ D.T`` (scipy CSR x CSR, ``D.T`` built once, outside the
  search timing, as our index is), ``S.toarray()``,
  ``np.argpartition`` for the top 10, then sorted by (score desc, doc asc);
* ``ours``   -- :class:`initlab.realdata.splade.retrieval.SparseIndex` (term-at-a-time ``index_add_`` into
  a dense score vector, ``torch.topk``);
* ``seismic`` -- pyseismic-lsr approximate search (if installed): throughput and recall@10 vs exact.

Rankings of ours and scipy are compared query by query (identical document lists in identical order;
a difference only counts as a tie if the two scores at that rank agree to 1e-5 relative).

Usage: ``python benchmarks/bench_retrieval.py [--n-docs 500000] [--n-queries 200] [--out results.json]``
Threads: torch and scipy use the threads they are given (set OMP_NUM_THREADS); report the machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import scipy.sparse as sp
import torch

from initlab.realdata.splade.retrieval import SparseIndex, recall_at_k, seismic_search


def _draw(n: int, V: int, m: int, p: np.ndarray, rng: np.random.Generator) -> sp.csr_matrix:
    draws = np.sort(rng.choice(V, size=(n, m), p=p), axis=1)
    keep = np.ones_like(draws, dtype=bool)
    keep[:, 1:] = draws[:, 1:] != draws[:, :-1]
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(keep.sum(1))
    ind = draws[keep].astype(np.int32)
    data = np.log1p(rng.lognormal(0.0, 0.5, size=len(ind))).astype(np.float32)
    return sp.csr_matrix((data, ind, indptr), shape=(n, V))


def synthetic_collection(n: int, active: float, *, V: int = 30522, seed: int = 0, zipf_s: float = 1.0) -> sp.csr_matrix:
    """``(n, V)`` CSR float32, ~``active`` distinct Zipf-drawn terms per row (see module docstring)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, V + 1) ** zipf_s
    p /= p.sum()
    # calibrate the number of draws m so that the mean number of distinct terms is ~active
    lo, hi = int(active), int(active * 4)
    cal_rng = np.random.default_rng(seed + 10_000)
    while lo < hi:
        mid = (lo + hi) // 2
        if _draw(2000, V, mid, p, cal_rng).getnnz(axis=1).mean() < active:
            lo = mid + 1
        else:
            hi = mid
    out = []
    for start in range(0, n, 50_000):
        out.append(_draw(min(50_000, n - start), V, lo, p, rng))
    return sp.vstack(out).tocsr()


def scipy_baseline(Q: sp.csr_matrix, DT: sp.csr_matrix, k: int, chunk: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of ``Q (Nq, V) @ DT (V, N)``; ``DT = D.T.tocsr()`` is the baseline's index, built (and timed)
    outside, like :meth:`SparseIndex.build` for ours."""
    out_i = np.empty((Q.shape[0], k), dtype=np.int64)
    out_s = np.empty((Q.shape[0], k), dtype=np.float32)
    for s in range(0, Q.shape[0], chunk):
        S = (Q[s:s + chunk] @ DT).toarray()
        top = np.argpartition(-S, k, axis=1)[:, :k]
        sc = np.take_along_axis(S, top, 1)
        for r in range(top.shape[0]):
            o = np.lexsort((top[r], -sc[r]))
            out_i[s + r], out_s[s + r] = top[r][o], sc[r][o]
    return out_s, out_i


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-docs", type=int, default=500_000)
    ap.add_argument("--n-queries", type=int, default=200)
    ap.add_argument("--doc-terms", type=float, default=120)
    ap.add_argument("--query-terms", type=float, default=30)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--no-seismic", action="store_true")
    ap.add_argument("--device", default="cpu", help="cpu or cuda for ours")
    ap.add_argument("--out", default=None, help="write the measurements as JSON here")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    D = synthetic_collection(args.n_docs, args.doc_terms, seed=0)
    Q = synthetic_collection(args.n_queries, args.query_terms, seed=1)
    gen_s = time.perf_counter() - t0
    post = np.diff(D.tocsc().indptr)
    res = {"n_docs": D.shape[0], "V": D.shape[1], "doc_active": D.nnz / D.shape[0], "query_active": Q.nnz / Q.shape[0],
           "postings_per_query": float(np.mean([post[Q[i].indices].sum() for i in range(Q.shape[0])])),
           "n_queries": Q.shape[0], "k": args.k, "torch_threads": torch.get_num_threads(),
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"), "loadavg_start": os.getloadavg(), "generate_s": gen_s}
    print(json.dumps(res, indent=1))

    t0 = time.perf_counter()
    DT = D.T.tocsr()
    res["scipy_build_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    b_s, b_i = scipy_baseline(Q, DT, args.k)
    res["scipy_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    index = SparseIndex.build(D, device=args.device)
    res["ours_build_s"] = time.perf_counter() - t0
    # ours with its defaults (dense head product + one tail-accumulation thread) is the headline;
    # also measured: the plain inverted index (no dense head, dense_threshold=None), for the record.
    t0 = time.perf_counter()
    o_s, o_i = index.search(Q, k=args.k)
    res["ours_s"] = time.perf_counter() - t0
    res["ours_head_terms"] = int(index.head_terms.numel())
    plain = SparseIndex.build(D, device=args.device, dense_threshold=None)
    t0 = time.perf_counter()
    p_s, p_i = plain.search(Q, k=args.k)
    res["ours_plain_inverted_s"] = time.perf_counter() - t0
    res["speedup_plain_inverted"] = res["scipy_s"] / res["ours_plain_inverted_s"]
    res["plain_inverted_identical_rankings"] = int((p_i == o_i).all(dim=1).sum())
    o_s, o_i = o_s.numpy(), o_i.numpy()
    same = (o_i == b_i).all(axis=1)
    tie = ~same & np.all((o_i == b_i) | np.isclose(o_s, b_s, rtol=1e-5, atol=0), axis=1)
    res.update({"scipy_qps": Q.shape[0] / res["scipy_s"], "ours_qps": Q.shape[0] / res["ours_s"],
                "speedup": res["scipy_s"] / res["ours_s"], "identical_rankings": int(same.sum()),
                "differ_only_at_ties": int(tie.sum()), "differ": int((~same & ~tie).sum()),
                "max_abs_score_diff": float(np.abs(o_s - b_s).max())})
    if not args.no_seismic:
        try:
            s_i, _, build_s, search_s = seismic_search(Q, D, k=args.k)
            res.update({"seismic_build_s": build_s, "seismic_search_s": search_s, "seismic_qps": Q.shape[0] / search_s,
                        "seismic_recall@10": recall_at_k(s_i, b_i)})
        except ImportError as err:
            res["seismic"] = f"not measured: {err}"
    res["loadavg_end"] = os.getloadavg()
    print(json.dumps(res, indent=1))
    if args.out:
        from initlab.runs import atomic_write_json

        atomic_write_json(args.out, res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
