"""The verdict cells of the README's claims table, each computed from raw numbers in saved result files.

Every function here takes the loaded result files (``{file name under docs/results: parsed JSON}``) and returns
one markdown cell. No saved verdict word is used: every verdict is recomputed by the one verdict function of its
claim in :mod:`initlab.evidence` from the saved raw per-seed numbers, and a saved verdict record, where a file
keeps one, must agree with that recomputation (else :class:`initlab.evidence.rules.VerdictRecordError`):

* theory (``theory_verify.json``): :func:`initlab.evidence.theory_claims.theorem` from the checks' recorded errors
  and tolerances;
* synthetic SPT (``synthetic_spt_<preset>/summary.json``, the ``full`` and ``default`` presets):
  :mod:`initlab.evidence.spt_claims` on ``summary.per_seed``, with the thresholds saved in the run's config;
* CPU ListOps (``lra_listops_summary.json``): :func:`initlab.evidence.lra_claims.listops_gain` on ``per_seed``;
* synthetic SPLADE: :mod:`initlab.paper_figs.claims_splade`;
* the diagnosis (``diagnose_validation/records.json``): :func:`initlab.evidence.diagnose_claims.predicts_gain`
  on the per-setting predictions and per-seed accuracies of both arms.

Every cell names the preset and seeds of the run it comes from. Brackets are intervals of the claim's rule
(95 % t for a gain, 90 % TOST for an equivalence, 95 % Fieller for a share; :mod:`initlab.evidence.rules`).

Errors: a missing key or a wrong type in a file surfaces as ``KeyError`` / ``TypeError`` / ``ValueError``;
:mod:`initlab.paper_figs.claims` turns it into an error naming the file.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from initlab.config import from_dict
from initlab.evidence import diagnose_claims, lra_claims, rules, spt_claims, text, theory_claims
from initlab.evidence.rules import NOT_RUN, Verdict

Results = Mapping[str, Any]

THEORY = "theory_verify.json"
#: the SPT runs behind the rows, strongest evidence first: (preset, file)
SPT_RUNS = (("full", "synthetic_spt_full/summary.json"), ("default", "synthetic_spt_default/summary.json"))
#: the earlier (2026-11-30) confirmatory run: cited, under today's interval rules, only for claims the current
#: runs do not test (depth, other data), and labelled as the earlier protocol (untuned scratch, fixed budgets)
SPT_EARLIER = "synthetic_spt_earlier/summary.json"
LRA = "lra_listops_summary.json"
DIAGNOSE = "diagnose_validation/records.json"
#: a measured blind fraction above this is "not blind" (float64 rounding is ~1e-16)
BLIND_ZERO = 1e-6


def b(word: str) -> str:
    return f"**{word}**"


def seeds_text(seeds: Sequence[int]) -> str:
    """``[7301, ..., 7305] -> 'seeds 7301-7305'`` for a consecutive run, else the list."""
    s = sorted(seeds)
    if len(s) > 2 and s == list(range(s[0], s[-1] + 1)):
        return f"seeds {s[0]}-{s[-1]}"
    return ("seed " if len(s) == 1 else "seeds ") + ", ".join(map(str, s))


# ------------------------------------------------------------------------------------------------
# theory
# ------------------------------------------------------------------------------------------------
def _checks_text(statements: list[dict[str, Any]], cases: int) -> str:
    """The kinds of check every statement ran (read from the saved check names), e.g. ``sympy derivations,
    float64 autograd identities and finite differences (20 random cases each)``."""
    kinds = [label for label, key in (("sympy derivations", "sympy"), ("float64 autograd identities", "autograd"),
                                      ("finite differences", "central difference"))
             if all(any(key in name for name in st["checks"]) for st in statements)] or ["checks"]
    listed = kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} and {kinds[-1]}"
    return f"{listed} ({cases} random cases each)"


def theory_row(r: Results) -> str:
    v = r[THEORY]
    st = v["statements"]
    verdict, cfg = theory_claims.theorem(v), v["config"]
    how = _checks_text(st, cfg["cases"])
    if verdict.reason:
        return f"{b(verdict.word)}: {verdict.reason} ({how})"
    measured = {s["statement"]: s["measured"] for s in st}
    per_mask = statistics.median(measured["T6"]["dropout_mc"]["per_mask_median_blind_fraction"])
    stacks = [t for t in measured["T7"]["table"] if t["spec"]["residual"] and t["max"] > BLIND_ZERO]
    parts = [name for name, on in (("FFN", lambda sp: sp["ffn"]), ("LayerNorm", lambda sp: sp["layernorm"]),
                                   ("random later attention", lambda sp: sp["later_attention"] == "random"))
             if any(on(t["spec"]) for t in stacks)]
    with_ = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} or {parts[-1]}"
    scope = (f"residual stacks with {with_} are not ({min(t['min'] for t in stacks):.2f}-"
             f"{max(t['max'] for t in stacks):.2f})" if stacks else "every measured residual stack is blind")
    return (f"{b(verdict.word)}: all {len(st)} statements ({st[0]['statement']}-{st[-1]['statement']}) pass {how}; the "
            f"closest check is {verdict.margin:.0f}x inside its tolerance. Scope: one dropout mask is not blind (median "
            f"blind fraction {per_mask:.2f} over verify's {cfg['cases']} random T6 cases), its expectation is; {scope}")


# ------------------------------------------------------------------------------------------------
# synthetic SPT
# ------------------------------------------------------------------------------------------------
def _spt_thresholds(cfg: Mapping[str, Any]) -> spt_claims.SPTThresholds:
    return from_dict(spt_claims.SPTThresholds, cfg["thresholds"])


def spt_runs(r: Results) -> list[tuple[str, dict[str, Any], dict[str, Verdict]]]:
    """``(label, summary file, verdicts)`` of every SPT run present, strongest first; the label names the preset,
    the seeds and the preregistration commit. A saved verdict record must agree with the recomputation."""
    out = []
    for preset, name in SPT_RUNS:
        if name not in r:
            continue
        s = r[name]
        th = _spt_thresholds(s["config"])
        vs = spt_claims.evaluate_all(spt_claims.as_raw(s["summary"]["per_seed"]), th)
        if "verdicts" in s:
            rules.check_record(s["verdicts"], vs, name)
        prereg = f", preregistered in `{s['preregistration']}`" if s.get("preregistration") else ""
        partial = ", partial run" if s.get("partial") else ""
        out.append((f"`{preset}` ({seeds_text(s['config']['seeds'])}{prereg}{partial})", s, vs))
    return out


_UNIT = {"gain": "points", "equivalence": "points", "share": "share"}


def _one(v: Verdict, unit: str | None = None) -> str:
    return text.describe(v, unit or _UNIT.get(v.rule, "points"))


def _per_run(r: Results, cell) -> str:
    runs = spt_runs(r)
    if not runs:
        return b(NOT_RUN)
    return " ".join(f"{label}: {cell(s, vs)}." for label, s, vs in runs)


def proximity_row(r: Results) -> str:
    def cell(s, vs):
        v = vs["proximity"]
        if v.word == NOT_RUN:
            return _one(v)
        u = s["summary"]["uniform_proximity"]
        return (f"{b(v.word)}: SPT − scratch first-layer proximity mass at fine-tuning start "
                f"{_one(v.parts[0], 'mass').split(': ', 1)[1]}; scratch, end − start of fine-tuning "
                f"{_one(v.parts[1], 'mass').split(': ', 1)[1]} (uniform attention {u:.3f})")
    return _per_run(r, cell)


def earlier_spt(r: Results, claim_id: str) -> Verdict | None:
    """The earlier run's verdict of ``claim_id`` under today's rules (None when its file is absent)."""
    if SPT_EARLIER not in r:
        return None
    s = r[SPT_EARLIER]
    th = spt_claims.SPTThresholds(**{k: v for k, v in s["config"]["thresholds"].items()
                                     if k in ("min_gain", "margin", "min_share")})
    return spt_claims.by_id(claim_id).verdict(earlier_spt_raw(s), th)


def _earlier_note(r: Results, claim_id: str, what: str, parts_names: Sequence[str] | None = None) -> str:
    """`` Not in this round's runs; the earlier run (...): VERDICT (parts).`` when no current run has the claim."""
    runs = spt_runs(r)
    if any(vs[claim_id].word != NOT_RUN for _, _, vs in runs):
        return ""
    v = earlier_spt(r, claim_id)
    if v is None or v.word == NOT_RUN:
        return ""
    seeds = seeds_text(r[SPT_EARLIER]["config"]["seeds"])
    names = parts_names or [""] * len(v.parts)
    parts = "; ".join(f"{n} {_one(p).replace('**', '')}".strip() for n, p in zip(names, v.parts))
    return (f". {what}: no result from this round's runs; the earlier run ({seeds}, 2026-11-30; a superseded "
            f"protocol: untuned scratch, fixed budgets; not this round's verdict) under today's rules read "
            f"{v.word} ({parts}).")


