"""The OOD synthetic SPLADE's definition: config, presets, grid and cell keys.

Role: what is run, fixed before running. :class:`OODConfig` holds the corpus
(:class:`initlab.synthetic.splade.domains.DomainCorpusConfig`), the families and their MLM recipes (each its own,
nothing multiplies a weight: :data:`initlab.synthetic.splade.phase.config`'s recipe directions, here over the
longer documents), the tied k grid, the seeds and the SPLADE recipe with its stopping rule:

* **plateau rule** (stated before any run): every ``eval_every`` steps the in-domain dev loss (in-batch InfoNCE of
  the dev queries with their source documents, batches of ``batch_size``, no FLOPS term) is measured; once the
  FLOPS warm-up is over (step >= ``reg_warmup_ratio x max_steps``), training stops when the dev loss has not gone
  below ``(1 - plateau_rel) x`` its best value for ``patience`` evaluations in a row; ``max_steps`` is the cap
  (a run stopped by it is *cap-bound*, counted in every report). The learning rate warms up linearly over
  ``lr_warmup_ratio`` of the cap, then decays linearly to 0 at the cap (transformers' default schedule).
* **FLOPS regulariser scaled to the vocabulary**: the weights reached after the quadratic warm-up (over
  ``reg_warmup_ratio`` of the cap, as SPLADE's recipe warms up over its first third) are
  ``lambda_q = lambda_q_ref x V / V_ref`` and ``lambda_d = lambda_d_ref x V / V_ref`` (:func:`flops_weights`), with
  the real recipe's weights at the real vocabulary as reference: ``lambda_q_ref = 0.01``, ``lambda_d_ref = 0.008``
  at ``V_ref = 30522`` (BERT's vocabulary; DistilSPLADE-max's weights as NAVER lists them for SPLADE v2,
  arXiv:2109.10086). Linear in V: the FLOPS term ``sum_j (mean_i a_ij)^2`` of vectors with A active entries out
  of V is about ``A^2 / V``, so the gradient it puts on each active entry goes as ``A / V``; a weight proportional
  to V keeps that per-entry pressure the same at every vocabulary size.
* **retrieval checkpoints**: nDCG@10 on every evaluation set at the steps ``checkpoints`` (and at the stop): the
  *training length* axis of the exploratory map (steps into a run with this cap's schedule).
* **query shift** (``query_shift``, evaluation only): for each synonym rate p listed, the in-domain dev set and every
  out-of-domain set are evaluated a second time with their queries written anew from the same source documents
  at synonym rate p (:func:`initlab.synthetic.splade.domains.query_shift_set`; training queries use
  ``corpus.p_synonym``): the graded *shift* axis of the map (domain x query vocabulary). Empty by default; an
  empty ``query_shift`` is left out of the cell keys, so runs made before the field existed keep their keys.

Levers of the regime exploration (each a :func:`initlab.config.later_field`: left out of ``config.json`` and of
every cell key while at its default, so that runs made before the fields existed keep their keys and resume):

* ``mlm_text_multiplier`` m: the backbones are MLM-pretrained on m times the retrieval corpus's text (per domain
  its retrieval documents, then ``(m - 1) x docs_per_domain`` more documents of the same language: the same
  seed's corpus generated with ``m x docs_per_domain`` documents per domain, its first ``docs_per_domain`` left
  out; :func:`initlab.synthetic.splade.ood.cell.mlm_texts`): unlabelled text larger than the labelled corpus,
  as a real backbone's pretraining text is. The steps are the family recipe's ``mlm_steps``.
* ``hard_negatives`` n: each training pair gets its query's top-n BM25 documents among the training domains'
  documents that are not relevant to it (grade 0) as extra negatives (SPLADE's own recipe mines hard negatives,
  "SPLADE v2", arXiv:2109.10086; :func:`initlab.synthetic.splade.ood.train.bm25_negatives`).
* ``select_k_on``: ``"heldout"`` (the best k of a degradation estimate chosen on the *select* half of the
  held-out-domain queries, judged on the other half) or ``"in_domain"`` (chosen on every in-domain dev query,
  judged on *every* held-out-domain query: what a user without labelled out-of-domain queries can do).
  Report-only: not in a cell key.
* ``imposed``: pairs ``(normal-norm family, high-norm family)``: the *imposed-norm arm*. The normal-norm
  backbone's head is untied and scaled up to the high-norm backbone's head norm (same seed; factor
  ``s = ||W_high||_F / ||W_normal||_F``) with :func:`initlab.mlmhead.rescale_mlm_head` (``k = 1/s``,
  ``untie=True``), then divided by each grid k (head only). Rows ``mode = "imposed"``; the claim
  :func:`initlab.synthetic.splade.ood.claims.imposed_interaction` compares its gain with the natural backbone's.
* ``bootstrap``: resamples of the within-seed query bootstrap (:mod:`initlab.synthetic.splade.ood.noise`);
  report-only.
* ``role``: ``"exploratory"`` or ``"confirmatory"`` (written in ``results.json`` and ``summary.md``); report-only.
* ``holm_families``: ``""``, ``"splade_ood_v8k"`` (the report adds ``verdicts_holm``, every out-of-domain and
  in-domain verdict Holm-corrected within :data:`initlab.synthetic.splade.ood.claims.SPLADE_OOD_V8K_FAMILIES`) or
  ``"splade_ood_v8k_imposed"`` (the report adds ``preregistered``: the claims, gate and rules of
  :mod:`initlab.synthetic.splade.ood.decide`, words only once every seed is complete); report-only.
* ``late_families``: families of ``families`` whose cells run after every seed's cells of the other families
  (:func:`initlab.synthetic.splade.ood.runner.plan`): the families the primary claims need come first; order only,
  not in a cell key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from initlab.config import check_ranges, later_field, ranged, to_dict
from initlab.runfile import RunFiles
from initlab.synthetic.splade.claims import SPLADEThresholds
from initlab.synthetic.splade.domains import DomainCorpusConfig
from initlab.synthetic.splade.families import FAMILIES, FamilyConfig

__all__ = ["OODConfig", "BASE", "PRESETS", "backbone_for", "flops_weights", "check_config", "cell_name",
           "config_record", "bm25_key", "train_key", "pretrain_key", "V_REF", "SELECT_K_ON", "ROLES"]

#: the real vocabulary (BERT's), at which the reference FLOPS weights are the real recipe's
V_REF = 30522


@dataclass(frozen=True)
class OODConfig:
    """The OOD sweep (module docstring). Grid: ``families`` x ``ks`` (tied, as ``mlmhead rescale``) x ``seeds``;
    a seed is the corpus's, the backbone's MLM pretraining's and the SPLADE training's. ``init_batch`` training
    pairs give the initial InfoNCE. ``engine``: the SPLADE head's engine (:func:`initlab.mlmhead.splade_encoder.use_engine`:
    ``"dense"``, sentence-transformers' own path, every preset with saved results; ``"fused"``, the same vectors to
    rounding without the ``(B, T, V)`` logits); a :func:`initlab.config.later_field`, in the records and the training
    cells' keys only when ``"fused"`` (the backbones and BM25 do not depend on it)."""

    corpus: DomainCorpusConfig = DomainCorpusConfig()
    backbone: FamilyConfig = FamilyConfig(max_len=104)
    family_backbones: dict[str, FamilyConfig] = field(default_factory=dict)
    families: tuple[str, ...] = ("bert", "modernbert")
    ks: tuple[float, ...] = ranged((1.0, 4.0, 16.0), "(0, inf)")
    seeds: tuple[int, ...] = ranged((0,), "[0, inf)")
    max_steps: int = ranged(600, "[1, inf)")
    eval_every: int = ranged(50, "[1, inf)")
    patience: int = ranged(3, "[1, inf)")
    plateau_rel: float = ranged(0.01, "[0, 1)")
    checkpoints: tuple[int, ...] = ranged((150, 300, 600), "[1, inf)")  # and at most max_steps (check_config)
    batch_size: int = ranged(32, "[2, inf)")  # in-batch negatives: one pair alone has none
    lr: float = ranged(5e-4, "(0, inf)")
    lr_warmup_ratio: float = ranged(0.1, "[0, 1]")
    lambda_q_ref: float = ranged(1e-2, "[0, inf)")
    lambda_d_ref: float = ranged(8e-3, "[0, inf)")
    reg_warmup_ratio: float = ranged(1 / 3, "[0, 1]")
    query_max_len: int = ranged(16, "[3, inf)")  # [CLS], one token, [SEP]
    doc_max_len: int = ranged(104, "[3, inf)")
    log_every: int = ranged(10, "[1, inf)")
    init_batch: int = ranged(32, "[2, inf)")
    claims: SPLADEThresholds = SPLADEThresholds(high_norm=("roberta", "modernbert"), normal_norm=("bert", "albert"))
    torch_threads: int = ranged(1, "[1, inf)")
    query_shift: tuple[float, ...] = ranged((), "[0, 1]")  # synonym rates
    engine: Literal["dense", "fused"] = later_field("dense")
    mlm_text_multiplier: int = later_field(1, "[1, inf)")
    hard_negatives: int = later_field(0, "[0, inf)")
    select_k_on: str = later_field("heldout")
    imposed: tuple[tuple[str, str], ...] = later_field(())
    bootstrap: int = later_field(1000, "[0, inf)")  # 0: no bootstrap
    role: str = later_field("")
    holm_families: str = later_field("")
    late_families: tuple[str, ...] = later_field(())

    def __post_init__(self) -> None:
        check_ranges(self)
        unknown = sorted(set(self.family_backbones) - set(FAMILIES))
        if unknown:
            raise ValueError(f"family_backbones: expected family names from {list(FAMILIES)}, got {unknown}")


