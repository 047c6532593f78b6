"""Claim families and Holm's family-wise error control over them.

Imported as ``initlab.evidence.families``. Every experiment's claims are split, before its confirmatory run, into
a **primary** family (the few claims the experiment exists to test) and a **secondary** family (everything else
it reports with a word), declared beside the claims in the experiment's claims module (e.g.
:data:`initlab.synthetic.spt.claims.SPT_FAMILIES`); this module holds only the machinery. Within each family the
family-wise error rate is held at ``alpha = 0.05`` by Holm's step-down procedure (S. Holm, "A simple sequentially rejective multiple test procedure", Scand. J. Statist. 6
(1979) 65-70), computed by ``statsmodels.stats.multitest.multipletests(method="holm")``, not by hand.

What is tested: every *leaf* verdict of a family's claims (a claim's own verdict, or each part of an all-of
claim such as ``depth`` or ``proximity``) is one hypothesis. A decided leaf carries the p-value of the decision
its word made (:class:`initlab.evidence.rules.Verdict`, ``p_value``: computed by the rule from the per-seed
numbers); an inconclusive leaf counts as a hypothesis that was tested and not rejected (p = 1), so it counts in
the family's size; a ``not run`` leaf is not a hypothesis of this run and does not count. A decided leaf whose
Holm-adjusted p-value exceeds ``alpha`` reads **inconclusive** after correction (its interval, at the
uncorrected level, is kept beside it, with the seed count that would decide it at the level Holm's step
required); all-of claims are then recombined from their corrected parts (:func:`initlab.evidence.rules.all_of`).

The corrected verdicts are computed from the same per-seed numbers by the same one function per claim;
:func:`corrected` only wraps the uncorrected verdicts of a whole family (the correction needs all of them).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from initlab.evidence import rules, stats
from initlab.evidence.rules import INCONCLUSIVE, NOT_RUN, Verdict

__all__ = ["ALPHA", "Family", "family_of", "holm", "corrected", "families_markdown", "LeafPlan", "seeds_for_words"]

#: the family-wise error rate held within each family
ALPHA = 0.05


@dataclass(frozen=True)
class Family:
    """A family of claims: ``name`` (``primary`` or ``secondary``), the ``claims`` (ids of the experiment's
    claim module) and why they belong together (``why``)."""

    name: str
    claims: tuple[str, ...]
    why: str


def family_of(families: Sequence[Family], claim_id: str) -> Family:
    """The family holding ``claim_id``.

    Raises:
        KeyError: naming the claim, when no family declares it.
    """
    for f in families:
        if claim_id in f.claims:
            return f
    raise KeyError(f"claim_id: {claim_id!r} is in no declared family ({[f.name for f in families]})")


def _leaves(v: Verdict) -> list[Verdict]:
    return list(v.parts) if v.rule == "all_of" and v.parts else [v]


def holm(p_values: Sequence[float], alpha: float = ALPHA) -> tuple[list[bool], list[float]]:
    """Holm's step-down procedure over one family: ``(reject, adjusted p-values)`` in input order
    (``statsmodels.stats.multitest.multipletests``, ``method="holm"``). An empty family gives two empty lists.

    Raises:
        ValueError: a p-value outside [0, 1] or NaN, or ``alpha`` outside (0, 1).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: expected a float in (0, 1), got {alpha!r}")
    if any(not (0.0 <= p <= 1.0) for p in p_values):
        raise ValueError(f"p_values: expected numbers in [0, 1], got {list(p_values)}")
    if not p_values:
        return [], []
    reject, adjusted = _holm(tuple(float(p) for p in p_values), alpha)
    return list(reject), list(adjusted)


@functools.lru_cache(maxsize=4096)
def _holm(p_values: tuple[float, ...], alpha: float) -> tuple[tuple[bool, ...], tuple[float, ...]]:
    # cached: statsmodels' multipletests runs a full gc.collect() per call (about 0.2 s), and the docs generator
    # corrects the same families many times
    from statsmodels.stats.multitest import multipletests

    reject, adjusted, _, _ = multipletests(list(p_values), alpha=alpha, method="holm")
    return tuple(bool(r) for r in reject), tuple(float(a) for a in adjusted)


