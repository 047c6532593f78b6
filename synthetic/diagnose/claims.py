"""The claim "initlab's diagnosis predicts SPT's gain", one verdict function, on the saved per-setting records.

Imported as ``initlab.synthetic.diagnose.claims``. Input: ``records`` as written by
``python -m initlab.synthetic.diagnose.report`` (``docs/results/diagnose_validation/records.json``):
``{"settings": {name: {"predicted_helps": bool, "blind_share": float, "seeds": {seed: {"scratch": acc, "spt":
acc}}}}}`` (test accuracies as fractions at the best validation epoch). The preregistered analysis
(docs/diagnose.md, section 2):

* :func:`outcome` -- a setting's measured SPT gain ``spt − scratch`` (paired over seeds) by the gain rule
  (:func:`initlab.evidence.rules.gain`, 95 % t-interval, δ = :data:`MIN_GAIN` = 5 points, tolerance :data:`TOL`):
  *reproduced* = SPT helps; *partly* or *not reproduced* = it does not help by δ; *inconclusive*; fewer than
  :data:`MIN_SEEDS` seeds = *not run*;
* :func:`part` -- the prediction judged against that outcome: *reproduced* (they agree), *not reproduced*
  (they disagree), *inconclusive* (the outcome is undecided);
* :func:`predicts_gain` -- the claim: :func:`initlab.evidence.rules.all_of` over the settings with an outcome
  (an intersection-union test: *reproduced* only if the prediction is right on every setting);
* :func:`confusion` and :func:`correlation` -- the confusion table and the Pearson (Fisher-z 95 % interval) and
  Spearman (bootstrap 95 % interval) correlations between predicted blind share and mean measured gain;
* :func:`ceiling_forced` -- the decided settings whose outcome a ceiling forced: scratch already at
  :data:`CEILING` or above leaves no room for a gain of :data:`MIN_GAIN`, so "does not help" there tests nothing
  about the rule's blind share (reported beside the claim, not part of the preregistered analysis).

:data:`HEADLINE` names the setting the diagnosis exists for: the synthetic SPT experiment's own local task
(docs/diagnose.md, section 2).

The README rows of these claims (:data:`CLAIM_ROWS`, one :class:`initlab.experiment.rows.Claim` each, rendered by
:mod:`initlab.app.docgen.claims`) follow the verdict functions.

The README's diagnosis row: "initlab's diagnosis predicts SPT's gain", from ``diagnose_validation/records.json`` by
:func:`initlab.synthetic.diagnose.claims.predicts_gain` on the per-setting predictions and per-seed accuracies of both
arms (the preregistered analysis of docs/diagnose.md).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

import numpy as np

from initlab.evidence import rules
from initlab.evidence.rules import INCONCLUSIVE, NOT, NOT_RUN, PARTLY, REPRODUCED, Verdict
from initlab.experiment.rows import Claim, Headline, Results, b, one, seeds_text

__all__ = ["MIN_GAIN", "TOL", "MIN_SEEDS", "CEILING", "HEADLINE", "gains", "outcome", "part", "predicts_gain",
           "confusion", "correlation", "scratch_mean", "ceiling_forced", "listops_record", "listops_part", "DIAGNOSE",
           "LISTOPS_DIAGNOSIS", "LISTOPS_RUN", "CLAIM_ROWS", "diagnose_row", "diagnose_headline"]

MIN_GAIN = 0.05  # 5 points, the synthetic SPT experiment's δ
TOL = 0.002  # one test sequence in 512
MIN_SEEDS = 2
#: scratch's mean test accuracy at or above which a gain of MIN_GAIN is out of reach (1 − 0.95 = 5 points)
CEILING = 1.0 - MIN_GAIN
#: the setting of the synthetic SPT experiment's own task (local, T = 100, depth 1, mean pooling)
HEADLINE = "local"


def gains(rec: Mapping[str, Any]) -> list[float]:
    """Per-seed ``spt − scratch`` test accuracy of one setting record, in seed order."""
    seeds = rec.get("seeds") or {}
    return [float(seeds[s]["spt"]) - float(seeds[s]["scratch"]) for s in sorted(seeds, key=int)]


def outcome(rec: Mapping[str, Any]) -> Verdict:
    """The measured outcome of one setting (module docstring)."""
    d = gains(rec)
    if len(d) < MIN_SEEDS:
        return rules.not_run("gain", [f"{MIN_SEEDS} paired seeds (have {len(d)})"])
    return rules.gain(d, min_gain=MIN_GAIN, tol=TOL)


def helps(v: Verdict) -> bool | None:
    """True (SPT helps by δ), False (it does not), None (undecided or not run)."""
    if v.word == REPRODUCED:
        return True
    if v.word in (PARTLY, NOT):
        return False
    return None


def part(name: str, rec: Mapping[str, Any]) -> Verdict:
    """One setting's part of the claim: the prediction against the measured outcome (module docstring)."""
    o = outcome(rec)
    pred = bool(rec["predicted_helps"])
    label = f"{name}: predicted {'helps' if pred else 'does not help'}"
    if o.word == NOT_RUN:
        return dataclasses.replace(o, reason=f"{label}; {o.reason}")
    truth = helps(o)
    if truth is None:
        word = INCONCLUSIVE
    else:
        word = REPRODUCED if truth == pred else NOT
    return dataclasses.replace(o, word=word, rule="prediction", reason=label)


