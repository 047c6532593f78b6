"""The CPU ListOps claim (SPT vs from scratch, preregistered plateau budgets), one verdict function.

Imported as ``initlab.realdata.lra.claims``. Input: the saved ``summary.json`` of ``initlab lra
listops-plateau`` (``per_seed``: ``spt_test_acc``, ``scratch_test_acc`` per seed). The claim "SPT beats
training from scratch by a large margin" is judged by the gain rule of :mod:`initlab.evidence.rules` on the
paired differences, with δ = the experiment's preregistered 2.0 points
(:data:`initlab.realdata.lra.experiment.GAIN_POINTS`, repeated here as :data:`MIN_GAIN` because the evidence
layer sits below realdata) and a tolerance of 0.1 points (one test sequence in 1000).

The README rows of these claims (:data:`CLAIM_ROWS`, one :class:`initlab.experiment.rows.Claim` each, rendered by
:mod:`initlab.app.docgen.claims`) follow the verdict functions.

The README's LRA row: not run at LRA scale; the preregistered CPU ListOps run (``lra_listops_summary.json``) by
:func:`initlab.realdata.lra.claims.listops_gain` on its ``per_seed`` numbers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import Any

from initlab.evidence import rules
from initlab.evidence.rules import NOT_RUN, Verdict
from initlab.evidence.stats import t_interval
from initlab.experiment.rows import Claim, Headline, Results, b, headline, one, seeds_text

__all__ = ["MIN_GAIN", "TOL", "listops_gain", "LRA", "CLAIM_ROWS", "lra_row", "lra_records"]

MIN_GAIN = 0.02  # fraction: 2.0 points
TOL = 0.001


def listops_gain(summary: Mapping[str, Any]) -> Verdict:
    """SPT's paired gain over scratch on CPU ListOps, interval rule (module docstring); ``not run`` without seeds."""
    rows = summary.get("per_seed") or []
    if not rows:
        return rules.not_run("gain", ["paired seeds"])
    d = [float(r["spt_test_acc"]) - float(r["scratch_test_acc"]) for r in rows]
    return rules.gain(d, min_gain=MIN_GAIN, tol=TOL)


# --- the README rows of these claims (initlab.app.docgen.claims renders them) ---
LRA = "lra_listops_summary.json"


def lra_records(v: Mapping[str, Any], where: str = LRA) -> dict[str, Any]:
    """Every number the ListOps row prints, from the per-seed records of ``lra_listops_summary.json``: seeds, mean
    test accuracies, and (where every record has them) the proximity masses at fine-tuning start.

    Raises:
        initlab.evidence.rules.SummaryRecordError: a stored summary field (``seeds``, ``spt_mean``, ``scratch_mean``,
            ``mean_diff_points``, ``prox_init_*_mean``, ``uniform_proximity_mean``) disagrees with the records.
        initlab.evidence.rules.VerdictRecordError: the file keeps no saved ``verdict``.
    """
    per = v.get("per_seed") or []
    rec: dict[str, Any] = {"seeds": [int(x["seed"]) for x in per]}
    if per:
        spt = [float(x["spt_test_acc"]) for x in per]
        scr = [float(x["scratch_test_acc"]) for x in per]
        rec.update(spt_mean=statistics.mean(spt), scratch_mean=statistics.mean(scr),
                   mean_diff_points=100 * (statistics.mean(spt) - statistics.mean(scr)))
        if all("prox_init_spt" in x and "prox_init_scratch" in x for x in per):
            rec.update(prox_init_spt_mean=statistics.mean(float(x["prox_init_spt"]) for x in per),
                       prox_init_scratch_mean=statistics.mean(float(x["prox_init_scratch"]) for x in per),
                       prox_diff=[float(x["prox_init_spt"]) - float(x["prox_init_scratch"]) for x in per])
            if all("uniform_proximity" in x for x in per):
                rec["uniform_proximity_mean"] = statistics.mean(float(x["uniform_proximity"]) for x in per)
    rules.check_summary(where, [(k, v[k], rec[k]) for k in rec if k in v])
    if "verdict" not in v:
        raise rules.VerdictRecordError(f"{where}: no saved verdict record ('verdict'); a run's summary must keep the "
                                       "verdict it was written with")
    return rec


def lra_row(r: Results) -> str:
    v = r[LRA]
    head = f"{b('not run')} at LRA scale (presets match the authors' configs, deviations listed)"
    rec = lra_records(v)
    g = listops_gain(v)
    if g.word == NOT_RUN:
        return head + f"; CPU ListOps: {b('not run')}"
    text_ = (f"{head}; preregistered CPU ListOps (preset `{v['preset']}`, {seeds_text(rec['seeds'])}): SPT − scratch "
             f"{one(g)} against the preregistered +{100 * MIN_GAIN:g} points; test accuracy SPT "
             f"{rec['spt_mean']:.3f} vs scratch {rec['scratch_mean']:.3f} (seed means)")
    if "prox_diff" in rec:  # per-seed proximity masses: an interval, no verdict (no threshold on the difference)
        iv = t_interval(rec["prox_diff"])
        bounds = "unbounded" if not math.isfinite(iv.lo) else f"{iv.lo:+.3f}, {iv.hi:+.3f}"
        text_ += (f"; first-layer proximity mass at fine-tuning start, SPT − scratch {iv.estimate:+.3f} [{bounds}] "
                  f"(95 % t, {iv.n} seed{'s' if iv.n != 1 else ''}; an interval only, no threshold was preregistered "
                  f"for this difference): SPT {rec['prox_init_spt_mean']:.3f}, scratch {rec['prox_init_scratch_mean']:.3f}"
                  + (f", uniform attention {rec['uniform_proximity_mean']:.3f}" if "uniform_proximity_mean" in rec else "")
                  + " (seed means)")
    return text_


def lra_headline(r: Results) -> Headline:
    g = listops_gain(r[LRA])
    h = headline([("CPU ListOps SPT − scratch", g, "points")])
    return Headline(f"{b(NOT_RUN)} at LRA scale; CPU ListOps: {h.word}", h.estimate)


CLAIM_ROWS: list[Claim] = [
    Claim("SPT vs from scratch on the five LRA tasks (Transformer)",
          "from scratch 36.4/64.3/57.5/42.4/71.4, SPT 59.2/88.8/90.4/76.0/88.5", "[LRA](docs/lra.md)", (LRA,), lra_row,
          headline=lra_headline),
]
