"""The one collapse detector on hand-made vectors: each rule fires exactly when it should."""

from __future__ import annotations

import math

import pytest
import torch

from initlab.nn.collapse import detect_collapse, mean_pairwise_cosine, same_ranking_share


def test_healthy_model_is_not_collapsed():
    D = torch.cat([torch.eye(6), torch.zeros(6, 2)], dim=1)  # orthogonal documents
    S = torch.eye(4, 6) * 2 + torch.arange(6.0) * 0.01  # each query prefers its own document
    v = detect_collapse(losses=[1.0, 0.5], q_active=3.0, d_active=2.0, vocab_size=8, doc_vectors=D, scores=S)
    assert not v.collapsed and v.reasons == []
    assert v.stats["mean_doc_cosine"] == pytest.approx(0.0) and v.stats["same_ranking_share"] == pytest.approx(0.25)


@pytest.mark.parametrize("kwargs, word", [
    ({"losses": [1.0, math.nan]}, "non-finite loss"),
    ({"losses": [{"step": 7, "loss": math.inf}]}, "step 7"),
    ({"finite_weights": False}, "non-finite weights"),
    ({"d_active": 0.4, "vocab_size": 10}, "documents empty"),
    ({"q_active": 0.0, "vocab_size": 10}, "queries empty"),
    ({"d_active": 9.5, "vocab_size": 10}, "documents dense"),
    ({"q_active": math.nan}, "non-finite vectors"),
])
def test_each_rule_fires(kwargs, word):
    v = detect_collapse(**kwargs)
    assert v.collapsed and any(word in r for r in v.reasons), v.reasons


def test_near_constant_documents_and_rankings_are_flagged():
    base = torch.rand(1, 50, generator=torch.Generator().manual_seed(0))
    D = base.repeat(20, 1) + 1e-4 * torch.rand(20, 50, generator=torch.Generator().manual_seed(1))
    v = detect_collapse(q_active=10.0, d_active=50.0, vocab_size=1000, doc_vectors=D)
    assert v.collapsed and "near-constant" in v.reasons[0] and v.stats["mean_doc_cosine"] > 0.99
    S = torch.arange(20.0).repeat(8, 1)  # every query ranks the documents the same way
    v = detect_collapse(scores=S)
    assert v.collapsed and "rankings near-constant" in v.reasons[0] and v.stats["same_ranking_share"] == 1.0


def test_ties_rank_by_ascending_document_index():
    S = torch.zeros(3, 5)  # all tied: the order is 0, 1, 2, ... for every query
    assert same_ranking_share(S) == 1.0
    S[1, 4] = 1.0
    assert same_ranking_share(S) == pytest.approx(2 / 3)