def flops_weights(cfg: OODConfig) -> tuple[float, float]:
    """``(lambda_q, lambda_d)`` after the warm-up, scaled to the vocabulary (module docstring)."""
    v = cfg.corpus.vocab_size / V_REF
    return cfg.lambda_q_ref * v, cfg.lambda_d_ref * v


def backbone_for(cfg: OODConfig, family: str) -> FamilyConfig:
    """The backbone shape and MLM recipe of ``family``: its entry in ``cfg.family_backbones``, else ``cfg.backbone``."""
    return cfg.family_backbones.get(family, cfg.backbone)


#: every run of the sweep, one file each in ``runs/`` (:class:`initlab.runfile.RunFiles`; docs/runs.md lists them);
#: its bases: ``recipes`` (every family its own MLM recipe: BERT and ALBERT the standard one, RoBERTa and ModernBERT
#: their long recipes, over documents of up to 102 tokens), ``small`` (the corpus the CPU allows), ``explore`` and
#: ``explore-v8k`` (the regime exploration's)
PRESETS: RunFiles[OODConfig] = RunFiles(OODConfig, Path(__file__).with_name("runs"))
#: the sweep's base (``runs/bases/recipes.toml``): every family its own MLM recipe
BASE: OODConfig = PRESETS.base("recipes")


