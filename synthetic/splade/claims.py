"""The synthetic SPLADE claims, one verdict function each, on raw per-seed numbers.

The thresholds and rules are :mod:`initlab.synthetic.splade.thresholds`, the reading of the raw per-seed rows
:mod:`initlab.synthetic.splade.seed_rows`; their names are re-exported here.

Imported as ``initlab.synthetic.splade.claims``. Every consumer (the run's ``summary.md``, the README claims
rows of :mod:`initlab.synthetic.splade.ood.claims`, the docs) calls these functions on the saved per-seed,
per-cell numbers of a synthetic SPLADE run (``phase.json``: its ``rows`` and ``inspect`` lists); nobody reads a
saved verdict word (:func:`check_record` refuses a saved record that disagrees with the recomputation).

Input ``raw`` (:func:`as_raw` builds it from a loaded ``phase.json``):

* ``rows``: one per grid point, ``{"family", "mode", "s", "k", "seed", "ndcg_select", "ndcg_test",
  "init_infonce", "final_infonce", "collapsed", "failed"}`` -- nDCG@10 on the two halves of the dev queries
  (``select``: even positions, ``test``: odd positions; a failed cell counts as 0), the in-batch InfoNCE
  (nats) of the first ``B`` training pairs before and after training (the same batch);
* ``inspect``: one per (family, s, seed) backbone, ``{"family", "s", "seed", "table": [{"k", "score_sd"}],
  "recommended_k"}`` -- ``initlab mlmhead inspect``'s per-query score sd at each k and its recommended k;
* ``batch``: B of the InfoNCE above (its chance level is ``ln B``).

Definitions (all on head scale s = 1, the backbone as pretrained; tied mode unless said):

* **best k** of a (family, seed): the tied grid k with the highest ``ndcg_select`` (ties: the smaller k). It is
  chosen on the *select* half of the queries and every verdict scores it on the *test* half, so choosing it
  does not inflate what it is judged with;
* ``d`` below are per-seed paired differences (same backbone and SPLADE seed on both sides) on ``ndcg_test``.

The claims (rules of :mod:`initlab.evidence.rules`; families are split by their preregistered pretraining
recipe into ``th.high_norm`` and ``th.normal_norm``; each claim is the all-of over the families of the run):

* :func:`high_norm_degrades` -- per high-norm family, all of: (a) *degrades*: ``d = nDCG(best k) - nDCG(k=1)``,
  gain δ = ``min_gain``; (b) *very high initial loss*: ``InfoNCE_init(k=1) - ln B``, gain δ = ``min_init_excess``
  nats; (c) *poor minimum*: ``InfoNCE_final(k=1) - InfoNCE_final(best k)``, gain δ = ``min_poor_minimum`` nats;
  and, as control, per normal-norm family (d) *not degraded*: ``nDCG(best k) - nDCG(k=1)`` equivalent to 0
  within ± ``min_gain`` (a large-norm effect, not one every family shows);
* :func:`rescaling_fixes` -- per high-norm family: ``d = nDCG(k_rec) - nDCG(k=1)`` with ``k_rec`` the
  recommended k of ``initlab mlmhead inspect`` on that backbone, gain δ = ``min_gain``;
* :func:`over_rescaling` -- per normal-norm family: ``d = nDCG(best k) - nDCG(k = k_far)``, gain δ = ``min_gain``
  (rescaling a normal-norm head by ``k_far`` hurts retrieval against the best k);
* :func:`input_side` -- per normal-norm family: ``d = nDCG_output-only(k_far) - nDCG_tied(k_far)``, gain
  δ = ``min_gain`` (the tie's input side carries the over-rescaling harm: dividing only the output projection
  by the same k avoids it);
* :func:`recommended_regret` -- the regret ``nDCG(best k) - nDCG(k_rule)`` over every (family, seed) of the run,
  equivalent to 0 within ± ``regret_margin`` (rule ``inspect``, ``edge`` or ``bert``; :func:`rule_k`);
* :func:`rule_difference` -- two rules' paired regrets, ``d = regret(b) - regret(a)``: gain δ = ``min_rule_gain``
  (rule ``a`` beats rule ``b``); the claims ``edge_beats_inspect`` and ``bert_beats_inspect`` ask whether an
  alternative beats the rule ``initlab mlmhead inspect`` ships (:func:`shipped_rule`).

Added after the preregistered ``full`` run (on that run they are **post-hoc analyses**: a run's saved
``verdicts`` record names the claims it was analysed with, and :func:`posthoc_claims` lists the ones it lacks):

* :func:`interaction` -- the headline test of "a large head norm degrades SPLADE and k fixes it": per seed, the
  mean over the high-norm families of ``nDCG(best k) - nDCG(k=1)`` minus the same mean over the normal-norm
  families (a difference of differences, so a gain every family shows cancels), gain δ = ``min_gain``;
  :func:`family_gains` gives the per-family rows beside it;
* :func:`landscape` -- per (family, seed) backbone the landscape's range, best minus worst ``nDCG_test`` over the
  tied k in ``[1, landscape_k_max]``, beside every rule's regret; k *matters* on a backbone whose range is at
  least ``landscape_factor x regret_margin``;
* :func:`landscape_regret` -- a rule's regret equivalent to 0 within ± ``regret_margin`` over the backbones where
  k matters only (elsewhere "k does not matter here", and with no such backbone the verdict is ``not run``
  saying so); :func:`landscape_rule_difference` -- two rules' paired regrets on those backbones (rules
  ``inspect``, ``edge``, ``fixed``: a fixed ``k = fixed_k`` for every backbone, and ``none``: k = 1).

The rules for k (:func:`rule_k`): ``inspect`` -- the saved recommended k (smallest grid k with score sd
<= sqrt(2 ln B)); ``edge`` -- the grid k whose score sd is closest to sqrt(2 ln B) in log scale; ``bert`` --
the grid k whose score sd is closest, in log scale, to that of the same seed's ``bert`` backbone at k = 1
("bring the initial score scale to BERT's"); ``fixed`` -- ``fixed_k`` on every backbone (no measurement);
``none`` -- k = 1 (no rescaling). Ties go to the smaller k.

The out-of-domain synthetic SPLADE judges the same claims (and one of its own, the imposed-norm arm's), so the
two experiments share this module; that experiment's own claims, its Holm families and the README rows of these
claims (which lead with its confirmation and keep the ``full`` run beside it) are in
:mod:`initlab.synthetic.splade.ood.claims`, above this module. :data:`CLAIM_ROWS` is therefore empty here.

Errors: a missing key or wrong type surfaces as ``KeyError`` / ``TypeError`` / ``ValueError`` (the caller names
the file); a saved record that disagrees with its numbers raises
:class:`initlab.evidence.rules.VerdictRecordError` (a ``ValueError``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from initlab.evidence import rules
from initlab.evidence.families import Family
from initlab.evidence.rules import NOT_RUN, Verdict
from initlab.experiment.rows import Claim
from initlab.synthetic.splade.seed_rows import (as_raw, best_k, cells_by_seed, complete_seeds, families_in, finite_or_none,
                                               ndcg_at, ndcg_of, on_seeds, paired_by_seed, rule_k, with_label)
from initlab.synthetic.splade.thresholds import LANDSCAPE_RULES, RULES, Raw, SPLADEThresholds

__all__ = ["SPLADEThresholds", "CLAIMS", "ClaimSpec", "RULES", "as_raw", "best_k", "rule_k", "high_norm_degrades",
           "rescaling_fixes", "over_rescaling", "input_side", "recommended_regret", "rule_difference", "evaluate_all",
           "by_id", "check_record", "regrets", "describe_claim", "part_label", "shipped_rule", "interaction",
           "family_gains", "landscape", "landscape_regret", "landscape_rule_difference", "posthoc_claims",
           "LANDSCAPE_RULES", "landscape_markdown", "POSTHOC_SINCE_FULL", "evaluate_corrected", "complete_seeds",
           "on_seeds", "CLAIM_ROWS", "SPLADE_FAMILIES", "ndcg_of", "cells_by_seed", "with_label", "all_or_not_run"]

# ------------------------------------------------------------------------------------------------
# the claims
# ------------------------------------------------------------------------------------------------
def all_or_not_run(parts: list[Verdict], missing: list[str], rule: str = "all_of") -> Verdict:
    """The all-of of ``parts`` (one part: that part itself); with no part, ``not run`` under ``rule`` naming
    ``missing`` (or "no family of this class in the run")."""
    if not parts:
        return rules.not_run(rule, missing or ["no family of this class in the run"])
    return rules.all_of(parts) if len(parts) > 1 else parts[0]


def _degrade_d(raw: Raw, f: str) -> list[float] | None:
    return paired_by_seed(raw, f, lambda c, s: (ndcg_at(c, best_k(c)), ndcg_at(c, 1.0)), "best k - k=1")


def high_norm_degrades(raw: Raw, th: SPLADEThresholds) -> Verdict:
    """A large MLM-head norm degrades SPLADE, from a very high initial loss to a poor minimum (module docstring)."""
    parts, missing = [], []
    ln_b = math.log(raw["batch"])
    for f in families_in(raw, th.high_norm):
        d = _degrade_d(raw, f)
        init = paired_by_seed(raw, f, lambda c, s: (finite_or_none(c.get(1.0, {}).get("init_infonce")), ln_b), "init - ln B")
        poor = paired_by_seed(raw, f, lambda c, s: (finite_or_none(c.get(1.0, {}).get("final_infonce")),
                                             finite_or_none(c[best_k(c)].get("final_infonce"))), "final k=1 - best")
        if d is None or init is None or poor is None:
            missing.append(f"{f}: k = 1 or InfoNCE cells")
            continue
        parts += [with_label(rules.gain(d, min_gain=th.min_gain, tol=th.tol), f"{f}: nDCG@10 best k − k = 1"),
                  with_label(rules.gain(init, min_gain=th.min_init_excess, tol=th.tol_nats), f"{f}: initial InfoNCE − ln B"),
                  with_label(rules.gain(poor, min_gain=th.min_poor_minimum, tol=th.tol_nats),
                         f"{f}: final InfoNCE k = 1 − best k")]
    if not parts:
        return rules.not_run("all_of", missing or ["no high-norm family in the run"])
    for f in families_in(raw, th.normal_norm):
        d = _degrade_d(raw, f)
        if d is not None:
            parts.append(with_label(rules.equivalence(d, margin=th.min_gain, tol=th.tol),
                                f"control {f}: nDCG@10 best k − k = 1 ≈ 0"))
    return rules.all_of(parts)


def _family_gains(raw: Raw, th: SPLADEThresholds, fams: Sequence[str], pick: Callable[[str], Callable[..., Any]],
                  label: Callable[[str], str], missing: Callable[[str], str]) -> tuple[dict[str, Verdict], list[str]]:
    """Per family of ``fams`` in the run: the gain verdict (δ = ``min_gain``) of the per-seed paired differences
    that ``pick(family)`` gives (:func:`paired_by_seed`), labelled ``label(family)``; and ``missing(family)`` for each
    family lacking a seed's cell. The one per-family loop of :func:`rescaling_fixes`, :func:`over_rescaling` and
    :func:`family_gains`."""
    out, lacking = {}, []
    for f in families_in(raw, fams):
        d = paired_by_seed(raw, f, pick(f), label(f))
        if d is None:
            lacking.append(missing(f))
            continue
        out[f] = with_label(rules.gain(d, min_gain=th.min_gain, tol=th.tol), label(f))
    return out, lacking


def rescaling_fixes(raw: Raw, th: SPLADEThresholds) -> Verdict:
    """Dividing W_head by the recommended k before training fixes a high-norm head (module docstring)."""
    got, missing = _family_gains(
        raw, th, th.high_norm, lambda f: lambda c, s: (ndcg_at(c, rule_k(raw, "inspect", f, s)), ndcg_at(c, 1.0)),
        lambda f: f"{f}: nDCG@10 recommended k − k = 1", lambda f: f"{f}: k = 1 or the recommended k's cell or inspect report")
    return all_or_not_run(list(got.values()), missing)


def over_rescaling(raw: Raw, th: SPLADEThresholds) -> Verdict:
    """Rescaling a normal-norm head by ``k_far`` hurts retrieval against the best k (module docstring)."""
    got, missing = _family_gains(
        raw, th, th.normal_norm, lambda f: lambda c, s: (ndcg_at(c, best_k(c)), ndcg_at(c, th.k_far)),
        lambda f: f"{f}: nDCG@10 best k − k = {th.k_far:g}", lambda f: f"{f}: tied k = {th.k_far:g}")
    return all_or_not_run(list(got.values()), missing)


def input_side(raw: Raw, th: SPLADEThresholds) -> Verdict:
    """The tie's input side carries the over-rescaling harm: output-only rescaling by ``k_far`` avoids it."""
    parts, missing = [], []
    for f in families_in(raw, th.normal_norm):
        tied, out = cells_by_seed(raw, f, "tied"), cells_by_seed(raw, f, "k_output")
        if not tied or set(tied) != set(out) or any(th.k_far not in tied[s] or th.k_far not in out[s] for s in tied):
            missing.append(f"{f}: tied and output-only k = {th.k_far:g}")
            continue
        d = [ndcg_of(out[s][th.k_far], "test") - ndcg_of(tied[s][th.k_far], "test") for s in sorted(tied)]
        parts.append(with_label(rules.gain(d, min_gain=th.min_gain, tol=th.tol),
                            f"{f}: nDCG@10 output-only − tied at k = {th.k_far:g}"))
    return all_or_not_run(parts, missing)


