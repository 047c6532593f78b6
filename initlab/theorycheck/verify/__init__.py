"""The theorem checks as an experiment: the ``theory`` stage's cells, cost model and summary (:mod:`.experiment`), the
theorem claim (:mod:`.claims`) and ``initlab theory verify`` (:mod:`.command`), over :mod:`initlab.theory.verify`."""

from __future__ import annotations

from initlab.experiment.record import Command, Experiment
from initlab.theorycheck.verify import claims

#: the experiment's record for the roof (:class:`initlab.experiment.record.Experiment`)
EXPERIMENT = Experiment(
    "theory_verify", claims, presets="initlab.theorycheck.verify.runner:PRESETS",
    commands=(Command("theory", "verify", "initlab.theorycheck.verify.command:verify_main",
                      "check the attention-gradient statements (T1-T7) on fresh random cases"),),
    stages=("initlab.theorycheck.verify.stage:STAGE",), figures=("initlab.paper_figs.theory_figures:draw_all",),
    order=10)
