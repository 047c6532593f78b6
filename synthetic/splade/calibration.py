"""Calibration of the collapse detector on a labelled set of healthy and degenerate SPLADE models.

``python -m initlab.synthetic.splade.calibration PHASE_JSON [PHASE_JSON ...] [--json OUT] [--held-out]`` reads the
saved ``phase.json`` of synthetic SPLADE runs (``initlab synthetic splade``) and builds the labelled set:

* **trained models**: every distinct trained cell of the runs (each family, seed, k and mode), and every trained
  cell divided after training by each ``posthoc_ks`` (``PhaseConfig.posthoc_ks``: a trained tied checkpoint
  rescaled as ``mlmhead rescale`` would, the case of a trained BERT SPLADE rescaled by k = 16 whose nDCG@10
  fell from 1.0 to 0.27);
* **constructed models** (:func:`constructed_cases`): hand-made query and document vectors with a known
  label -- diverse sparse vectors (healthy); identical documents, one dominant shared dimension, empty,
  dense, every query the same, and 9 of 10 queries the same (degenerate).

Labels of the trained models come from retrieval quality, never from the detector's statistics: with ``ref``
the best nDCG@10 (all dev queries) over the trained cells of the same (family, seed), a model is *healthy* if
its nDCG@10 >= ``HEALTHY_FRACTION`` x ref (within 20 % of the best), *degenerate* if <= ``DEGENERATE_FRACTION``
x ref, and *degraded* in between (reported, not used to place a threshold).

Thresholds (:func:`calibrate`): the empty (< 1 active dimension) and dense (> 0.9 V) rules are definitions
and are not tuned (on this corpus healthy documents use 14-47 % of V, so active dimensions do not separate the
classes). Each near-constant rule's threshold is put one safety step beyond the largest value any healthy model
reaches, on the rule's own scale (:data:`MIN_MARGIN`: a factor of 2 of ``1 - cos`` for the cosine rule, 0.1 of
the queries for the ranking rule), so every healthy model of the set passes with at least that margin. Then
every labelled model is decided and the margin of each decision is reported
(:class:`initlab.nn.collapse.CollapseVerdict`'s margins, positive = passes): a degenerate model that passes is a
miss (its margin says by how much), a healthy one that is flagged an error. The midpoint of the gap between
the healthy maximum and the next degenerate value is reported beside it (it is where a maximum-margin
classifier would put the threshold; on the exploratory run the gap is a hair wide, see docs).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any, Sequence

import torch

from initlab.textio import read_json
from initlab.nn.collapse import MARGIN_CLAMP, detect_collapse

__all__ = ["HEALTHY_FRACTION", "DEGENERATE_FRACTION", "MIN_MARGIN", "constructed_cases", "trained_cases", "calibrate",
           "decide", "main"]

HEALTHY_FRACTION = 0.8
DEGENERATE_FRACTION = 0.25
#: the safety step of each near-constant rule, in its own scale (one factor of 2 of 1 - cos; 0.1 of the queries)
MIN_MARGIN = {"doc_cosine": 1.0, "same_ranking": 0.1}


def _stats(q: torch.Tensor, d: torch.Tensor) -> dict[str, Any]:
    """The detector's statistics of queries ``q (Q, V)`` and documents ``d (D, V)``."""
    v = detect_collapse(q_active=float((q > 0).sum(1).double().mean()), d_active=float((d > 0).sum(1).double().mean()),
                        vocab_size=q.shape[1], doc_vectors=d, scores=q.double() @ d.double().T)
    return {"q_active_dims": float((q > 0).sum(1).double().mean()), "d_active_dims": float((d > 0).sum(1).double().mean()),
            "vocab": int(q.shape[1]), "finite": True, **v.stats}