def regrets(raw: Raw, rule: str, fixed_k: float = 4.0) -> dict[tuple[str, int], float] | None:
    """``{(family, seed): nDCG_test(best k) - nDCG_test(k_rule)}`` over every backbone of the run (s = 1), or
    None if some backbone lacks the rule's k or its cell."""
    out = {}
    fams = sorted({r["family"] for r in raw["rows"]})
    for f in fams:
        for seed, by_k in sorted(cells_by_seed(raw, f).items()):
            k = rule_k(raw, rule, f, seed, fixed_k=fixed_k)
            at = ndcg_at(by_k, k)
            if at is None:
                return None
            out[(f, seed)] = ndcg_at(by_k, best_k(by_k)) - at
    return out or None


def recommended_regret(raw: Raw, th: SPLADEThresholds, rule: str = "inspect") -> Verdict:
    """``rule``'s regret against the best k is within ± ``regret_margin`` (TOST over every (family, seed))."""
    reg = regrets(raw, rule)
    if reg is None:
        return rules.not_run("equivalence", [f"the {rule} rule's k in the grid for every backbone"])
    return with_label(rules.equivalence(list(reg.values()), margin=th.regret_margin, tol=th.tol),
                  f"regret of the {rule} rule over {len(reg)} family-seed backbones")


