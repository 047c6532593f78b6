"""The out-of-domain synthetic SPLADE's claims: its imposed-norm verdict, its claim families and the README rows.

Imported as ``initlab.synthetic.splade.ood.claims``. The thresholds, ``raw`` and every other verdict function are
the synthetic SPLADE claims the two SPLADE experiments share (:mod:`initlab.synthetic.splade.claims`).

* :func:`imposed_interaction` -- the head norm apart from the recipe: a normal-norm backbone whose untied head is
  scaled up to a high-norm family's norm, its ``nDCG(best k) - nDCG(k=1)`` minus the same backbone's at its natural
  norm, gain δ = ``min_gain`` (rows ``mode = "imposed"`` of the OOD synthetic SPLADE; one of :data:`OOD_CLAIMS`,
  not of :data:`initlab.synthetic.splade.claims.CLAIMS`: the phase experiment has no such arm).

The README claims rows of the synthetic SPLADE experiments, one function per row, from saved result files. The
phase diagram's record holds no row of its own: each row leads with this experiment's confirmation and keeps the
phase diagram's ``full`` run beside it, so the rows live here, above both (:data:`CLAIM_ROWS`).

Each function takes the loaded result files (``{file name under docs/results: parsed JSON}``, as
:func:`initlab.app.docgen.claims.load_results` gives them) and returns the markdown verdict cell of one README
row. Every verdict is recomputed from the raw per-seed numbers of the run's ``phase.json`` (its ``rows`` and
``inspect`` lists) by :mod:`initlab.synthetic.splade.claims`; the saved ``verdicts`` record is only checked
against that recomputation (:func:`initlab.synthetic.splade.claims.check_record`: a mismatch is an error).

What the numbers are (said in every cell): the run is the OOD synthetic SPLADE's preregistered confirmation,
preset ``confirm-v2k`` (:data:`CONFIRM`: out-of-domain nDCG@10 as the metric, the interaction as the
headline, in domain as secondary, verdicts on its complete seeds, Holm within
:data:`SPLADE_OOD_FAMILIES`) when its file is present with at least 2 complete seeds,
with the earlier preregistered run, preset ``full`` (:data:`FULL`), kept beside it; else the ``full`` run alone.
The seeds are named. ``estimate [lo, hi] (kind, n seeds)`` is a per-seed paired mean
difference of nDCG@10 on the test half of the dev queries (or of InfoNCE in nats) with its 95 % t-interval
(``95 % t``), or, for an equivalence (a regret, a control), its 90 % TOST interval (``90 % TOST``); the n of a
regret counts (family, seed) backbones. Head norms are ``mean ± sd`` over seeds (sample sd). An interval that
holds its threshold reads **inconclusive**, with the seed count that would decide it.

Rows (the README's wording of the seed claims):

* :func:`degradation_row` -- "A large MLM-head norm degrades SPLADE, starting from a very high loss and
  ending in a poor minimum": headline :func:`initlab.synthetic.splade.claims.interaction` (high-norm gain from k
  minus the normal-norm families'; a post-hoc analysis on a run whose saved record lacks it,
  :func:`~initlab.synthetic.splade.claims.posthoc_claims`, and said so in the cell), the per-family rows
  (:func:`~initlab.synthetic.splade.claims.family_gains`), then
  :func:`~initlab.synthetic.splade.claims.high_norm_degrades`;
* :func:`fix_row` -- "Dividing W_head by k before training fixes it":
  :func:`~initlab.synthetic.splade.claims.rescaling_fixes`, the recommended k's regret (``inspect``'s rule, the
  BERT-scale rule, the edge rule) and the landscape: how many backbones k matters on, and the regrets judged there
  only (:func:`~initlab.synthetic.splade.claims.landscape_regret`);
* :func:`over_rescaling_row` -- "Rescaling a normal-norm head too far hurts or collapses retrieval":
  :func:`~initlab.synthetic.splade.claims.over_rescaling`, :func:`~initlab.synthetic.splade.claims.input_side` and
  the collapse flags at ``k_far``.

Errors: a missing key or wrong type surfaces as ``KeyError`` / ``TypeError`` / ``ValueError`` (the caller names
the file); a saved record that disagrees with its numbers raises
:class:`initlab.evidence.rules.VerdictRecordError` (a ``ValueError``).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from initlab.config import from_dict
from initlab.evidence import rules
from initlab.evidence.families import Family
from initlab.evidence.rules import Verdict
from initlab.experiment import text
from initlab.experiment.rows import Claim, Headline, headline, seeds_text
from initlab.experiment.text import bold
from initlab.synthetic.splade.ood import decide as v8k
from initlab.synthetic.splade.claims import (CLAIMS, ClaimSpec, Raw, SPLADEThresholds, all_or_not_run, as_raw, best_k,
                                             cells_by_seed, check_record, describe_claim, evaluate_all,
                                             evaluate_corrected, family_gains, landscape, ndcg_of, on_seeds,
                                             part_label, posthoc_claims, shipped_rule, with_label)

__all__ = ["imposed_interaction", "OOD_CLAIMS", "evaluate_ood", "SPLADE_OOD_FAMILIES", "SPLADE_OOD_V8K_FAMILIES",
           "SPLADE_OOD_IN_DOMAIN_FAMILIES", "FULL", "FILES", "CONFIRM", "OPTIONAL", "Confirmation", "load_confirm",
           "load_phase", "CLAIM_ROWS", "ROWS", "degradation_row", "full_degradation", "fix_row", "over_rescaling_row"]


def _imposed_cells(raw: Raw, family: str, high: str) -> dict[int, dict[float, Mapping[str, Any]]]:
    """``{seed: {k: row}}`` of ``family``'s imposed-norm arm with ``high``'s head norm (rows ``mode = "imposed"``)."""
    out: dict[int, dict[float, Mapping[str, Any]]] = {}
    for r in raw["rows"]:
        if r["family"] == family and r["mode"] == "imposed" and r.get("imposed") == high:
            out.setdefault(int(r["seed"]), {})[float(r["k"])] = r
    return out


def imposed_interaction(raw: Raw, th: SPLADEThresholds) -> Verdict:
    """The head norm itself, apart from the pretraining recipe: per imposed-norm arm (a normal-norm family's
    backbone whose untied head is scaled up to a high-norm family's head norm, same seed; rows ``mode =
    "imposed"``, :mod:`initlab.synthetic.splade.ood.config`), per seed the arm's ``nDCG(best k) - nDCG(k=1)``
    minus the same backbone's at its natural norm (tied rows, s = 1), gain δ = ``min_gain`` on the 95 %
    t-interval over the seeds common to both. Several arms: the all-of. ``not run`` without an imposed arm with
    k = 1 and its natural twin."""
    pairs = sorted({(r["family"], r.get("imposed")) for r in raw["rows"] if r.get("mode") == "imposed"})
    parts, missing = [], []
    for f, hi in pairs:
        arm, nat = _imposed_cells(raw, f, hi), cells_by_seed(raw, f)
        seeds = sorted(s for s in set(arm) & set(nat) if 1.0 in arm[s] and 1.0 in nat[s])
        if not seeds:
            missing.append(f"{f} with {hi}'s head norm: k = 1 in both arms on a common seed")
            continue
        d = [(ndcg_of(arm[s][best_k(arm[s])], "test") - ndcg_of(arm[s][1.0], "test"))
             - (ndcg_of(nat[s][best_k(nat[s])], "test") - ndcg_of(nat[s][1.0], "test")) for s in seeds]
        parts.append(with_label(rules.gain(d, min_gain=th.min_gain, tol=th.tol),
                            f"{f} at {hi}'s head norm − {f} natural: nDCG@10 best k − k = 1"))
    if not parts:
        return rules.not_run("gain", missing or ["an imposed-norm arm (rows with mode 'imposed')"])
    return parts[0] if len(parts) == 1 and not missing else all_or_not_run(parts, missing)


#: the OOD synthetic SPLADE's preregistered confirmation (docs/synthetic_splade_ood.md#confirmation-preregistered):
#: the interaction is the one primary claim (its preregistered headline test); everything else of
#: :mod:`initlab.synthetic.splade.claims` is secondary. Applied separately to the out-of-domain verdicts and to the
#: in-domain ones (two declarations of the same structure; in domain every claim is secondary by the preregistered design).
SPLADE_OOD_FAMILIES: tuple[Family, ...] = (
    Family("primary", ("interaction",),
           "a large head norm degrades SPLADE and k fixes it beyond what the normal-norm control gains (out of domain)"),
    Family("secondary", ("high_norm_degrades", "rescaling_fixes", "over_rescaling", "input_side", "regret_inspect",
                         "regret_bert", "regret_edge", "edge_beats_inspect", "bert_beats_inspect",
                         "landscape_regret_inspect", "landscape_regret_edge", "landscape_regret_fixed",
                         "landscape_edge_beats_inspect", "landscape_inspect_beats_fixed"),
           "the per-family degradation and fix, over-rescaling, the tie's input side, and the k rules' regrets "
           "(on the grid and gated by the landscape)"),
)

#: the OOD synthetic SPLADE's claims: :data:`initlab.synthetic.splade.claims.CLAIMS` and the imposed-norm arm's (an arm only that experiment has)
OOD_CLAIMS: tuple[ClaimSpec, ...] = CLAIMS + (
    ClaimSpec("imposed_interaction", "a head scaled up to a high norm degrades a normal-norm backbone and k fixes it",
              "a large MLM-head norm degrades SPLADE; dividing W_head by k fixes it",
              "(nDCG@10 best k − k = 1) imposed high norm − natural norm, same backbone", imposed_interaction),
)

#: the OOD synthetic SPLADE's second confirmation (preset ``confirm-v8k``, docs/synthetic_splade_ood.md's
#: preregistration at 8192 ids): the headline interaction and the imposed-norm interaction (the head norm apart
#: from the recipe) are the primary family; every other out-of-domain claim **and every in-domain claim**
#: (``in_domain/<claim id>``: the same functions on the in-domain dev rows) one secondary family, so an in-domain
#: claim is never a family of its own.
_OOD_SECONDARY = ("high_norm_degrades", "rescaling_fixes", "over_rescaling", "input_side", "regret_inspect",
                  "regret_bert", "regret_edge", "edge_beats_inspect", "bert_beats_inspect", "landscape_regret_inspect",
                  "landscape_regret_edge", "landscape_regret_fixed", "landscape_edge_beats_inspect",
                  "landscape_inspect_beats_fixed")
SPLADE_OOD_V8K_FAMILIES: tuple[Family, ...] = (
    Family("primary", ("interaction", "imposed_interaction"),
           "a large head norm degrades SPLADE out of domain and k fixes it, beyond the normal-norm control, and the "
           "same when a normal-norm backbone's head is scaled up to the high norm (the norm, not the recipe)"),
    Family("secondary", _OOD_SECONDARY + tuple(f"in_domain/{c}" for c in ("interaction", "imposed_interaction")
                                                + _OOD_SECONDARY),
           "the other out-of-domain claims (per-family degradation and fix, over-rescaling, the k rules' regrets) "
           "and every claim on the in-domain dev queries"),
)

#: the OOD confirmation's in-domain verdicts: every claim in one secondary family. The preregistration calls the
#: in-domain metric "secondary throughout" but also names "the same two families", which would leave the in-domain
#: interaction alone in a primary family; its in-domain word is a secondary claim's, so it is corrected with the
#: other secondary claims (the stricter reading; docs/synthetic_splade_ood.md says so).
SPLADE_OOD_IN_DOMAIN_FAMILIES: tuple[Family, ...] = (
    Family("secondary", tuple(c for f in SPLADE_OOD_FAMILIES for c in f.claims),
           "in domain every claim is secondary (the secondary metric), the interaction included"),
)


def evaluate_ood(raw: Raw, th: SPLADEThresholds) -> dict[str, Verdict]:
    """Every OOD claim's verdict (:data:`OOD_CLAIMS`: :func:`initlab.synthetic.splade.claims.evaluate_all`'s and ``imposed_interaction``), by id."""
    return rules.evaluate_claims(OOD_CLAIMS, raw, th)


# --- the README rows of these claims (initlab.app.docgen.claims renders them) ---
Results = Mapping[str, Any]

#: the preregistered confirmatory run (docs/synthetic_splade.md#preregistration)
FULL = "synthetic_splade_full/phase.json"
FILES = (FULL,)
#: the OOD synthetic SPLADE's preregistered confirmation (docs/synthetic_splade_ood.md#confirmation-preregistered):
#: when present with at least 2 complete seeds the rows come from it (out-of-domain nDCG@10, the
#: interaction as the headline, in domain as secondary), the ``full`` run kept beside it
CONFIRM = "synthetic_splade_ood_confirm/results.json"
#: the confirmation's seeds that finished after its preregistered deadline (22:20 UTC; docs/synthetic_splade_ood.md,
#: "Confirmation results, all 3 seeds"): reported apart, and every row whose words need them says so
CONFIRM_LATE_SEEDS = (9203,)
OPTIONAL = (CONFIRM, v8k.RESULTS)
SPLADE_DOCS = "[synthetic SPLADE](docs/synthetic_splade.md"
OOD_DOCS = "[out of domain](docs/synthetic_splade_ood.md#confirmation-preregistered)"


def load_phase(r: Results, name: str = FULL) -> tuple[dict[str, Any], SPLADEThresholds, dict[str, Any], Mapping[str, Any]]:
    """``(raw, thresholds, verdicts, phase)`` of the saved run ``name``; the verdicts recomputed from the raw
    numbers and Holm-corrected within the declared families (:func:`initlab.synthetic.splade.claims.evaluate_corrected`),
    after checking the saved (uncorrected) record against the uncorrected recomputation.

    Raises:
        KeyError: ``name`` not loaded, or a field missing.
        initlab.evidence.rules.VerdictRecordError: the saved record disagrees with the numbers.
    """
    phase = r[name]
    th = from_dict(SPLADEThresholds, phase["config"]["claims"])
    raw = as_raw(phase)
    check_record(phase.get("verdicts", {}), raw, th, f"docs/results/{name}")  # the record: uncorrected words
    return raw, th, evaluate_corrected(raw, th), phase


@dataclass(frozen=True)
class Confirmation:
    """The OOD confirmation's numbers and verdicts: ``raw`` (out of domain) and ``raw_id`` (in domain) on the
    complete seeds, ``th``, the Holm-corrected verdicts ``v`` / ``v_id``
    (:data:`SPLADE_OOD_FAMILIES`, each metric separately) and the loaded ``rep``."""

    raw: dict[str, Any]
    raw_id: dict[str, Any]
    th: SPLADEThresholds
    v: dict[str, Verdict]
    v_id: dict[str, Verdict]
    rep: Mapping[str, Any]


def load_confirm(r: Results) -> Confirmation | None:
    """The OOD confirmation (:data:`CONFIRM`) if it is loaded and has at least 2 complete seeds (the preregistered
    rule: with fewer no interval exists and the rows stay on the ``full`` run), else None. The verdicts are
    recomputed on the complete seeds from the raw rows, after checking the saved (uncorrected) records.

    Raises:
        KeyError: a field missing.
        initlab.evidence.rules.VerdictRecordError: a saved record disagrees with the numbers.
    """
    from initlab.evidence import families

    if CONFIRM not in r:
        return None
    rep = r[CONFIRM]
    seeds = [int(x) for x in rep["complete_seeds"]]
    if len(seeds) < 2:
        return None
    th = from_dict(SPLADEThresholds, rep["config"]["claims"])
    raw = on_seeds(as_raw(rep), seeds)
    raw_id = on_seeds(as_raw({**rep, "rows": v8k.id_rows(rep["rows"])}), seeds)
    check_record(rep["verdicts"], raw, th, f"docs/results/{CONFIRM} (verdicts)")
    check_record(rep["verdicts_in_domain"], raw_id, th, f"docs/results/{CONFIRM} (verdicts_in_domain)")
    v = families.corrected(evaluate_all(raw, th), SPLADE_OOD_FAMILIES)
    v_id = families.corrected(evaluate_all(raw_id, th), SPLADE_OOD_IN_DOMAIN_FAMILIES)
    return Confirmation(raw, raw_id, th, v, v_id, rep)


def _confirm_scope(c: Confirmation) -> str:
    seeds = sorted({int(x["seed"]) for x in c.raw["rows"]})
    cfg = c.rep["config"]
    late = [s for s in seeds if s in CONFIRM_LATE_SEEDS]
    note = (f"; {seeds_text(late)} finished after the preregistered deadline, so these words need a late seed"
            if late else "")
    return (f"preregistered confirmation out of domain, preset `confirm-v2k`, {len(seeds)} complete "
            f"{seeds_text(seeds)}, {cfg['corpus']['vocab_size']} ids, nDCG@10 on {cfg['corpus']['n_heldout']} held-out "
            f"domains{note}")


def _by_deadline(c: Confirmation, claim: str, in_domain: bool = False) -> str:
    """`` By the deadline (seeds ...): WORD ...`` -- ``claim`` recomputed on the seeds finished by the preregistered
    deadline (Holm as for all seeds), reported apart; empty when no seed was late or fewer than 2 were on time."""
    from initlab.evidence import families

    seeds = sorted({int(x["seed"]) for x in c.raw["rows"]})
    on_time = [s for s in seeds if s not in CONFIRM_LATE_SEEDS]
    if len(on_time) == len(seeds) or len(on_time) < 2:
        return ""
    raw = on_seeds(c.raw_id if in_domain else c.raw, on_time)
    fams = SPLADE_OOD_IN_DOMAIN_FAMILIES if in_domain else SPLADE_OOD_FAMILIES
    v = families.corrected(evaluate_all(raw, c.th), fams)[claim]
    return f" By the deadline ({seeds_text(on_time)}, reported apart): " + describe_claim(v) + "."


def _scope(phase: Mapping[str, Any]) -> str:
    seeds = sorted({int(r["seed"]) for r in phase["rows"]})  # the seeds of the per-cell records, not the config
    span = f"{seeds[0]}-{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2 else \
        ", ".join(str(s) for s in seeds)
    return f"synthetic, preset `full`, {len(seeds)} seeds {span}"


def _norms(phase: Mapping[str, Any], families: tuple[str, ...]) -> str:
    out = []
    for f in families:
        v = [n["head_frobenius"] for n in phase["natural_scale"].values() if n["family"] == f]
        if v:
            sd = f" ± {statistics.stdev(v):.1f}" if len(v) > 1 else ""
            out.append(f"{f} {statistics.mean(v):.1f}{sd}")
    return ", ".join(out)


def _posthoc(phase: Mapping[str, Any], claim: str) -> str:
    """", a post-hoc analysis (not preregistered for this run)" for a claim the run's saved record lacks, else ''."""
    return (", a post-hoc analysis: not preregistered for this run" if claim in posthoc_claims(phase.get("verdicts", {}))
            else "")


