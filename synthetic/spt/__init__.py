"""Synthetic length-100 self-pretraining (SPT) experiments: SPT vs label supervision, a verdict per claim.

``initlab synthetic spt [--preset quick|default|full|causal|causal-tuned|FILE] [--out DIR] [--workers N] [--scheduler ADDR]``
(every run is a file in ``runs/``; docs/runs.md lists them)

Per seed s (conditions share a seed's data and initialisation, so every comparison is paired):

* data: the ``local`` task (:mod:`initlab.synthetic.spt.tasks`), ``n_train`` / ``n_val`` / ``n_test``
  sequences of length T = 100; SPT sources are the local task's training inputs, the ``count`` control
  task's inputs or i.i.d. tokens (same vocabulary);
* SPT (:func:`initlab.synthetic.spt.training.pretrain`): masked reconstruction until the best validation
  masked-reconstruction loss improves by less than ``spt_min_rel_improvement`` over ``spt_window`` epochs
  (at most ``spt_max_epochs``); the best validation epoch's checkpoint (the *rule's epoch*) is used, and
  fixed-epoch snapshots (``spt_sweep_epochs``) of the same run give the SPT-duration curve;
* fine-tuning (:func:`initlab.synthetic.spt.training.finetune`): cross entropy of the mean-pooled
  classifier until the best validation accuracy is ``finetune_patience`` epochs old (at most
  ``finetune_max_epochs``); the reported test accuracy is that of the best validation epoch. Label-only arms
  use the learning rate chosen on validation over ``lr_grid`` on the exploratory seeds (``explore-lr``);
  ``scratch_matched`` trains from scratch for as many optimiser steps as SPT plus fine-tuning;
* conditions (:func:`condition_names`; one entry each in the arms table :mod:`initlab.synthetic.spt.arms`):
  ``scratch``, ``scratch_matched``, ``spt`` (every weight but the heads from SPT), ``frozen_attn`` (W_Q, W_K,
  W_V, W_O frozen at their random init), hybrids ``hybrid_<groups>`` (``qk``, ``qkvo``, ``ffn``, ``qk_emb``,
  ``qk_ln``, ``qk_emb_ln``), ``spt_e<E>``, ``depth<L>_scratch`` / ``depth<L>_spt``, ``cross_count`` /
  ``cross_iid``, the attention-only 1-layer model of the theorem (``attn_scratch`` / ``attn_spt`` /
  ``attn_qk``), and the causal arms (``alibi_scratch``, ``qkscale_scratch``, ``lastpool_scratch``,
  ``spt_nopos``);
* measured: first-layer proximity mass, relative-position score and attention entropy on a probe batch
  at fine-tuning start and end, per-epoch accuracies, score gradients at initialisation; verdicts per
  claim by :mod:`initlab.synthetic.spt.claims` from the per-seed numbers.

Every SPT run and fine-tuning of one seed is a cell (:mod:`initlab.synthetic.spt.cells`) run by
:mod:`initlab.executor` (local processes or a Dask cluster), resumable after every epoch.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from initlab.experiment.record import Command, Experiment
from initlab.synthetic.spt import claims

#: the package's names -> the module that defines them, imported on first use (the config imports torch; the
#: console script reads :data:`EXPERIMENT` to print its usage and must not)
_LAZY = {**{n: "config" for n in ("BASE", "EXPLORATORY_SEEDS", "HYBRIDS", "LABEL_ONLY", "PRESETS", "SPTConfig",
                                  "condition_names", "condition_seeds", "condition_spec", "model_config")},
         **{n: "report" for n in ("summarize", "verdicts")},
         **{n: "runner" for n in ("expected_seconds", "partial_report", "run")}}

__all__ = ["SPTConfig", "PRESETS", "BASE", "EXPLORATORY_SEEDS", "HYBRIDS", "LABEL_ONLY", "condition_names", "condition_seeds",
           "condition_spec", "model_config", "run", "summarize", "verdicts", "partial_report", "expected_seconds",
           "EXPERIMENT"]


def __getattr__(name: str) -> Any:
    """The config, report and runner names of :data:`__all__`, imported from their module on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


#: the experiment's record for the roof (:class:`initlab.experiment.record.Experiment`)
EXPERIMENT = Experiment(
    "synthetic_spt", claims, families=(("spt", claims.SPT_FAMILIES),), presets="initlab.synthetic.spt.config:PRESETS",
    commands=(Command("synthetic", "spt", "initlab.synthetic.spt.command:spt_main",
                      "synthetic length-100 self-pretraining experiments"),
              Command("synthetic", "run", "initlab.synthetic.spt.command:run_main",
                      "deprecated name of synthetic spt, kept for one release")),
    stages=("initlab.synthetic.spt.stage:STAGE",), figures=("initlab.paper_figs.spt_figures:make_figures",), order=20)