def constructed_cases(seed: int = 0) -> list[dict[str, Any]]:
    """Hand-made models with a known label (module docstring): 40 queries (10 for the 9-of-10 case) and 60
    documents over V = 400, deterministic by ``seed``."""
    g = torch.Generator().manual_seed(seed)
    V, D, Q = 400, 60, 40

    def sparse(n: int, active: int) -> torch.Tensor:
        x = torch.zeros(n, V)
        for i in range(n):
            idx = torch.randperm(V, generator=g)[:active]
            x[i, idx] = torch.rand(active, generator=g) + 0.1
        return x

    docs = sparse(D, 20)
    own = torch.randint(D, (Q,), generator=g)
    queries = docs[own] * (torch.rand(Q, V, generator=g) < 0.4) + sparse(Q, 3) * 0.5  # a part of its document's terms
    cases = [("diverse sparse vectors, each query a part of one document", "healthy", queries, docs)]
    same = docs[:1].repeat(D, 1) + 1e-3 * sparse(D, 20)
    cases.append(("identical documents (plus 1e-3 noise)", "degenerate", queries, same))
    dom = 0.05 * docs.clone()
    dom[:, 0] = 3.0
    cases.append(("one dominant dimension shared by every document", "degenerate", queries, dom))
    cases.append(("empty vectors", "degenerate", torch.zeros(Q, V), torch.zeros(D, V)))
    cases.append(("dense vectors (every dimension active)", "degenerate", torch.rand(Q, V, generator=g) + 0.01,
                  torch.rand(D, V, generator=g) + 0.01))
    cases.append(("every query the same vector", "degenerate", queries[:1].repeat(Q, 1), docs))
    nine = queries[:10].clone()
    nine[1:9] = nine[0]  # queries 0-8 identical, query 9 its own
    cases.append(("9 of 10 queries the same vector", "degenerate", nine, docs))
    return [{"source": "constructed", "case": name, "label": label, "ndcg": None, **_stats(q, d)}
            for name, label, q, d in cases]


def trained_cases(phase: dict[str, Any], source: str) -> list[dict[str, Any]]:
    """The trained and trained-then-rescaled models of one loaded ``phase.json``, labelled (module docstring)."""
    cells: dict[str, dict[str, Any]] = {}
    for r in phase["rows"]:
        cells.setdefault(r["cell"], r)
    vocab = 5 + phase["config"]["corpus"]["n_background"] + phase["config"]["corpus"]["n_topics"] * \
        phase["config"]["corpus"]["topic_words"] + phase["config"]["corpus"]["n_entities"]
    ref: dict[tuple[str, int], float] = {}
    for c in cells.values():
        key = (c["family"], int(c["seed"]))
        ref[key] = max(ref.get(key, 0.0), c["ndcg@10"] or 0.0)
    out = []

    def add(name: str, c: dict[str, Any], nd: float | None, stats: dict[str, Any], failed: bool) -> None:
        r = ref[(c["family"], int(c["seed"]))]
        nd = 0.0 if nd is None else float(nd)
        label = ("healthy" if nd >= HEALTHY_FRACTION * r else "degenerate" if nd <= DEGENERATE_FRACTION * r else "degraded")
        out.append({"source": source, "case": name, "family": c["family"], "seed": int(c["seed"]), "label": label,
                    "ndcg": nd, "ref_ndcg": r, "vocab": vocab, "finite": not failed, **stats})

    for name, c in sorted(cells.items()):
        add(name, c, c["ndcg@10"], {"q_active_dims": c["q_active_dims"], "d_active_dims": c["d_active_dims"],
                                    "mean_doc_cosine": c.get("mean_doc_cosine"),
                                    "same_ranking_share": c.get("same_ranking_share")}, bool(c["failed"]))
    for p in phase.get("posthoc", []):
        c = cells.get(p["cell"]) or {"family": p["family"], "seed": p["seed"]}
        st = p.get("collapse_stats", {})
        add(f"{p['cell']} / k={p['k']:g} after training", c, p["ndcg@10"],
            {"q_active_dims": p["q_active_dims"], "d_active_dims": p["d_active_dims"],
             "mean_doc_cosine": st.get("mean_doc_cosine"), "same_ranking_share": st.get("same_ranking_share")},
            not p.get("finite_vectors", True))
    return out