def shipped_rule(raw: Raw, th: SPLADEThresholds) -> str:
    """The preregistered decision on the rule ``mlmhead inspect`` should ship: an alternative (``edge`` or
    ``bert``) replaces ``inspect``'s rule only if it beats it (:func:`rule_difference` reads *reproduced*: its
    regret lower by more than ``min_rule_gain`` with the whole 95 % interval beyond it); of two such, the one
    with the larger estimate. Otherwise ``inspect`` stays."""
    wins = [(rule_difference(raw, th, r, "inspect"), r) for r in ("edge", "bert")]
    wins = [(v.estimate, r) for v, r in wins if v.word == rules.REPRODUCED]
    return max(wins)[1] if wins else "inspect"


def rule_difference(raw: Raw, th: SPLADEThresholds, a: str = "inspect", b: str = "bert") -> Verdict:
    """Rule ``a`` has a lower regret than rule ``b`` by at least ``min_rule_gain`` (paired over (family, seed))."""
    ra, rb = regrets(raw, a), regrets(raw, b)
    if ra is None or rb is None:
        return rules.not_run("gain", [f"the {a} and {b} rules' k in the grid for every backbone"])
    d = [rb[u] - ra[u] for u in sorted(ra)]
    return with_label(rules.gain(d, min_gain=th.min_rule_gain, tol=th.tol), f"regret({b}) − regret({a})")

