"""Configuration, presets and conditions of the synthetic SPT experiments (see :mod:`initlab.synthetic.spt`).

A condition is a recipe for one fine-tuned model per seed: which encoder (``full`` pre-norm model or the
``attn_only`` model of the theorem), its depth, which SPT checkpoint it starts from (none for the
*label-only* arms), which parameter groups it loads from that checkpoint, which groups it freezes, its
learning rate and its fine-tuning budget. :func:`condition_spec` lists them; :func:`condition_seeds` says
on which seeds each condition runs (a preregistered per-condition seed count may use only the first n
seeds, so that a claim that needs more seeds does not make every condition pay for them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from initlab.config import check_ranges, later_field, ranged
from initlab.runfile import RunFiles
from initlab.synthetic.spt.arms import HYBRIDS, arms
from initlab.synthetic.spt.claims import SPTThresholds
from initlab.nn.encoder import ModelConfig
from initlab.synthetic.spt.tasks import TaskConfig

__all__ = ["SPTConfig", "PRESETS", "BASE", "EXPLORATORY_SEEDS", "HYBRIDS", "LABEL_ONLY", "CAUSAL", "condition_names",
           "spt_model_overrides", "label_only_names", "condition_spec", "condition_seeds", "label_lr", "model_config"]

EXPLORATORY_SEEDS = (0, 1, 2, 3, 4)


def label_only_names(depths: tuple[int, ...] = (1, 2, 4)) -> tuple[str, ...]:
    """The label-only arms (no SPT checkpoint) of :mod:`initlab.synthetic.spt.arms` at these depths, in table order:
    each gets its own learning rate chosen on validation."""
    return tuple(a.name for a in arms((), depths) if a.label_only)


#: the label-only arms at the depths of the presets (:func:`label_only_names`)
LABEL_ONLY = label_only_names()
#: the causal arms (docs/synthetic_spt.md, the preregistration of the causal run): each a condition with a
#: written prediction; label-only ones tune their learning rate like every other label-only arm
CAUSAL = ("alibi_scratch", "qkscale_scratch", "lastpool_scratch", "spt_nopos")


@dataclass(frozen=True)
class SPTConfig:
    """Resolved configuration of one ``initlab synthetic spt`` run.

    Data and model: ``n_train`` / ``n_val`` / ``n_test`` sequences of the task (test accuracy is only
    measured, so a large ``n_test`` costs one forward pass per measurement and removes test-sampling noise
    from the per-seed accuracies); encoder width ``d_model``, ``n_heads``, ``d_ff``.

    Optimisation: AdamW, ``batch_size``, ``weight_decay``; ``lr`` for SPT and for fine-tuning every arm
    without its own entry; ``label_lr`` the preregistered fine-tuning learning rate of a condition (pairs
    ``(condition, lr)``: every label-only arm, and since the causal round the SPT-initialised arms too),
    chosen on validation accuracy over ``lr_grid`` on exploratory seeds. ``lr_sweep`` non-empty turns the
    run into that selection: every fine-tuned condition of the run (``scratch_matched`` excepted) is
    trained at every learning rate of ``lr_sweep``. ``ft_schedule`` the fine-tuning learning-rate schedule
    (``constant``, or ``cosine``: linear warm-up over ``warmup_epochs`` then cosine decay to 0 at the
    fine-tuning cap; :func:`initlab.synthetic.spt.training.lr_factor`).

    Causal arms (:data:`CAUSAL`): ``alibi_slope`` the fixed distance bias ``-m |t - s|`` of ``alibi_scratch``
    (ALiBi, arXiv:2108.12409); ``qk_init_scale`` the factor on W_Q, W_K's initial weights of
    ``qkscale_scratch`` (a non-uniform start); ``lastpool_scratch`` pools the last token instead of the mean;
    ``spt_nopos`` fine-tunes (with positions) from an SPT run whose model had no position codes.

    Budgets: SPT runs until the best validation masked-reconstruction loss improved by less than
    ``spt_min_rel_improvement`` (relative) over the last ``spt_window`` epochs, at most ``spt_max_epochs``
    (the rule's epoch is the best validation epoch); fixed-epoch snapshots ``spt_sweep_epochs`` are kept
    for the SPT-duration curve. Fine-tuning stops when the best validation accuracy is ``finetune_patience``
    epochs old, at most ``finetune_max_epochs`` (``finetune_patience = 0``: always the maximum); the
    compute-matched arm ``scratch_matched`` runs, per seed, exactly as many optimiser steps as that seed's
    SPT run (to its stopping epoch) plus its ``spt`` fine-tuning, with no early stop. The reported test
    accuracy is always that of the best validation epoch.

    Seeds: ``seeds`` (paired across conditions: same data and initialisation); ``seed_counts`` pairs
    ``(condition, n)`` run a condition on the first n seeds only. ``thresholds`` are the preregistered
    verdict thresholds (:class:`initlab.synthetic.spt.claims.SPTThresholds`).

    Engine: ``engine = "single"`` trains one model per cell (every preset with saved results); ``"batched"`` trains
    the seeds of one SPT source, and of one fine-tuned arm (every rate of it in a learning-rate selection), as one
    batched model (:mod:`initlab.synthetic.spt.batched`): each seed's data, initialisation and generators are the same,
    equal to the one-at-a-time loops in float64, to rounding in float32 (so its cells are other cells). A
    :func:`initlab.config.later_field`: at ``"single"`` it is in no config record or cell key, so the runs saved before
    it existed keep their keys and resume.
    """

    seeds: tuple[int, ...] = ranged(EXPLORATORY_SEEDS, "[0, inf)")
    task: TaskConfig = field(default_factory=TaskConfig)
    n_train: int = ranged(1024, "[1, inf)")
    n_val: int = ranged(512, "[1, inf)")
    n_test: int = ranged(4096, "[1, inf)")
    d_model: int = ranged(32, "[1, inf)")
    n_heads: int = ranged(1, "[1, inf)")
    d_ff: int = ranged(64, "[1, inf)")
    batch_size: int = ranged(64, "[1, inf)")
    lr: float = ranged(1e-3, "(0, inf)")
    label_lr: tuple[tuple[str, float], ...] = ranged((), "(0, inf)")
    lr_grid: tuple[float, ...] = ranged((3e-4, 1e-3, 3e-3, 1e-2), "(0, inf)")
    lr_sweep: tuple[float, ...] = ranged((), "(0, inf)")
    ft_schedule: str = "constant"
    warmup_epochs: int = ranged(0, "[0, inf)")
    alibi_slope: float = ranged(0.4, "(0, 1000)")
    qk_init_scale: float = ranged(4.0, "(0, 1000)")
    weight_decay: float = ranged(0.01, "[0, inf)")
    finetune_max_epochs: int = ranged(150, "[1, inf)")
    finetune_patience: int = ranged(20, "[0, inf)")
    spt_max_epochs: int = ranged(300, "[1, inf)")
    spt_window: int = ranged(20, "[1, inf)")
    spt_min_rel_improvement: float = ranged(0.01, "[0, 1)")
    spt_sweep_epochs: tuple[int, ...] = ranged((1, 5, 10, 20, 40), "[1, inf)")
    mask_rate: float = ranged(0.15, "(0, 1)")
    depths: tuple[int, ...] = ranged((1, 2, 4), "[1, inf)")
    proximity_w: int = ranged(2, "[0, inf)")
    probe_size: int = ranged(64, "[1, inf)")
    conditions: tuple[str, ...] = ()  # empty = every condition
    seed_counts: tuple[tuple[str, int], ...] = ranged((), "[1, inf)")
    map_seed: int = ranged(-1, "[-1, inf)")  # the seed whose attention maps are saved for the figures (-1: the first seed)
    thresholds: SPTThresholds = field(default_factory=SPTThresholds)
    engine: Literal["single", "batched"] = later_field("single")

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.engine not in ("single", "batched"):
            raise ValueError(f"SPTConfig.engine: expected 'single' or 'batched', got {self.engine!r}")
        if self.ft_schedule not in ("constant", "cosine"):
            raise ValueError(f"SPTConfig.ft_schedule: expected 'constant' or 'cosine', got {self.ft_schedule!r}")
        if self.warmup_epochs >= self.finetune_max_epochs:
            raise ValueError(f"SPTConfig.warmup_epochs: expected an int in [0, finetune_max_epochs), got {self.warmup_epochs!r}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"SPTConfig.seeds: expected at least one seed, no repeats, got {self.seeds}")
        if len(set(self.spt_sweep_epochs)) != len(self.spt_sweep_epochs):
            raise ValueError(f"SPTConfig.spt_sweep_epochs: expected distinct ints >= 1, got {self.spt_sweep_epochs}")
        if 1 not in self.depths:
            raise ValueError(f"SPTConfig.depths: expected ints >= 1 including 1, got {self.depths}")
        if self.probe_size > self.n_test:
            raise ValueError(f"SPTConfig.probe_size: expected <= n_test={self.n_test}, got {self.probe_size}")
        known = condition_names(self, all_=True)
        bad = [c for c in self.conditions if c not in known]
        if bad:
            raise ValueError(f"SPTConfig.conditions: unknown {bad}; expected names from {known}")
        for name, pairs in (("seed_counts", self.seed_counts),):
            conds = [c for c, _ in pairs]
            bad = [c for c in conds if c not in known] + [c for c in set(conds) if conds.count(c) > 1]
            if bad:
                raise ValueError(f"SPTConfig.{name}: unknown or repeated conditions {sorted(set(bad))}; expected "
                                 f"(condition, value) pairs with names from {known}")
        conds = [c for c, _ in self.label_lr]
        for c, lr in self.label_lr:
            if (c not in known and c not in label_only_names()) or conds.count(c) > 1:
                raise ValueError(f"SPTConfig.label_lr: ({c!r}, {lr!r}): expected a condition of {known} "
                                 "and a learning rate > 0, once each")
        for c, n in self.seed_counts:
            if n > len(self.seeds):
                raise ValueError(f"SPTConfig.seed_counts: ({c!r}, {n!r}): expected 1 <= n <= {len(self.seeds)} seeds")
        if self.lr_sweep and all(c == "scratch_matched" for c in condition_names(self)):
            raise ValueError("SPTConfig.lr_sweep: the learning-rate selection trains fine-tuned conditions other than "
                             "scratch_matched; expected some in conditions")


# -- conditions ----------------------------------------------------------------------------------
def condition_spec(cfg: SPTConfig) -> dict[str, dict[str, Any]]:
    """condition -> {variant ("full" | "attn_only"), depth, spt: (source, epoch) or None, load, freeze,
    budget ("early_stop" | "matched"), model (ModelConfig overrides), qk_scale (factor on the initial W_Q, W_K
    weights)}: every arm of :mod:`initlab.synthetic.spt.arms` under ``cfg`` (:meth:`~initlab.synthetic.spt.arms.Arm.spec`).

    ``epoch`` is ``"rule"`` (the SPT stopping rule's checkpoint) or a fixed sweep epoch. Source ``nopos`` is
    SPT on the task's own inputs by a model without position codes (:func:`spt_model_overrides`).
    """
    return {a.name: a.spec(cfg) for a in arms(cfg.spt_sweep_epochs, cfg.depths)}


def spt_model_overrides(source: str) -> dict[str, Any]:
    """ModelConfig overrides of the model an SPT source pretrains: ``nopos`` has no position codes."""
    return {"pos_encoding": "none"} if source == "nopos" else {}


def condition_names(cfg: SPTConfig, all_: bool = False) -> list[str]:
    """Condition names run by ``cfg`` (all that ``cfg`` defines when ``all_`` or ``cfg.conditions`` is empty)."""
    names = list(condition_spec(cfg))
    if all_ or not cfg.conditions:
        return names
    return [n for n in names if n in cfg.conditions]


def condition_seeds(cfg: SPTConfig, name: str) -> tuple[int, ...]:
    """The seeds condition ``name`` runs on: the first ``n`` of ``cfg.seeds`` for a ``seed_counts`` entry, else all."""
    n = dict(cfg.seed_counts).get(name, len(cfg.seeds))
    return tuple(cfg.seeds[:n])


def label_lr(cfg: SPTConfig, name: str) -> float:
    """The fine-tuning learning rate of condition ``name``: its ``label_lr`` entry (label-only arms), else ``lr``.
    The compute-matched arm uses scratch's learning rate unless it has its own entry."""
    lrs = dict(cfg.label_lr)
    if name == "scratch_matched" and name not in lrs:
        return lrs.get("scratch", cfg.lr)
    return lrs.get(name, cfg.lr)


def model_config(cfg: SPTConfig, depth: int, variant: str = "full", **overrides: Any) -> ModelConfig:
    """The encoder of a condition: ``full`` (FFN + pre-norm LayerNorms) or ``attn_only`` (the theorem's
    setting: attention with residual straight into mean pooling, no FFN, no LayerNorm); ``overrides`` are
    further ModelConfig fields (a condition's ``model`` entry: distance bias, pooling, position codes)."""
    from initlab.synthetic.spt.tasks import vocab_size

    extra = {} if variant == "full" else dict(use_ffn=False, use_layernorm=False)
    extra.update(overrides)
    return ModelConfig(vocab_size=vocab_size(cfg.task), max_len=cfg.task.T, d_model=cfg.d_model, n_heads=cfg.n_heads,
                       n_layers=depth, d_ff=cfg.d_ff, **extra)


# -- presets ---------------------------------------------------------------------------------------
#: the dataclass defaults: task, model sizes and optimiser of the earlier runs, budgets by the stated rules
BASE = SPTConfig()
#: every run of the experiment, one file each in ``runs/`` (:class:`initlab.runfile.RunFiles`; docs/runs.md lists them)
PRESETS: RunFiles[SPTConfig] = RunFiles(SPTConfig, Path(__file__).with_name("runs"))

#: the primary claims ``initlab reproduce``'s SPT stage must decide (one Holm family: those of
#: :data:`initlab.synthetic.spt.claims.SPT_FAMILIES`'s primary claims that the arms of ``runs/default.toml`` run). The
#: stage runs ``runs/default.toml``: its base is the preregistered run whose recipe it repeats
#: (:func:`reproduce_recipe`), its seeds are fresh and as many as the power computation on that run's saved per-seed
#: numbers asks for these claims (tests/synthetic/spt/test_reproduce_preset.py checks all three)
REPRODUCE_CLAIMS = ("spt_gain", "proximity", "causal_prior", "causal_nopos")


def reproduce_recipe() -> str:
    """The name of the preregistered run whose recipe (rates, budgets, task, model) ``initlab reproduce``'s SPT stage
    repeats: the base of ``runs/default.toml``, the run the stage runs."""
    return PRESETS.files()["default"].base
