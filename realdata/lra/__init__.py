"""Full-scale Long Range Arena self-pretraining reproduction (Amos et al., ICLR 2024) and its ablations.

Modules, in reading order: :mod:`.data` (loaders in the standard layouts), :mod:`.listops` (LRA's
ListOps generator), :mod:`.masking` (SPT objectives), :mod:`.config` (frozen configs and presets),
:mod:`.model` (the synthetic encoder plus the Retrieval two-tower head and the causal pass),
:mod:`.train` (pretrain / fine-tune loops), :mod:`.metrics` (attention metrics), :mod:`.sweep`
(ablations), :mod:`.cli` (``initlab lra ...``), :mod:`.gpu_check`, :mod:`.ddp_check`.
"""

from __future__ import annotations

from initlab.experiment.record import Command, Experiment
from initlab.realdata.lra import claims

#: the experiment's record for the roof (:class:`initlab.experiment.record.Experiment`)
EXPERIMENT = Experiment(
    "lra_listops", claims, presets="initlab.realdata.lra.config:PRESETS",
    commands=(Command("lra", "pretrain", "initlab.realdata.lra.command:pretrain_main",
                      "self-pretrain on a Long Range Arena task's inputs"),
              Command("lra", "finetune", "initlab.realdata.lra.command:finetune_main",
                      "fine-tune (from scratch or from an SPT checkpoint) on an LRA task"),
              Command("lra", "sweep", "initlab.realdata.lra.command:sweep_main",
                      "run an LRA ablation preset (SPT epochs, depth, cross-task, frozen, hybrid)"),
              Command("lra", "listops-plateau", "initlab.realdata.lra.command:listops_plateau_main",
                      "the preregistered CPU ListOps SPT-vs-scratch experiment (plateau budgets)"),
              Command("lra", "fidelity", "initlab.realdata.lra.command:fidelity_main",
                      "the LRA preset fidelity table against Amos et al. and LRA's configs"),
              Command("lra", "listops-generate", "initlab.realdata.lra.command:listops_main",
                      "generate ListOps (LRA's generator) as basic_{train,val,test}.tsv")),
    stages=("initlab.realdata.lra.stage:STAGE",),
    figures=("initlab.paper_figs.lra_figures:plot_listops_plateau", "initlab.paper_figs.lra_figures:plot_sweep"),
    order=40)
