"""Collapse detection for SPLADE representations: one detector for synthetic and real-data SPLADE.

A SPLADE model has collapsed when its term-weight vectors stop carrying ranking information. The
detector flags, each with a reason string:

* a non-finite training loss or non-finite weights/vectors;
* empty vectors: queries or documents with fewer than one active dimension on average;
* dense vectors: more than ``dense_fraction`` of the vocabulary active on average;
* near-constant vectors (optional, given the vectors or the scores): document vectors whose mean pairwise
  cosine exceeds ``max_mean_cosine``, or one top-10 ranking shared by more than ``max_same_ranking`` of the
  queries (and by at least 2 of them: one query alone shares nothing).

Near-constant collapse is what rescaling a tied head too far does: a model can keep a healthy number
of active dimensions while every document vector points the same way.

Every decision comes with its **margin** (``CollapseVerdict.margins``): how far the measured statistic lies
from its threshold, positive on the healthy side, negative on the flagged side, in the rule's own scale --
factors of 2 for the active-dimension rules (``log2(active / 1)``, ``log2(dense_fraction V / active)``), factors
of 2 of the distance from a constant vector for the cosine rule (``log2((1 - cos) / (1 - max_mean_cosine))``),
and shares of the queries for the ranking rule (``max_same_ranking - share``). A decision with a margin near 0
is a knife edge. The thresholds (:data:`THRESHOLDS`) were chosen on a labelled set of healthy and degenerate
models (:mod:`initlab.synthetic.splade.calibration`; docs/synthetic_splade.md#collapse-detector-calibration).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import torch

from initlab.config import check_ranges, ranged

__all__ = ["CollapseThresholds", "THRESHOLDS", "UNCALIBRATED", "CollapseVerdict", "detect_collapse", "mean_pairwise_cosine",
           "same_ranking_share", "modal_ranking_share", "MARGIN_CLAMP"]


@dataclass(frozen=True)
class CollapseThresholds:
    """The detector's thresholds: ``dense_fraction`` (of V), ``max_mean_cosine`` (mean pairwise cosine of the
    document vectors), ``max_same_ranking`` (share of queries with the modal top-10), ``min_queries`` (fewest
    queries for the ranking rule on given rankings). Empty means < 1 active dimension (a definition)."""

    dense_fraction: float = ranged(0.9, "(0, 1]")
    max_mean_cosine: float = ranged(0.99, "(0, 1]")
    max_same_ranking: float = ranged(0.9, "(0, 1]")
    min_queries: int = ranged(5, "[1, inf)")

    def __post_init__(self) -> None:
        check_ranges(self)


#: the detector's thresholds, calibrated on the labelled set of the exploratory synthetic SPLADE run
#: (``python -m initlab.synthetic.splade.calibration docs/results/synthetic_splade_explore/phase.json``): each
#: near-constant rule one safety step beyond the largest value a healthy model reached (mean document cosine 0.8865
#: -> 0.943, i.e. 1 - cos halved; modal top-10 share 0.05 -> 0.15). Until then: 0.99 and 0.9.
THRESHOLDS = CollapseThresholds(max_mean_cosine=0.943, max_same_ranking=0.15)
#: the thresholds before the calibration (the earlier runs were flagged with these)
UNCALIBRATED = CollapseThresholds()

#: margins are clamped to ± this (log2 units: a factor of 2**30), so an empty vector's margin stays a number
MARGIN_CLAMP = 30.0


def _log2_margin(num: float, den: float) -> float:
    if not (math.isfinite(num) and math.isfinite(den)):
        return -MARGIN_CLAMP
    if num <= 0:
        return -MARGIN_CLAMP
    return max(-MARGIN_CLAMP, min(MARGIN_CLAMP, math.log2(num / den)))


@dataclass
class CollapseVerdict:
    """``collapsed`` is True iff ``reasons`` is non-empty; ``stats`` holds the measured quantities and
    ``margins`` the signed distance of each measured statistic from its threshold (module docstring)."""

    reasons: list[str] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)
    margins: dict[str, float] = field(default_factory=dict)

    @property
    def collapsed(self) -> bool:
        return bool(self.reasons)

    @property
    def min_margin(self) -> float | None:
        """The smallest margin over the rules that were measured (None if none was)."""
        return min(self.margins.values()) if self.margins else None

    def as_dict(self) -> dict[str, Any]:
        return {"collapsed": self.collapsed, "reasons": list(self.reasons), **self.stats, "margins": dict(self.margins)}


def _is_scipy_sparse(X: Any) -> bool:
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


def mean_pairwise_cosine(X: Any) -> float:
    """Mean cosine over distinct pairs of rows of ``X (N, V)`` (zero rows count as cosine 0); N >= 2.

    ``X`` is a dense tensor or a ``scipy.sparse`` matrix (real corpora: O(nnz) memory, no densifying).
    Uses ``sum_{i != j} cos_ij = ||sum_i u_i||^2 - sum_i ||u_i||^2`` with ``u_i`` the unit rows.

    Raises:
        ValueError: ``X`` not 2-d or fewer than 2 rows.
    """
    if _is_scipy_sparse(X):
        import numpy as np

        if X.ndim != 2 or X.shape[0] < 2:
            raise ValueError(f"X: expected (N, V) with N >= 2 vectors, got {tuple(X.shape)}")
        M = X.tocsr().astype(np.float64)
        norms = np.sqrt(np.asarray(M.multiply(M).sum(axis=1)).ravel())
        inv = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        import scipy.sparse as sp

        U = sp.diags(inv) @ M
        s = np.asarray(U.sum(axis=0)).ravel()
        N = M.shape[0]
        return float((s @ s - float((inv > 0).sum())) / (N * (N - 1)))
    if X.dim() != 2 or X.shape[0] < 2:
        raise ValueError(f"X: expected (N, V) with N >= 2 vectors, got {tuple(X.shape)}")
    X = X.double()
    n = X.norm(dim=1, keepdim=True)
    U = torch.where(n > 0, X / n.clamp_min(1e-300), torch.zeros_like(X))
    s = U.sum(dim=0)
    N = X.shape[0]
    total = float(s @ s) - float((U * U).sum())  # sum over i != j of cos_ij
    return total / (N * (N - 1))


def same_ranking_share(scores: torch.Tensor, top: int = 10) -> float:
    """Share of queries whose top-``top`` ranking equals the most common one, from ``scores (Q, D)``.

    Ties are broken by ascending document index (a stable sort), the order initlab uses everywhere.

    Raises:
        ValueError: ``scores`` not 2-d or empty.
    """
    if scores.dim() != 2 or scores.numel() == 0:
        raise ValueError(f"scores: expected a non-empty (Q, D) matrix, got {tuple(scores.shape)}")
    k = min(top, scores.shape[1])
    order = torch.sort(-scores.double(), dim=1, stable=True).indices[:, :k]
    return modal_ranking_share(order)


def modal_ranking_share(rankings: Any, top: int = 10) -> float:
    """Share of queries whose top-``top`` ranking equals the most common one, from ``rankings (Q, k)``
    (document indices by rank, e.g. the indices an exact top-k search returns).

    Raises:
        ValueError: ``rankings`` not 2-d or empty.
    """
    rows = rankings.tolist() if hasattr(rankings, "tolist") else list(rankings)
    if not rows or not all(hasattr(r, "__len__") for r in rows):
        raise ValueError("rankings: expected a non-empty (Q, k) array of document indices")
    counts: dict[tuple[int, ...], int] = {}
    for row in rows:
        key = tuple(int(x) for x in row[:top])
        counts[key] = counts.get(key, 0) + 1
    return max(counts.values()) / len(rows)


def detect_collapse(*, losses: Sequence[float | Mapping[str, Any]] = (), q_active: float | None = None,
                    d_active: float | None = None, vocab_size: int | None = None, finite_weights: bool = True,
                    doc_vectors: Any = None, scores: torch.Tensor | None = None,
                    dense_fraction: float = THRESHOLDS.dense_fraction, max_mean_cosine: float = THRESHOLDS.max_mean_cosine,
                    max_same_ranking: float = THRESHOLDS.max_same_ranking, rankings: Any = None,
                    min_queries: int = THRESHOLDS.min_queries) -> CollapseVerdict:
    """The collapse verdict of one trained or evaluated SPLADE model.

    Args:
        losses: logged training losses, as numbers or as rows ``{"step", "loss", ...}`` (every numeric
            value of a row is checked).
        q_active, d_active: mean active dimensions per query / document (None: not measured).
        vocab_size: V, needed for the dense rule.
        finite_weights: False if the model's weights hold NaN or inf.
        doc_vectors: ``(N, V)`` document term weights (tensor or scipy sparse), for the mean-cosine rule
            (None: skipped).
        scores: ``(Q, D)`` query-document scores, for the identical-ranking rule (None: skipped; needs D >= 2
            and Q >= 2).
        rankings: ``(Q, k)`` document indices by rank (an exact top-k search's output), the same rule
            without the full score matrix (None: skipped; needs Q >= ``min_queries`` and k >= 2: with a
            handful of queries an identical top 10 is not evidence of collapse).
        dense_fraction, max_mean_cosine, max_same_ranking: thresholds (fractions in (0, 1]).
    Returns:
        :class:`CollapseVerdict` with the reasons, ``stats`` (``mean_doc_cosine``, ``same_ranking_share``
        when measured) and ``margins`` (``empty_<documents|queries>``, ``dense_<...>``, ``doc_cosine``,
        ``same_ranking``: module docstring).
    """
    v = CollapseVerdict()
    for i, row in enumerate(losses):
        values = row.values() if isinstance(row, Mapping) else [row]
        if any(isinstance(x, (int, float)) and not math.isfinite(float(x)) for x in values):
            step = row.get("step", i) if isinstance(row, Mapping) else i
            v.reasons.append(f"non-finite loss at step {step}")
            break
    if not finite_weights:
        v.reasons.append("non-finite weights")
    for name, a in (("documents", d_active), ("queries", q_active)):
        if a is None:
            continue
        if not math.isfinite(a):
            v.reasons.append(f"{name}: non-finite vectors")
            v.margins[f"empty_{name}"] = -MARGIN_CLAMP
            continue
        v.margins[f"empty_{name}"] = _log2_margin(a, 1.0)
        if vocab_size is not None:
            v.margins[f"dense_{name}"] = _log2_margin(dense_fraction * vocab_size, a) if a > 0 else MARGIN_CLAMP
        if a < 1.0:
            v.reasons.append(f"{name} empty (mean active dims {a:.3g})")
        elif vocab_size is not None and a > dense_fraction * vocab_size:
            v.reasons.append(f"{name} dense ({a:.0f} of {vocab_size} dims active)")
    if doc_vectors is not None and len(doc_vectors.shape) == 2 and doc_vectors.shape[0] >= 2:
        finite = (bool(np_isfinite_all(doc_vectors.data)) if _is_scipy_sparse(doc_vectors)
                  else bool(torch.isfinite(doc_vectors).all()))
        if finite:
            cos = mean_pairwise_cosine(doc_vectors)
            v.stats["mean_doc_cosine"] = cos
            v.margins["doc_cosine"] = _log2_margin(1.0 - cos, 1.0 - max_mean_cosine)
            if cos > max_mean_cosine:
                v.reasons.append(f"documents near-constant (mean pairwise cosine {cos:.4f} > {max_mean_cosine:g})")
    if scores is not None and scores.dim() == 2 and scores.shape[0] >= 2 and scores.shape[1] >= 2:
        if torch.isfinite(scores).all():
            share = same_ranking_share(scores)
            v.stats["same_ranking_share"] = share
            v.margins["same_ranking"] = max_same_ranking - share
            if share > max_same_ranking and share * scores.shape[0] >= 2 - 1e-9:  # a shared ranking needs 2 queries
                v.reasons.append(f"rankings near-constant ({share:.0%} of queries share one top-10 ranking)")
    if rankings is not None and "same_ranking_share" not in v.stats and len(rankings) >= max(2, min_queries):
        if len(rankings[0]) >= 2:
            share = modal_ranking_share(rankings)
            v.stats["same_ranking_share"] = share
            v.margins["same_ranking"] = max_same_ranking - share
            if share > max_same_ranking and share * len(rankings) >= 2 - 1e-9:
                v.reasons.append(f"rankings near-constant ({share:.0%} of queries share one top-10 ranking)")
    return v


def np_isfinite_all(values: Any) -> bool:
    import numpy as np

    return bool(np.isfinite(values).all())
