"""The SPLADE training recipe of the synthetic SPLADE experiment (the phase diagram's
:class:`initlab.synthetic.splade.phase.config.PhaseConfig` derives from it)."""

from __future__ import annotations

from dataclasses import dataclass

from initlab.config import check_ranges, ranged

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

    steps: int = ranged(200, "[1, inf)")
    batch_size: int = ranged(32, "[2, inf)")  # in-batch negatives: one pair alone has none
    lr: float = ranged(5e-4, "(0, inf)")
    lr_warmup_ratio: float = ranged(0.1, "[0, 1]")
    lambda_q: float = ranged(5e-2, "[0, inf)")
    lambda_d: float = ranged(3e-2, "[0, inf)")
    reg_warmup_ratio: float = ranged(1 / 3, "[0, 1]")
    query_max_len: int = ranged(12, "[3, inf)")  # [CLS], one token, [SEP]
    doc_max_len: int = ranged(32, "[3, inf)")
    log_every: int = ranged(10, "[1, inf)")
    init_batch: int = ranged(64, "[2, inf)")

    def __post_init__(self) -> None:
        check_ranges(self)
