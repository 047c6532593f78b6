"""The synthetic SPT claims' README rows (:data:`CLAIM_ROWS`), over the verdict functions and the claims table of
:mod:`initlab.synthetic.spt.claim_verdicts`, whose names are re-exported here.

The README rows of these claims (:data:`CLAIM_ROWS`, one :class:`initlab.experiment.rows.Claim` each, rendered by
:mod:`initlab.app.docgen.claims`) follow the verdict functions.

The README's synthetic SPT rows, from the saved run summaries (``synthetic_spt_<preset>/summary.json``, the
``causal``, ``full`` and ``default`` presets): :mod:`initlab.synthetic.spt.claims` on ``summary.per_seed``, with the
thresholds saved in the run's config. A cell shows every run that tested the claim, the newest preregistered run
(``causal``) first; the README's short cells come from the first run that tested it. The earlier (2026-11-30) run
is cited only for claims the current runs do not test. Also the side-by-side tables of ``python -m initlab.app.docgen.claims --earlier-spt / --compare-spt``.
"""

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from initlab.config import from_dict
from initlab.evidence import families, rules
from initlab.evidence.rules import INCONCLUSIVE, NOT, NOT_RUN, REPRODUCED, Verdict
from initlab.experiment import text
from initlab.experiment.rows import Claim, Headline, Results, b, headline, one, seeds_text
from initlab.synthetic.spt.claim_verdicts import (CLAIMS, SPT_FAMILIES, ClaimSpec, Raw, SPTThresholds, as_raw, by_id,
                                                  causal_nonuniform, causal_nopos, causal_pooling, causal_prior,
                                                  cross_data, depth, evaluate_all, evaluate_corrected, few_epochs,
                                                  ffn, frozen_attn, mechanism, proximity, qk, qkvo, seed_plan,
                                                  spt_gain, spt_gain_matched)

__all__ = ["SPTThresholds", "Raw", "CLAIMS", "ClaimSpec", "spt_gain", "spt_gain_matched", "proximity", "qkvo", "qk",
           "few_epochs", "frozen_attn", "ffn", "depth", "cross_data", "causal_prior", "causal_nopos",
           "causal_nonuniform", "causal_pooling", "mechanism", "evaluate_all", "evaluate_corrected", "SPT_FAMILIES",
           "SPT_RUNS", "SPT_EARLIER", "CLAIM_ROWS", "spt_runs", "proximity_row", "spt_gain_row", "attention_weights_row",
           "few_epochs_other_data_row", "frozen_ffn_row", "causal_row", "earlier_spt_table", "spt_comparison_table", "seed_plan", "by_id", "as_raw"]


# --- the README rows of these claims (initlab.app.docgen.claims renders them) ---
#: the SPT runs behind the rows, in the order a row shows them: the causal round's preregistered confirmatory run
#: (seeds 8271-8274: the SPT gain, proximity and the causal arms), then the `full` one (seeds 8201-8208: every other
#: claim), then `default`: (preset, file)
SPT_RUNS = (("causal", "synthetic_spt_causal/summary.json"), ("full", "synthetic_spt_full/summary.json"),
            ("default", "synthetic_spt_default/summary.json"))
#: the earlier (2026-11-30) confirmatory run: cited, under today's interval rules, only for claims the current
#: runs do not test (depth, other data), and labelled as the earlier protocol (untuned scratch, fixed budgets)
SPT_EARLIER = "synthetic_spt_earlier/summary.json"
SPT_DOCS = "[synthetic SPT](docs/synthetic_spt.md)"
_SPT_FILES = tuple(f for _, f in SPT_RUNS) + (SPT_EARLIER,)


def _spt_thresholds(cfg: Mapping[str, Any]) -> SPTThresholds:
    return from_dict(SPTThresholds, cfg["thresholds"])


