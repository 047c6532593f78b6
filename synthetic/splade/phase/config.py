"""The synthetic SPLADE phase diagram's definition: its config, presets, grid and cells.

Role: what is run, fixed before running. :class:`PhaseConfig` (grid, SPLADE recipe, analysis thresholds)
and its presets; :func:`grid` lists every (family, mode, s, k, seed) point and :func:`cell_spec` maps it
to the one trained model :class:`CellSpec` behind it (the three ``MODES`` are described in
:mod:`initlab.synthetic.splade.phase.runner`); :func:`cell_key` is the config a saved cell depends on. Running
one cell is :mod:`initlab.synthetic.splade.phase.cell`, the sweep :func:`initlab.synthetic.splade.phase.runner.run_phase`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from initlab.config import derive, to_dict
from initlab.synthetic.splade.data import CorpusConfig
from initlab.synthetic.splade.families import FAMILIES, FamilyConfig

__all__ = ["MODES", "PhaseConfig", "BASE", "PRESETS", "CellSpec", "cell_spec", "grid", "check_config", "cell_key"]


#: the three ways of applying s and k (see the module docstring).
MODES: tuple[str, ...] = ("tied", "k_output", "s_output")


@dataclass(frozen=True)
class PhaseConfig:
    """The phase-diagram sweep: grid, SPLADE recipe and the thresholds of the analysis, fixed before running.

    Grid: ``families`` x ``head_scales`` (s) x ``ks`` (k) in ``modes``; ``output_ks`` are the k of the
    ``k_output`` and ``s_output`` modes (k = 1 of ``k_output`` is the tied cell). Recipe: as
    :class:`initlab.synthetic.splade.config.SpladeSweepConfig` (``steps`` AdamW steps of batch ``batch_size``,
    peak ``lr``, FLOPS regulariser weights ``lambda_q``/``lambda_d`` after a quadratic warm-up over
    ``reg_warmup_ratio`` of the steps, T limits ``query_max_len``/``doc_max_len``, losses logged every
    ``log_every`` steps, ``init_batch`` pairs for the initial InfoNCE).

    Thresholds: collapse by :func:`initlab.nn.collapse.detect_collapse` with ``dense_fraction``,
    ``max_mean_cosine``, ``max_same_ranking``; ``loss_threshold`` (nats of the logged InfoNCE part)
    for "steps to threshold"; ``harm_margin`` (nDCG@10) for every "worse than" in the claim verdicts;
    ``poor_min_loss_margin`` (nats) for a poor minimum; ``hit_tolerance`` (nDCG@10) for a near-hit of
    the recommended k. Each worker process runs its cells with ``torch_threads`` threads.
    """

    corpus: CorpusConfig = CorpusConfig(n_docs=240, n_train_queries=1600, n_dev_queries=80)
    backbone: FamilyConfig = FamilyConfig()
    families: tuple[str, ...] = FAMILIES
    head_scales: tuple[float, ...] = (0.25, 1.0, 16.0)
    ks: tuple[float, ...] = (1.0, 2.0, 4.0, 16.0, 64.0)
    output_ks: tuple[float, ...] = (4.0, 16.0)
    modes: tuple[str, ...] = ("tied", "k_output")
    seeds: tuple[int, ...] = (0,)
    steps: int = 150
    batch_size: int = 32
    lr: float = 5e-4
    lr_warmup_ratio: float = 0.1
    lambda_q: float = 5e-2
    lambda_d: float = 3e-2
    reg_warmup_ratio: float = 1 / 3
    query_max_len: int = 12
    doc_max_len: int = 32
    log_every: int = 5
    init_batch: int = 32
    dense_fraction: float = 0.9
    max_mean_cosine: float = 0.99
    max_same_ranking: float = 0.9
    loss_threshold: float = 1.0
    harm_margin: float = 0.05
    poor_min_loss_margin: float = 0.1
    hit_tolerance: float = 0.01
    inspect_texts: int = 40
    torch_threads: int = 1


BASE = PhaseConfig()


_P2 = tuple(2.0 ** i for i in range(-2, 7))  # 1/4 ... 64


PRESETS: dict[str, PhaseConfig] = {
    "quick": derive(BASE, corpus=derive(BASE.corpus, n_docs=120, n_train_queries=600, n_dev_queries=40),
                    backbone=derive(BASE.backbone, mlm_steps=100), families=("bert", "modernbert"),
                    head_scales=(1.0, 16.0), ks=(1.0, 16.0), output_ks=(16.0,), steps=40),
    "default": BASE,
    "full": derive(BASE, head_scales=_P2, ks=_P2, output_ks=tuple(k for k in _P2 if k != 1.0),
                   modes=MODES, seeds=(0, 1, 2), steps=200),
    # the fresh seed on which the alternative recommended-k rule (``edge_k`` in
    # :mod:`initlab.synthetic.splade.phase.report`) is tested: the default recipe, tied mode, seed 1
    "confirm": derive(BASE, modes=("tied",), seeds=(1,)),
    # the fresh seed for the input-side check at equal output scale (s = 1/4, k = 16: tied e = h = 1/64
    # against output-only e = 1/4, h = 1/64), added after the seed-0 default run; see docs/synthetic_splade.md
    "confirm-input": derive(BASE, modes=("tied", "k_output"), head_scales=(0.25,), ks=(1.0, 16.0),
                            output_ks=(16.0,), seeds=(1,)),
}


@dataclass(frozen=True)
class CellSpec:
    """One trained model: input word embeddings ``e * W``, output projection ``h * W``, tied or not."""

    family: str
    tied: bool
    e: float
    h: float
    seed: int

    @property
    def name(self) -> str:
        return f"{self.family}_{'tied' if self.tied else 'untied'}_e={self.e:g}_h={self.h:g}_seed={self.seed}"


def cell_spec(family: str, mode: str, s: float, k: float, seed: int) -> CellSpec:
    """The trained model behind grid point (family, mode, s, k, seed).

    Raises:
        ValueError: unknown ``mode``.
    """
    if mode == "tied":
        return CellSpec(family, True, s / k, s / k, seed)
    if mode == "k_output":
        return CellSpec(family, True, s, s, seed) if k == 1.0 else CellSpec(family, False, s, s / k, seed)
    if mode == "s_output":
        return CellSpec(family, False, 1.0, s / k, seed)
    raise ValueError(f"mode: expected one of {list(MODES)}, got {mode!r}")


def grid(cfg: PhaseConfig) -> list[dict[str, Any]]:
    """Every grid point ``{family, mode, s, k, seed, cell}`` of ``cfg`` (``cell``: the :class:`CellSpec` name)."""
    points = []
    for family in cfg.families:
        for mode in cfg.modes:
            ks = cfg.ks if mode == "tied" else ((1.0,) if mode == "k_output" else ()) + tuple(cfg.output_ks)
            for s in cfg.head_scales:
                for k in ks:
                    for seed in cfg.seeds:
                        spec = cell_spec(family, mode, s, k, seed)
                        points.append({"family": family, "mode": mode, "s": s, "k": k, "seed": seed, "cell": spec.name})
    return points


def check_config(cfg: PhaseConfig) -> None:
    """Raise ``ValueError`` naming the field for an unknown family or mode, or a scale that is not a power of two."""
    for f in cfg.families:
        if f not in FAMILIES:
            raise ValueError(f"families: expected names from {list(FAMILIES)}, got {f!r}")
    for m in cfg.modes:
        if m not in MODES:
            raise ValueError(f"modes: expected names from {list(MODES)}, got {m!r}")
    for name in ("head_scales", "ks", "output_ks"):
        for v in getattr(cfg, name):
            if not (math.isfinite(v) and v > 0 and math.log2(v) == round(math.log2(v))):
                raise ValueError(f"{name}: expected powers of two (exact products s / k), got {v!r}")


_GRID_FIELDS = ("families", "head_scales", "ks", "output_ks", "modes", "seeds")


def cell_key(cfg: PhaseConfig, spec: CellSpec) -> dict[str, Any]:
    """The config a cell depends on: its spec and the whole recipe (not the grid lists or worker count)."""
    recipe = {k: v for k, v in to_dict(cfg).items() if k not in _GRID_FIELDS}
    return {"cell": {"family": spec.family, "tied": spec.tied, "e": spec.e, "h": spec.h, "seed": spec.seed},
            "recipe": recipe}
