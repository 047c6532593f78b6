"""The out-of-domain synthetic SPLADE: a generated multi-domain corpus with a real-sized vocabulary,
BM25 as the lexical anchor, SPLADE trained to a dev-loss plateau, out-of-domain nDCG@10 as the primary metric."""

from __future__ import annotations

from initlab.experiment.record import Command, Experiment
from initlab.synthetic.splade.ood import claims

#: the experiment's record for the roof (:class:`initlab.experiment.record.Experiment`); its claims module
#: (:mod:`.claims`) holds its own claims, families and the README rows, over the verdict functions it shares with the
#: phase diagram (:mod:`initlab.synthetic.splade.claims`); its reproduce stage is ``splade_in_domain`` (:mod:`.stage`:
#: the confirmation's recipe on fresh seeds, deciding the head-norm effect in domain); ``order`` 55 places its rows
#: and its stage right after the phase diagram's
EXPERIMENT = Experiment(
    "synthetic_splade_ood", claims, families=(("splade_ood", claims.SPLADE_OOD_FAMILIES),),
    presets="initlab.synthetic.splade.ood.config:PRESETS",
    commands=(Command("synthetic", "splade-ood", "initlab.synthetic.splade.ood.command:splade_ood_main",
                      "synthetic SPLADE out of domain: multi-domain corpus, BM25, plateau rule (exploratory)"),),
    stages=("initlab.synthetic.splade.ood.stage:STAGE",),
    figures=("initlab.paper_figs.synthetic_splade_ood_figures:draw_map",
             "initlab.paper_figs.synthetic_splade_ood_figures:draw_shift"), order=55)