def spt_gain_row(r: Results) -> str:
    def cell(s, vs):
        out = [f"SPT − scratch {_one(vs['spt_gain'])}"]
        if vs["spt_gain_matched"].word != NOT_RUN:
            out.append(f"against compute-matched scratch {_one(vs['spt_gain_matched'])}")
        d = vs["depth"]
        if d.word != NOT_RUN:
            depths = [f"depth {L}" for L in sorted(s["config"].get("depths", [1, 2, 4])) if L != 1]
            out.append(f"every depth: {b(d.word)} (" + "; ".join(f"{n} {_one(p)}" for n, p in zip(depths, d.parts[1:])) + ")")
        return "; ".join(out)
    return _per_run(r, cell) + _earlier_note(r, "depth", "Depth 1, 2, 4", ["depth 1", "depth 2", "depth 4"])


def attention_weights_row(r: Results) -> str:
    def cell(s, vs):
        out = [f"W_Q/W_K/W_V/W_O share {_one(vs['qkvo'])}", f"W_Q, W_K alone share {_one(vs['qk'])}"]
        mech = [("mech_hybrid_qk_emb", "with the embeddings"), ("mech_hybrid_qk_ln", "with the LayerNorms"),
                ("mech_hybrid_qk_emb_ln", "with both"), ("mech_attn_qk", "in the attention-only model")]
        shares = [f"{label} {vs[k].estimate:.2f} {text.interval(vs[k], 'share')}" for k, label in mech
                  if vs[k].word != NOT_RUN]
        if shares:
            out.append("W_Q, W_K share " + ", ".join(shares) + " (mechanism rows)")
        return "; ".join(out)
    return _per_run(r, cell)


