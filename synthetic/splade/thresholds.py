"""The synthetic SPLADE claims' thresholds and rules: :class:`SPLADEThresholds` (preregistered, saved in a run's
config), the rules of k a claim compares, and the shape of the raw numbers (:data:`Raw`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


__all__ = ['Raw', 'RULES', 'ALL_RULES', 'LANDSCAPE_RULES', 'SPLADEThresholds']

Raw = Mapping[str, Any]
#: the preregistered rules (their regrets are claims of the ``full`` run); ``fixed`` and ``none`` are the landscape's
RULES = ("inspect", "edge", "bert")
ALL_RULES = RULES + ("fixed", "none")
#: the rules compared on the landscape (:func:`landscape`): inspect's, the edge rule, a fixed k, no rescaling
LANDSCAPE_RULES = ("inspect", "edge", "fixed", "none")


@dataclass(frozen=True)
class SPLADEThresholds:
    """Preregistered thresholds of the synthetic SPLADE claims (nDCG@10 differences, nats).

    ``min_gain`` a difference in nDCG@10 that matters (0.05, about 2 sd of one seed's nDCG@10 on 80 test
    queries); ``min_init_excess`` nats of initial InfoNCE above chance (ln B) that count as "a very high
    initial loss"; ``min_poor_minimum`` nats of final InfoNCE (same batch, equal steps) that count as a worse
    minimum; ``regret_margin`` the equivalence margin of a rule's regret; ``min_rule_gain`` the regret
    difference that makes one rule better than another; ``k_far`` the "too far" rescaling of a normal-norm
    head; ``high_norm`` / ``normal_norm`` the families whose pretraining recipe lets the head norm grow / keeps
    the standard recipe. Tolerances: an interval end within ``tol`` (nDCG@10) or ``tol_nats`` of a threshold
    counts as touching it (well above float noise, well below one query's weight in an nDCG@10 mean).

    Landscape (post hoc on the ``full`` run): the range is taken over the tied k in
    ``[1, landscape_k_max]``; k *matters* on a backbone whose range is at least ``landscape_factor`` times
    ``regret_margin``; ``fixed_k`` is the fixed-k rule's k (4: the log-scale midpoint of 1..16).
    """

    min_gain: float = 0.05
    min_init_excess: float = 1.0
    min_poor_minimum: float = 0.1
    regret_margin: float = 0.03
    min_rule_gain: float = 0.01
    k_far: float = 64.0
    high_norm: tuple[str, ...] = ("roberta", "modernbert")
    normal_norm: tuple[str, ...] = ("bert", "albert")
    tol: float = 0.002
    tol_nats: float = 0.01
    landscape_k_max: float = 16.0
    landscape_factor: float = 3.0
    fixed_k: float = 4.0

    def __post_init__(self) -> None:
        for name in ("min_gain", "min_init_excess", "min_poor_minimum", "regret_margin", "min_rule_gain", "k_far",
                     "landscape_k_max", "landscape_factor", "fixed_k"):
            v = getattr(self, name)
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"SPLADEThresholds.{name}: expected a finite number > 0, got {v!r}")
        for name in ("tol", "tol_nats"):
            v = getattr(self, name)
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and 0 <= v < 0.05):
                raise ValueError(f"SPLADEThresholds.{name}: expected a float in [0, 0.05), got {v!r}")
        if set(self.high_norm) & set(self.normal_norm):
            raise ValueError(f"SPLADEThresholds: a family cannot be both high-norm and normal-norm: "
                             f"{sorted(set(self.high_norm) & set(self.normal_norm))}")
