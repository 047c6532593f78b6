"""Configuration, presets and conditions of the synthetic SPT experiments (see :mod:`initlab.synthetic.spt`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


from initlab.config import derive
from initlab.nn.encoder import ModelConfig
from initlab.synthetic.spt.tasks import TaskConfig
from initlab.synthetic.spt.verdicts import VerdictThresholds

__all__ = ["SPTConfig", "PRESETS", "BASE", "CONFIRMATORY_SEEDS", "EXPLORATORY_SEEDS", "HYBRIDS", "condition_names",
           "condition_spec", "model_config"]

EXPLORATORY_SEEDS = (0, 1, 2, 3, 4)
CONFIRMATORY_SEEDS = (7301, 7302, 7303, 7304, 7305)
ALL_GROUPS = ("embeddings", "qkvo", "ffn", "layernorm")
HYBRIDS = {"qk": ("qk",), "qkvo": ("qkvo",), "ffn": ("ffn",), "qk_emb": ("qk", "embeddings"),
           "qk_ln": ("qk", "layernorm"), "qk_emb_ln": ("qk", "embeddings", "layernorm")}


@dataclass(frozen=True)
class SPTConfig:
    """Resolved configuration of one ``initlab synthetic spt`` run."""

    seeds: tuple[int, ...] = CONFIRMATORY_SEEDS
    task: TaskConfig = field(default_factory=TaskConfig)
    n_train: int = 1024
    n_val: int = 512
    n_test: int = 512
    d_model: int = 32
    n_heads: int = 1
    d_ff: int = 64
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.01
    finetune_epochs: int = 100  # fixed budget by the plateau rule (initlab.synthetic.spt.budget): no plateau by 100 -> 100
    spt_max_epochs: int = 60  # SPT stops when validation masked-reconstruction loss stalls, at most this
    spt_patience: int = 5
    spt_sweep_epochs: tuple[int, ...] = (0, 1, 10, 50)  # fixed-epoch SPT checkpoints (0 = scratch)
    mask_rate: float = 0.15
    depths: tuple[int, ...] = (1, 2, 4)
    proximity_w: int = 2
    probe_size: int = 64
    conditions: tuple[str, ...] = ()  # empty = every condition
    map_seed: int = -1  # the seed whose attention maps are saved for the figures (-1: the first seed)
    thresholds: VerdictThresholds = field(default_factory=VerdictThresholds)

    def __post_init__(self) -> None:
        for name in ("n_train", "n_val", "n_test", "d_model", "n_heads", "d_ff", "batch_size", "finetune_epochs",
                     "spt_max_epochs", "spt_patience", "probe_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"SPTConfig.{name}: expected a positive int, got {v!r}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"SPTConfig.seeds: expected at least one seed, no repeats, got {self.seeds}")
        if any(e < 0 for e in self.spt_sweep_epochs):
            raise ValueError(f"SPTConfig.spt_sweep_epochs: expected ints >= 0, got {self.spt_sweep_epochs}")
        if any(L < 1 for L in self.depths) or 1 not in self.depths:
            raise ValueError(f"SPTConfig.depths: expected ints >= 1 including 1, got {self.depths}")
        if self.lr <= 0:
            raise ValueError(f"SPTConfig.lr: expected > 0, got {self.lr}")
        if self.probe_size > self.n_test:
            raise ValueError(f"SPTConfig.probe_size: expected <= n_test={self.n_test}, got {self.probe_size}")
        bad = [c for c in self.conditions if c not in condition_names(self, all_=True)]
        if bad:
            raise ValueError(f"SPTConfig.conditions: unknown {bad}; expected names from {condition_names(self, all_=True)}")


# -- conditions ----------------------------------------------------------------------------------
def condition_spec(cfg: SPTConfig) -> dict[str, dict[str, Any]]:
    """condition -> {variant ("full" | "attn_only"), depth, spt: (source, epoch) or None, load, freeze}.

    ``epoch`` is ``"rule"`` (the early-stopping checkpoint) or a fixed sweep epoch.
    """
    spec: dict[str, dict[str, Any]] = {
        "scratch": dict(variant="full", depth=1, spt=None, load=(), freeze=()),
        "spt": dict(variant="full", depth=1, spt=("local", "rule"), load=ALL_GROUPS, freeze=()),
        "frozen_attn": dict(variant="full", depth=1, spt=None, load=(), freeze=("qkvo",)),
    }
    for h, groups in HYBRIDS.items():
        spec[f"hybrid_{h}"] = dict(variant="full", depth=1, spt=("local", "rule"), load=groups, freeze=())
    for e in cfg.spt_sweep_epochs:
        if e > 0:
            spec[f"spt_e{e}"] = dict(variant="full", depth=1, spt=("local", e), load=ALL_GROUPS, freeze=())
    for L in cfg.depths:
        if L != 1:
            spec[f"depth{L}_scratch"] = dict(variant="full", depth=L, spt=None, load=(), freeze=())
            spec[f"depth{L}_spt"] = dict(variant="full", depth=L, spt=("local", "rule"), load=ALL_GROUPS, freeze=())
    spec["cross_count"] = dict(variant="full", depth=1, spt=("count", "rule"), load=ALL_GROUPS, freeze=())
    spec["cross_iid"] = dict(variant="full", depth=1, spt=("iid", "rule"), load=ALL_GROUPS, freeze=())
    spec["attn_scratch"] = dict(variant="attn_only", depth=1, spt=None, load=(), freeze=())
    spec["attn_spt"] = dict(variant="attn_only", depth=1, spt=("local", "rule"), load=("embeddings", "qkvo"), freeze=())
    spec["attn_qk"] = dict(variant="attn_only", depth=1, spt=("local", "rule"), load=("qk",), freeze=())
    return spec


def condition_names(cfg: SPTConfig, all_: bool = False) -> list[str]:
    """Condition names run by ``cfg`` (all that ``cfg`` defines when ``all_`` or ``cfg.conditions`` is empty)."""
    names = list(condition_spec(cfg))
    if all_ or not cfg.conditions:
        return names
    return [n for n in names if n in cfg.conditions]


def model_config(cfg: SPTConfig, depth: int, variant: str = "full") -> ModelConfig:
    """The encoder of a condition: ``full`` (FFN + pre-norm LayerNorms) or ``attn_only`` (the theorem's
    setting: attention with residual straight into mean pooling, no FFN, no LayerNorm)."""
    from initlab.synthetic.spt.tasks import vocab_size

    extra = {} if variant == "full" else dict(use_ffn=False, use_layernorm=False)
    return ModelConfig(vocab_size=vocab_size(cfg.task), max_len=cfg.task.T, d_model=cfg.d_model, n_heads=cfg.n_heads,
                       n_layers=depth, d_ff=cfg.d_ff, **extra)


# Sizes (d, n, lr, batch) are those of the exploratory runs; the budgets follow the stated rules
# (SPT: validation early stopping; fine-tuning: scratch's train-accuracy plateau on exploratory seeds).
BASE = SPTConfig()
PRESETS: dict[str, SPTConfig] = {
    # smoke test: one exploratory seed, three conditions, 40 fine-tuning epochs (not the rule's budget)
    "quick": derive(BASE, seeds=(0,), finetune_epochs=40, spt_sweep_epochs=(0,), depths=(1,), conditions=("scratch", "spt", "hybrid_qk")),
    "default": BASE,
    "full": derive(BASE, seeds=CONFIRMATORY_SEEDS + (7306, 7307, 7308, 7309, 7310), spt_max_epochs=100, spt_patience=10),
}