def few_epochs_other_data_row(r: Results) -> str:
    def cell(s, vs):
        out = [f"few epochs ({_spt_thresholds(s['config']).few_epochs}): share {_one(vs['few_epochs'])}"]
        conds = {c["condition"]: c for c in s["summary"]["conditions"]}
        curve = sorted((int(n[len("spt_e"):]), c) for n, c in conds.items() if n.startswith("spt_e") and "diff_mean" in c)
        if curve:
            out.append("SPT-epoch curve, gain over scratch (mean ± sd, points): " + ", ".join(
                f"{e}: {100 * c['diff_mean']:+.1f}" + (f" ± {100 * c['diff_sd']:.1f}" if math.isfinite(c["diff_sd"]) else "")
                for e, c in curve))
        cross = vs["cross_data"]
        if cross.word != NOT_RUN:
            names = ("count-task inputs", "i.i.d. tokens")
            out.append(f"other data: {b(cross.word)} (" + "; ".join(f"{n} {_one(p)}" for n, p in zip(names, cross.parts)) + ")")
        return "; ".join(out)
    return _per_run(r, cell) + _earlier_note(r, "cross_data", "Other data", ["count-task inputs", "i.i.d. tokens"])


def frozen_ffn_row(r: Results) -> str:
    def cell(s, vs):
        m = 100 * _spt_thresholds(s["config"]).margin
        return (f"frozen attention − scratch {_one(vs['frozen_attn'])}; FFN only − scratch {_one(vs['ffn'])} "
                f"(equivalent: the 90 % interval inside ±{m:g} points)")
    return _per_run(r, cell)


def earlier_spt_raw(s: Mapping[str, Any]) -> dict[str, dict[int, dict[str, float]]]:
    """Per-seed raw numbers of the earlier (2026-11-30) confirmatory run's summary, which saved per-seed test
    accuracies (``test_acc_seeds``, in seed order) but only the mean proximity masses: the proximity claim is
    left out (it needs per-seed masses), every accuracy claim can be recomputed."""
    seeds = s["config"]["seeds"]
    return {c["condition"]: {sd: {"test_acc": a} for sd, a in zip(seeds, c["test_acc_seeds"])}
            for c in s["summary"]["conditions"]}


def earlier_spt_table(s: Mapping[str, Any]) -> str:
    """The earlier run's claims under today's interval rules (the thresholds it preregistered, today's
    tolerances), as a markdown table: claim | statistic | verdict."""
    th = spt_claims.SPTThresholds(**{k: v for k, v in s["config"]["thresholds"].items()
                                     if k in ("min_gain", "margin", "min_share")})
    raw = earlier_spt_raw(s)
    lines = ["| claim | statistic | verdict under the interval rules |", "| --- | --- | --- |"]
    for c in spt_claims.CLAIMS:
        if c.id == "proximity":
            continue
        v = c.verdict(raw, th)
        if v.rule == "all_of" and v.word != NOT_RUN:
            cell = f"{b(v.word)} (" + "; ".join(_one(p) for p in v.parts) + ")"
        else:
            cell = _one(v)
        lines.append(f"| {c.title} | {c.statistic} | {cell} |")
    return "\n".join(lines)