def predicts_gain(records: Mapping[str, Any]) -> Verdict:
    """The claim's verdict: all-of over the settings that have an outcome; ``not run`` when none has."""
    parts = [part(n, r) for n, r in records["settings"].items()]
    have = [p for p in parts if p.word != NOT_RUN]
    if not have:
        return rules.not_run("all_of", [p.reason for p in parts])
    v = rules.all_of(have, rule="all_of")
    missing = [p.reason for p in parts if p.word == NOT_RUN]
    return dataclasses.replace(v, reason="; ".join(missing) if missing else "")


def confusion(records: Mapping[str, Any]) -> dict[str, Any]:
    """``{"table": {(predicted, measured): [settings]}, "undecided": [settings], "not_run": [settings]}`` with
    predicted / measured in ``{"helps", "does not help"}``."""
    table: dict[tuple[str, str], list[str]] = {(p, m): [] for p in ("helps", "does not help") for m in ("helps", "does not help")}
    undecided, not_run = [], []
    for n, r in records["settings"].items():
        o = outcome(r)
        if o.word == NOT_RUN:
            not_run.append(n)
            continue
        t = helps(o)
        if t is None:
            undecided.append(n)
            continue
        table[("helps" if r["predicted_helps"] else "does not help", "helps" if t else "does not help")].append(n)
    return {"table": table, "undecided": undecided, "not_run": not_run}


def correlation(records: Mapping[str, Any], *, n_resamples: int = 9999, seed: int = 0) -> dict[str, float]:
    """Pearson r (Fisher-z 95 % interval, ``scipy.stats.pearsonr``) and Spearman rho (percentile bootstrap 95 %
    interval over settings, ``scipy.stats.bootstrap``) between the predicted blind share and the mean measured gain
    (points) over the settings with at least :data:`MIN_SEEDS` seeds. NaN where undefined (fewer than 3 settings,
    or a constant variable)."""
    from scipy import stats as ss

    xs, ys = [], []
    for r in records["settings"].values():
        d = gains(r)
        if len(d) >= MIN_SEEDS:
            xs.append(float(r["blind_share"]))
            ys.append(100.0 * float(np.mean(d)))
    out = {"n": len(xs), "pearson": math.nan, "pearson_lo": math.nan, "pearson_hi": math.nan,
           "spearman": math.nan, "spearman_lo": math.nan, "spearman_hi": math.nan}
    if len(xs) < 3 or np.ptp(xs) == 0 or np.ptp(ys) == 0:
        return out
    pr = ss.pearsonr(xs, ys)
    ci = pr.confidence_interval(0.95)
    out.update(pearson=float(pr.statistic), pearson_lo=float(ci.low), pearson_hi=float(ci.high))
    out["spearman"] = float(ss.spearmanr(xs, ys).statistic)

    def rho(x, y, axis=-1):
        """Spearman's rho of every resample at once (``(..., n)`` -> ``(...)``): the Pearson correlation of the
        average ranks, as ``scipy.stats.spearmanr``; 0 for a resample with a constant variable (no rank association)."""
        rx, ry = ss.rankdata(x, axis=axis), ss.rankdata(y, axis=axis)
        rx, ry = rx - rx.mean(axis=axis, keepdims=True), ry - ry.mean(axis=axis, keepdims=True)
        const = (np.ptp(x, axis=axis) == 0) | (np.ptp(y, axis=axis) == 0)
        den = np.sqrt((rx * rx).sum(axis=axis) * (ry * ry).sum(axis=axis))
        return np.where(const, 0.0, (rx * ry).sum(axis=axis) / np.where(const, 1.0, den))

    bs = ss.bootstrap((np.asarray(xs), np.asarray(ys)), rho, paired=True, vectorized=True, n_resamples=n_resamples,
                      method="percentile", random_state=np.random.default_rng(seed))
    out.update(spearman_lo=float(bs.confidence_interval.low), spearman_hi=float(bs.confidence_interval.high))
    return out


