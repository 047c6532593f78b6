"""The README's LRA row: not run at LRA scale; the preregistered CPU ListOps run (``lra_listops_summary.json``) by
:func:`initlab.realdata.lra.claims.listops_gain` on its ``per_seed`` numbers."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import Any

from initlab.evidence.rows import Claim, Headline, Results, b, headline, one, seeds_text
from initlab.evidence import rules
from initlab.realdata.lra import claims as lra_claims
from initlab.evidence.rules import NOT_RUN
from initlab.evidence.stats import t_interval

__all__ = ["LRA", "CLAIMS", "lra_row", "lra_records"]

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
    g = lra_claims.listops_gain(v)
    if g.word == NOT_RUN:
        return head + f"; CPU ListOps: {b('not run')}"
    text_ = (f"{head}; preregistered CPU ListOps (preset `{v['preset']}`, {seeds_text(rec['seeds'])}): SPT − scratch "
             f"{one(g)} against the preregistered +{100 * lra_claims.MIN_GAIN:g} points; test accuracy SPT "
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
    g = lra_claims.listops_gain(r[LRA])
    h = headline([("CPU ListOps SPT − scratch", g, "points")])
    return Headline(f"{b(NOT_RUN)} at LRA scale; CPU ListOps: {h.word}", h.estimate)


CLAIMS: list[Claim] = [
    Claim("SPT vs from scratch on the five LRA tasks (Transformer)",
          "from scratch 36.4/64.3/57.5/42.4/71.4, SPT 59.2/88.8/90.4/76.0/88.5", "[LRA](docs/lra.md)", (LRA,), lra_row,
          headline=lra_headline),
]