def spt_comparison_table(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Every SPT claim side by side over several runs (``(label, summary file)`` pairs, as saved in docs/results):
    one markdown row per claim, one column per run, each cell the verdict recomputed from that run's per-seed
    numbers under today's rules. The earlier (2026-11-30) run's summary, which saved per-seed accuracies only, is
    read with :func:`earlier_spt_raw` (its proximity cell reads not run)."""
    cols = []
    for label, s in runs:
        if "per_seed" in s["summary"]:
            vs = spt_claims.evaluate_all(spt_claims.as_raw(s["summary"]["per_seed"]), _spt_thresholds(s["config"]))
        else:
            raw = earlier_spt_raw(s)
            th = spt_claims.SPTThresholds(**{k: v for k, v in s["config"]["thresholds"].items()
                                             if k in ("min_gain", "margin", "min_share")})
            vs = {c.id: (rules.not_run("all_of", ["per-seed proximity (not saved by that run)"]) if c.id == "proximity"
                         else c.verdict(raw, th)) for c in spt_claims.CLAIMS}
        cols.append((f"{label} ({seeds_text(s['config']['seeds'])})", vs))
    lines = ["| claim | " + " | ".join(c for c, _ in cols) + " |", "| --- |" + " --- |" * len(cols)]
    for c in spt_claims.CLAIMS:
        cells = []
        for _, vs in cols:
            v = vs[c.id]
            if v.rule == "all_of" and v.word != NOT_RUN:
                cells.append(f"{b(v.word)} (" + "; ".join(_one(p, "mass" if c.id == "proximity" else None) for p in v.parts) + ")")
            else:
                cells.append(_one(v))
        lines.append(f"| {c.title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# CPU ListOps
# ------------------------------------------------------------------------------------------------
def lra_row(r: Results) -> str:
    v = r[LRA]
    head = f"{b('not run')} at LRA scale (presets match the authors' configs, deviations listed)"
    g = lra_claims.listops_gain(v)
    if g.word == NOT_RUN:
        return head + f"; CPU ListOps: {b('not run')}"
    text_ = (f"{head}; preregistered CPU ListOps (preset `{v['preset']}`, {seeds_text(v['seeds'])}): SPT − scratch "
             f"{_one(g)} against the preregistered +{100 * lra_claims.MIN_GAIN:g} points; test accuracy SPT "
             f"{v['spt_mean']:.3f} vs scratch {v['scratch_mean']:.3f}")
    if "prox_init_spt_mean" in v:  # the run saved seed means only: a number, no interval, no verdict
        text_ += (f"; first-layer proximity mass at fine-tuning start {v['prox_init_spt_mean']:.3f} after SPT vs "
                  f"{v['uniform_proximity_mean']:.3f} for uniform attention (seed means; no interval)")
    return text_


# ------------------------------------------------------------------------------------------------
# initlab diagnose
# ------------------------------------------------------------------------------------------------
def diagnose_row(r: Results) -> str:
    """The diagnosis claim: the all-of word, where the rule was right / wrong / undecided, and the correlation."""
    rec = r[DIAGNOSE]
    v = diagnose_claims.predicts_gain(rec)
    if v.word == NOT_RUN:
        return f"{b(NOT_RUN)} (no setting has {diagnose_claims.MIN_SEEDS} finished seeds yet)"
    c = diagnose_claims.confusion(rec)
    right = c["table"][("helps", "helps")] + c["table"][("does not help", "does not help")]
    wrong = c["table"][("helps", "does not help")] + c["table"][("does not help", "helps")]
    seeds = sorted({int(s) for x in rec["settings"].values() for s in x["seeds"]})
    out = (f"{b(v.word)} (preregistered rule, {len(rec['settings'])} synthetic settings, {seeds_text(seeds)}): right on "
           f"{len(right)} ({', '.join(right) or 'none'}), wrong on {len(wrong)} ({', '.join(wrong) or 'none'})")
    if c["undecided"]:
        need = [p.seeds_to_decide for p in v.parts if p.word == rules.INCONCLUSIVE]
        out += f", undecided on {len(c['undecided'])} ({', '.join(c['undecided'])}"
        out += f"; {max(need)} seeds would decide)" if need and all(n is not None for n in need) else ")"
    if c["not_run"]:
        out += f", not run on {', '.join(c['not_run'])}"
    k = diagnose_claims.correlation(rec)
    if not math.isnan(k["pearson"]):
        out += (f"; blind share vs SPT gain: Pearson {k['pearson']:.2f} [{k['pearson_lo']:.2f}, {k['pearson_hi']:.2f}], "
                f"Spearman {k['spearman']:.2f} [{k['spearman_lo']:.2f}, {k['spearman_hi']:.2f}] ({k['n']} settings)")
    return out