def degradation_row(r: Results) -> str:
    """Row "A large MLM-head norm degrades SPLADE ...": from the OOD confirmation when present (:func:`load_confirm`;
    its interaction out of domain, the per-family gains, the high-norm claim, in domain as secondary), then the
    ``full`` run's (kept beside it), else the ``full`` run's alone."""
    c, lead = load_confirm(r), v8k.readme_lead(r, ("family_interaction", "imposed_loss"), ("four_family_interaction",))
    if c is None:
        return lead + full_degradation(r)
    fams = "; ".join(describe_claim(g, with_word=False) for g in family_gains(c.raw, c.th).values())
    return lead + (f"{bold(c.v['interaction'].word)} (interaction, the preregistered headline; {_confirm_scope(c)}; W_head "
            f"Frobenius {_norms(c.rep, c.th.high_norm + c.th.normal_norm)}; best k chosen on the select half of the "
            f"queries). " + describe_claim(c.v["interaction"], with_word=False) + f". Per family: {fams}. High-norm "
            f"claim (initial loss, poor minimum, control not degraded): " + describe_claim(c.v["high_norm_degrades"])
            + "." + _by_deadline(c, "interaction") + " In domain (secondary; Holm within one secondary family): "
            "interaction " + describe_claim(c.v_id["interaction"]) + "." + _by_deadline(c, "interaction", True)
            + " Earlier run, kept beside it: " + full_degradation(r))