def _step_alpha(rank: int, m: int, alpha: float) -> float:
    """The level Holm's step ``rank`` (0-based, ascending p) compares with: ``alpha / (m - rank)``."""
    return alpha / (m - rank)


def _corrected_leaf(v: Verdict, p_adj: float, step_alpha: float, family: str, alpha: float) -> Verdict:
    fields: dict[str, Any] = dict(p_adjusted=p_adj, uncorrected=v.word, family=family)
    if v.word in (INCONCLUSIVE, NOT_RUN) or p_adj <= alpha:
        return dataclasses.replace(v, **fields)
    # decided before correction, not after: inconclusive, with the seeds that would decide it at Holm's step level
    level = 1 - 2 * step_alpha if v.rule == "equivalence" else 1 - step_alpha
    need = rules.planned_seeds(dataclasses.replace(v, level=level))
    return dataclasses.replace(v, word=INCONCLUSIVE, seeds_to_decide=need, **fields)


def corrected(verdicts: Mapping[str, Verdict], families: Sequence[Family], alpha: float = ALPHA) -> dict[str, Verdict]:
    """The Holm-corrected verdicts (module docstring) of ``verdicts`` ``{claim id: uncorrected verdict}``, in the
    same order. Claims of no family are returned unchanged (``uncorrected`` empty).

    Raises:
        ValueError: a claim of ``verdicts`` is declared in two families.
    """
    seen = [c for f in families for c in f.claims]
    dup = sorted({c for c in seen if seen.count(c) > 1})
    if dup:
        raise ValueError(f"families: claims declared twice: {dup}")
    out = dict(verdicts)
    for fam in families:
        ids = [c for c in fam.claims if c in verdicts]
        leaves = [(cid, i, leaf) for cid in ids for i, leaf in enumerate(_leaves(verdicts[cid])) if leaf.word != NOT_RUN]
        ps = [1.0 if leaf.word == INCONCLUSIVE or math.isnan(leaf.p_value) else leaf.p_value for _, _, leaf in leaves]
        reject, adj = holm(ps, alpha)
        order = sorted(range(len(ps)), key=lambda k: ps[k])
        rank = {k: r for r, k in enumerate(order)}
        fixed: dict[tuple[str, int], Verdict] = {}
        for k, (cid, i, leaf) in enumerate(leaves):
            fixed[(cid, i)] = _corrected_leaf(leaf, adj[k], _step_alpha(rank[k], len(ps), alpha), fam.name, alpha)
        for cid in ids:
            v = verdicts[cid]
            if v.word == NOT_RUN:
                out[cid] = dataclasses.replace(v, uncorrected=v.word, family=fam.name)
            elif v.rule == "all_of" and v.parts:
                parts = [fixed.get((cid, i), p) for i, p in enumerate(v.parts)]
                combined = rules.all_of(parts, v.rule)
                out[cid] = dataclasses.replace(combined, uncorrected=v.word, family=fam.name, reason=v.reason)
            else:
                out[cid] = fixed[(cid, 0)]
    return out


def families_markdown(families: Sequence[Family], titles: Callable[[str], str] | None = None,
                      alpha: float = ALPHA) -> str:
    """The declared families as a markdown table (family | claims | why), for the docs; ``titles`` maps a claim
    id to its printed name (default: the id in backticks)."""
    name = titles or (lambda c: f"`{c}`")
    lines = [f"| family (Holm, family-wise α = {alpha:g}) | claims | why together |", "| --- | --- | --- |"]
    for f in families:
        lines.append(f"| {f.name} | " + ", ".join(name(c) for c in f.claims) + f" | {f.why} |")
    return "\n".join(lines)


