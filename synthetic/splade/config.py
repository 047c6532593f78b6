"""The SPLADE training recipe of the synthetic SPLADE experiment (the phase diagram's
:class:`initlab.synthetic.splade.phase.config.PhaseConfig` derives from it)."""

from __future__ import annotations

from dataclasses import dataclass


__all__ = ["TrainingRecipe"]


@dataclass(frozen=True)
class TrainingRecipe:
    """The SPLADE training recipe (:class:`initlab.synthetic.splade.phase.config.PhaseConfig` derives from it;
    :mod:`initlab.synthetic.splade.train` and :mod:`initlab.synthetic.splade.measure` read only these fields).

    ``steps`` of ``batch_size`` (query, positive) pairs; ``lr`` AdamW's peak learning rate with a linear warm-up
    over ``lr_warmup_ratio`` of the steps, then linear decay (transformers' default); ``lambda_q`` / ``lambda_d`` the
    maximum FLOPS regulariser weights, reached after a quadratic warm-up over ``reg_warmup_ratio`` of the steps;
    ``query_max_len`` / ``doc_max_len`` the token limits T (incl. [CLS] and [SEP]); the loss is logged every
    ``log_every`` steps; ``init_batch`` queries and documents are measured at initialisation.
    """

    steps: int = 200
    batch_size: int = 32
    lr: float = 5e-4
    lr_warmup_ratio: float = 0.1
    lambda_q: float = 5e-2
    lambda_d: float = 3e-2
    reg_warmup_ratio: float = 1 / 3
    query_max_len: int = 12
    doc_max_len: int = 32
    log_every: int = 10
    init_batch: int = 64
