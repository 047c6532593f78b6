"""The synthetic SPLADE phase diagram's definition: its config, presets, grid and cells.

Role: what is run, fixed before running. :class:`PhaseConfig` (grid, SPLADE recipe, analysis thresholds)
and its presets; :func:`grid` lists every (family, mode, s, k, seed) point and :func:`cell_spec` maps it
to the one trained model :class:`CellSpec` behind it (the three ``MODES`` are described in
:mod:`initlab.synthetic.splade.phase.runner`); :func:`cell_key` is the config a saved cell depends on. Running
one cell is :mod:`initlab.synthetic.splade.phase.cell`, the sweep :func:`initlab.synthetic.splade.phase.runner.run_phase`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from initlab.config import later_field, ranged, to_dict
from initlab.synthetic.splade.claims import SPLADEThresholds
from initlab.nn.collapse import THRESHOLDS
from initlab.synthetic.splade.config import TrainingRecipe
from initlab.synthetic.splade.data import CorpusConfig
from initlab.synthetic.splade.families import FAMILIES, FamilyConfig
from initlab.runfile import RunFiles

__all__ = ["MODES", "PhaseConfig", "BASE", "PRESETS", "backbone_for", "STANDARD_RECIPE", "CellSpec", "cell_spec", "grid", "check_config", "cell_key", "inspect_name"]


#: the three ways of applying s and k (see the module docstring).
MODES: tuple[str, ...] = ("tied", "k_output", "s_output")


@dataclass(frozen=True)
class PhaseConfig(TrainingRecipe):
    """The phase-diagram sweep: grid, SPLADE recipe and the thresholds of the analysis, fixed before running.

    Grid: ``families`` x ``head_scales`` (s) x ``ks`` (k) in ``modes``; ``output_ks`` are the k of the
    ``k_output`` and ``s_output`` modes (k = 1 of ``k_output`` is the tied cell). Backbones: ``backbone`` (shape
    and MLM recipe) for every family, except those named in ``family_backbones``, which have their own
    (:func:`backbone_for`). Recipe: the shared :class:`initlab.synthetic.splade.config.TrainingRecipe` (``steps``
    AdamW steps of batch ``batch_size``, peak ``lr``, FLOPS regulariser weights ``lambda_q``/``lambda_d`` after a
    quadratic warm-up over ``reg_warmup_ratio`` of the steps, T limits ``query_max_len``/``doc_max_len``, losses
    logged every ``log_every`` steps, ``init_batch`` pairs for the initial InfoNCE).

    Evaluation: nDCG@10 on all dev queries and on its two halves (``select``: even positions, ``test``: odd
    positions; :mod:`initlab.synthetic.splade.claims` chooses the best k on one and judges on the other). After
    training every cell is also divided by each ``posthoc_ks`` (the trained model's head, tied or not, as
    ``mlmhead rescale`` would) and evaluated again: the trained-and-rescaled models of the collapse
    calibration (:mod:`initlab.synthetic.splade.calibration`).

    Thresholds: collapse by :func:`initlab.nn.collapse.detect_collapse` with ``dense_fraction``,
    ``max_mean_cosine``, ``max_same_ranking``; ``loss_threshold`` (nats of the logged InfoNCE part) for the
    descriptive "steps to threshold"; ``claims`` the preregistered thresholds of the claim verdicts. Each
    worker process runs its cells with ``torch_threads`` threads.

    ``engine``: the SPLADE head's engine (:func:`initlab.mlmhead.splade_encoder.use_engine`): ``"dense"``,
    sentence-transformers' own path (every preset with saved results), or ``"fused"`` (the same vectors to rounding
    without the ``(B, T, V)`` logits). A :func:`initlab.config.later_field`: at ``"dense"`` it is in no config record
    or cell key, so the runs saved before it existed keep their keys and resume; ``"fused"`` cells are other cells.
    """

    corpus: CorpusConfig = CorpusConfig(n_docs=240, n_train_queries=1600, n_dev_queries=160)
    backbone: FamilyConfig = FamilyConfig()
    family_backbones: dict[str, FamilyConfig] = field(default_factory=dict)
    families: tuple[str, ...] = FAMILIES
    head_scales: tuple[float, ...] = ranged((1.0,), "(0, inf)")
    ks: tuple[float, ...] = ranged((1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0), "(0, inf)")
    output_ks: tuple[float, ...] = ranged((4.0, 16.0, 64.0), "(0, inf)")
    modes: tuple[str, ...] = ("tied", "k_output")
    seeds: tuple[int, ...] = ranged((0,), "[0, inf)")
    steps: int = ranged(150, "[1, inf)")  # the recipe (TrainingRecipe) at this experiment's defaults
    log_every: int = ranged(5, "[1, inf)")
    init_batch: int = ranged(32, "[2, inf)")
    posthoc_ks: tuple[float, ...] = ranged((4.0, 16.0, 64.0), "(0, inf)")
    dense_fraction: float = ranged(THRESHOLDS.dense_fraction, "(0, 1]")
    max_mean_cosine: float = ranged(THRESHOLDS.max_mean_cosine, "(0, 1]")
    max_same_ranking: float = ranged(THRESHOLDS.max_same_ranking, "(0, 1]")
    loss_threshold: float = ranged(1.0, "(0, inf)")
    claims: SPLADEThresholds = SPLADEThresholds()
    inspect_texts: int = ranged(40, "[2, inf)")
    torch_threads: int = ranged(1, "[1, inf)")
    engine: Literal["dense", "fused"] = later_field("dense")

    def __post_init__(self) -> None:
        super().__post_init__()  # the recipe's ranges and this config's (check_ranges reads every field)
        unknown = sorted(set(self.family_backbones) - set(FAMILIES))
        if unknown:
            raise ValueError(f"family_backbones: expected family names from {list(FAMILIES)}, got {unknown}")


def backbone_for(cfg: PhaseConfig, family: str) -> FamilyConfig:
    """The backbone shape and MLM recipe of ``family``: its entry in ``cfg.family_backbones``, else ``cfg.backbone``."""
    return cfg.family_backbones.get(family, cfg.backbone)


BASE = PhaseConfig()

#: the standard MLM pretraining recipe (:class:`FamilyConfig`'s defaults: 400 AdamW steps at 1e-3, weight decay 0.01
#: on every weight); the natural-norm recipes of RoBERTa and ModernBERT are the diffs in ``runs/bases/natural.toml``
STANDARD_RECIPE = FamilyConfig()

#: every run of the experiment, one file each in ``runs/`` (:class:`initlab.runfile.RunFiles`; docs/runs.md lists them):
#: the natural-norm design (``runs/bases/natural.toml``: s = 1, each family its own recipe, their own recipes) and,
#: archived, the first design (an imposed head scale s, every family the standard recipe)
PRESETS: RunFiles[PhaseConfig] = RunFiles(PhaseConfig, Path(__file__).with_name("runs"))


@dataclass(frozen=True)
class CellSpec:
    """One trained model: input word embeddings ``e * W``, output projection ``h * W``, tied or not.

    ``k``: the MLM-head rescaling factor by which the cell reaches these weights: the backbone is given the
    imposed scale first (:meth:`imposed`), then divided by ``k`` with :func:`initlab.mlmhead.rescale_mlm_head`
    (untied by it when the cell is untied). Grid points with the same ``e``, ``h`` and tie are one model (bitwise,
    for powers of two) whatever their ``k``, so ``k`` is left out of equality, the name and the cell key.
    """

    family: str
    tied: bool
    e: float
    h: float
    seed: int
    k: float = field(default=1.0, compare=False)

    def imposed(self) -> tuple[float, float]:
        """``(input scale, head scale)`` of the backbone before the division by ``k``: ``(e * k, h * k)`` tied,
        ``(e, h * k)`` untied."""
        return (self.e * self.k if self.tied else self.e), self.h * self.k

    @property
    def name(self) -> str:
        return f"{self.family}_{'tied' if self.tied else 'untied'}_e={self.e:g}_h={self.h:g}_seed={self.seed}"


def cell_spec(family: str, mode: str, s: float, k: float, seed: int) -> CellSpec:
    """The trained model behind grid point (family, mode, s, k, seed).

    Raises:
        ValueError: unknown ``mode``.
    """
    if mode == "tied":
        return CellSpec(family, True, s / k, s / k, seed, k)
    if mode == "k_output":
        return CellSpec(family, True, s, s, seed, k) if k == 1.0 else CellSpec(family, False, s, s / k, seed, k)
    if mode == "s_output":
        return CellSpec(family, False, 1.0, s / k, seed, k)
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
    """Raise ``ValueError`` naming the field for an unknown family or mode, a scale that is not a power of two, or an
    unknown ``engine``."""
    from initlab.mlmhead.splade_encoder import ENGINES

    if cfg.engine not in ENGINES:
        raise ValueError(f"engine: expected one of {list(ENGINES)}, got {cfg.engine!r}")
    for f in cfg.families:
        if f not in FAMILIES:
            raise ValueError(f"families: expected names from {list(FAMILIES)}, got {f!r}")
    for m in cfg.modes:
        if m not in MODES:
            raise ValueError(f"modes: expected names from {list(MODES)}, got {m!r}")
    for name in ("head_scales", "ks", "output_ks"):
        for v in getattr(cfg, name):
            if not math.log2(v) == round(math.log2(v)):
                raise ValueError(f"{name}: expected powers of two (exact products s / k), got {v!r}")


_GRID_FIELDS = ("families", "head_scales", "ks", "output_ks", "modes", "seeds", "claims", "backbone", "family_backbones")


def inspect_name(family: str, s: float, seed: int) -> str:
    """The cell name of the ``mlmhead inspect`` report of one (family, s, seed) backbone."""
    return f"inspect_{family}_s={s:g}_seed={seed}"


def cell_key(cfg: PhaseConfig, spec: CellSpec) -> dict[str, Any]:
    """The config a cell depends on: its spec, its family's backbone (:func:`backbone_for`) and the whole recipe
    (not the grid lists, the claim thresholds or the other families' backbones), so a cell computed by one
    preset is reused by another of the same recipe."""
    recipe = {k: v for k, v in to_dict(cfg).items() if k not in _GRID_FIELDS}
    recipe["backbone"] = to_dict(backbone_for(cfg, spec.family))
    return {"cell": {"family": spec.family, "tied": spec.tied, "e": spec.e, "h": spec.h, "seed": spec.seed},
            "recipe": recipe}
