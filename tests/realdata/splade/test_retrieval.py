"""Exact sparse retrieval vs the dense float64 reference; FLOPS and active dims vs brute force."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given, strategies as st

from initlab.realdata.splade.retrieval import (
    SparseIndex,
    active_dims,
    dense_topk_reference,
    flops,
    recall_at_k,
    to_scipy_csr,
)
from initlab.realdata.splade.seismic import seismic_search


def _random_sparse(rng, n, V, density):
    m = sp.random(n, V, density=density, format="csr", random_state=rng, dtype=np.float32)
    m.data = np.log1p(m.data * 5).astype(np.float32)  # SPLADE-like non-negative weights
    return m


@given(seed=st.integers(0, 10_000), n_docs=st.integers(1, 60), n_q=st.integers(1, 12), V=st.integers(2, 80),
       density=st.floats(0.02, 0.5), k=st.integers(1, 70), chunk=st.integers(1, 5))
def test_exact_search_matches_dense_reference(seed, n_docs, n_q, V, density, k, chunk):
    rng = np.random.default_rng(seed)
    D = _random_sparse(rng, n_docs, V, density)
    Q = _random_sparse(rng, n_q, V, density)
    s, i = SparseIndex.build(D).search(Q, k=k, chunk_size=chunk)
    rs, ri = dense_topk_reference(Q, D, k)
    assert s.shape == rs.shape == (n_q, min(k, n_docs))
    np.testing.assert_allclose(s.double().numpy(), rs.numpy(), rtol=1e-5, atol=1e-6)
    # identical rankings wherever scores are not tied (zero-score documents are ties too)
    full = (Q.astype(np.float64) @ D.T.astype(np.float64)).toarray()  # (n_q, n_docs) all scores
    for row in range(n_q):
        for j, score in enumerate(rs[row].numpy()):
            tied = np.isclose(full[row], score, rtol=1e-5, atol=1e-7).sum() > 1
            if not tied:
                assert int(i[row, j]) == int(ri[row, j])


def test_exact_search_input_forms_agree_and_errors():
    rng = np.random.default_rng(0)
    D = _random_sparse(rng, 30, 20, 0.3)
    Q = _random_sparse(rng, 4, 20, 0.3)
    idx = SparseIndex.build(torch.from_numpy(D.toarray()))
    a = idx.search(Q, k=5)
    b = idx.search(torch.from_numpy(Q.toarray()).to_sparse(), k=5)
    c = idx.search(Q.toarray(), k=5)
    for other in (b, c):
        assert torch.equal(a[1], other[1])
    with pytest.raises(ValueError, match="width V = 20"):
        idx.search(np.zeros((2, 21), np.float32), k=3)
    with pytest.raises(ValueError, match="k: expected >= 1"):
        idx.search(Q, k=0)
    with pytest.raises(ValueError, match=">= 0"):
        to_scipy_csr(-np.ones((2, 3)), "docs")
    with pytest.raises(TypeError, match="docs"):
        to_scipy_csr([[1.0]], "docs")
    with pytest.raises(ValueError, match="2-D"):
        to_scipy_csr(np.ones(3), "docs")


def test_flops_matches_brute_force_expectation():
    rng = np.random.default_rng(1)
    Q = _random_sparse(rng, 7, 15, 0.3)
    D = _random_sparse(rng, 11, 15, 0.4)
    # brute force: mean over all (q, d) pairs of the number of shared active terms (multiplications)
    qa, da = (Q.toarray() > 0).astype(float), (D.toarray() > 0).astype(float)
    brute = np.mean([[np.sum(qa[i] * da[j]) for j in range(11)] for i in range(7)])
    assert flops(Q, D) == pytest.approx(brute, rel=1e-12)
    assert active_dims(D) == pytest.approx(da.sum(1).mean())
    with pytest.raises(ValueError, match="widths differ"):
        flops(Q, D[:, :10])


def test_recall_at_k():
    assert recall_at_k(np.array([[1, 2, 3]]), np.array([[3, 4, 1]])) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        recall_at_k(np.zeros((2, 3)), np.zeros((1, 3)))


def test_seismic_backend_returns_valid_documents():
    pytest.importorskip("seismic")
    rng = np.random.default_rng(2)
    D = _random_sparse(rng, 60, 40, 0.2)
    Q = _random_sparse(rng, 3, 40, 0.3)
    approx, a_scores, build_s, search_s = seismic_search(Q, D, k=5, num_threads=1)
    _, exact = dense_topk_reference(Q, D, 5)
    full = Q.toarray().astype(np.float64) @ D.toarray().astype(np.float64).T
    for i in range(3):  # seismic's scores are the dot products of the documents it returns, up to its
        got = approx[i] >= 0  # reduced-precision (half-float) storage of the weights
        np.testing.assert_allclose(a_scores[i][got], full[i, approx[i][got]], rtol=2e-3)
    assert approx.shape == (3, 5) and build_s >= 0 and search_s >= 0
    assert ((approx >= -1) & (approx < 60)).all()
    assert 0.0 <= recall_at_k(approx, exact.numpy()) <= 1.0


def test_seismic_results_follow_query_order_whatever_the_hash_seed():
    # pyseismic-lsr's batch_search returns result lists in an order that depends on PYTHONHASHSEED; the
    # wrapper must place them by query id. Run it under several hash seeds in fresh interpreters.
    pytest.importorskip("seismic")
    import os
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import numpy as np, scipy.sparse as sp
        from initlab.realdata.splade.seismic import seismic_search
        rng = np.random.default_rng(2)
        D = sp.random(60, 40, density=0.2, format="csr", random_state=rng, dtype=np.float32)
        Q = sp.random(6, 40, density=0.3, format="csr", random_state=rng, dtype=np.float32)
        idx, sc, _, _ = seismic_search(Q, D, k=5, num_threads=1)
        full = Q.toarray().astype(np.float64) @ D.toarray().astype(np.float64).T
        for i in range(6):
            ok = idx[i] >= 0
            assert np.allclose(sc[i][ok], full[i, idx[i][ok]], rtol=2e-3, atol=1e-6), i
        print("OK")
        """
    )
    for seed in ("1", "2", "3", "4"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0 and "OK" in proc.stdout, (seed, proc.stderr[-2000:])


@given(seed=st.integers(0, 10_000), n_docs=st.integers(1, 40), n_q=st.integers(1, 8), V=st.integers(1, 12),
       k=st.integers(1, 50), chunk=st.integers(1, 4))
def test_exact_search_breaks_ties_by_index_like_a_full_sort(seed, n_docs, n_q, V, k, chunk):
    # Small integer weights on a tiny vocabulary: many exactly tied scores (sums of small integers are exact
    # in float32 and float64), including all-zero rows (empty queries / documents) and ties at the k-th place.
    rng = np.random.default_rng(seed)
    D = sp.csr_matrix(rng.integers(0, 3, size=(n_docs, V)) * (rng.random((n_docs, V)) < 0.4)).astype(np.float32)
    Qd = rng.integers(0, 3, size=(n_q, V)) * (rng.random((n_q, V)) < 0.5)
    Qd[0] = 0  # an empty query: every document scores 0, ranking = index order
    Q = sp.csr_matrix(Qd).astype(np.float32)
    s, i = SparseIndex.build(D).search(Q, k=k, chunk_size=chunk)
    rs, ri = dense_topk_reference(Q, D, k)
    assert torch.equal(i, ri) and torch.equal(s.double(), rs)
    assert torch.equal(i[0], torch.arange(min(k, n_docs)))


class _BagOfWords:
    """A stand-in encoder (the evaluate API of a SparseEncoder): term weight 1 per distinct known word."""

    device = torch.device("cpu")
    vocab = {w: j for j, w in enumerate("cat sofa dog rain".split())}

    def _enc(self, texts, **_):
        rows = [[self.vocab[w] for w in sorted(set(t.split())) if w in self.vocab] for t in texts]
        idx = [[r for r, js in enumerate(rows) for _ in js], [j for js in rows for j in js]]
        return torch.sparse_coo_tensor(idx, torch.ones(len(idx[1])), (len(texts), len(self.vocab)), check_invariants=True)

    encode_query = encode_document = _enc


def test_beir_identical_query_and_document_ids_are_not_retrieved():
    # BEIR's evaluation drops a document whose id is the query's id (ArguAna, Quora); MS MARCO never does,
    # where query and passage ids are separate number ranges that can collide.
    from initlab.realdata.splade.evalset import RetrievalSet
    from initlab.realdata.splade.evaluate import evaluate_set

    corpus = {"q0": "cat sofa", "d1": "cat", "d2": "dog"}
    kw = dict(corpus=corpus, queries={"q0": "cat sofa"}, qrels={"q0": {"d1": 1}})
    beir = evaluate_set(_BagOfWords(), RetrievalSet("quora-like", **kw, ignore_identical_ids=True), top_k=3)
    plain = evaluate_set(_BagOfWords(), RetrievalSet("msmarco-like", **kw), top_k=3)
    assert beir["RR@10"] == pytest.approx(1.0) and plain["RR@10"] == pytest.approx(0.5)
    # FLOPS = sum_j p_j^q p_j^d = 1 * 2/3 (cat) + 1 * 1/3 (sofa); active dims: query 2, documents (2+1+1)/3
    assert beir["flops"] == pytest.approx(1.0) and beir["q_active"] == 2 and beir["d_active"] == pytest.approx(4 / 3)


ARGUANA_LIKE = Path(__file__).resolve().parents[1] / "fixtures" / "splade" / "beir" / "arguana"


def _beir_reference(ds, enc, top_k):
    """BEIR's exact search by hand: dense scores of every document, ranked by (score desc, corpus order), the
    query's own id skipped, the first top_k kept; then the same ir_measures measures."""
    import ir_measures
    from ir_measures import R, nDCG

    dids = list(ds.corpus)
    Q = enc.encode_query(list(ds.queries.values())).to_dense().double()
    D = enc.encode_document(list(ds.corpus.values())).to_dense().double()
    S = Q @ D.T
    run = {}
    for i, q in enumerate(ds.queries):
        order = sorted(range(len(dids)), key=lambda j: (-float(S[i, j]), j))
        kept = [j for j in order if dids[j] != q and S[i, j] > 0][:top_k]
        run[q] = {dids[j]: float(top_k - r) for r, j in enumerate(kept)}
    agg = ir_measures.calc_aggregate([nDCG @ 10, R @ top_k], ds.qrels, run)
    return run, float(agg[nDCG @ 10]), float(agg[R @ top_k])


@pytest.mark.parametrize("top_k", [3, 6])
def test_beir_self_hit_is_dropped_before_the_top_k_cut(top_k):
    """ArguAna-like fixture in the BEIR layout: each query is also a corpus document, and its relevant document
    ranks (k + 1)-th counting the self-hit. BEIR retrieves k + 1 and drops the self-hit, so k documents remain
    and the relevant one is found; cutting at k first left k - 1 (nDCG@10 0 and R@3 0 at top_k = 3)."""
    from initlab.realdata.splade.data import load_eval_set
    from initlab.realdata.splade.evaluate import evaluate_set

    ds = load_eval_set("arguana", data_root=ARGUANA_LIKE.parents[1])
    assert ds.ignore_identical_ids and set(ds.queries) <= set(ds.corpus)
    row = evaluate_set(_BagOfWords(), ds, top_k=top_k)
    run, ndcg, recall = _beir_reference(ds, _BagOfWords(), top_k)
    assert row["nDCG@10"] == pytest.approx(ndcg, abs=1e-12) and row[f"R@{top_k}"] == pytest.approx(recall, abs=1e-12)
    if top_k == 3:  # by hand: both relevant documents at rank 3 of 3, 1 / log2(4)
        assert all(len(r) == 3 for r in run.values())
        assert row["nDCG@10"] == pytest.approx(0.5) and row["R@3"] == pytest.approx(1.0)


def test_drop_identical_ids_keeps_exactly_k():
    from initlab.realdata.splade.evaluate import drop_identical_ids

    dids = ["a", "q1", "b", "c", "q2"]
    idx = torch.tensor([[1, 0, 2, 3], [0, 2, 3, 1], [3, 2, 4, -1]])  # q1 first; q1's id absent from row 2; padded
    scores = torch.tensor([[9.0, 5, 4, 3], [8.0, 7, 6, 5], [3.0, 2, 1, -math.inf]])
    s, i = drop_identical_ids(["q1", "q2", "x"], dids, scores, idx, 3)
    assert i.tolist() == [[0, 2, 3], [0, 2, 3], [3, 2, 4]] and s[0].tolist() == [5.0, 4.0, 3.0]
    s, i = drop_identical_ids(["q1", "q2", "q2"], dids, scores[:, :3], idx[:, :3], 3)  # too few columns: padding
    assert i.tolist() == [[0, 2, -1], [0, 2, 3], [3, 2, -1]] and s[0, 2] == -math.inf
    with pytest.raises(ValueError, match="k: expected >= 1"):
        drop_identical_ids(["q1"], dids, scores[:1], idx[:1], 0)


@pytest.mark.parametrize("threshold", [None, 0.05, 0.3, 1.0])
def test_dense_head_and_plain_inverted_index_agree_with_reference(threshold):
    # Zipf-like columns: a few dense (head) terms and many rare ones, so both paths of the hybrid search run.
    rng = np.random.default_rng(7)
    n, V = 300, 50
    p = 0.9 / np.arange(1, V + 1) ** 1.1
    mask = rng.random((n, V)) < p
    D = sp.csr_matrix((rng.random((n, V)) * mask).astype(np.float32))
    Q = sp.csr_matrix((rng.random((9, V)) * (rng.random((9, V)) < 0.3)).astype(np.float32))
    idx = SparseIndex.build(D, dense_threshold=threshold)
    if threshold is None:
        assert idx.head_terms.numel() == 0
    else:
        lengths = np.diff(D.tocsc().indptr)
        assert set(idx.head_terms.tolist()) == set(np.nonzero(lengths >= threshold * n)[0].tolist())
    s, i = idx.search(Q, k=20, chunk_size=4, workers=2)
    ref_s, ref_i = dense_topk_reference(Q, D, 20)
    assert torch.equal(i, ref_i)
    assert torch.allclose(s.double(), ref_s, rtol=1e-5, atol=1e-6)


def test_dense_head_respects_memory_cap_and_validates():
    D = sp.csr_matrix(np.ones((10, 6), dtype=np.float32))
    assert SparseIndex.build(D, max_dense_bytes=4 * 10 * 2).head_terms.numel() == 2
    with pytest.raises(ValueError, match="dense_threshold"):
        SparseIndex.build(D, dense_threshold=0.0)
    with pytest.raises(ValueError, match="workers"):
        SparseIndex.build(D).search(D, k=1, workers=0)


# ---- the fast path (dense head prefix + term-at-a-time + pruned top-k, worker threads) vs the reference ----

from initlab.realdata.splade import retrieval as _retrieval  # noqa: E402


def _dyadic_sparse(rng, n, V, density):
    """Weights in {1/4, 1/2, ..., 2}: every sum of a few products is exact in float32 and float64, so
    scores tie exactly wherever they tie mathematically."""
    mask = rng.random((n, V)) < density
    return sp.csr_matrix((rng.integers(1, 9, size=(n, V)) / 4.0 * mask).astype(np.float32))


@given(seed=st.integers(0, 10_000), n_docs=st.integers(1, 90), n_q=st.integers(1, 10), V=st.integers(1, 30),
       k=st.integers(1, 40), chunk=st.integers(1, 6), workers=st.integers(1, 3),
       cost=st.sampled_from([0.0, 0.01, 1e9]), threshold=st.sampled_from([None, 0.05, 0.4]),
       short=st.sampled_from([0, 5, 1024]))
def test_fast_search_equals_float64_reference_with_ties(seed, n_docs, n_q, V, k, chunk, workers, cost, threshold, short):
    # ids must be equal (ties by ascending document index) and scores equal to float64 within 0 (dyadic
    # weights: the float32 sums are exact). cost 0 puts every head term into the dense product, 1e9 none,
    # 0.01 (the default) splits the head per block; short 0 adds every posting list with its own
    # index_add_, 1024 (the default) gathers them all into one per block, 5 mixes both.
    rng = np.random.default_rng(seed)
    D = _dyadic_sparse(rng, n_docs, V, rng.uniform(0.05, 0.6))
    Q = _dyadic_sparse(rng, n_q, V, rng.uniform(0.05, 0.6))
    idx = SparseIndex.build(D, dense_threshold=threshold)
    plan = _retrieval.SearchPlan
    old = plan.DENSE_PER_POSTING, plan.SHORT_POSTINGS
    plan.DENSE_PER_POSTING, plan.SHORT_POSTINGS = cost, short
    try:
        s, i = idx.search(Q, k=k, chunk_size=chunk, workers=workers)
    finally:
        plan.DENSE_PER_POSTING, plan.SHORT_POSTINGS = old
    rs, ri = dense_topk_reference(Q, D, k)
    assert torch.equal(i, ri)
    assert torch.equal(s.double(), rs)


@given(seed=st.integers(0, 10_000), n_docs=st.integers(50, 400), n_q=st.integers(1, 6), k=st.integers(1, 30),
       workers=st.integers(1, 2))
def test_fast_search_on_zipf_like_floats_matches_float64_reference(seed, n_docs, n_q, k, workers):
    # Real-valued weights: scores within rtol 1e-5 / atol 1e-6 of float64 (float32 summation), identical ids
    # wherever the reference's score is not tied within that tolerance.
    rng = np.random.default_rng(seed)
    V = 60
    p = 0.9 / np.arange(1, V + 1) ** 1.1
    D = sp.csr_matrix((np.log1p(rng.lognormal(0, 0.5, (n_docs, V))) * (rng.random((n_docs, V)) < p)).astype(np.float32))
    Q = sp.csr_matrix((rng.random((n_q, V)) * (rng.random((n_q, V)) < 0.3)).astype(np.float32))
    s, i = SparseIndex.build(D, dense_threshold=0.1).search(Q, k=k, chunk_size=4, workers=workers)
    rs, ri = dense_topk_reference(Q, D, k)
    np.testing.assert_allclose(s.double().numpy(), rs.numpy(), rtol=1e-5, atol=1e-6)
    full = Q.toarray().astype(np.float64) @ D.toarray().astype(np.float64).T
    for row in range(n_q):
        for j, score in enumerate(rs[row].numpy()):
            if np.isclose(full[row], score, rtol=1e-5, atol=1e-6).sum() == 1:
                assert int(i[row, j]) == int(ri[row, j])


@given(seed=st.integers(0, 10_000), B=st.integers(1, 4), n=st.integers(1, 300), k=st.integers(1, 40),
       segment=st.integers(1, 40), levels=st.integers(1, 6))
def test_pruned_topk_equals_full_stable_sort(seed, B, n, k, segment, levels):
    # Few distinct values: ties everywhere, across segment borders and at the k-th place; N need not be a
    # multiple of the segment.
    rng = np.random.default_rng(seed)
    scores = torch.from_numpy(rng.integers(0, levels, size=(B, n)).astype(np.float32))
    k = min(k, n)
    s, i = _retrieval.topk_stable(scores, k, segment=segment)
    order = torch.argsort(-scores.double(), dim=1, stable=True)[:, :k]
    assert torch.equal(i, order)
    assert torch.equal(s, torch.gather(scores, 1, order))


def test_dense_prefix_is_the_cheapest_split():
    rng = np.random.default_rng(3)
    for _ in range(50):
        H = int(rng.integers(0, 12))
        users = rng.integers(0, 9, H).astype(float)
        lengths = rng.integers(1, 500, H).astype(float)
        B, n, c = int(rng.integers(1, 9)), 500, float(rng.choice([0.0, 0.01, 0.5]))
        costs = [h * B * n * c + float((users[h:] * lengths[h:]).sum()) for h in range(H + 1)]
        got = _retrieval.dense_prefix(users, lengths, B, n, c)
        assert costs[got] == pytest.approx(min(costs))


def test_workers_leave_torch_threads_as_they_were_and_raise_worker_errors(monkeypatch):
    import threading

    rng = np.random.default_rng(4)
    D, Q = _random_sparse(rng, 50, 20, 0.3), _random_sparse(rng, 9, 20, 0.3)
    idx = SparseIndex.build(D)
    before = torch.get_num_threads()
    a = idx.search(Q, k=5, chunk_size=2, workers=3)
    b = idx.search(Q, k=5, chunk_size=2, workers=1)
    assert torch.equal(a[1], b[1])
    seen = []
    t = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    t.start()
    t.join()
    assert torch.get_num_threads() == before and seen == [before]

    def broken(self, *args):
        raise RuntimeError("block failed")

    monkeypatch.setattr(_retrieval.SearchPlan, "score_block", broken)
    with pytest.raises(RuntimeError, match="block failed"):
        idx.search(Q, k=5, chunk_size=2, workers=2)
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="chunk_size"):
        idx.search(Q, k=5, chunk_size=0)


@pytest.mark.gpu
def test_cuda_search_equals_float64_reference():
    # The CUDA path: one stream of blocks, every posting list added with its own index_add_.
    rng = np.random.default_rng(5)
    D, Q = _dyadic_sparse(rng, 300, 40, 0.3), _dyadic_sparse(rng, 11, 40, 0.3)
    s, i = SparseIndex.build(D, device="cuda", dense_threshold=0.2).search(Q, k=25, chunk_size=4)
    rs, ri = dense_topk_reference(Q, D, 25)
    assert torch.equal(i, ri) and torch.equal(s.double(), rs)