# ------------------------------------------------------------------------------------------------
# the interaction and the landscape (post hoc on the preregistered full run)
# ------------------------------------------------------------------------------------------------
def family_gains(raw: Raw, th: SPLADEThresholds) -> dict[str, Verdict]:
    """Per family (high-norm first, then normal-norm) the gain ``nDCG(best k) - nDCG(k=1)`` over its seeds, gain
    δ = ``min_gain``: the per-family rows shown beside :func:`interaction`."""
    return _family_gains(raw, th, th.high_norm + th.normal_norm,
                         lambda f: lambda c, s: (ndcg_at(c, best_k(c)), ndcg_at(c, 1.0)),
                         lambda f: f"{f}: nDCG@10 best k − k = 1", str)[0]


def _by_seed_gain(raw: Raw, f: str) -> dict[int, float] | None:
    cells = cells_by_seed(raw, f)
    if not cells or any(1.0 not in c for c in cells.values()):
        return None
    return {seed: ndcg_of(c[best_k(c)], "test") - ndcg_of(c[1.0], "test") for seed, c in cells.items()}


def interaction(raw: Raw, th: SPLADEThresholds) -> Verdict:
    """A large head norm degrades SPLADE and k fixes it, *specifically*: per seed, the mean over the high-norm
    families of ``nDCG(best k) - nDCG(k=1)`` minus the mean of the same over the normal-norm families (the
    controls), gain δ = ``min_gain`` on the 95 % t-interval over the seeds common to every family. A gain every
    family shows (e.g. from a moderate k that helps any backbone) cancels; only a high-norm-specific gain counts.
    ``not run`` if a class has no family in the run or a family lacks k = 1."""
    hi = [g for g in (_by_seed_gain(raw, f) for f in families_in(raw, th.high_norm)) if g is not None]
    lo = [g for g in (_by_seed_gain(raw, f) for f in families_in(raw, th.normal_norm)) if g is not None]
    if not hi or not lo:
        return rules.not_run("gain", ["a high-norm and a normal-norm family with k = 1 and its grid"])
    seeds = sorted(set.intersection(*(set(g) for g in hi + lo)))
    if not seeds:
        return rules.not_run("gain", ["seeds common to every family"])
    d = [sum(g[s] for g in hi) / len(hi) - sum(g[s] for g in lo) / len(lo) for s in seeds]
    names = lambda fams: "+".join(f for f in fams if f in {r["family"] for r in raw["rows"]})  # noqa: E731
    return with_label(rules.gain(d, min_gain=th.min_gain, tol=th.tol),
                  f"high-norm {names(th.high_norm)} − normal-norm {names(th.normal_norm)}: nDCG@10 best k − k = 1")