def check_config(cfg: OODConfig) -> None:
    """Raise ``ValueError`` naming the field for an unknown family, a grid without k = 1, a document limit that the
    backbone's positions cannot hold, a checkpoint past ``max_steps``, ``query_shift`` rates repeated (as ``%g``,
    which names the sets) or equal to the corpus's own rate, or an unknown ``engine``, ``select_k_on``, ``role``,
    ``holm_families``, ``imposed`` or ``late_families`` entry (each field's own range is checked when the config is
    built: :func:`initlab.config.check_ranges`)."""
    for f in cfg.families:
        if f not in FAMILIES:
            raise ValueError(f"families: expected names from {list(FAMILIES)}, got {f!r}")
    if 1.0 not in cfg.ks:
        raise ValueError("ks: expected k = 1 in the grid (every claim compares with it)")
    for f in cfg.families:
        if backbone_for(cfg, f).max_len < cfg.doc_max_len:
            raise ValueError(f"doc_max_len: {cfg.doc_max_len} exceeds {f}'s max_len {backbone_for(cfg, f).max_len}")
    if cfg.corpus.doc_len_max + 2 > cfg.doc_max_len:
        raise ValueError(f"doc_max_len: expected >= corpus.doc_len_max + 2 ({cfg.corpus.doc_len_max + 2}), got "
                         f"{cfg.doc_max_len} (documents would be truncated)")
    labels = [f"{p:g}" for p in cfg.query_shift]
    if len(set(labels)) != len(labels) or f"{cfg.corpus.p_synonym:g}" in labels:
        raise ValueError(f"query_shift: expected distinct rates (as %g), other than corpus.p_synonym "
                         f"({cfg.corpus.p_synonym:g}), got {list(cfg.query_shift)}")
    from initlab.mlmhead.splade_encoder import ENGINES

    if cfg.engine not in ENGINES:
        raise ValueError(f"engine: expected one of {list(ENGINES)}, got {cfg.engine!r}")
    if cfg.select_k_on not in SELECT_K_ON:
        raise ValueError(f"select_k_on: expected one of {list(SELECT_K_ON)}, got {cfg.select_k_on!r}")
    if cfg.role not in ROLES:
        raise ValueError(f"role: expected one of {list(ROLES)}, got {cfg.role!r}")
    if cfg.holm_families not in HOLM_FAMILIES:
        raise ValueError(f"holm_families: expected one of {list(HOLM_FAMILIES)}, got {cfg.holm_families!r}")
    for pair in cfg.imposed:
        if len(pair) != 2 or pair[0] not in cfg.claims.normal_norm or pair[1] not in cfg.claims.high_norm:
            raise ValueError(f"imposed: expected (normal-norm family of {list(cfg.claims.normal_norm)}, high-norm "
                             f"family of {list(cfg.claims.high_norm)}) pairs, got {pair!r}")
        if pair[0] not in cfg.families or pair[1] not in cfg.families:
            raise ValueError(f"imposed: both families of {pair!r} must be in families {list(cfg.families)} (the arm "
                             "is compared with the natural backbone and reads the high-norm backbone's norm)")
    if len(set(p[0] for p in cfg.imposed)) != len(cfg.imposed):
        raise ValueError(f"imposed: expected one high-norm family per normal-norm family, got {list(cfg.imposed)}")
    for f in cfg.late_families:
        if f not in cfg.families or any(f in pair for pair in cfg.imposed):
            raise ValueError(f"late_families: expected families of {list(cfg.families)} outside the imposed-norm arm's "
                             f"pairs {list(cfg.imposed)}, got {f!r}")
    if any(c > cfg.max_steps for c in cfg.checkpoints):
        raise ValueError(f"checkpoints: expected steps in 1..max_steps ({cfg.max_steps}), got {list(cfg.checkpoints)}")


