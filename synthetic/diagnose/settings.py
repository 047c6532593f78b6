"""The preregistered validation settings of ``initlab diagnose`` (docs/diagnose.md, section 2).

Every setting is one synthetic task (:mod:`initlab.synthetic.spt.tasks`) and one encoder
(:class:`initlab.nn.encoder.SequenceTransformer`), trained in two arms on the same seeds: label-only from a
fresh initialisation (``scratch``) and masked-reconstruction self-pretraining on the same training inputs then
label fine-tuning (``spt``). The training loops are those of the synthetic SPT experiment
(:func:`initlab.synthetic.spt.training.pretrain`, :func:`initlab.synthetic.spt.training.finetune`).

Data seeds of seed s (as in :mod:`initlab.synthetic.spt.cells`): training ``1000 s + 1``, test ``1000 s + 2``,
validation ``1000 s + 6``. A CLS setting prepends the token ``CLS_ID = vocab_size(task)`` to every sequence
(the model's vocabulary grows by one) and classifies from position 0.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from initlab.config import check_ranges, ranged
from initlab.nn.encoder import ModelConfig, SequenceTransformer
from initlab.synthetic.spt.tasks import TaskConfig, make_task, vocab_size

__all__ = ["Setting", "Budget", "SETTINGS", "SEEDS", "BUDGET", "setting_data", "setting_model", "setting_model_config"]

#: fresh seeds (no earlier run of this project used them: docs and presets grepped, 2026-12-01)
SEEDS = (2901, 2902, 2903)


@dataclass(frozen=True)
class Setting:
    """One validation setting: ``task`` (local | count), its :class:`TaskConfig`, encoder depth, pooling
    (mean | cls), the fixed proximity bias m of the scores (0 = none) and the label-only learning rate."""

    name: str
    task: str
    task_cfg: TaskConfig
    depth: int = ranged(1, "[1, inf)")
    pooling: str = "mean"
    proximity_bias: float = ranged(0.0, "[0, inf)")
    scratch_lr: float = ranged(1e-2, "(0, inf)")  # the learning rate explore-lr chose for depth-1 scratch (3e-3 at depth 2 and 4)
    what: str = ""

    def __post_init__(self) -> None:
        check_ranges(self)


@dataclass(frozen=True)
class Budget:
    """Sizes and budgets shared by every setting (sized from a measured cost, docs/diagnose.md section 3)."""

    n_train: int = ranged(1024, "[1, inf)")
    n_val: int = ranged(256, "[1, inf)")
    n_test: int = ranged(1024, "[1, inf)")
    d_model: int = ranged(32, "[1, inf)")
    n_heads: int = ranged(1, "[1, inf)")
    d_ff: int = ranged(64, "[1, inf)")
    batch_size: int = ranged(64, "[1, inf)")
    spt_epochs: int = ranged(25, "[1, inf)")
    spt_lr: float = ranged(1e-3, "(0, inf)")
    finetune_lr: float = ranged(1e-3, "(0, inf)")  # fine-tuning of the SPT arm
    finetune_max_epochs: int = ranged(40, "[1, inf)")
    finetune_patience: int = ranged(10, "[0, inf)")
    weight_decay: float = ranged(0.01, "[0, inf)")
    mask_rate: float = ranged(0.15, "(0, 1)")
    proximity_w: int = ranged(2, "[0, inf)")

    def __post_init__(self) -> None:
        check_ranges(self)


BUDGET = Budget()
_T100 = TaskConfig(T=100)

SETTINGS: dict[str, Setting] = {s.name: s for s in (
    Setting("local", "local", _T100, what="local task (run walk), T = 100, depth 1, mean pooling"),
    Setting("local_T50", "local", TaskConfig(T=50), what="local task, T = 50 (second sequence length)"),
    Setting("count", "count", _T100, what="count task (runs of tokens, label = which half dominates), T = 100"),
    Setting("bag", "count", replace(_T100, mean_run=1.0),
            what="bag-of-tokens count task: i.i.d. tokens, label = which half dominates (mean pooling solves it)"),
    Setting("depth2", "local", _T100, depth=2, scratch_lr=3e-3, what="local task, depth 2"),
    Setting("depth4", "local", _T100, depth=4, scratch_lr=3e-3, what="local task, depth 4"),
    Setting("cls", "local", _T100, pooling="cls", what="local task, CLS pooling (a CLS token at position 0)"),
    Setting("prox", "local", _T100, proximity_bias=1.0,
            what="local task, proximity-prior model (fixed ALiBi-like score bias -|i - j|)"),
)}


def cls_id(s: Setting) -> int:
    """The CLS token id of a CLS setting (one past the task's vocabulary)."""
    return vocab_size(s.task_cfg)


def _with_cls(s: Setting, x: torch.Tensor) -> torch.Tensor:
    if s.pooling != "cls":
        return x
    return torch.cat([torch.full((x.shape[0], 1), cls_id(s), dtype=x.dtype), x], dim=1)


def setting_data(s: Setting, seed: int, b: Budget = BUDGET) -> dict[str, torch.Tensor]:
    """``xtr, ytr, xva, yva, xte, yte`` of setting ``s`` and seed ``seed`` (``(N, T)`` long, ``(N,)`` long)."""
    xtr, ytr = make_task(s.task, b.n_train, 1000 * seed + 1, s.task_cfg)
    xte, yte = make_task(s.task, b.n_test, 1000 * seed + 2, s.task_cfg)
    xva, yva = make_task(s.task, b.n_val, 1000 * seed + 6, s.task_cfg)
    return {"xtr": _with_cls(s, xtr), "ytr": ytr, "xva": _with_cls(s, xva), "yva": yva, "xte": _with_cls(s, xte), "yte": yte}


def setting_model_config(s: Setting, b: Budget = BUDGET) -> ModelConfig:
    """The encoder of setting ``s`` (the synthetic SPT experiment's full pre-norm model, d 32, d_ff 64)."""
    extra = 1 if s.pooling == "cls" else 0
    return ModelConfig(vocab_size=vocab_size(s.task_cfg) + extra, max_len=s.task_cfg.T + extra, d_model=b.d_model,
                       n_heads=b.n_heads, n_layers=s.depth, d_ff=b.d_ff, pooling=s.pooling,
                       proximity_bias=s.proximity_bias)


def setting_model(s: Setting, seed: int, b: Budget = BUDGET) -> SequenceTransformer:
    """The fresh model of setting ``s`` and seed ``seed`` (``torch.manual_seed(seed)`` first): both arms start here."""
    torch.manual_seed(seed)
    return SequenceTransformer(setting_model_config(s, b))