def full_degradation(r: Results) -> str:
    """The README cell of the earlier full-scale phase diagram's degradation claim: the interaction verdict, its
    scope and head norms, the per-family gains and the preregistered high-norm claim, from ``r``'s saved
    ``phase.json`` (:func:`load_phase`)."""
    raw, th, v, phase = load_phase(r)
    fams = "; ".join(describe_claim(g, with_word=False) for g in family_gains(raw, th).values())
    return (f"{bold(v['interaction'].word)} (interaction{_posthoc(phase, 'interaction')}; {_scope(phase)}; head norms "
            f"from each family's own MLM pretraining, no imposed multiplier: W_head Frobenius "
            f"{_norms(phase, th.high_norm + th.normal_norm)}; best k chosen on held-out queries). "
            + describe_claim(v["interaction"], with_word=False) + f". Per family: {fams}. Preregistered claim "
            f"(high initial loss, poor minimum, controls not degraded): " + describe_claim(v["high_norm_degrades"]))


def _regret(v: Verdict) -> str:
    """A regret verdict: ``**word**: estimate [lo, hi] (90 % TOST over n (family, seed) backbones)``."""
    if v.word == "not run":
        return describe_claim(v)
    decide = "".join(f"; {t}" for t in (text.decide_text(v), text.holm_text(v)) if t)
    return (f"{bold(v.word)}: {text.number(v.estimate, 'ndcg')} {text.interval(v, 'ndcg')} ({text.interval_kind(v)} "
            f"over {v.n} (family, seed) backbones{decide})")


