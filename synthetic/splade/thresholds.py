"""The synthetic SPLADE claims' thresholds and rules: :class:`SPLADEThresholds` (preregistered, saved in a run's
config), the rules of k a claim compares, and the shape of the raw numbers (:data:`Raw`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from initlab.config import check_ranges, ranged


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

    min_gain: float = ranged(0.05, "(0, inf)")
    min_init_excess: float = ranged(1.0, "(0, inf)")
    min_poor_minimum: float = ranged(0.1, "(0, inf)")
    regret_margin: float = ranged(0.03, "(0, inf)")
    min_rule_gain: float = ranged(0.01, "(0, inf)")
    k_far: float = ranged(64.0, "(0, inf)")
    high_norm: tuple[str, ...] = ("roberta", "modernbert")
    normal_norm: tuple[str, ...] = ("bert", "albert")
    tol: float = ranged(0.002, "[0, 0.05)")
    tol_nats: float = ranged(0.01, "[0, 0.05)")
    landscape_k_max: float = ranged(16.0, "(0, inf)")
    landscape_factor: float = ranged(3.0, "(0, inf)")
    fixed_k: float = ranged(4.0, "(0, inf)")

    def __post_init__(self) -> None:
        check_ranges(self)
        if set(self.high_norm) & set(self.normal_norm):
            raise ValueError(f"SPLADEThresholds: a family cannot be both high-norm and normal-norm: "
                             f"{sorted(set(self.high_norm) & set(self.normal_norm))}")
