"""The score-scale analysis as an experiment: the ``score_scale`` stage's cells, cost model and summary
(:mod:`.experiment`) and ``initlab theory score-scale`` (:mod:`.command`), over :mod:`initlab.theory.score_scale`."""

from __future__ import annotations

from initlab.experiment.record import Command, Experiment

#: the experiment's record for the roof (:class:`initlab.experiment.record.Experiment`); it decides no claim
EXPERIMENT = Experiment(
    "score_scale", presets="initlab.theorycheck.score_scale.experiment:PRESETS",
    commands=(Command("theory", "score-scale", "initlab.theorycheck.score_scale.command:score_scale_main",
                      "tabulate the SPLADE score-scale analysis against the rescaling factor k"),),
    stages=("initlab.theorycheck.score_scale.stage:STAGE",),
    figures=("initlab.paper_figs.score_scale_figures:plot_theory_vs_mc",), order=30)