@dataclass(frozen=True)
class LeafPlan:
    """The seed count a fresh run needs for one leaf verdict of a saved run to reach its word again.

    ``claim`` the claim id, ``part`` the leaf's index in an all-of claim (0 otherwise), ``word`` the saved leaf's
    uncorrected word, ``estimate`` and ``sd`` its per-seed mean and sd (the claim's units; a share's sd is the
    delta-method sd of the ratio), ``threshold`` the threshold its word is decided against, ``alpha`` the level
    each decision is planned at (the family-wise α over the family's leaf count, Holm's strictest step), ``power``
    the power asked for, ``seeds`` the count (None: the saved leaf is undecided, or no count up to
    :data:`initlab.evidence.stats.MAX_SEEDS` reaches ``power``) and ``achieved`` the power at ``seeds``."""

    claim: str
    part: int
    word: str
    estimate: float
    sd: float
    threshold: float
    alpha: float
    power: float
    seeds: int | None
    achieved: float


def seeds_for_words(verdicts: Mapping[str, Verdict], claims: Sequence[str], *, power: float = 0.9,
                    alpha: float = ALPHA) -> list[LeafPlan]:
    """How many seeds a fresh run of ``claims`` (one Holm family) needs for each of their leaves to reach the word a
    saved run gave it (``verdicts``: the saved run's *uncorrected* verdicts, recomputed from its per-seed numbers),
    with probability ``power`` if the true mean and sd were the saved ones.

    Every leaf of the family counts (a leaf the fresh run cannot decide is a hypothesis still, p = 1), so each
    decision is planned at Holm's strictest step, ``alpha / m`` for ``m`` leaves: a leaf decided there is decided
    after the correction whatever the other leaves' p-values (a conservative bound on Holm). A decided word is
    reached when the interval clears the claim's upper threshold (δ of a gain, σ of a share) on the side the saved
    estimate lies: above it for *reproduced*, below it for *partly* or *not reproduced* (both decided words: which
    one depends on the interval's other end, against 0); an equivalence's TOST interval must fit inside the margin
    (:func:`initlab.evidence.stats.seeds_for_gain`, :func:`initlab.evidence.stats.seeds_for_equivalence`: the
    noncentral t). A leaf the saved run left undecided gets no count (``seeds`` None).

    Raises:
        KeyError: a claim of ``claims`` is not in ``verdicts``.
        ValueError: ``power`` or ``alpha`` outside (0, 1).
    """
    if not (0 < power < 1 and 0 < alpha < 1):
        raise ValueError(f"power, alpha: expected values in (0, 1), got {power!r}, {alpha!r}")
    missing = [c for c in claims if c not in verdicts]
    if missing:
        raise KeyError(f"claims: {missing} have no saved verdict (known: {sorted(verdicts)})")
    leaves = [(c, i, leaf) for c in claims for i, leaf in enumerate(_leaves(verdicts[c])) if leaf.word != NOT_RUN]
    step = alpha / max(len(leaves), 1)
    out = []
    for c, i, leaf in leaves:
        n: int | None = None
        achieved = math.nan
        if leaf.word not in (INCONCLUSIVE, NOT_RUN) and leaf.rule in ("gain", "share", "equivalence"):
            if leaf.rule == "equivalence":
                threshold = leaf.thresholds[1]
                n = stats.seeds_for_equivalence(leaf.estimate, leaf.sd, threshold, alpha=step, power=power, tol=leaf.tol)
                if n is not None:
                    m = threshold - leaf.tol
                    achieved = float(stats.power_one_sided(n, m + leaf.estimate, leaf.sd, 1 - 2 * step)
                                     + stats.power_one_sided(n, m - leaf.estimate, leaf.sd, 1 - 2 * step) - 1)
            else:
                threshold = leaf.thresholds[1]
                n = stats.seeds_for_gain(leaf.estimate, leaf.sd, threshold, level=1 - step, power=power, tol=leaf.tol)
                if n is not None:
                    achieved = float(stats.power_one_sided(n, abs(leaf.estimate - threshold) - leaf.tol, leaf.sd,
                                                           1 - step))
        else:
            threshold = leaf.thresholds[1] if len(leaf.thresholds) > 1 else math.nan
        out.append(LeafPlan(c, i, leaf.word, leaf.estimate, leaf.sd, threshold, step, power, n, achieved))
    return out