def landscape(raw: Raw, th: SPLADEThresholds) -> list[dict[str, Any]]:
    """One row per (family, seed) backbone: ``family``, ``seed``, ``range`` (best minus worst ``nDCG_test`` over
    the tied k in ``[1, landscape_k_max]``), ``k_best_test`` / ``k_worst_test`` (where they are), ``matters``
    (``range >= landscape_factor * regret_margin``), ``best_k`` (chosen on the select half, as everywhere) and
    per rule of :data:`LANDSCAPE_RULES` ``k_<rule>`` and ``regret_<rule>`` (None where the rule's k has no cell)."""
    out = []
    for f in sorted({r["family"] for r in raw["rows"]}):
        for seed, by_k in sorted(cells_by_seed(raw, f).items()):
            ks = [k for k in by_k if 1.0 <= k <= th.landscape_k_max]
            if not ks:
                continue
            vals = {k: ndcg_of(by_k[k], "test") for k in ks}
            hi, lo = max(ks, key=lambda k: (vals[k], -k)), min(ks, key=lambda k: (vals[k], k))
            rng = vals[hi] - vals[lo]
            row: dict[str, Any] = {"family": f, "seed": seed, "range": rng, "k_best_test": hi, "k_worst_test": lo,
                                   "matters": rng >= th.landscape_factor * th.regret_margin - 1e-12,
                                   "best_k": best_k(by_k)}
            best = ndcg_at(by_k, row["best_k"])
            for rule in LANDSCAPE_RULES:
                k = rule_k(raw, rule, f, seed, fixed_k=th.fixed_k)
                at = ndcg_at(by_k, k)
                row[f"k_{rule}"] = k
                row[f"regret_{rule}"] = None if at is None else best - at
            out.append(row)
    return out