def spt_runs(r: Results) -> list[tuple[str, dict[str, Any], dict[str, Verdict]]]:
    """``(label, summary file, verdicts)`` of every SPT run present, strongest first; the label names the preset,
    the seeds and the preregistration commit. The verdicts are Holm-corrected within the declared families
    (:func:`initlab.synthetic.spt.claims.evaluate_corrected`); a saved verdict record must agree with the
    uncorrected recomputation."""
    out = []
    for preset, name in SPT_RUNS:
        if name not in r:
            continue
        s = r[name]
        th = _spt_thresholds(s["config"])
        raw = as_raw(s["summary"]["per_seed"])
        if "verdicts" not in s:  # every saved run carries the verdicts it was written with (SPLADE's rule too)
            raise rules.VerdictRecordError(f"{name}: no saved verdict record ('verdicts'); a run's summary must keep "
                                           "the verdicts it was written with (re-collect it with --collect-spt)")
        u = evaluate_all(raw, th)  # the record holds uncorrected words; claims added later are not run in it
        rules.check_record(s["verdicts"], {k: v for k, v in u.items() if k in s["verdicts"] or v.word != NOT_RUN}, name)
        check_spt_summary(s, name)
        vs = evaluate_corrected(raw, th)
        prereg = f", preregistered in `{s['preregistration']}`" if s.get("preregistration") else ""
        partial = ", partial run" if s.get("partial") else ""
        out.append((f"`{preset}` ({seeds_text(record_seeds(s['summary']['per_seed']))}{prereg}{partial})", s, vs))
    return out


