"""Synthetic length-100 self-pretraining (SPT) experiments: SPT vs label supervision, verdicts per claim.

``initlab synthetic spt [--preset quick|default|full] [--out DIR] [--overwrite]``

Per seed s (conditions share a seed's data and initialisation, so comparisons are paired):

* data: the ``local`` task (:mod:`initlab.synthetic.spt.tasks`), ``n_train`` / ``n_val`` / ``n_test``
  sequences of length T = 100 (data seeds ``1000 s + 1`` / ``+ 6`` / ``+ 2``); SPT sources are the local
  task's training inputs, the ``count`` control task's inputs or i.i.d. tokens (same vocabulary);
* SPT: masked reconstruction (each token replaced by a mask token with probability ``mask_rate``, cross
  entropy on masked positions) **until the masked-reconstruction loss on held-out validation inputs
  has not improved for ``spt_patience`` epochs** (at most ``spt_max_epochs``); the checkpoint of the
  best validation epoch (the *rule's epoch*, recorded per seed) is the one used. Fixed-epoch snapshots
  (``spt_sweep_epochs``) are kept for the SPT-duration sweep;
* fine-tuning: cross entropy of the mean-pooled classifier for a **fixed** ``finetune_epochs`` (set by
  the plateau of scratch's training accuracy on exploratory seeds, :mod:`initlab.synthetic.spt.budget`);
  the reported test accuracy is the one at the best **validation** epoch;
* conditions (:func:`condition_names`): ``scratch``; ``spt`` (every weight but the heads from SPT);
  ``frozen_attn`` (W_Q, W_K, W_V, W_O frozen at their random init); hybrids ``hybrid_<groups>`` (only
  those groups from SPT: ``qk``, ``qkvo``, ``ffn``, ``qk_emb`` (+ token embeddings), ``qk_ln``
  (+ LayerNorms), ``qk_emb_ln``); ``spt_e<E>`` (SPT-duration sweep, fixed E); ``depth<L>_scratch`` /
  ``depth<L>_spt``; ``cross_count`` / ``cross_iid``; and the attention-only 1-layer variant (no FFN,
  no LayerNorm: the theorem's setting) ``attn_scratch`` / ``attn_spt`` / ``attn_qk``;
* measured: first-layer proximity mass, relative-position score and attention entropy on a probe batch
  at the start and the end of fine-tuning; per-epoch train/validation/test accuracy; score gradients
  at initialisation in the model and in the theorem's setting; verdicts per claim
  (:mod:`initlab.synthetic.spt.verdicts`, thresholds in the config).

All seeds of a condition train as one vectorized ensemble (:mod:`initlab.synthetic.spt.ensemble`). Each SPT
run and each fine-tuning condition is a resumable cell keyed by its config; NaN/inf stops the run.
"""

from __future__ import annotations

from initlab.synthetic.spt.cells import finetune_condition, init_gradients, pretrain_source
from initlab.synthetic.spt.config import (
    BASE,
    CONFIRMATORY_SEEDS,
    EXPLORATORY_SEEDS,
    HYBRIDS,
    PRESETS,
    SPTConfig,
    condition_names,
    condition_spec,
    model_config,
)
from initlab.synthetic.spt.runner import partial_report, run, summarize

__all__ = ["SPTConfig", "PRESETS", "BASE", "CONFIRMATORY_SEEDS", "EXPLORATORY_SEEDS", "HYBRIDS", "condition_names",
           "condition_spec", "model_config", "run", "summarize", "partial_report", "finetune_condition", "pretrain_source",
           "init_gradients"]
