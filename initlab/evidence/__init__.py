"""Evidence: the statistics of the verdicts -- interval statistics, verdict rules and claim families -- on raw
per-seed numbers.

Imported as ``initlab.evidence`` (layer 6, beside ``initlab.nn`` and ``initlab.mlmhead``: the experiments,
their reports and the figure/table code all call it; it imports only ``initlab.config`` and scipy/numpy).

* :mod:`initlab.evidence.stats` -- t-intervals, Fieller ratio intervals, TOST, power-based seed counts;
* :mod:`initlab.evidence.rules` -- the verdict rules (gain, equivalence, share, all-of, checks) with their
  tolerances, returning :class:`initlab.evidence.rules.Verdict`;
* :mod:`initlab.evidence.families` -- claim families and the Holm correction within each.

Each claim's verdict function lives in its experiment's ``claims`` module; the words of a verdict
(:mod:`initlab.experiment.text`) and the claims-row record (:mod:`initlab.experiment.rows`) live with what every
experiment shares.
"""

from initlab.evidence.rules import INCONCLUSIVE, NOT, NOT_RUN, PARTLY, REPRODUCED, Verdict

__all__ = ["Verdict", "REPRODUCED", "PARTLY", "NOT", "INCONCLUSIVE", "NOT_RUN"]