def record_seeds(per_seed: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[int]:
    """The seeds of a run's per-seed records (every condition's), sorted: what its rows name, never the config."""
    return sorted({int(rec["seed"]) for recs in per_seed.values() for rec in recs})


def _paired(per_seed: Mapping[str, Sequence[Mapping[str, Any]]], cond: str, control: str = "scratch") -> list[float]:
    """Per-seed ``test_acc`` differences ``cond - control`` over the seeds both hold, in seed order."""
    a = {int(x["seed"]): float(x["test_acc"]) for x in per_seed.get(cond, [])}
    c = {int(x["seed"]): float(x["test_acc"]) for x in per_seed.get(control, [])}
    return [a[k] - c[k] for k in sorted(a) if k in c]


def epoch_curve(per_seed: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[tuple[int, float, float]]:
    """``(SPT epochs, mean, sd)`` of the per-seed gain over scratch of every ``spt_e<N>`` condition, from the
    records (sd NaN for one seed)."""
    out = []
    for cond in per_seed:
        if cond.startswith("spt_e") and cond[len("spt_e"):].isdigit():
            d = _paired(per_seed, cond)
            if d:
                out.append((int(cond[len("spt_e"):]), statistics.mean(d),
                            statistics.stdev(d) if len(d) > 1 else math.nan))
    return sorted(out)


def check_spt_summary(s: Mapping[str, Any], where: str) -> None:
    """A synthetic SPT summary's stored per-condition numbers (seed counts, mean test accuracy, the SPT-epoch gains)
    must be what its per-seed records give.

    Raises:
        initlab.evidence.rules.SummaryRecordError: naming ``where`` and each field that differs.
    """
    per = s["summary"]["per_seed"]
    fields = []
    for c in s["summary"].get("conditions", []):
        recs = per.get(c["condition"])
        if recs is None:
            continue
        name = c["condition"]
        if "n_seeds" in c:
            fields.append((f"{name}.n_seeds", c["n_seeds"], len(recs)))
        if "test_acc_mean" in c:
            fields.append((f"{name}.test_acc_mean", c["test_acc_mean"], statistics.mean(float(x["test_acc"]) for x in recs)))
        if name.startswith("spt_e") and "diff_mean" in c and _paired(per, name):
            fields.append((f"{name}.diff_mean", c["diff_mean"], statistics.mean(_paired(per, name))))
    rules.check_summary(where, fields)


def _ran(vs: Mapping[str, Verdict], ids: Sequence[str]) -> bool:
    return any(vs[i].word != NOT_RUN for i in ids)


def _per_run(r: Results, cell, ids: Sequence[str]) -> str:
    """Every run that tested one of the claims ``ids``, each as ``label: cell.``; **not run** when none did."""
    runs = [(label, s, vs) for label, s, vs in spt_runs(r) if _ran(vs, ids)]
    if not runs:
        return b(NOT_RUN)
    return " ".join(f"{label}: {cell(s, vs)}." for label, s, vs in runs)


def proximity_row(r: Results) -> str:
    def cell(s, vs):
        v = vs["proximity"]
        if v.word == NOT_RUN:
            return one(v)
        u = s["summary"]["uniform_proximity"]
        return (f"{b(v.word)}: SPT − scratch first-layer proximity mass at fine-tuning start "
                f"{one(v.parts[0], 'mass').split(': ', 1)[1]}; scratch, end − start of fine-tuning "
                f"{one(v.parts[1], 'mass').split(': ', 1)[1]} (uniform attention {u:.3f})")
    return _per_run(r, cell, ["proximity"])


def earlier_spt(r: Results, claim_id: str) -> Verdict | None:
    """The earlier run's verdict of ``claim_id`` under today's rules (None when its file is absent)."""
    if SPT_EARLIER not in r:
        return None
    s = r[SPT_EARLIER]
    th = SPTThresholds(**{k: v for k, v in s["config"]["thresholds"].items()
                                     if k in ("min_gain", "margin", "min_share")})
    return by_id(claim_id).verdict(earlier_spt_raw(s), th)


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
    parts = "; ".join(f"{n} {one(p).replace('**', '')}".strip() for n, p in zip(names, v.parts))
    return (f". {what}: no result from this round's runs; the earlier run ({seeds}, 2026-11-30; a superseded "
            f"protocol: untuned scratch, fixed budgets; not this round's verdict) under today's rules read "
            f"{v.word} ({parts}).")


def spt_gain_row(r: Results) -> str:
    def cell(s, vs):
        out = [f"SPT − scratch {one(vs['spt_gain'])}"]
        if vs["spt_gain_matched"].word != NOT_RUN:
            out.append(f"against compute-matched scratch {one(vs['spt_gain_matched'])}")
        d = vs["depth"]
        if d.word != NOT_RUN:
            depths = [f"depth {L}" for L in sorted(s["config"].get("depths", [1, 2, 4])) if L != 1]
            out.append(f"every depth: {b(d.word)} (" + "; ".join(f"{n} {one(p)}" for n, p in zip(depths, d.parts[1:])) + ")")
        return "; ".join(out)
    return (_per_run(r, cell, ["spt_gain", "spt_gain_matched", "depth"])
            + _earlier_note(r, "depth", "Depth 1, 2, 4", ["depth 1", "depth 2", "depth 4"]))


def attention_weights_row(r: Results) -> str:
    def cell(s, vs):
        out = [f"W_Q/W_K/W_V/W_O share {one(vs['qkvo'])}", f"W_Q, W_K alone share {one(vs['qk'])}"]
        mech = [("mech_hybrid_qk_emb", "with the embeddings"), ("mech_hybrid_qk_ln", "with the LayerNorms"),
                ("mech_hybrid_qk_emb_ln", "with both"), ("mech_attn_qk", "in the attention-only model")]
        shares = [f"{label} {vs[k].estimate:.2f} {text.interval(vs[k], 'share')}" for k, label in mech
                  if vs[k].word != NOT_RUN]
        if shares:
            out.append("W_Q, W_K share " + ", ".join(shares) + " (mechanism rows)")
        return "; ".join(out)
    return _per_run(r, cell, ["qkvo", "qk"])


def few_epochs_other_data_row(r: Results) -> str:
    def cell(s, vs):
        out = [f"few epochs ({_spt_thresholds(s['config']).few_epochs}): share {one(vs['few_epochs'])}"]
        curve = epoch_curve(s["summary"]["per_seed"])  # from the per-seed records, never the stored means
        if curve:
            out.append("SPT-epoch curve, gain over scratch (mean ± sd, points): " + ", ".join(
                f"{e}: {100 * m:+.1f}" + (f" ± {100 * sd:.1f}" if math.isfinite(sd) else "") for e, m, sd in curve))
        cross = vs["cross_data"]
        if cross.word != NOT_RUN:
            names = ("count-task inputs", "i.i.d. tokens")
            out.append(f"other data: {b(cross.word)} (" + "; ".join(f"{n} {one(p)}" for n, p in zip(names, cross.parts)) + ")")
        return "; ".join(out)
    return (_per_run(r, cell, ["few_epochs", "cross_data"])
            + _earlier_note(r, "cross_data", "Other data", ["count-task inputs", "i.i.d. tokens"]))


def frozen_ffn_row(r: Results) -> str:
    def cell(s, vs):
        m = 100 * _spt_thresholds(s["config"]).margin
        return (f"frozen attention − scratch {one(vs['frozen_attn'])}; FFN only − scratch {one(vs['ffn'])} "
                f"(equivalent: the 90 % interval inside ±{m:g} points)")
    return _per_run(r, cell, ["frozen_attn", "ffn"])


#: the causal arms of the round's confirmatory run: (claim id, what the arm is, its preregistered prediction)
_CAUSAL = (("causal_prior", "label-only with a fixed proximity (ALiBi) prior, share of SPT's gain", "reproduced"),
           ("causal_nopos", "SPT without position codes, share of SPT's gain", "not reproduced"),
           ("causal_nonuniform", "a non-uniform random start (W_Q, W_K x4) − scratch", "not reproduced"),
           ("causal_pooling", "last-token pooling − scratch", "not reproduced"))

#: the claims whose preregistered prediction is negative (docs/synthetic_spt.md, section 9.4), with what their
#: "not reproduced" means in words: such a row reads what was predicted and whether it held, never a bare
#: "not reproduced" (which would read as a failed prediction)
PREDICTED_NEGATIVE = {"causal_nopos": "gives under half of SPT's gain", "causal_nonuniform": "no 5-point gain",
                      "causal_pooling": "no 5-point gain"}

#: cells that finished after their run's preregistered deadline (docs/synthetic_spt.md, section 9.6): run preset ->
#: condition -> seeds. Reported apart: a row whose verdict needs them says so and gives the verdict without them.
LATE_CELLS = {"causal": {"lastpool_scratch": (8273, 8274)}}


def claim_word(claim_id: str, v: Verdict) -> str:
    """``v``'s word in bold as a row shows it: for a predicted negative (:data:`PREDICTED_NEGATIVE`) a "not
    reproduced" reads ``**<what it means>, as predicted**``, a "reproduced" ``**reproduced, against the
    prediction**``; every other word as it is."""
    if claim_id in PREDICTED_NEGATIVE:
        if v.word == NOT:
            return b(f"{PREDICTED_NEGATIVE[claim_id]}, as predicted")
        if v.word == REPRODUCED:
            return b("reproduced, against the prediction")
    return b(v.word)


def _prediction(v: Verdict, pred: str) -> str:
    if v.word == NOT_RUN:
        return ""
    if v.word == INCONCLUSIVE:
        return " (prediction undecided)"
    return " (prediction met)" if v.word == pred else f" (predicted {pred}: not met)"


def _late(preset: str, claim_id: str) -> str:
    """`` [late cells: ...]`` for a claim of run ``preset`` whose conditions include cells finished after the run's
    deadline (:data:`LATE_CELLS`); empty otherwise. By the preregistered budget rule such a claim had no verdict at
    the deadline, so its word rests on the late cells."""
    late = LATE_CELLS.get(preset, {})
    conds = {"causal_pooling": ("lastpool_scratch",), "causal_nonuniform": ("qkscale_scratch",),
             "causal_nopos": ("spt_nopos",), "causal_prior": ("alibi_scratch",)}.get(claim_id, ())
    hit = {c: late[c] for c in conds if c in late}
    if not hit:
        return ""
    cells = "; ".join(f"{c} of {seeds_text(list(seeds))}" for c, seeds in hit.items())
    return (f" [late cells: {cells} finished after the preregistered deadline; at the deadline the budget rule made "
            "no claim of it, so this word rests on late cells]")


def causal_row(r: Results) -> str:
    """The interventions on the explanation, each with its preregistered prediction beside the verdict, and any
    late cells it needs reported apart."""
    def cell(s, vs):
        preset = next((p for p, f in SPT_RUNS if r.get(f) is s), "")
        out = []
        for k, what, pred in _CAUSAL:
            v = vs[k]
            if v.word == NOT_RUN:
                continue
            body = one(v)
            body = claim_word(k, v) + body[len(b(v.word)):] if body.startswith(b(v.word)) else body
            out.append(f"{what}: {body}{_prediction(v, pred)}{_late(preset, k)}")
        return "; ".join(out)
    return _per_run(r, cell, [k for k, _, _ in _CAUSAL])


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
    th = SPTThresholds(**{k: v for k, v in s["config"]["thresholds"].items()
                                     if k in ("min_gain", "margin", "min_share")})
    raw = earlier_spt_raw(s)
    lines = ["| claim | statistic | verdict under the interval rules |", "| --- | --- | --- |"]
    for c in CLAIMS:
        if c.id == "proximity":
            continue
        v = c.verdict(raw, th)
        if v.rule == "all_of" and v.word != NOT_RUN:
            cell = f"{b(v.word)} (" + "; ".join(one(p) for p in v.parts) + ")"
        else:
            cell = one(v)
        lines.append(f"| {c.title} | {c.statistic} | {cell} |")
    return "\n".join(lines)


#: The words of an exploratory run's cells: what its numbers were consistent with, never a confirmatory word.
EXPLORATORY_WORDS = {b(REPRODUCED): b("consistent"), b(rules.PARTLY): b("consistent in part"),
                     b(NOT): b("not consistent")}


def exploratory_words(cell: str) -> str:
    """A rendered cell of an exploratory run (saved with an empty ``preregistration``) with each bold confirmatory
    word replaced by :data:`EXPLORATORY_WORDS` ("reproduced" -> "consistent"); "inconclusive" and "not run" stay."""
    for word, plain in EXPLORATORY_WORDS.items():
        cell = cell.replace(word, plain)
    return cell


def spt_comparison_table(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Every SPT claim side by side over several runs (``(label, summary file)`` pairs, as saved in docs/results):
    one markdown row per claim, one column per run, each cell the verdict recomputed from that run's per-seed
    numbers under today's rules, Holm-corrected within the declared families; a run saved as exploratory (empty
    ``preregistration``) reads with :func:`exploratory_words`, never a confirmatory word. The earlier (2026-11-30) run's summary, which saved per-seed accuracies only, is
    read with :func:`earlier_spt_raw` (its proximity cell reads not run)."""
    cols = []
    for label, s in runs:
        if "per_seed" in s["summary"]:
            vs = evaluate_corrected(as_raw(s["summary"]["per_seed"]), _spt_thresholds(s["config"]))
        else:
            raw = earlier_spt_raw(s)
            th = SPTThresholds(**{k: v for k, v in s["config"]["thresholds"].items()
                                             if k in ("min_gain", "margin", "min_share")})
            vs = {c.id: (rules.not_run("all_of", ["per-seed proximity (not saved by that run)"]) if c.id == "proximity"
                         else c.verdict(raw, th)) for c in CLAIMS}
            vs = families.corrected(vs, SPT_FAMILIES)
        seeds = record_seeds(s["summary"]["per_seed"]) if "per_seed" in s["summary"] else s["config"]["seeds"]
        exploratory = s.get("preregistration") == ""  # saved by an exploratory run: no confirmatory word
        cols.append((f"{label}{', exploratory' if exploratory else ''} ({seeds_text(seeds)})", vs, exploratory))
    lines = ["| claim | " + " | ".join(c for c, _, _ in cols) + " |", "| --- |" + " --- |" * len(cols)]
    for c in CLAIMS:
        cells = []
        for _, vs, exploratory in cols:
            v = vs[c.id]
            if v.rule == "all_of" and v.word != NOT_RUN:
                cell = f"{b(v.word)} (" + "; ".join(one(p, "mass" if c.id == "proximity" else None) for p in v.parts) + ")"
            else:
                cell = one(v)
            cells.append(exploratory_words(cell) if exploratory else cell)
        lines.append(f"| {c.title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _headline(r: Results, cell, ids: Sequence[str]) -> Headline:
    """The README cells from the first run (in :data:`SPT_RUNS` order) that tested one of the claims ``ids``."""
    runs = [(s, vs) for _, s, vs in spt_runs(r) if _ran(vs, ids)]
    if not runs:
        return Headline(b(NOT_RUN), "—")
    return cell(*runs[0])


def proximity_headline(r: Results) -> Headline:
    def cell(s, vs):
        v = vs["proximity"]
        if not v.parts:
            return headline([("proximity mass", v, "mass")])
        word = (f"{b(v.word)} (SPT's pattern: {b(v.parts[0].word)}; scratch unchanged, end − start: "
                f"{b(v.parts[1].word)})") if v.word != v.parts[0].word or v.word != v.parts[1].word else b(v.word)
        return headline([("SPT − scratch proximity mass", v.parts[0], "mass"),
                         ("scratch, end − start of fine-tuning", v.parts[1], "mass")], word=word)
    return _headline(r, cell, ["proximity"])


def spt_gain_headline(r: Results) -> Headline:
    return _headline(r, lambda s, vs: headline([("SPT − scratch", vs["spt_gain"], "points")]), ["spt_gain"])


def attention_weights_headline(r: Results) -> Headline:
    return _headline(r, lambda s, vs: headline([("W_Q, W_K share", vs["qk"], "share"),
                                                ("all four share", vs["qkvo"], "share")]), ["qk", "qkvo"])


def few_epochs_other_data_headline(r: Results) -> Headline:
    def cell(s, vs):
        parts = [("few epochs share", vs["few_epochs"], "share")]
        cross = vs["cross_data"]
        if cross.word != NOT_RUN:
            parts += [(f"other data, {n}", p, "points") for n, p in zip(("count-task inputs", "i.i.d. tokens"), cross.parts)]
        word = f"few epochs: {b(vs['few_epochs'].word)}; other data: {b(cross.word)}"
        return headline(parts, word=word)
    return _headline(r, cell, ["few_epochs", "cross_data"])


def frozen_ffn_headline(r: Results) -> Headline:
    return _headline(r, lambda s, vs: headline([("frozen attention − scratch", vs["frozen_attn"], "points"),
                                                ("FFN only − scratch", vs["ffn"], "points")]), ["frozen_attn", "ffn"])


def causal_headline(r: Results) -> Headline:
    def cell(s, vs):
        p, n = vs["causal_prior"], vs["causal_nopos"]
        word = f"prior: {claim_word('causal_prior', p)}; no positions: {claim_word('causal_nopos', n)}"
        return headline([("proximity prior share", p, "share"), ("SPT without positions share", n, "share")],
                        word=word)
    return _headline(r, cell, ["causal_prior", "causal_nopos"])


CLAIM_ROWS: list[Claim] = [
    Claim("Self-pretraining learns a proximity (relative-position) attention pattern from sinusoidal positions; label "
          "training does not", "mechanism", SPT_DOCS, (), proximity_row, optional=_SPT_FILES,
          headline=proximity_headline),
    Claim("Self-pretraining gives a large accuracy gain over training from scratch, already at one layer",
          "LRA: +17 (Pathfinder) to +34 points (Image)", SPT_DOCS, (), spt_gain_row, optional=_SPT_FILES,
          headline=spt_gain_headline),
    Claim("Initialising W_Q, W_K (or all attention weights) from SPT recovers most of the gain", "most of the gain",
          SPT_DOCS, (), attention_weights_row, optional=_SPT_FILES,
          headline=attention_weights_headline),
    Claim("The gain appears after few SPT epochs, and with SPT on other data", "gains in the ablations", SPT_DOCS,
          (), few_epochs_other_data_row, optional=_SPT_FILES,
          headline=few_epochs_other_data_headline),
    Claim("Attention frozen at init fine-tunes about as well as attention trained from labels; the FFN alone carries "
          "nothing", "ablations", SPT_DOCS, (), frozen_ffn_row, optional=_SPT_FILES,
          headline=frozen_ffn_headline),
    Claim("Interventions on the explanation: a fixed proximity prior gives label-only training SPT's gain; SPT without "
          "position codes gives none", "the explanation's prediction", SPT_DOCS, (), causal_row,
          optional=_SPT_FILES, headline=causal_headline),
]
