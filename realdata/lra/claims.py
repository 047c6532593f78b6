"""The CPU ListOps claim (SPT vs from scratch, preregistered plateau budgets), one verdict function.

Imported as ``initlab.realdata.lra.claims``. Input: the saved ``summary.json`` of ``initlab lra
listops-plateau`` (``per_seed``: ``spt_test_acc``, ``scratch_test_acc`` per seed). The claim "SPT beats
training from scratch by a large margin" is judged by the gain rule of :mod:`initlab.evidence.rules` on the
paired differences, with δ = the experiment's preregistered 2.0 points
(:data:`initlab.realdata.lra.experiment.GAIN_POINTS`, repeated here as :data:`MIN_GAIN` because the evidence
layer sits below realdata) and a tolerance of 0.1 points (one test sequence in 1000).
"""

from __future__ import annotations

from typing import Any, Mapping

from initlab.evidence import rules
from initlab.evidence.rules import Verdict

__all__ = ["MIN_GAIN", "TOL", "listops_gain"]

MIN_GAIN = 0.02  # fraction: 2.0 points
TOL = 0.001


def listops_gain(summary: Mapping[str, Any]) -> Verdict:
    """SPT's paired gain over scratch on CPU ListOps, interval rule (module docstring); ``not run`` without seeds."""
    rows = summary.get("per_seed") or []
    if not rows:
        return rules.not_run("gain", ["paired seeds"])
    d = [float(r["spt_test_acc"]) - float(r["scratch_test_acc"]) for r in rows]
    return rules.gain(d, min_gain=MIN_GAIN, tol=TOL)
