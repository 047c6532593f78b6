"""Benchmark: exact top-10 SPLADE retrieval, ours against the peers a user would pick, interleaved in one run.

Synthetic SPLADE-like collection: N documents (default 500,000) over V = 30,522 terms
(BERT's vocabulary), about 120 active terms per document and 30 per query. Term ids are drawn from a
Zipf law (p_j ~ 1/j over term ranks j = 1..V, with replacement; the number of draws is calibrated once
so the mean number of DISTINCT terms hits the target), weights are log(1 + X) with X lognormal(0, 0.5)
(the SPLADE activation of a positive logit). Queries are drawn the same way with their own seed.

Every index is built once (build seconds recorded); then all searches of the same queries are timed
interleaved with :func:`_timing.interleaved` (``--repeats`` rounds, one search per case per round, the
order rotated each round) under each load of ``--burners`` (0 = as the machine is, 1 = one extra
CPU-burning process: on 2 cores, the other core busy). The ratio reported for a peer is, round by
round, its search time divided by ours (ours' speed-up), with the median and spread over rounds.

Cases (a peer whose package is missing is skipped with a line saying so):

* ``ours``         -- :class:`initlab.realdata.splade.retrieval.SparseIndex` (exact; defaults);
* ``ours_plain``   -- the same with ``dense_threshold=None`` (plain inverted index, for the record);
* ``scipy``        -- the plain baseline: ``Q_chunk @ D.T`` (scipy CSR x CSR, ``D.T`` built once, as our
  index is), ``toarray``, ``np.argpartition`` for the top 10, sorted by (score desc, doc asc); one thread;
* ``splade_index`` -- splade-index (PyPI ``splade-index``; exact, numba backend, ``n_threads``); its
  encoder is a stand-in that returns the collection's vectors, so only indexing and search are measured;
* ``pisa``         -- PISA through pyterrier-pisa (PyPI ``pyterrier-pisa``): ``toks_indexer`` (weights
  quantised to ``int(100 w)``, its default scale), ``quantized()`` retrieval, block-max WAND (its
  defaults); approximate because of the quantisation: recall@10 against exact is reported;
* ``seismic``      -- pyseismic-lsr approximate search (default settings of our wrapper); recall@10.

Exactness: every exact case is compared query by query with ``scipy`` (identical document lists, or
different only where the two scores at a rank agree to 1e-5 relative: a tie).

Usage::

    python benchmarks/bench_retrieval.py [--n-docs 500000] [--n-queries 200] [--repeats 5]
        [--threads 2] [--burners 0,1] [--skip seismic] [--out results.json]

``--threads`` is given to every side: torch's threads (ours' search workers), numba's (splade-index),
PISA's; scipy's product is single-threaded. Optional peers: ``pip install 'initlab[bench]'``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import Burners, interleaved, load_average  # noqa: E402

from initlab.realdata.splade.retrieval import SparseIndex, recall_at_k  # noqa: E402
from initlab.realdata.splade.seismic import seismic_build, seismic_query  # noqa: E402

PEERS = ("scipy", "ours_plain", "splade_index", "pisa", "seismic")


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
    outside, like :meth:`SparseIndex.build` for ours. Returns ``(scores, indices)``, each ``(Nq, k)``."""
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


def _sparse_rows(m: sp.csr_matrix) -> torch.Tensor:
    c = m.tocoo()
    idx = torch.from_numpy(np.vstack([c.row, c.col]).astype(np.int64))
    return torch.sparse_coo_tensor(idx, torch.from_numpy(c.data), c.shape, check_invariants=False).coalesce()


class _StandInEncoder:
    """What splade-index asks of a sentence-transformers SparseEncoder, serving precomputed vectors: the
    collection for ``encode_document``, the benchmark queries for ``encode_query`` (a one-term vector per
    text for any other list, e.g. splade-index's JIT warm-up query)."""

    def __init__(self, D: sp.csr_matrix, Q: sp.csr_matrix):
        self.D, self.Q = D, Q
        V = D.shape[1]
        self.tokenizer = type("Vocab", (), {"get_vocab": staticmethod(lambda: {str(j): j for j in range(V)})})()
        self._queries = [torch.sparse_coo_tensor(torch.from_numpy(Q[i].indices[None].astype(np.int64)),
                                                 torch.from_numpy(Q[i].data), (V,), check_invariants=False).coalesce()
                         for i in range(Q.shape[0])]

    def encode_document(self, documents, **_):
        return _sparse_rows(self.D)

    def encode_query(self, queries, **_):
        if len(queries) == self.Q.shape[0]:
            return self._queries
        one = torch.sparse_coo_tensor(torch.zeros((1, 1), dtype=torch.int64), torch.ones(1), (self.D.shape[1],),
                                      check_invariants=False)
        return [one.coalesce() for _ in queries]


