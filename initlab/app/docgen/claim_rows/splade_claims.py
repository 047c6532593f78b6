"""The README claims rows of the synthetic SPLADE experiment, one function per row, from saved result files.

Each function takes the loaded result files (``{file name under docs/results: parsed JSON}``, as
:func:`initlab.app.docgen.claims.load_results` gives them) and returns the markdown verdict cell of one README
row. Every verdict is recomputed from the raw per-seed numbers of the run's ``phase.json`` (its ``rows`` and
``inspect`` lists) by :mod:`initlab.synthetic.splade.claims`; the saved ``verdicts`` record is only checked
against that recomputation (:func:`initlab.synthetic.splade.claims.check_record`: a mismatch is an error).

What the numbers are (said in every cell): the run is the OOD synthetic SPLADE's preregistered confirmation,
preset ``confirm-v2k`` (:data:`CONFIRM`: out-of-domain nDCG@10 as the metric, the interaction as the
headline, in domain as secondary, verdicts on its complete seeds, Holm within
:data:`initlab.evidence.families.SPLADE_OOD_FAMILIES`) when its file is present with at least 2 complete seeds,
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
* :func:`landscape_markdown` -- the table of every backbone's landscape range beside every rule's regret (docs).
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

from initlab.evidence.rows import Claim, Headline, headline, seeds_text
from initlab.config import from_dict
from initlab.synthetic.splade import claims as sc
from initlab.evidence import text
from initlab.evidence.text import bold

__all__ = ["FULL", "FILES", "CONFIRM", "OPTIONAL", "Confirmation", "load_confirm", "CLAIMS", "ROWS", "load_phase", "degradation_row", "fix_row", "over_rescaling_row",
           "landscape_markdown"]

Results = Mapping[str, Any]

#: the preregistered confirmatory run (docs/synthetic_splade.md#preregistration)
FULL = "synthetic_splade_full/phase.json"
FILES = (FULL,)
#: the OOD synthetic SPLADE's preregistered confirmation (docs/synthetic_splade_ood.md#confirmation-preregistered):
#: when present with at least 2 complete seeds the rows come from it (out-of-domain nDCG@10, the
#: interaction as the headline, in domain as secondary), the ``full`` run kept beside it
CONFIRM = "synthetic_splade_ood_confirm/results.json"
OPTIONAL = (CONFIRM,)
SPLADE_DOCS = "[synthetic SPLADE](docs/synthetic_splade.md"
OOD_DOCS = "[out of domain](docs/synthetic_splade_ood.md#confirmation-preregistered)"


def load_phase(r: Results, name: str = FULL) -> tuple[dict[str, Any], sc.SPLADEThresholds, dict[str, Any], Mapping[str, Any]]:
    """``(raw, thresholds, verdicts, phase)`` of the saved run ``name``; the verdicts recomputed from the raw
    numbers and Holm-corrected within the declared families (:func:`initlab.synthetic.splade.claims.evaluate_corrected`),
    after checking the saved (uncorrected) record against the uncorrected recomputation.

    Raises:
        KeyError: ``name`` not loaded, or a field missing.
        initlab.evidence.rules.VerdictRecordError: the saved record disagrees with the numbers.
    """
    phase = r[name]
    th = from_dict(sc.SPLADEThresholds, phase["config"]["claims"])
    raw = sc.as_raw(phase)
    sc.check_record(phase.get("verdicts", {}), raw, th, f"docs/results/{name}")  # the record: uncorrected words
    return raw, th, sc.evaluate_corrected(raw, th), phase


@dataclass(frozen=True)
class Confirmation:
    """The OOD confirmation's numbers and verdicts: ``raw`` (out of domain) and ``raw_id`` (in domain) on the
    complete seeds, ``th``, the Holm-corrected verdicts ``v`` / ``v_id``
    (:data:`initlab.evidence.families.SPLADE_OOD_FAMILIES`, each metric separately) and the loaded ``rep``."""

    raw: dict[str, Any]
    raw_id: dict[str, Any]
    th: sc.SPLADEThresholds
    v: dict[str, sc.Verdict]
    v_id: dict[str, sc.Verdict]
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
    th = from_dict(sc.SPLADEThresholds, rep["config"]["claims"])
    raw = sc.on_seeds(sc.as_raw(rep), seeds)
    raw_id = sc.on_seeds(sc.as_raw({**rep, "rows": [dict(x, ndcg_select=x["id_select"], ndcg_test=x["id_test"])
                                                    for x in rep["rows"]]}), seeds)
    sc.check_record(rep["verdicts"], raw, th, f"docs/results/{CONFIRM} (verdicts)")
    sc.check_record(rep["verdicts_in_domain"], raw_id, th, f"docs/results/{CONFIRM} (verdicts_in_domain)")
    v = families.corrected(sc.evaluate_all(raw, th), families.SPLADE_OOD_FAMILIES)
    v_id = families.corrected(sc.evaluate_all(raw_id, th), families.SPLADE_OOD_FAMILIES)
    return Confirmation(raw, raw_id, th, v, v_id, rep)


def _confirm_scope(c: Confirmation) -> str:
    seeds = sorted({int(x["seed"]) for x in c.raw["rows"]})
    cfg = c.rep["config"]
    return (f"preregistered confirmation out of domain, preset `confirm-v2k`, {len(seeds)} complete "
            f"{seeds_text(seeds)}, {cfg['corpus']['vocab_size']} ids, nDCG@10 on {cfg['corpus']['n_heldout']} held-out "
            f"domains")


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
    return (", a post-hoc analysis: not preregistered for this run" if claim in sc.posthoc_claims(phase.get("verdicts", {}))
            else "")


def degradation_row(r: Results) -> str:
    """Row "A large MLM-head norm degrades SPLADE ...": from the OOD confirmation when present (:func:`load_confirm`;
    its interaction out of domain, the per-family gains, the high-norm claim, in domain as secondary), then the
    ``full`` run's (kept beside it), else the ``full`` run's alone."""
    c = load_confirm(r)
    if c is None:
        return _full_degradation(r)
    fams = "; ".join(sc.describe_claim(g, with_word=False) for g in sc.family_gains(c.raw, c.th).values())
    return (f"{bold(c.v['interaction'].word)} (interaction, the preregistered headline; {_confirm_scope(c)}; W_head "
            f"Frobenius {_norms(c.rep, c.th.high_norm + c.th.normal_norm)}; best k chosen on the select half of the "
            f"queries). " + sc.describe_claim(c.v["interaction"], with_word=False) + f". Per family: {fams}. High-norm "
            f"claim (initial loss, poor minimum, control not degraded): " + sc.describe_claim(c.v["high_norm_degrades"])
            + ". In domain (secondary): interaction " + sc.describe_claim(c.v_id["interaction"]) + ". Earlier run, kept "
            "beside it: " + _full_degradation(r))


def _full_degradation(r: Results) -> str:
    raw, th, v, phase = load_phase(r)
    fams = "; ".join(sc.describe_claim(g, with_word=False) for g in sc.family_gains(raw, th).values())
    return (f"{bold(v['interaction'].word)} (interaction{_posthoc(phase, 'interaction')}; {_scope(phase)}; head norms "
            f"from each family's own MLM pretraining, no imposed multiplier: W_head Frobenius "
            f"{_norms(phase, th.high_norm + th.normal_norm)}; best k chosen on held-out queries). "
            + sc.describe_claim(v["interaction"], with_word=False) + f". Per family: {fams}. Preregistered claim "
            f"(high initial loss, poor minimum, controls not degraded): " + sc.describe_claim(v["high_norm_degrades"]))


def _regret(v: sc.Verdict) -> str:
    """A regret verdict: ``**word**: estimate [lo, hi] (90 % TOST over n (family, seed) backbones)``."""
    if v.word == "not run":
        return sc.describe_claim(v)
    decide = "".join(f"; {t}" for t in (text.decide_text(v), text.holm_text(v)) if t)
    return (f"{bold(v.word)}: {text.number(v.estimate, 'ndcg')} {text.interval(v, 'ndcg')} ({text.interval_kind(v)} "
            f"over {v.n} (family, seed) backbones{decide})")


def fix_row(r: Results) -> str:
    """Row "Dividing W_head by k before training fixes it": the fix at inspect's recommended k and the rules' regret,
    from the OOD confirmation when present (the landscape out of domain and in domain), the ``full`` run beside it."""
    c = load_confirm(r)
    if c is None:
        return _full_fix(r)
    return (f"{bold(c.v['rescaling_fixes'].word)} ({_confirm_scope(c)}): " + sc.describe_claim(c.v["rescaling_fixes"], with_word=False)
            + f". Regret of `mlmhead inspect`'s k against the best k, equivalent to 0 within ± {c.th.regret_margin:g} "
              f"nDCG@10: {_regret(c.v['regret_inspect'])}; the BERT-scale rule's: {_regret(c.v['regret_bert'])}; the "
              f"edge rule's: {_regret(c.v['regret_edge'])}. " + _landscape_text(c.raw, c.th, c.v, c.rep)
            + ". In domain (secondary): fix " + sc.describe_claim(c.v_id["rescaling_fixes"]) + ". "
            + _landscape_text(c.raw_id, c.th, c.v_id, c.rep) + ". Earlier run, kept beside it: " + _full_fix(r))


def _full_fix(r: Results) -> str:
    raw, th, v, phase = load_phase(r)
    return (f"{bold(v['rescaling_fixes'].word)} ({_scope(phase)}; real backbones {bold('not run')}): "
            + sc.describe_claim(v["rescaling_fixes"], with_word=False)
            + f". Regret of `mlmhead inspect`'s k against the best k, equivalent to 0 within ± {th.regret_margin:g} "
              f"nDCG@10: {_regret(v['regret_inspect'])}; the BERT-scale rule's: {_regret(v['regret_bert'])}; the edge "
              f"rule's: {_regret(v['regret_edge'])}; " + _shipped(sc.shipped_rule(raw, th)) + ". " + _landscape_text(raw, th, v, phase))


def _landscape_text(raw: dict[str, Any], th: sc.SPLADEThresholds, v: Mapping[str, sc.Verdict],
                    phase: Mapping[str, Any]) -> str:
    """The regrets judged against the landscape, in words (post hoc where the run's record lacks them)."""
    rows = sc.landscape(raw, th)
    on = [x for x in rows if x["matters"]]
    head = (f"Against the landscape{_posthoc(phase, 'landscape_regret_inspect')}: k matters (best − worst nDCG@10 "
            f"over k in 1..{th.landscape_k_max:g} at least {th.landscape_factor:g} × {th.regret_margin:g}) on "
            f"{len(on)} of {len(rows)} backbones ({_count_by_family(on)})")
    if not on:
        return head + "; everywhere else, and so for every regret verdict: k does not matter here"
    return (head + "; elsewhere k does not matter here. There: "
            + sc.describe_claim(v["landscape_regret_inspect"], with_word=False) + "; " + sc.describe_claim(v["landscape_regret_edge"], with_word=False)
            + "; " + sc.describe_claim(v["landscape_regret_fixed"], with_word=False) + "; "
            + sc.describe_claim(v["landscape_edge_beats_inspect"], with_word=False) + "; "
            + sc.describe_claim(v["landscape_inspect_beats_fixed"], with_word=False))


def _count_by_family(rows: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for x in rows:
        counts[x["family"]] = counts.get(x["family"], 0) + 1
    return ", ".join(f"{f} {n}" for f, n in counts.items()) or "none"


def landscape_markdown(raw: Mapping[str, Any], th: sc.SPLADEThresholds) -> str:
    """The landscape table (:func:`initlab.synthetic.splade.claims.landscape_markdown`)."""
    return sc.landscape_markdown(raw, th)


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
            f"best k): " + sc.describe_claim(c.v["over_rescaling"], with_word=False) + f"; collapse flagged in {flagged} "
            f"of {len(far)} of those cells. In domain (secondary): " + sc.describe_claim(c.v_id["over_rescaling"])
            + ". Earlier run, kept beside it: " + _full_over(r))


def _full_over(r: Results) -> str:
    raw, th, v, phase = load_phase(r)
    far = [row for row in phase["rows"] if row["family"] in th.normal_norm and row["mode"] == "tied"
           and row["k"] == th.k_far]
    flagged = sum(bool(row["collapsed"]) for row in far)
    return (f"hurts: {bold(v['over_rescaling'].word)} ({_scope(phase)}; tied k = {th.k_far:g} against the best k): "
            + sc.describe_claim(v["over_rescaling"], with_word=False)
            + f"; collapse flagged in {flagged} of {len(far)} of those cells (calibrated detector). Input side of the "
              f"tie (output-only rescaling by the same k leaves the input embeddings alone): "
            + sc.describe_claim(v["input_side"]))


#: README row (its "seed claim" text, abbreviated) -> function
ROWS = {"A large MLM-head norm degrades SPLADE": degradation_row, "Dividing W_head by k before training fixes it": fix_row,
        "Rescaling a normal-norm head too far hurts or collapses retrieval": over_rescaling_row}


def _ndcg_parts(v: sc.Verdict) -> list[tuple[str, sc.Verdict, str]]:
    """The nDCG@10 parts of a claim verdict, labelled as the claim labels them (the InfoNCE parts stay in
    docs/claims.md)."""
    parts = v.parts if v.rule == "all_of" else (v,)
    return [(sc.part_label(p), p, "ndcg") for p in parts if "InfoNCE" not in p.reason and "control" not in p.reason]


def _beside(h: Headline, earlier: Headline, tag: str = "OOD confirmation") -> Headline:
    """The confirmation's headline with the ``full`` run's kept beside it."""
    return Headline(h.word + f" ({tag})", h.estimate + f"; earlier `full` run (in domain): {earlier.word}: "
                    + earlier.estimate)


def degradation_headline(r: Results) -> Headline:
    """The interaction (the headline test; "post hoc" where the run's record lacks it) and the per-family rows; from
    the OOD confirmation when present, the ``full`` run's beside it."""
    c = load_confirm(r)
    if c is None:
        return _full_degradation_headline(r)
    parts = [("high-norm − normal-norm", c.v["interaction"], "ndcg")] + [
        (f, g, "ndcg") for f, g in sc.family_gains(c.raw, c.th).items()]
    full = load_phase(r)[2]["interaction"]
    return _beside(headline(parts, word=bold(c.v["interaction"].word)),
                   headline([("high-norm − normal-norm", full, "ndcg")], word=bold(full.word)), "interaction, OOD confirmation")


def _full_degradation_headline(r: Results) -> Headline:
    raw, th, v, phase = load_phase(r)
    inter = v["interaction"]
    tag = " (interaction, post hoc)" if "interaction" in sc.posthoc_claims(phase.get("verdicts", {})) else " (interaction)"
    parts = [("high-norm − normal-norm", inter, "ndcg")] + [(f, g, "ndcg") for f, g in sc.family_gains(raw, th).items()]
    return headline(parts, word=bold(inter.word) + tag)


def _claim_headline(r: Results, claim: str) -> Headline:
    """One claim's nDCG@10 parts, from the OOD confirmation when present with the ``full`` run's beside it."""
    full = load_phase(r)[2][claim]
    earlier = headline(_ndcg_parts(full), word=bold(full.word))
    c = load_confirm(r)
    if c is None:
        return earlier
    return _beside(headline(_ndcg_parts(c.v[claim]), word=bold(c.v[claim].word)), earlier)


def fix_headline(r: Results) -> Headline:
    return _claim_headline(r, "rescaling_fixes")


def over_rescaling_headline(r: Results) -> Headline:
    return _claim_headline(r, "over_rescaling")


CLAIMS: list[Claim] = [
    Claim("A large MLM-head norm degrades SPLADE, starting from a very high loss and ending in a poor minimum",
          "BEIR-13 nDCG@10: ModernBERT 0.127 vs BERT 0.370", SPLADE_DOCS + "#confirmatory-run-full-seeds-9101-9105), " + OOD_DOCS,
          FILES, degradation_row, optional=OPTIONAL, headline=degradation_headline),
    Claim("Dividing W_head by k before training fixes it", "ModernBERT 0.405 at k = 16",
          SPLADE_DOCS + "#confirmatory-run-full-seeds-9101-9105), " + OOD_DOCS + ", [at scale](docs/splade_at_scale.md)",
          FILES, fix_row, optional=OPTIONAL, headline=fix_headline),
    Claim("Rescaling a normal-norm head too far hurts or collapses retrieval (RoBERTa best k = 2; ALBERT hurt by "
          "rescaling)", "no number", SPLADE_DOCS + "#confirmatory-run-full-seeds-9101-9105), " + OOD_DOCS,
          FILES, over_rescaling_row, optional=OPTIONAL, headline=over_rescaling_headline),
    Claim("The SPLADE grid: 7 backbones × k in {1, ..., 32} on MS MARCO, BEIR-13", "table of the seed",
          "[SPLADE at scale](docs/splade_at_scale.md)",
          verdict_text="**not run** (needs GPUs this project did not have); pipeline tested end to end on fixtures",
          headline_text=Headline("**not run**", "needs GPUs; pipeline tested on fixtures")),
]