def fix_row(r: Results) -> str:
    """Row "Dividing W_head by k before training fixes it": the fix at inspect's recommended k and the rules' regret,
    from the OOD confirmation when present (the landscape out of domain and in domain), the ``full`` run beside it."""
    c, lead = load_confirm(r), v8k.readme_lead(r, ("imposed_recovery",))
    if c is None:
        return lead + _full_fix(r)
    return lead + (f"{bold(c.v['rescaling_fixes'].word)} ({_confirm_scope(c)}): " + describe_claim(c.v["rescaling_fixes"], with_word=False)
            + f". Regret of `mlmhead inspect`'s k against the best k, equivalent to 0 within ± {c.th.regret_margin:g} "
              f"nDCG@10: {_regret(c.v['regret_inspect'])}; the BERT-scale rule's: {_regret(c.v['regret_bert'])}; the "
              f"edge rule's: {_regret(c.v['regret_edge'])}. " + _landscape_text(c.raw, c.th, c.v, c.rep)
            + ". In domain (secondary): fix " + describe_claim(c.v_id["rescaling_fixes"]) + ". "
            + _landscape_text(c.raw_id, c.th, c.v_id, c.rep) + ". Earlier run, kept beside it: " + _full_fix(r))


def _full_fix(r: Results) -> str:
    raw, th, v, phase = load_phase(r)
    return (f"{bold(v['rescaling_fixes'].word)} ({_scope(phase)}; real backbones {bold('not run')}): "
            + describe_claim(v["rescaling_fixes"], with_word=False)
            + f". Regret of `mlmhead inspect`'s k against the best k, equivalent to 0 within ± {th.regret_margin:g} "
              f"nDCG@10: {_regret(v['regret_inspect'])}; the BERT-scale rule's: {_regret(v['regret_bert'])}; the edge "
              f"rule's: {_regret(v['regret_edge'])}; " + _shipped(shipped_rule(raw, th)) + ". " + _landscape_text(raw, th, v, phase))


