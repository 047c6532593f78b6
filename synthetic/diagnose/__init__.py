"""Validation of ``initlab diagnose`` against measured SPT outcomes (docs/diagnose.md).

* :mod:`initlab.synthetic.diagnose.settings` -- the preregistered settings (task, length, depth, pooling,
  proximity prior), their data and their models;
* :mod:`initlab.synthetic.diagnose.run` -- both arms (label-only scratch, SPT then fine-tuning) per setting
  and seed, resumable, with ``python -m initlab.synthetic.diagnose.run``;
* :mod:`initlab.synthetic.diagnose.report` -- the diagnosis of every setting at initialisation, the
  per-setting records and the confusion table / correlation.
"""

from __future__ import annotations

from initlab.experiment.record import Experiment
from initlab.synthetic.diagnose import claims

#: the experiment's record for the roof (:class:`initlab.experiment.record.Experiment`)
EXPERIMENT = Experiment("diagnose_validation", claims, order=70)
