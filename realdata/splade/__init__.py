"""Full-scale SPLADE reproduction: seven backbones x MLM-head rescaling factor k on MS MARCO, TREC DL 2019,
BEIR-13 and NanoBEIR (``initlab splade train|eval|sweep``).

Modules: :mod:`.config` (recipe and presets), :mod:`.data` (ir_datasets ids and local file layouts),
:mod:`.modeling` (SparseEncoder + rescaling, safetensors checkpoints), :mod:`.train` (SpladeLoss with a
global-batch FLOPS regulariser), :mod:`.retrieval` (exact sparse top-k, FLOPS, seismic), :mod:`.evaluate`,
:mod:`.sweep`, :mod:`.cli`, :mod:`.gpu_check`.
"""

from __future__ import annotations

from initlab.experiment.record import Command, Experiment
from initlab.realdata.splade import claims

#: the experiment's record for the roof (:class:`initlab.experiment.record.Experiment`); its one claim row (the
#: backbone x k grid, not run) is in :mod:`.claims`; ``order`` 60 places it right after the synthetic SPLADE rows
EXPERIMENT = Experiment(
    "realdata_splade", claims, presets="initlab.realdata.splade.config:PRESETS",
    commands=(Command("splade", "train", "initlab.realdata.splade.command:train_main",
                      "train one SPLADE model (backbone x k) on MS MARCO"),
              Command("splade", "eval", "initlab.realdata.splade.command:eval_main",
                      "evaluate a SPLADE checkpoint (MS MARCO dev, TREC DL 2019, BEIR, NanoBEIR)"),
              Command("splade", "sweep", "initlab.realdata.splade.command:sweep_main",
                      "train and evaluate the backbone x k grid, resumable")),
    figures=("initlab.paper_figs.splade_scale_figures:plot_loss_curve",
             "initlab.paper_figs.splade_scale_figures:plot_nanobeir_vs_flops"), order=60)