def _landscape_text(raw: dict[str, Any], th: SPLADEThresholds, v: Mapping[str, Verdict],
                    phase: Mapping[str, Any]) -> str:
    """The regrets judged against the landscape, in words (post hoc where the run's record lacks them)."""
    rows = landscape(raw, th)
    on = [x for x in rows if x["matters"]]
    head = (f"Against the landscape{_posthoc(phase, 'landscape_regret_inspect')}: k matters (best − worst nDCG@10 "
            f"over k in 1..{th.landscape_k_max:g} at least {th.landscape_factor:g} × {th.regret_margin:g}) on "
            f"{len(on)} of {len(rows)} backbones ({_count_by_family(on)})")
    if not on:
        return head + "; everywhere else, and so for every regret verdict: k does not matter here"
    return (head + "; elsewhere k does not matter here. There: "
            + describe_claim(v["landscape_regret_inspect"], with_word=False) + "; " + describe_claim(v["landscape_regret_edge"], with_word=False)
            + "; " + describe_claim(v["landscape_regret_fixed"], with_word=False) + "; "
            + describe_claim(v["landscape_edge_beats_inspect"], with_word=False) + "; "
            + describe_claim(v["landscape_inspect_beats_fixed"], with_word=False))


def _count_by_family(rows: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for x in rows:
        counts[x["family"]] = counts.get(x["family"], 0) + 1
    return ", ".join(f"{f} {n}" for f, n in counts.items()) or "none"



def _shipped(rule: str) -> str:
    """The preregistered decision on ``mlmhead inspect``'s rule, in words."""
    if rule == "inspect":
        return "`mlmhead inspect` keeps its own rule (neither alternative beat it by the preregistered rule)"
    name = {"edge": "edge", "bert": "BERT-scale"}.get(rule, rule)
    return f"`mlmhead inspect` should switch to the {name} rule (it beat inspect's by the preregistered rule)"


def over_rescaling_row(r: Results) -> str:
    """Row "Rescaling a normal-norm head too far ...": the harm at ``k_far`` from the OOD confirmation when present
    (out of domain, in domain as secondary), the ``full`` run beside it (its ``k_far``, the input side, the
    collapse flags)."""
    c = load_confirm(r)
    if c is None:
        return _full_over(r)
    far = [x for x in c.raw["rows"] if x["family"] in c.th.normal_norm and x["k"] == c.th.k_far]
    flagged = sum(bool(x["collapsed"]) for x in far)
    return (f"hurts: {bold(c.v['over_rescaling'].word)} ({_confirm_scope(c)}; tied k = {c.th.k_far:g} against the "
            f"best k): " + describe_claim(c.v["over_rescaling"], with_word=False) + f"; collapse flagged in {flagged} "
            f"of {len(far)} of those cells. In domain (secondary): " + describe_claim(c.v_id["over_rescaling"])
            + ". Earlier run, kept beside it: " + _full_over(r))


def _full_over(r: Results) -> str:
    raw, th, v, phase = load_phase(r)
    far = [row for row in phase["rows"] if row["family"] in th.normal_norm and row["mode"] == "tied"
           and row["k"] == th.k_far]
    flagged = sum(bool(row["collapsed"]) for row in far)
    return (f"hurts: {bold(v['over_rescaling'].word)} ({_scope(phase)}; tied k = {th.k_far:g} against the best k): "
            + describe_claim(v["over_rescaling"], with_word=False)
            + f"; collapse flagged in {flagged} of {len(far)} of those cells (calibrated detector). Input side of the "
              f"tie (output-only rescaling by the same k leaves the input embeddings alone): "
            + describe_claim(v["input_side"]))


#: README row (its "seed claim" text, abbreviated) -> function
ROWS = {"A large MLM-head norm degrades SPLADE": degradation_row, "Dividing W_head by k before training fixes it": fix_row,
        "Rescaling a normal-norm head too far hurts or collapses retrieval": over_rescaling_row}


def _ndcg_parts(v: Verdict) -> list[tuple[str, Verdict, str]]:
    """The nDCG@10 parts of a claim verdict, labelled as the claim labels them (the InfoNCE parts stay in
    docs/claims.md)."""
    parts = v.parts if v.rule == "all_of" else (v,)
    return [(part_label(p), p, "ndcg") for p in parts if "InfoNCE" not in p.reason and "control" not in p.reason]


def _beside(h: Headline, earlier: Headline, tag: str = "OOD confirmation", c: Confirmation | None = None) -> Headline:
    """The confirmation's headline with the ``full`` run's word kept beside it (its numbers: docs/claims.md); the
    tag names the confirmation's late seeds (:data:`CONFIRM_LATE_SEEDS`) when its words need them."""
    if c is not None:
        late = sorted({int(x["seed"]) for x in c.raw["rows"]} & set(CONFIRM_LATE_SEEDS))
        tag += "".join(f"; seed {s} after the deadline" for s in late)
    return Headline(h.word + f" ({tag})", h.estimate + f"; earlier `full` run: {earlier.word}")


def degradation_headline(r: Results) -> Headline:
    """The interaction (the headline test; "post hoc" where the run's record lacks it) and the per-family rows; from
    the OOD confirmation when present, the ``full`` run's beside it."""
    c = load_confirm(r)
    if c is None:
        return v8k.readme_headline(r, ("family_interaction", "imposed_loss"), _full_degradation_headline(r))
    parts = [("high-norm − normal-norm", c.v["interaction"], "ndcg")] + [
        (f, g, "ndcg") for f, g in family_gains(c.raw, c.th).items()]
    full = load_phase(r)[2]["interaction"]
    return v8k.readme_headline(r, ("family_interaction", "imposed_loss"), _beside(
        headline(parts, word=bold(c.v["interaction"].word)),
        headline([("high-norm − normal-norm", full, "ndcg")], word=bold(full.word)), "interaction, OOD confirmation", c))


def _full_degradation_headline(r: Results) -> Headline:
    raw, th, v, phase = load_phase(r)
    inter = v["interaction"]
    tag = " (interaction, post hoc)" if "interaction" in posthoc_claims(phase.get("verdicts", {})) else " (interaction)"
    parts = [("high-norm − normal-norm", inter, "ndcg")] + [(f, g, "ndcg") for f, g in family_gains(raw, th).items()]
    return headline(parts, word=bold(inter.word) + tag)


def _claim_headline(r: Results, claim: str) -> Headline:
    """One claim's nDCG@10 parts, from the OOD confirmation when present with the ``full`` run's beside it."""
    full = load_phase(r)[2][claim]
    earlier = headline(_ndcg_parts(full), word=bold(full.word))
    c = load_confirm(r)
    if c is None:
        return earlier
    return _beside(headline(_ndcg_parts(c.v[claim]), word=bold(c.v[claim].word)), earlier, c=c)


def fix_headline(r: Results) -> Headline:
    return v8k.readme_headline(r, ("imposed_recovery",), _claim_headline(r, "rescaling_fixes"))


def over_rescaling_headline(r: Results) -> Headline:
    return _claim_headline(r, "over_rescaling")


CLAIM_ROWS: list[Claim] = [
    Claim("A large MLM-head norm degrades SPLADE, starting from a very high loss and ending in a poor minimum",
          "BEIR-13 nDCG@10: ModernBERT 0.127 vs BERT 0.370", SPLADE_DOCS + "#confirmatory-run-full-seeds-9101-9105), " + OOD_DOCS,
          FILES, degradation_row, optional=OPTIONAL, headline=degradation_headline),
    Claim("Dividing W_head by k before training fixes it", "ModernBERT 0.405 at k = 16",
          SPLADE_DOCS + "#confirmatory-run-full-seeds-9101-9105), " + OOD_DOCS + ", [at scale](docs/splade_at_scale.md)",
          FILES, fix_row, optional=OPTIONAL, headline=fix_headline),
    Claim("Rescaling a normal-norm head too far hurts or collapses retrieval (RoBERTa best k = 2; ALBERT hurt by "
          "rescaling)", "no number", SPLADE_DOCS + "#confirmatory-run-full-seeds-9101-9105), " + OOD_DOCS,
          FILES, over_rescaling_row, optional=OPTIONAL, headline=over_rescaling_headline),
]