def test_mean_pairwise_cosine_matches_a_loop_and_checks_shape():
    X = torch.rand(7, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    X[2] = 0
    U = [x / x.norm() if x.norm() > 0 else x for x in X]
    ref = sum(float(U[i] @ U[j]) for i in range(7) for j in range(7) if i != j) / 42
    assert mean_pairwise_cosine(X) == pytest.approx(ref, abs=1e-12)
    with pytest.raises(ValueError, match="X"):
        mean_pairwise_cosine(torch.zeros(1, 3))


def test_sparse_cosine_and_rankings_match_the_dense_rules():
    import numpy as np
    import scipy.sparse as sp

    from initlab.nn.collapse import modal_ranking_share

    X = torch.rand(9, 6, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    X[X < 0.5] = 0
    X[3] = 0
    assert mean_pairwise_cosine(sp.csr_matrix(X.numpy())) == pytest.approx(mean_pairwise_cosine(X), abs=1e-12)
    S = torch.rand(6, 12, generator=torch.Generator().manual_seed(5))
    S[:4] = S[0]  # 4 of 6 queries rank identically
    order = torch.sort(-S.double(), dim=1, stable=True).indices[:, :10]
    assert modal_ranking_share(order.numpy()) == same_ranking_share(S) == pytest.approx(4 / 6)
    same = np.tile(np.arange(10), (8, 1))
    v = detect_collapse(rankings=same, doc_vectors=sp.csr_matrix(np.eye(5)))
    assert v.collapsed and "rankings near-constant" in v.reasons[0] and v.stats["mean_doc_cosine"] == 0.0
    assert not detect_collapse(rankings=same[:3]).collapsed  # too few queries to call it


def test_every_decision_reports_its_margin_positive_on_the_healthy_side():
    D = torch.cat([torch.eye(6), torch.zeros(6, 2)], dim=1)
    S = torch.eye(4, 6) * 2 + torch.arange(6.0) * 0.01
    v = detect_collapse(q_active=3.0, d_active=2.0, vocab_size=8, doc_vectors=D, scores=S, max_same_ranking=0.9,
                        max_mean_cosine=0.99)
    assert v.margins["empty_documents"] == pytest.approx(1.0)  # 2 active dims: one factor of 2 above 1
    assert v.margins["dense_queries"] == pytest.approx(math.log2(0.9 * 8 / 3))
    assert v.margins["doc_cosine"] == pytest.approx(math.log2(1 / 0.01))  # cos 0: far from constant
    assert v.margins["same_ranking"] == pytest.approx(0.9 - 0.25)
    assert v.min_margin == min(v.margins.values()) > 0 and "margins" in v.as_dict()
    empty = detect_collapse(q_active=0.0, d_active=0.0, vocab_size=8)
    assert empty.collapsed and empty.margins["empty_documents"] == -30.0  # clamped, still a number


def test_a_knife_edge_reads_as_a_small_margin():
    """The trained tied BERT SPLADE rescaled by k = 16 (a knife edge of the thresholds): mean document cosine 0.9934 against 0.99."""
    a = torch.tensor([[1.0, 0.0], [0.9934, (1 - 0.9934 ** 2) ** 0.5]])
    v = detect_collapse(doc_vectors=a, max_mean_cosine=0.99)
    assert v.collapsed and -1.0 < v.margins["doc_cosine"] < 0  # flagged by less than one factor of 2
    S = torch.arange(20.0).repeat(10, 1)
    S[9] = torch.arange(20.0).flip(0)  # 9 of 10 queries share one top-10
    assert not detect_collapse(scores=S, max_same_ranking=0.9).collapsed  # the old rule stayed silent at 0.9 ...
    assert detect_collapse(scores=S, max_same_ranking=0.9).margins["same_ranking"] == pytest.approx(0.0, abs=1e-12)
    calibrated = detect_collapse(scores=S)  # ... the calibrated one flags it by 7.5 of its 0.1 steps
    assert calibrated.collapsed and calibrated.margins["same_ranking"] == pytest.approx(0.15 - 0.9)


def test_one_query_alone_shares_no_ranking():
    S = torch.eye(4, 6) * 2 + torch.arange(6.0) * 0.01  # 4 queries, 4 different top-10s: share 1/4 > 0.15
    v = detect_collapse(scores=S)
    assert v.stats["same_ranking_share"] == 0.25 and not v.collapsed
    S[1] = S[0]  # two queries now share one: flagged (2 of 4)
    assert detect_collapse(scores=S).collapsed


def test_calibrated_thresholds_are_the_defaults():
    from initlab.nn.collapse import THRESHOLDS, UNCALIBRATED

    assert (THRESHOLDS.max_mean_cosine, THRESHOLDS.max_same_ranking) == (0.943, 0.15)
    assert (UNCALIBRATED.max_mean_cosine, UNCALIBRATED.max_same_ranking) == (0.99, 0.9)
    a = torch.tensor([[1.0, 0.0], [0.95, (1 - 0.95 ** 2) ** 0.5]])
    assert detect_collapse(doc_vectors=a).collapsed and not detect_collapse(doc_vectors=a, max_mean_cosine=0.99).collapsed
