"""Evidence: interval statistics, verdict rules and one verdict function per claim, on raw per-seed numbers.

Imported as ``initlab.evidence`` (layer 6, beside ``initlab.nn`` and ``initlab.mlmhead``: the experiments,
their reports and the figure/table code all call it; it imports only ``initlab.config`` and scipy/numpy).

* :mod:`initlab.evidence.stats` -- t-intervals, Fieller ratio intervals, TOST, power-based seed counts;
* :mod:`initlab.evidence.rules` -- the verdict rules (gain, equivalence, share, all-of, checks) with their
  tolerances, returning :class:`initlab.evidence.rules.Verdict`;
* :mod:`initlab.synthetic.spt.claims` -- the synthetic SPT claims;
* :mod:`initlab.evidence.text` -- one formatter for verdicts in reports and tables.
"""

from initlab.evidence.rules import INCONCLUSIVE, NOT, NOT_RUN, PARTLY, REPRODUCED, Verdict

__all__ = ["Verdict", "REPRODUCED", "PARTLY", "NOT", "INCONCLUSIVE", "NOT_RUN"]