def scratch_mean(rec: Mapping[str, Any]) -> float:
    """Mean scratch test accuracy (fraction) of one setting record over its seeds; NaN without seeds."""
    seeds = rec.get("seeds") or {}
    return float(np.mean([float(x["scratch"]) for x in seeds.values()])) if seeds else math.nan


def ceiling_forced(records: Mapping[str, Any]) -> list[str]:
    """The settings with a decided outcome (:func:`confusion`) whose scratch arm already averages :data:`CEILING` or
    more: SPT cannot gain :data:`MIN_GAIN` there, so their "does not help" was forced by the ceiling, whatever the
    rule predicted. In the records' order."""
    c = confusion(records)
    decided = {n for names in c["table"].values() for n in names}
    return [n for n, r in records["settings"].items() if n in decided and scratch_mean(r) >= CEILING]


def listops_record(diagnosis: Mapping[str, Any], summary: Mapping[str, Any]) -> dict[str, Any]:
    """The ListOps example of docs/diagnose.md as a setting record of :func:`part`: its prediction from the saved
    diagnosis (``initlab diagnose --json``: ``prediction.spt_helps``) and the per-seed test accuracies of the
    preregistered CPU ListOps run (``lra_listops_summary.json``: ``per_seed`` ``spt_test_acc``,
    ``scratch_test_acc``). Outside the preregistered settings: reported beside the claim, never part of it."""
    return {"predicted_helps": bool(diagnosis["prediction"]["spt_helps"]),
            "seeds": {str(int(r["seed"])): {"scratch": float(r["scratch_test_acc"]), "spt": float(r["spt_test_acc"])}
                      for r in summary.get("per_seed") or []}}


def listops_part(diagnosis: Mapping[str, Any], summary: Mapping[str, Any]) -> Verdict:
    """The ListOps example's prediction judged against the CPU ListOps run's outcome by this claim's own gain rule
    (:func:`outcome`: δ = :data:`MIN_GAIN`, not the LRA run's 2 points): *inconclusive* while that outcome is
    undecided."""
    return part("ListOps", listops_record(diagnosis, summary))


# --- the README rows of these claims (initlab.app.docgen.claims renders them) ---
DIAGNOSE = "diagnose_validation/records.json"
#: the diagnosis of docs/diagnose.md's ListOps example (the CPU ListOps run's training file, initlab:spt)
LISTOPS_DIAGNOSIS = "diagnose_validation/listops_cpu_diagnosis.json"
#: the preregistered CPU ListOps run (also the LRA claim's input)
LISTOPS_RUN = "lra_listops_summary.json"


def _listops_text(r: Results) -> str:
    """``; outside the preregistered settings, ListOps ...``: the example's prediction against the CPU ListOps run
    (empty where either file is absent from the results)."""
    if LISTOPS_DIAGNOSIS not in r or LISTOPS_RUN not in r:
        return ""
    rec = listops_record(r[LISTOPS_DIAGNOSIS], r[LISTOPS_RUN])
    v = listops_part(r[LISTOPS_DIAGNOSIS], r[LISTOPS_RUN])
    pred = "helps" if rec["predicted_helps"] else "does not help"
    measured = {REPRODUCED: "right", NOT: "wrong"}.get(v.word, "undecided" if v.word == INCONCLUSIVE else v.word)
    return (f"; outside the preregistered settings, the ListOps example of docs/diagnose.md (predicted {pred}) "
            f"against the preregistered CPU ListOps run (LRA's 2-layer model, {seeds_text(sorted(map(int, rec['seeds'])))}"
            f"): SPT − scratch {one(outcome(rec), 'points')} by this claim's {100 * MIN_GAIN:.0f}-point rule: the "
            f"prediction is {measured}")


