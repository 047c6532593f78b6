"""Configuration of the synthetic SPLADE inflation sweep (:mod:`initlab.synthetic.splade.inflation`).

Role: the frozen sweep config, its presets, and the two names derived from it (the vocabulary size of a
corpus, the file name of a cell). The corpus and backbone configs it nests are those of
:mod:`initlab.synthetic.splade.data` and :mod:`initlab.synthetic.splade.model`.
"""

from __future__ import annotations

from dataclasses import dataclass

from initlab.config import derive
from initlab.synthetic.splade.data import CorpusConfig
from initlab.synthetic.splade.model import BackboneConfig

__all__ = ["TrainingRecipe", "SpladeSweepConfig", "BASE", "PRESETS", "vocab_size", "cell_name"]


@dataclass(frozen=True)
class TrainingRecipe:
    """The SPLADE training recipe both synthetic SPLADE experiments share (the inflation sweep's
    :class:`SpladeSweepConfig` and the phase diagram's :class:`initlab.synthetic.splade.phase.config.PhaseConfig`
    derive from it; :mod:`initlab.synthetic.splade.train` and :mod:`initlab.synthetic.splade.measure` read only
    these fields).

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


@dataclass(frozen=True)
class SpladeSweepConfig(TrainingRecipe):
    """The sweep: corpus, backbone, the (inflation x k x seed) grid and the SPLADE recipe.

    ``lambda_q`` / ``lambda_d`` are the maximum FLOPS regulariser weights reached after the quadratic
    warm-up over ``reg_warmup_ratio`` of the ``steps``; ``lr`` is AdamW's peak learning rate with
    linear warm-up over ``lr_warmup_ratio`` of the steps, then linear decay (transformers' default).
    Query/document token limits are ``query_max_len`` / ``doc_max_len`` (T, incl. [CLS] and [SEP]).
    ``torch_threads`` intra-op CPU threads during the sweep (1: the models are tiny, and on a shared
    machine extra threads mostly spin).
    """

    corpus: CorpusConfig = CorpusConfig()
    backbone: BackboneConfig = BackboneConfig()
    inflations: tuple[float, ...] = (1.0, 4.0, 16.0)
    ks: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
    seeds: tuple[int, ...] = (0,)
    dense_fraction: float = 0.9
    torch_threads: int = 1


BASE = SpladeSweepConfig()


PRESETS: dict[str, SpladeSweepConfig] = {
    "quick": derive(
        BASE,
        corpus=derive(BASE.corpus, n_docs=120, n_train_queries=600, n_dev_queries=40),
        backbone=derive(BASE.backbone, mlm_steps=100),
        inflations=(1.0, 16.0), ks=(1.0, 16.0), seeds=(0,), steps=60, log_every=5,
    ),
    "default": BASE,
    "full": derive(BASE, seeds=(0, 1, 2), steps=500, corpus=derive(BASE.corpus, n_train_queries=5000)),
}


def vocab_size(c: CorpusConfig) -> int:
    """V of the corpus: special tokens + background + topic + entity words."""
    return 5 + c.n_background + c.n_topics * c.topic_words + c.n_entities


def cell_name(inflation: float, k: float, seed: int) -> str:
    """File-safe name of one cell, e.g. ``inf=4_k=16_seed=0``."""
    return f"inf={inflation:g}_k={k:g}_seed={seed}"