def _cos_scale(cos: float) -> float:
    return min(MARGIN_CLAMP, -math.log2(max(1.0 - cos, 2.0 ** -MARGIN_CLAMP)))


def decide(case: dict[str, Any], max_mean_cosine: float, max_same_ranking: float, dense_fraction: float = 0.9) -> dict[str, Any]:
    """The detector's decision on one labelled case's saved statistics, with every rule's margin."""
    if not case.get("finite", True):
        return {"flagged": True, "rules": ["non-finite"], "margins": {}}
    kw: dict[str, Any] = {"q_active": case["q_active_dims"], "d_active": case["d_active_dims"], "vocab_size": case["vocab"],
                          "dense_fraction": dense_fraction, "max_mean_cosine": max_mean_cosine,
                          "max_same_ranking": max_same_ranking}
    v = detect_collapse(**{k: w for k, w in kw.items() if w is not None})
    margins = dict(v.margins)
    rules = [r for r in ("empty_documents", "empty_queries", "dense_documents", "dense_queries") if margins.get(r, 1) < 0]
    cos, share = case.get("mean_doc_cosine"), case.get("same_ranking_share")
    if cos is not None:
        margins["doc_cosine"] = _cos_scale(max_mean_cosine) - _cos_scale(cos)
        if cos > max_mean_cosine:
            rules.append("doc_cosine")
    if share is not None:
        margins["same_ranking"] = max_same_ranking - share
        if share > max_same_ranking:
            rules.append("same_ranking")
    return {"flagged": bool(rules), "rules": rules, "margins": margins}


def _gap(healthy: list[float], degenerate: list[float], step: float) -> dict[str, float | None]:
    """On one rule's scale: the healthy maximum, the next degenerate value above it, their midpoint, and the
    threshold one ``step`` beyond the healthy maximum."""
    h = max(healthy)
    above = sorted(x for x in degenerate if x > h)
    return {"healthy_max": h, "degenerate_next_above": above[0] if above else None,
            "gap_midpoint": (h + above[0]) / 2 if above else None, "threshold": h + step}


def _bins(values: list[float]) -> dict[str, int]:
    """Counts of margins (in units of the rule's safety step) below 0.25, 0.25-1 and >= 1."""
    return {"< 0.25": sum(v < 0.25 for v in values), "0.25-1": sum(0.25 <= v < 1 for v in values),
            ">= 1": sum(v >= 1 for v in values)}


