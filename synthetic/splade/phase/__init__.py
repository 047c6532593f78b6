"""The synthetic SPLADE phase diagram: four backbone families x head scale s x MLM-head rescaling k.

What is run is fixed in :mod:`.config` (grid, recipe, analysis thresholds, presets); one cell is trained,
evaluated and inspected by :mod:`.cell`; the sweep around the cells is :mod:`.runner` (whose docstring states
the design); the tables, claim verdicts and theory comparison read the saved cells in :mod:`.report`, and
:mod:`.summary` writes them as files.
"""

from __future__ import annotations

from initlab.experiment.record import Command, Experiment
from initlab.synthetic.splade import claims

#: the phase diagram's record for the roof (:class:`initlab.experiment.record.Experiment`); its claims module holds
#: the verdict functions both SPLADE experiments share, and the README rows they feed (each led by the out-of-domain
#: confirmation) are the out-of-domain record's (:mod:`initlab.synthetic.splade.ood.claims`)
EXPERIMENT = Experiment(
    "synthetic_splade", claims, families=(("splade", claims.SPLADE_FAMILIES),),
    presets="initlab.synthetic.splade.phase.config:PRESETS",
    commands=(Command("synthetic", "splade", "initlab.synthetic.splade.phase.command:splade_main",
                      "synthetic SPLADE collapse and recovery under MLM-head rescaling"),),
    stages=("initlab.synthetic.splade.phase.stage:STAGE",),
    figures=("initlab.paper_figs.synthetic_splade_phase_figures:draw_phase",), order=50)
