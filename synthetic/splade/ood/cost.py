"""The OOD synthetic SPLADE's cost model: CPU seconds of one SPLADE training step (per head engine and family), one
evaluation (per engine) and one MLM step on one core, each linear in the vocabulary V (the head's ``V x d``
projection, and on the dense engine the ``(tokens, V)`` logits, dominate), measured with
``python benchmarks/bench_ood_cost.py`` (docs/synthetic_splade_ood.md#cost); :func:`cell_seconds` adds them up per
cell of a config. The sweep (:mod:`initlab.synthetic.splade.ood.runner`) gives each planned cell its cost from here.
"""

from __future__ import annotations

from initlab.synthetic.splade.ood.config import OODConfig, backbone_for

__all__ = ["STEP_SECONDS", "EVAL_SECONDS", "MLM_STEP_SECONDS", "TOKEN_CACHE_STEP_SECONDS", "step_seconds", "eval_seconds",
           "mlm_step_seconds", "cell_seconds"]

#: cost model, fitted to ``python benchmarks/bench_ood_cost.py --vocab 2048,8192,30000 --families
#: bert,modernbert --steps 5 --rounds 2 --sparse-mlm`` (2026-12-02, 2 shared cores at load 7-10, one torch thread; the
#: measured points are in docs/synthetic_splade_ood.md#cost): CPU seconds per SPLADE step (batch 32, documents of
#: 60-100 words) = a + b V / 1000 for each head engine and family (families not measured use bert's line: roberta
#: has its shape, albert a narrower head); per evaluation of every set (1600 documents) a + b V / 1000 per engine;
#: per MLM step (head at the masked positions only) a + b V / 1000
STEP_SECONDS: dict[str, dict[str, tuple[float, float]]] = {
    "dense": {"bert": (0.146, 0.0833), "modernbert": (0.138, 0.0799)},
    "fused": {"bert": (0.115, 0.0112), "modernbert": (0.109, 0.0113)},
}
EVAL_SECONDS: dict[str, tuple[float, float]] = {"dense": (2.97, 1.108), "fused": (1.55, 0.408)}
MLM_STEP_SECONDS = (0.064, 0.0056)
#: CPU seconds per SPLADE step that a cell's token cache takes off the step lines above (each text tokenised once in
#: a cell, :class:`initlab.synthetic.splade.train.TokenCache`; ``bench_ood_cost.py`` times steps without it): the
#: tokenising of the training batches, plateau checks and checkpoint evaluations a 300-step cell of the default no
#: longer does, per step (``BACKBONES=<backbone folder> python benchmarks/bench_reproduce_cost.py tokens``,
#: 2026-12-06, docs/benchmarks.md)
TOKEN_CACHE_STEP_SECONDS = 0.008


def _engine(engine: str) -> str:
    if engine not in STEP_SECONDS:
        raise ValueError(f"engine: expected one of {sorted(STEP_SECONDS)}, got {engine!r}")
    return engine


def step_seconds(vocab: int, engine: str = "dense", family: str = "bert") -> float:
    """Cost model: CPU seconds of one SPLADE training step (batch 32, documents of 60-100 words) at vocabulary V with
    head ``engine`` (``"dense"`` or ``"fused"``) for ``family`` (bert's line for a family not measured), less what the
    cell's token cache saves per step (:data:`TOKEN_CACHE_STEP_SECONDS`).

    Raises:
        ValueError: an unknown ``engine``.
    """
    lines = STEP_SECONDS[_engine(engine)]
    a, b = lines.get(family, lines["bert"])
    return a + b * vocab / 1000 - TOKEN_CACHE_STEP_SECONDS


def eval_seconds(vocab: int, engine: str = "dense") -> float:
    """Cost model: CPU seconds of one evaluation of every set (1600 documents) at vocabulary V with head ``engine``.

    Raises:
        ValueError: an unknown ``engine``.
    """
    a, b = EVAL_SECONDS[_engine(engine)]
    return a + b * vocab / 1000


def cell_seconds(cfg: OODConfig) -> dict[str, float]:
    """Cost model: CPU seconds of each backbone (``pretrain_<family>``, on ``mlm_text_multiplier`` times the text:
    the steps, not the text, set the cost), of one SPLADE cell of each family at the cap with its evaluations
    (``train_<family>``, with ``cfg.engine``; the same for every k, a plateau stop only shortens it; an imposed-norm
    arm's cell costs its normal-norm family's; BM25 hard negatives not costed), and the whole grid of one seed with
    the imposed-norm arm's cells (``seed_total``), for ``cfg``."""
    V = cfg.corpus.vocab_size
    out = {f"pretrain_{f}": backbone_for(cfg, f).mlm_steps * mlm_step_seconds(V) for f in cfg.families}
    for f in cfg.families:
        out[f"train_{f}"] = (cfg.max_steps * step_seconds(V, cfg.engine, f)
                             + (len(cfg.checkpoints) + 1) * eval_seconds(V, cfg.engine))
    out["seed_total"] = (sum(out[f"pretrain_{f}"] + len(cfg.ks) * out[f"train_{f}"] for f in cfg.families)
                         + sum(len(cfg.ks) * out[f"train_{f}"] for f, _ in cfg.imposed))
    return out


def mlm_step_seconds(vocab: int) -> float:
    """Cost model: CPU seconds of one MLM pretraining step (batch 32, head at the masked positions) at vocabulary V."""
    return MLM_STEP_SECONDS[0] + MLM_STEP_SECONDS[1] * vocab / 1000