def calibrate(cases: Sequence[dict[str, Any]], fixed: Any = None) -> dict[str, Any]:
    """Choose the two near-constant thresholds on ``cases`` and decide every case (module docstring). With
    ``fixed`` (a :class:`initlab.nn.collapse.CollapseThresholds`, e.g. the committed ``THRESHOLDS``) nothing is
    chosen: every case is decided by those thresholds, the held-out check of a calibration on new runs (the gaps
    are still reported).

    Returns ``{"thresholds", "rule_gaps", "summary", "errors", "misses", "margins", "cases"}``: ``errors`` the
    healthy models flagged, ``misses`` the degenerate models that pass, ``margins`` per label the distance of
    each decision from the nearest threshold it was decided by, in safety steps (binned).

    Raises:
        ValueError: no healthy or no degenerate case.
    """
    healthy = [c for c in cases if c["label"] == "healthy"]
    degen = [c for c in cases if c["label"] == "degenerate"]
    if not healthy or not degen:
        raise ValueError("cases: expected at least one healthy and one degenerate model")
    cos = {lab: [_cos_scale(c["mean_doc_cosine"]) for c in group if c.get("mean_doc_cosine") is not None]
           for lab, group in (("h", healthy), ("d", degen))}
    g_cos = _gap(cos["h"], cos["d"], MIN_MARGIN["doc_cosine"])
    max_cos = 1.0 - 2.0 ** -g_cos["threshold"]
    g_cos.update({"scale": "-log2(1 - cos)", "healthy_max_cos": 1 - 2.0 ** -g_cos["healthy_max"], "threshold_cos": max_cos})
    share = {lab: [c["same_ranking_share"] for c in group if c.get("same_ranking_share") is not None]
             for lab, group in (("h", healthy), ("d", degen))}
    g_share = _gap(share["h"], share["d"], MIN_MARGIN["same_ranking"])
    g_share["scale"] = "share of queries"
    t_share = g_share["threshold"]
    if fixed is not None:
        max_cos, t_share = float(fixed.max_mean_cosine), float(fixed.max_same_ranking)
    decided = [{**c, **decide(c, max_cos, t_share)} for c in cases]

    def steps(c: dict[str, Any]) -> float:
        """The decision's margin in safety steps: the largest excess over a firing rule (flagged) or the smallest
        distance below any near-constant rule (passed)."""
        m = c["margins"]
        near = {r: m[r] / MIN_MARGIN[r] for r in MIN_MARGIN if r in m}
        if c["flagged"]:
            fired = [-near[r] for r in c["rules"] if r in near]
            return max(fired) if fired else math.inf  # flagged by a definition (empty, dense, non-finite)
        return min(near.values()) if near else math.inf

    for c in decided:
        c["margin_steps"] = steps(c)
    errors = [c["case"] for c in decided if c["label"] == "healthy" and c["flagged"]]
    misses = [c["case"] for c in decided if c["label"] == "degenerate" and not c["flagged"]]
    summary = {lab: {"n": sum(c["label"] == lab for c in decided), "flagged": sum(c["flagged"] for c in decided if c["label"] == lab)}
               for lab in ("healthy", "degraded", "degenerate")}
    margins = {lab: {"flagged": _bins([c["margin_steps"] for c in decided if c["label"] == lab and c["flagged"]]),
                     "passed": _bins([c["margin_steps"] for c in decided if c["label"] == lab and not c["flagged"]])}
               for lab in ("healthy", "degraded", "degenerate")}
    for c in decided:  # JSON has no infinity: a definition-flagged decision has no near-constant margin
        if not math.isfinite(c["margin_steps"]):
            c["margin_steps"] = None
    return {"thresholds": {"max_mean_cosine": max_cos, "max_same_ranking": t_share, "dense_fraction": 0.9, "min_active": 1.0},
            "rule_gaps": {"doc_cosine": g_cos, "same_ranking": g_share},
            "labels": {"healthy_fraction": HEALTHY_FRACTION, "degenerate_fraction": DEGENERATE_FRACTION},
            "safety_steps": dict(MIN_MARGIN), "summary": summary, "errors": errors, "misses": misses, "margins": margins,
            "cases": decided}


def main(argv: list[str] | None = None) -> int:
    """``python -m initlab.synthetic.splade.calibration PHASE_JSON ... [--json OUT]``: calibrate and print."""
    parser = argparse.ArgumentParser(prog="python -m initlab.synthetic.splade.calibration",
                                     description="Calibrate the collapse detector on saved synthetic SPLADE runs.")
    parser.add_argument("phase", type=Path, nargs="+", help="phase.json files of finished runs")
    parser.add_argument("--json", type=Path, default=None, help="write the calibration record here")
    parser.add_argument("--held-out", action="store_true",
                        help="choose nothing: decide every case with the committed thresholds (initlab.nn.collapse."
                             "THRESHOLDS) and report the healthy models flagged and the degenerate ones passed")
    args = parser.parse_args(argv)
    cases = constructed_cases()
    for p in args.phase:
        if not p.is_file():
            parser.error(f"{p}: no such file; expected a phase.json written by initlab synthetic splade")
        cases += trained_cases(read_json(p), str(p))
    if args.held_out:
        from initlab.nn.collapse import THRESHOLDS

        rep = calibrate(cases, fixed=THRESHOLDS)
    else:
        rep = calibrate(cases)
    if args.json is not None:
        from initlab.runs import atomic_write_json

        atomic_write_json(args.json, rep)
    print(json.dumps({k: rep[k] for k in ("thresholds", "rule_gaps", "summary", "errors", "misses", "margins")}, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