def _matters(raw: Raw, th: SPLADEThresholds) -> tuple[list[dict[str, Any]], int]:
    rows = landscape(raw, th)
    return [r for r in rows if r["matters"]], len(rows)


def _flat_reason(n_all: int, th: SPLADEThresholds) -> str:
    return (f"k does not matter here: none of the {n_all} backbones has a landscape range (best − worst nDCG@10 over "
            f"k in 1..{th.landscape_k_max:g}) of at least {th.landscape_factor:g} × {th.regret_margin:g}")


def landscape_regret(raw: Raw, th: SPLADEThresholds, rule: str = "inspect") -> Verdict:
    """``rule``'s regret equivalent to 0 within ± ``regret_margin`` (TOST), over the backbones where k matters
    (:func:`landscape`) only. ``not run`` with the reason "k does not matter here" if there is no such backbone,
    or naming the missing cells."""
    on, n_all = _matters(raw, th)
    if not on:
        return Verdict(NOT_RUN, "equivalence", reason=_flat_reason(n_all, th))
    reg = [r[f"regret_{rule}"] for r in on]
    if any(v is None for v in reg):
        return rules.not_run("equivalence", [f"the {rule} rule's k in the grid for every backbone where k matters"])
    return with_label(rules.equivalence(reg, margin=th.regret_margin, tol=th.tol),
                  f"regret of the {rule} rule over the {len(on)} of {n_all} family-seed backbones where k matters")


def landscape_rule_difference(raw: Raw, th: SPLADEThresholds, a: str = "edge", b: str = "inspect") -> Verdict:
    """Rule ``a`` has a lower regret than rule ``b`` by at least ``min_rule_gain`` (paired, gain rule) over the
    backbones where k matters only; ``not run`` as in :func:`landscape_regret`."""
    on, n_all = _matters(raw, th)
    if not on:
        return Verdict(NOT_RUN, "gain", reason=_flat_reason(n_all, th))
    pairs = [(r[f"regret_{a}"], r[f"regret_{b}"]) for r in on]
    if any(x is None or y is None for x, y in pairs):
        return rules.not_run("gain", [f"the {a} and {b} rules' k in the grid where k matters"])
    return with_label(rules.gain([y - x for x, y in pairs], min_gain=th.min_rule_gain, tol=th.tol),
                  f"regret({b}) − regret({a}) where k matters")


