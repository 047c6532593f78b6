"""Collapse-detector calibration: labels from retrieval quality, midpoint thresholds, per-decision margins."""

from __future__ import annotations

import math

import pytest

from initlab.synthetic.splade import calibration as cal


def test_constructed_cases_have_the_statistics_their_labels_say():
    cases = {c["case"]: c for c in cal.constructed_cases()}
    assert cases["diverse sparse vectors, each query a part of one document"]["label"] == "healthy"
    assert cases["identical documents (plus 1e-3 noise)"]["mean_doc_cosine"] > 0.999
    assert cases["one dominant dimension shared by every document"]["mean_doc_cosine"] > 0.99
    assert cases["empty vectors"]["d_active_dims"] == 0.0
    assert cases["dense vectors (every dimension active)"]["d_active_dims"] == 400.0
    assert cases["every query the same vector"]["same_ranking_share"] == 1.0
    assert cases["9 of 10 queries the same vector"]["same_ranking_share"] == pytest.approx(0.9)


def _phase(cells):
    """A phase.json with one (family, seed): ``cells`` = [(name, ndcg, cos, share, posthoc rows)]."""
    rows, posthoc = [], []
    for name, nd, cos, share, ph in cells:
        rows.append({"cell": name, "family": "bert", "seed": 0, "ndcg@10": nd, "q_active_dims": 5.0, "d_active_dims": 20.0,
                     "mean_doc_cosine": cos, "same_ranking_share": share, "failed": False})
        for k, pnd, pcos, pshare in ph:
            posthoc.append({"cell": name, "family": "bert", "seed": 0, "k": k, "ndcg@10": pnd, "q_active_dims": 5.0,
                            "d_active_dims": 20.0, "finite_vectors": True,
                            "collapse_stats": {"mean_doc_cosine": pcos, "same_ranking_share": pshare}})
    corpus = {"n_background": 5, "n_topics": 2, "topic_words": 5, "n_entities": 50}
    return {"config": {"corpus": corpus}, "rows": rows, "posthoc": posthoc}


def test_labels_come_from_retrieval_quality_and_thresholds_sit_mid_gap():
    phase = _phase([("a", 0.80, 0.40, 0.02, [(16.0, 0.10, 0.999, 0.50)]),
                    ("b", 0.70, 0.60, 0.05, [(16.0, 0.30, 0.90, 0.10)])])
    cases = cal.trained_cases(phase, "x")
    labels = {c["case"]: c["label"] for c in cases}
    assert labels == {"a": "healthy", "b": "healthy", "a / k=16 after training": "degenerate",
                      "b / k=16 after training": "degraded"}  # 0.30 / 0.80: between a quarter and a half
    rep = cal.calibrate(cases)
    g = rep["rule_gaps"]["doc_cosine"]
    assert g["healthy_max_cos"] == pytest.approx(0.60)  # "b", the healthy model closest to constant
    # one safety step (a factor of 2 of 1 - cos) beyond it: 1 - 0.4 / 2
    assert rep["thresholds"]["max_mean_cosine"] == pytest.approx(0.80)
    assert g["degenerate_next_above"] == pytest.approx(-math.log2(0.001)) and g["gap_midpoint"] is not None
    assert rep["thresholds"]["max_same_ranking"] == pytest.approx(0.05 + 0.1)
    dec = {c["case"]: c for c in rep["cases"]}
    assert dec["a / k=16 after training"]["flagged"] and not dec["a"]["flagged"] and not dec["b"]["flagged"]
    assert dec["a"]["margins"]["doc_cosine"] > 0 > dec["a / k=16 after training"]["margins"]["doc_cosine"]
    assert dec["b"]["margin_steps"] == pytest.approx(1.0)  # the healthy maximum passes by exactly one step
    assert rep["errors"] == [] and rep["misses"] == [] and rep["summary"]["degenerate"] == {"n": 1, "flagged": 1}


def test_overlapping_labels_are_reported_as_errors_not_hidden():
    cases = [{"case": "h", "label": "healthy", "q_active_dims": 5.0, "d_active_dims": 5.0, "vocab": 100,
              "mean_doc_cosine": 0.5, "same_ranking_share": 0.1},
             {"case": "d-near-constant", "label": "degenerate", "q_active_dims": 5.0, "d_active_dims": 5.0, "vocab": 100,
              "mean_doc_cosine": 0.999, "same_ranking_share": 0.9},
             {"case": "d-diverse", "label": "degenerate", "q_active_dims": 5.0, "d_active_dims": 5.0, "vocab": 100,
              "mean_doc_cosine": 0.3, "same_ranking_share": 0.05}]
    rep = cal.calibrate(cases)
    assert rep["errors"] == [] and rep["misses"] == ["d-diverse"]  # diverse vectors: no near-constant rule catches them
    assert rep["cases"][2]["margin_steps"] > 0 and rep["margins"]["degenerate"]["passed"][">= 1"] == 1
    with pytest.raises(ValueError, match="healthy"):
        cal.calibrate(cases[1:])


def test_held_out_check_decides_with_the_committed_thresholds_and_chooses_nothing():
    from initlab.nn.collapse import CollapseThresholds

    cases = [{"case": "h", "label": "healthy", "q_active_dims": 5.0, "d_active_dims": 5.0, "vocab": 100,
              "mean_doc_cosine": 0.5, "same_ranking_share": 0.1},
             {"case": "d", "label": "degenerate", "q_active_dims": 5.0, "d_active_dims": 5.0, "vocab": 100,
              "mean_doc_cosine": 0.7, "same_ranking_share": 0.05}]
    chosen = cal.calibrate(cases)  # one step beyond the healthy 0.5: 0.75, so "d" (0.7) passes
    assert chosen["thresholds"]["max_mean_cosine"] == pytest.approx(0.75) and chosen["misses"] == ["d"]
    fixed = cal.calibrate(cases, fixed=CollapseThresholds(max_mean_cosine=0.6, max_same_ranking=0.08))
    assert fixed["thresholds"]["max_mean_cosine"] == 0.6 and fixed["thresholds"]["max_same_ranking"] == 0.08
    assert fixed["misses"] == [] and fixed["errors"] == ["h"]  # the fixed share threshold flags the healthy one