def cell_name(family: str, k: float, seed: int, imposed: str | None = None) -> str:
    """File-safe name of one training cell, e.g. ``modernbert_k=16_seed=0``; an imposed-norm cell
    ``bert-imposed-modernbert_k=1_seed=0`` (bert's head scaled to modernbert's norm)."""
    return f"{family}{'-imposed-' + imposed if imposed else ''}_k={k:g}_seed={seed}"


#: what ``select_k_on`` may be (module docstring) and the run roles
SELECT_K_ON = ("heldout", "in_domain")
ROLES = ("", "exploratory", "confirmatory")

#: fields that are not in a training cell's key: the grid, and the report-only fields
_GRID = ("families", "ks", "seeds", "claims", "backbone", "family_backbones", "select_k_on", "imposed", "bootstrap",
         "role", "holm_families", "late_families")
#: what ``holm_families`` may name
HOLM_FAMILIES = ("", "splade_ood_v8k", "splade_ood_v8k_imposed")


def pretrain_key(cfg: OODConfig, family: str, seed: int) -> dict[str, Any]:
    """What a backbone depends on: family, seed, its recipe, the corpus and (when not 1) the MLM text multiplier."""
    more = {} if cfg.mlm_text_multiplier == 1 else {"mlm_text_multiplier": cfg.mlm_text_multiplier}
    return {"family": family, "seed": seed, "backbone": to_dict(backbone_for(cfg, family)), "corpus": to_dict(cfg.corpus),
            "mlm_head": "masked positions only", **more}


#: a field added after runs were made that is not a :func:`initlab.config.later_field` (the ones added since are):
#: left out of a run's records while empty, so that the ``config.json`` and cell keys of those runs still match
_LATER_FIELDS = ("query_shift",)


def config_record(cfg: OODConfig) -> dict[str, Any]:
    """The config as the run folder records it (``config.json``, the base of :func:`train_key`): :func:`to_dict`
    (which leaves out every later field at its default) without ``query_shift`` while it is empty."""
    return {key: v for key, v in to_dict(cfg).items() if not (key in _LATER_FIELDS and not v)}


def bm25_key(cfg: OODConfig, seed: int) -> dict[str, Any]:
    """What a BM25 cell depends on: the corpus, the seed and the later fields of :func:`config_record` that are set
    (``query_shift``: the sets it scores)."""
    later = {key: v for key, v in config_record(cfg).items() if key in _LATER_FIELDS}
    return {"corpus": to_dict(cfg.corpus), "seed": seed, **later}


def train_key(cfg: OODConfig, family: str, k: float, seed: int, imposed: str | None = None) -> dict[str, Any]:
    """What a training cell depends on: its (family, k, seed), its backbone and the whole recipe (not the grid nor
    the report-only fields), from :func:`config_record` (later fields at their defaults are left out). An
    imposed-norm cell (``imposed``: the high-norm family whose head norm is imposed) also depends on that family's
    backbone (:func:`pretrain_key`), whose norm sets the factor."""
    recipe = {key: v for key, v in config_record(cfg).items() if key not in _GRID}
    key = {"cell": {"family": family, "k": k, "seed": seed}, "backbone": to_dict(backbone_for(cfg, family)),
           "recipe": recipe}
    if imposed:
        key["imposed"] = {"norm_of": pretrain_key(cfg, imposed, seed), "how": "rescale_mlm_head(k=1/s, untie=True)"}
    return key
