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

from initlab.evidence import rules
from initlab.evidence.rules import INCONCLUSIVE, NOT_RUN, Verdict

__all__ = ["ALPHA", "Family", "family_of", "holm", "corrected", "families_markdown"]

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