def landscape_markdown(raw: Mapping[str, Any], th: SPLADEThresholds) -> str:
    """A markdown table: per (family, seed) backbone the landscape range (best − worst ``nDCG_test`` over k in
    ``1..landscape_k_max``, and where they are), whether k matters there, and every rule's k and regret
    (:func:`landscape`)."""
    rules_ = LANDSCAPE_RULES
    head = ("| family | seed | range (best k / worst k) | k matters | best k (select) | "
            + " | ".join(f"{r} k: regret" for r in rules_) + " |")
    lines = [head, "| --- | ---: | --- | --- | ---: | " + " | ".join("---:" for _ in rules_) + " |"]
    for x in landscape(raw, th):
        cells = []
        for r in rules_:
            k, reg = x[f"k_{r}"], x[f"regret_{r}"]
            cells.append("-" if reg is None else f"{k:g}: {reg:+.3f}")
        lines.append(f"| {x['family']} | {x['seed']} | {x['range']:.3f} ({x['k_best_test']:g} / {x['k_worst_test']:g}) | "
                     f"{'yes' if x['matters'] else 'no: k does not matter here'} | {x['best_k']:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dataclass(frozen=True)
class ClaimSpec:
    """One claim: ``id``, a short ``title``, the seed's claim (``quote``), the comparison (``statistic``), its
    verdict function and the unit its numbers are shown in (:func:`initlab.experiment.text.number`)."""

    id: str
    title: str
    quote: str
    statistic: str
    verdict: Callable[[Raw, SPLADEThresholds], Verdict]
    unit: str = "ndcg"


CLAIMS: tuple[ClaimSpec, ...] = (
    ClaimSpec("interaction", "a large head norm degrades SPLADE and k fixes it, beyond what normal-norm heads gain",
              "a large MLM-head norm degrades SPLADE; dividing W_head by k fixes it",
              "(nDCG@10 best k − k = 1) high-norm − normal-norm", interaction),
    ClaimSpec("high_norm_degrades", "a large head norm degrades SPLADE (high initial loss, poor minimum)",
              "a large MLM-head norm degrades SPLADE, starting from a very high loss and ending in a poor minimum",
              "nDCG@10 best k − k = 1; InfoNCE", high_norm_degrades),
    ClaimSpec("rescaling_fixes", "dividing W_head by the recommended k fixes it",
              "dividing W_head by k before training fixes it", "nDCG@10 recommended k − k = 1", rescaling_fixes),
    ClaimSpec("over_rescaling", "rescaling a normal-norm head too far hurts retrieval",
              "rescaling a normal-norm head too far hurts or collapses retrieval", "nDCG@10 best k − k_far",
              over_rescaling),
    ClaimSpec("input_side", "the tie's input side carries the over-rescaling harm",
              "(mechanism) tied rescaling shrinks the input embeddings too", "nDCG@10 output-only − tied at k_far",
              input_side),
    ClaimSpec("regret_inspect", "inspect's recommended k is within the margin of the best k", "-",
              "regret nDCG@10", lambda raw, th: recommended_regret(raw, th, "inspect")),
    ClaimSpec("regret_bert", "the BERT-scale rule's k is within the margin of the best k", "-",
              "regret nDCG@10", lambda raw, th: recommended_regret(raw, th, "bert")),
    ClaimSpec("regret_edge", "the edge rule's k is within the margin of the best k", "-",
              "regret nDCG@10", lambda raw, th: recommended_regret(raw, th, "edge")),
    ClaimSpec("edge_beats_inspect", "the edge rule has a lower regret than inspect's rule", "-",
              "regret(inspect) − regret(edge)", lambda raw, th: rule_difference(raw, th, "edge", "inspect")),
    ClaimSpec("bert_beats_inspect", "the BERT-scale rule has a lower regret than inspect's rule", "-",
              "regret(inspect) − regret(bert)", lambda raw, th: rule_difference(raw, th, "bert", "inspect")),
    ClaimSpec("landscape_regret_inspect", "where k matters, inspect's k is within the margin of the best k", "-",
              "regret nDCG@10 where k matters", lambda raw, th: landscape_regret(raw, th, "inspect")),
    ClaimSpec("landscape_regret_edge", "where k matters, the edge rule's k is within the margin of the best k", "-",
              "regret nDCG@10 where k matters", lambda raw, th: landscape_regret(raw, th, "edge")),
    ClaimSpec("landscape_regret_fixed", "where k matters, a fixed k is within the margin of the best k", "-",
              "regret nDCG@10 where k matters", lambda raw, th: landscape_regret(raw, th, "fixed")),
    ClaimSpec("landscape_edge_beats_inspect", "where k matters, the edge rule has a lower regret than inspect's", "-",
              "regret(inspect) − regret(edge) where k matters",
              lambda raw, th: landscape_rule_difference(raw, th, "edge", "inspect")),
    ClaimSpec("landscape_inspect_beats_fixed", "where k matters, inspect's rule has a lower regret than a fixed k", "-",
              "regret(fixed) − regret(inspect) where k matters",
              lambda raw, th: landscape_rule_difference(raw, th, "inspect", "fixed")),
)

#: the claims added after the preregistered ``full`` run: post hoc on any run whose saved record lacks them
POSTHOC_SINCE_FULL = ("interaction", "landscape_regret_inspect", "landscape_regret_edge", "landscape_regret_fixed",
                      "landscape_edge_beats_inspect", "landscape_inspect_beats_fixed")


#: the synthetic SPLADE claims (:mod:`initlab.synthetic.splade.claims`). Primary: the degradation and its fix.
SPLADE_FAMILIES: tuple[Family, ...] = (
    Family("primary", ("high_norm_degrades", "rescaling_fixes"),
           "a large MLM-head norm degrades SPLADE; dividing W_head by the recommended k fixes it"),
    Family("secondary", ("interaction", "over_rescaling", "input_side", "regret_inspect", "regret_bert", "regret_edge",
                         "edge_beats_inspect", "bert_beats_inspect", "landscape_regret_inspect", "landscape_regret_edge",
                         "landscape_regret_fixed", "landscape_edge_beats_inspect", "landscape_inspect_beats_fixed"),
           "the high-norm x normal-norm interaction, over-rescaling, the tie's input side, and the k rules' regrets "
           "and comparisons (on the grid and on the landscape)"),
)


def evaluate_all(raw: Raw, th: SPLADEThresholds) -> dict[str, Verdict]:
    """Every claim's verdict, by id, in :data:`CLAIMS` order."""
    return rules.evaluate_claims(CLAIMS, raw, th)


def evaluate_corrected(raw: Raw, th: SPLADEThresholds) -> dict[str, Verdict]:
    """Every claim's Holm-corrected verdict within its declared family
    (:data:`SPLADE_FAMILIES`), a wrapper over :func:`evaluate_all`."""
    from initlab.evidence import families

    return families.corrected(evaluate_all(raw, th), SPLADE_FAMILIES)


def by_id(claim_id: str) -> ClaimSpec:
    """The :class:`ClaimSpec` of ``claim_id``.

    Raises:
        KeyError: naming the unknown id and the known ones.
    """
    return rules.claim_by_id(CLAIMS, claim_id)


def posthoc_claims(saved: Mapping[str, Any]) -> list[str]:
    """The claims of :data:`POSTHOC_SINCE_FULL` that a run's saved verdict record lacks: the run was analysed
    (and, for a confirmatory run, preregistered) without them, so on that run they are post-hoc analyses."""
    return [c for c in POSTHOC_SINCE_FULL if c not in saved]


def check_record(saved: Mapping[str, Any], raw: Raw, th: SPLADEThresholds, where: str) -> dict[str, Verdict]:
    """The recomputed verdicts, after checking a saved record ``{claim id: {"word": ...}}`` against them. A claim
    added after the record was written (:func:`posthoc_claims`) is recomputed but not required in the record.

    Raises:
        initlab.evidence.rules.VerdictRecordError: a saved word differs from its recomputation (names ``where``).
    """
    got = evaluate_all(raw, th)
    later = set(posthoc_claims(saved))
    rules.check_record(dict(saved), {k: v for k, v in got.items()
                                     if k in saved or (v.word != NOT_RUN and k not in later)}, where)
    return got


def part_label(v: Verdict) -> str:
    """The label a claim function gave one part (its ``reason``, e.g. ``"modernbert: nDCG@10 best k − k = 1"``)."""
    return v.reason.split(" (")[0] if v.reason else ""


def describe_claim(v: Verdict, *, with_word: bool = True) -> str:
    """A claim verdict in words: ``**word**`` then each part as ``label: estimate [lo, hi] (kind, n seeds)``
    (nDCG@10 differences in ``ndcg`` units, InfoNCE parts in ``nats``; :func:`initlab.experiment.text.describe`)."""
    from initlab.experiment import text

    def one(p: Verdict) -> str:
        unit = "nats" if "InfoNCE" in p.reason else "ndcg"
        label = part_label(p)
        counted = "(family, seed) backbone" if "regret" in p.reason else "seed"
        body = text.describe(dataclasses.replace(p, reason=p.reason[len(label):].strip(" ()")), unit, counted=counted)
        return f"{label}: {body}" if label else body

    if v.word == NOT_RUN:
        return text.describe(v, "ndcg", with_word=with_word)
    parts = v.parts if v.rule == "all_of" else (v,)
    head = f"{text.bold(text.shown_word(v))}: " if with_word else ""
    return head + "; ".join(one(p) for p in parts)


#: the README rows of these claims: the out-of-domain experiment's claims module holds them
#: (:mod:`initlab.synthetic.splade.ood.claims`: each row leads with its confirmation, this run beside it)
CLAIM_ROWS: list[Claim] = []
