"""Synthetic SPLADE on CPU: collapse under a large-norm MLM head, recovery by dividing the head by k.

The pieces both SPLADE experiments build on: the synthetic corpus with known relevance (:mod:`.data`), the tiny
masked-LM backbones (:mod:`.model` for BERT, :mod:`.families` for BERT, RoBERTa, ALBERT and ModernBERT), the
sentence-transformers ``SparseEncoder`` and its training recipe (:mod:`.train`, configured by :mod:`.config`)
and the measurements of a trained or untrained encoder (:mod:`.measure`). The experiment: the four-family phase
diagram that ``initlab synthetic splade`` and ``initlab reproduce`` run (:mod:`.phase`; an imposed head scale s,
the earlier inflation sweep's design, is its ``imposed-s*`` presets), and the collapse detector's calibration
(:mod:`.calibration`).
"""

from __future__ import annotations

from initlab.experiment.record import Command, Experiment
from initlab.synthetic.splade import claims

#: the phase diagram's record for the roof (:class:`initlab.experiment.record.Experiment`); its claims module holds
#: the verdict functions both SPLADE experiments share, and the README rows they feed (each led by the out-of-domain
#: confirmation) are the out-of-domain record's (:mod:`.ood.claims`)
EXPERIMENT = Experiment(
    "synthetic_splade", claims, families=(("splade", claims.SPLADE_FAMILIES),),
    presets="initlab.synthetic.splade.phase.config:PRESETS",
    commands=(Command("synthetic", "splade", "initlab.synthetic.splade.phase.command:splade_main",
                      "synthetic SPLADE collapse and recovery under MLM-head rescaling"),),
    stages=("initlab.synthetic.splade.phase.stage:STAGE",),
    figures=("initlab.paper_figs.synthetic_splade_phase_figures:draw_phase",), order=50)