def build_splade_index(D, Q, k: int, threads: int):
    from splade_index import SPLADE

    retriever = SPLADE(backend="numba")
    retriever.index(_StandInEncoder(D, Q), [""] * D.shape[0], show_progress=False)  # also JIT-compiles
    texts = [""] * Q.shape[0]

    def search():
        res = retriever.retrieve(texts, k=k, n_threads=threads, show_progress=False)
        return np.asarray(res.scores, dtype=np.float32), np.asarray(res.doc_ids, dtype=np.int64)

    return search


@contextlib.contextmanager
def _quiet():
    """Send file descriptors 1 and 2 to /dev/null while a peer's native code prints its progress (PISA's
    C++ bars, seismic's build log), restoring them afterwards."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (null, *saved):
            os.close(fd)


def build_pisa(D, Q, k: int, threads: int, folder: Path):
    import pandas as pd
    from pyterrier_pisa import PisaIndex

    def docs():
        for i in range(D.shape[0]):
            lo, hi = D.indptr[i], D.indptr[i + 1]
            yield {"docno": str(i), "toks": dict(zip(map(str, D.indices[lo:hi].tolist()), D.data[lo:hi].tolist()))}

    index = PisaIndex(str(folder / "pisa"), stemmer="none", threads=threads)
    with _quiet():
        index.toks_indexer().index(docs())
        retriever = index.quantized(num_results=k)
    frame = pd.DataFrame({"qid": [str(i) for i in range(Q.shape[0])],
                          "query_toks": [dict(zip(map(str, Q[i].indices.tolist()), Q[i].data.tolist()))
                                         for i in range(Q.shape[0])]})

    def search():
        res = retriever(frame)
        ids = np.full((Q.shape[0], k), -1, dtype=np.int64)
        scores = np.full((Q.shape[0], k), -np.inf, dtype=np.float32)
        qi, rank = res["qid"].astype(int).to_numpy(), res["rank"].to_numpy()
        ids[qi, rank] = res["docno"].astype(int).to_numpy()
        scores[qi, rank] = res["score"].to_numpy()
        return scores, ids

    return search


def compare_rankings(s: np.ndarray, i: np.ndarray, ref_s: np.ndarray, ref_i: np.ndarray) -> dict:
    same = (i == ref_i).all(axis=1)
    tie = ~same & np.all((i == ref_i) | np.isclose(s, ref_s, rtol=1e-5, atol=0), axis=1)
    return {"identical": int(same.sum()), "differ_only_at_ties": int(tie.sum()), "differ": int((~same & ~tie).sum()),
            "max_abs_score_diff": float(np.abs(s.astype(np.float64) - ref_s).max())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-docs", type=int, default=500_000)
    ap.add_argument("--n-queries", type=int, default=200)
    ap.add_argument("--doc-terms", type=float, default=120)
    ap.add_argument("--query-terms", type=float, default=30)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds per load (default 5)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for every side (default: the cores)")
    ap.add_argument("--burners", default="0", help="comma-separated counts of extra CPU burners, one timing per count (default 0)")
    ap.add_argument("--burner-nice", type=int, default=0, help="niceness of the burners (default 0, as ours)")
    ap.add_argument("--skip", default="", help=f"comma-separated cases to leave out, of {','.join(PEERS)}")
    ap.add_argument("--device", default="cpu", help="cpu or cuda for ours")
    ap.add_argument("--out", default=None, help="write the measurements as JSON here")
    args = ap.parse_args(argv)
    skip = {s for s in args.skip.split(",") if s}
    if skip - set(PEERS):
        ap.error(f"--skip: unknown case(s) {sorted(skip - set(PEERS))}; expected some of {','.join(PEERS)}")
    try:
        burners = [int(b) for b in args.burners.split(",")]
    except ValueError:
        ap.error(f"--burners: expected comma-separated integers, got {args.burners!r}")
    if args.repeats < 1 or args.threads < 1 or min(burners) < 0:
        ap.error("--repeats and --threads must be >= 1, --burners >= 0")
    torch.set_num_threads(args.threads)

    t0 = time.perf_counter()
    D = synthetic_collection(args.n_docs, args.doc_terms, seed=0)
    Q = synthetic_collection(args.n_queries, args.query_terms, seed=1)
    post = np.diff(D.tocsc().indptr)
    res = {"command": " ".join(["python", "benchmarks/bench_retrieval.py", *(argv if argv is not None else sys.argv[1:])]),
           "date": time.strftime("%Y-%m-%d"), "machine": {"cores": os.cpu_count(), "cpu": platform.processor() or platform.machine()},
           "n_docs": D.shape[0], "V": D.shape[1], "doc_active": D.nnz / D.shape[0], "query_active": Q.nnz / Q.shape[0],
           "postings_per_query": float(np.mean([post[Q[i].indices].sum() for i in range(Q.shape[0])])),
           "n_queries": Q.shape[0], "k": args.k, "threads": args.threads, "generate_s": time.perf_counter() - t0,
           "loadavg_start": load_average(), "build_s": {}, "skipped": {}, "exactness_vs_scipy": {}, "recall@10_vs_exact": {}}
    print(json.dumps({k: v for k, v in res.items() if not isinstance(v, dict) or k == "machine"}), flush=True)

    cases = {}
    t0 = time.perf_counter()
    index = SparseIndex.build(D, device=args.device)
    res["build_s"]["ours"] = time.perf_counter() - t0
    res["ours_head_terms"] = int(index.head_terms.numel())
    cases["ours"] = lambda: tuple(x.numpy() for x in index.search(Q, k=args.k))
    if "ours_plain" not in skip:
        t0 = time.perf_counter()
        plain = SparseIndex.build(D, device=args.device, dense_threshold=None)
        res["build_s"]["ours_plain"] = time.perf_counter() - t0
        cases["ours_plain"] = lambda: tuple(x.numpy() for x in plain.search(Q, k=args.k))
    t0 = time.perf_counter()
    DT = D.T.tocsr()
    res["build_s"]["scipy"] = time.perf_counter() - t0
    cases["scipy"] = lambda: scipy_baseline(Q, DT, args.k)
    with tempfile.TemporaryDirectory() as tmp:
        builders = {"splade_index": (("splade_index", "numba"), lambda: build_splade_index(D, Q, args.k, args.threads)),
                    "pisa": (("pyterrier_pisa", "pandas"), lambda: build_pisa(D, Q, args.k, args.threads, Path(tmp))),
                    "seismic": (("seismic",), None)}
        for name, (modules, build) in builders.items():
            if name in skip:
                continue
            try:
                for m in modules:
                    __import__(m)
            except ImportError as err:
                res["skipped"][name] = f"not installed ({err}); pip install 'initlab[bench]'"
                print(f"skipping {name}: {res['skipped'][name]}", flush=True)
                continue
            t0 = time.perf_counter()
            if name == "seismic":
                with _quiet():
                    built = seismic_build(D, n_postings=3500, summary_energy=0.4, vocab=None, num_threads=args.threads)
                cases[name] = lambda built=built: seismic_query(built, Q, args.k, num_threads=args.threads)[::-1]
            else:
                cases[name] = build()
            res["build_s"][name] = time.perf_counter() - t0
            print(f"built {name} in {res['build_s'][name]:.1f} s", flush=True)

        res["loads"] = []
        for count in burners:
            with Burners(count, args.burner_nice) as b:
                cmp = interleaved(cases, baseline="ours", repeats=args.repeats, warmup=1)
            entry = {"burners": b.describe(), **cmp.to_json(),
                     "queries_per_s": {n: args.n_queries / float(np.median(ts)) for n, ts in cmp.seconds.items()}}
            res["loads"].append(entry)
            print(f"\n{b.describe()}; load average {cmp.load_start} at the start, {cmp.load_end} at the end; "
                  f"median of {args.repeats} interleaved rounds, {args.n_queries} queries each", flush=True)
            print(cmp.table(per=args.n_queries, unit="q/s"), flush=True)
        results = cmp.results

    ref_s, ref_i = results["scipy"]
    for name in ("ours", "ours_plain", "splade_index"):
        if name in results:
            res["exactness_vs_scipy"][name] = compare_rankings(*results[name], ref_s, ref_i)
    for name in ("pisa", "seismic"):
        if name in results:
            res["recall@10_vs_exact"][name] = recall_at_k(results[name][1], ref_i)
    res["loadavg_end"] = load_average()
    print("\nexactness vs scipy:", json.dumps(res["exactness_vs_scipy"]))
    print("recall@10 of the approximate peers vs exact:", json.dumps(res["recall@10_vs_exact"]))
    print("index build seconds:", json.dumps({k: round(v, 1) for k, v in res["build_s"].items()}))
    if args.out:
        from initlab.runs import atomic_write_json

        atomic_write_json(args.out, res)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