def _forced_text(rec) -> str:
    """``; NAMES forced by a ceiling: ...`` naming the decided settings whose scratch arm already reached
    :data:`CEILING` (empty when none)."""
    forced = ceiling_forced(rec)
    if not forced:
        return ""
    acc = ", ".join(f"{100 * scratch_mean(rec['settings'][n]):.1f} %" for n in forced)
    return (f"; {', '.join(forced)} forced by a ceiling: scratch already at {acc} (≥ {100 * CEILING:.0f} %), no "
            f"{100 * MIN_GAIN:.0f}-point gain possible")


def _headline_text(undecided: list[str]) -> str:
    """``; the headline setting `local`, ..., is undecided`` when it is among the ``undecided`` settings."""
    return (f"; the headline setting `{HEADLINE}`, the synthetic SPT experiment's task, is undecided"
            if HEADLINE in undecided else "")


def diagnose_row(r: Results) -> str:
    """The all-of word, where the rule was right / wrong / undecided (which decided settings a ceiling forced, and
    whether the headline setting is undecided), and the correlation with its intervals."""
    rec = r[DIAGNOSE]
    v = predicts_gain(rec)
    if v.word == NOT_RUN:
        return f"{b(NOT_RUN)} (no setting has {MIN_SEEDS} finished seeds yet)"
    c = confusion(rec)
    right = c["table"][("helps", "helps")] + c["table"][("does not help", "does not help")]
    wrong = c["table"][("helps", "does not help")] + c["table"][("does not help", "helps")]
    seeds = sorted({int(s) for x in rec["settings"].values() for s in x["seeds"]})
    out = (f"{b(v.word)} (preregistered rule, {len(rec['settings'])} synthetic settings, {seeds_text(seeds)}): right on "
           f"{len(right)} ({', '.join(right) or 'none'}{_forced_text(rec)}), wrong on {len(wrong)} "
           f"({', '.join(wrong) or 'none'})")
    if c["undecided"]:
        need = [p.seeds_to_decide for p in v.parts if p.word == rules.INCONCLUSIVE]
        out += f", undecided on {len(c['undecided'])} ({', '.join(c['undecided'])}"
        out += f"; {max(need)} seeds would decide" if need and all(n is not None for n in need) else ""
        out += _headline_text(c["undecided"]) + ")"
    if c["not_run"]:
        out += f", not run on {', '.join(c['not_run'])}"
    out += _listops_text(r)
    k = correlation(rec)
    if not math.isnan(k["pearson"]):
        out += (f"; blind share vs SPT gain: Pearson {k['pearson']:.2f} [{k['pearson_lo']:.2f}, {k['pearson_hi']:.2f}], "
                f"Spearman {k['spearman']:.2f} [{k['spearman_lo']:.2f}, {k['spearman_hi']:.2f}] ({k['n']} settings)")
    return out


def diagnose_headline(r: Results) -> Headline:
    """The README's cells: the all-of word, and the rule's hits out of the decided settings with the seeds."""
    rec = r[DIAGNOSE]
    v = predicts_gain(rec)
    if v.word == NOT_RUN:
        return Headline(b(NOT_RUN), "—")
    c = confusion(rec)
    right = len(c["table"][("helps", "helps")] + c["table"][("does not help", "does not help")])
    decided = sum(len(x) for x in c["table"].values())
    forced = ceiling_forced(rec)
    seeds = sorted({int(s) for x in rec["settings"].values() for s in x["seeds"]})
    ceiling = f" ({len(forced)} forced by a ceiling: scratch ≥ {100 * CEILING:.0f} %)" if forced else ""
    head = f", `{HEADLINE}` among them" if HEADLINE in c["undecided"] else ""
    return Headline(b(v.word), f"rule right on {right} of {decided} decided settings{ceiling}, undecided on "
                                f"{len(c['undecided'])} of {len(rec['settings'])}{head} ({len(seeds)} seeds)")


CLAIM_ROWS: list[Claim] = [
    Claim("initlab's diagnosis predicts SPT's gain", "initlab's own claim",
          "[diagnose](docs/diagnose.md)", (DIAGNOSE,), diagnose_row, optional=(LISTOPS_DIAGNOSIS, LISTOPS_RUN),
          headline=diagnose_headline),
]
