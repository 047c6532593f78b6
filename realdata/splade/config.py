"""SPLADE reproduction configs: one recipe fixed across backbones, presets as run files of small diffs.

The recipe (:data:`RECIPE`) is the same for every backbone and every rescaling factor k; only
``backbone`` and ``k`` change across the grid (7 backbones x k in {1, 2, 4, 8, 16, 32}). Each value's
source is written beside it:

* [S1] Formal, Piwowarski, Clinchant. "SPLADE: Sparse lexical and expansion model for first stage
  ranking", SIGIR 2021 (SPLADE, FLOPS regulariser on queries and documents, quadratic lambda warm-up).
* [N] The authors' training code, github.com/naver/splade (commit 141a8c08):
  ``conf/train/config/splade.yaml`` (lr 2e-5, train_batch_size 128, nb_iterations 150000, warmup_steps 6000,
  max_length 256, weight_decay 0.01) and ``conf/config_splade++_max.yaml`` (SPLADE-max with in-batch
  negatives, loss InBatchPairwiseNLL, FLOPS lambda_q 3e-4, lambda_d 1e-4, quadratic warm-up T = 50000 steps).
* [S2] Formal, Lassance, Piwowarski, Clinchant. "SPLADE v2", arXiv 2109.10086, 2021 (SPLADE-max:
  max pooling).
* [S3] Formal et al. "From distillation to hard negative sampling" (SPLADE++), SIGIR 2022
  (margin-MSE distillation with cross-encoder scores as the optional loss).
* [ST] sentence-transformers SparseEncoder training docs (SpladeLoss, SparseMultipleNegativesRankingLoss,
  SpladeRegularizerWeightSchedulerCallback with quadratic warm-up, warmup_ratio default 1/3).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from initlab.config import check_ranges, derive, ranged
from initlab.runfile import RunFiles

__all__ = ["SpladeTrainConfig", "RECIPE", "BACKBONES", "K_VALUES", "REMOTE_CODE", "PRESETS", "DEPRECATED_PRESETS", "get_preset", "cell_config", "cell_name"]

BACKBONES: dict[str, str] = {
    "bert": "bert-base-uncased",
    "distilbert": "distilbert-base-uncased",
    "albert": "albert-base-v2",
    "gte": "Alibaba-NLP/gte-en-mlm-base",
    "roberta": "roberta-base",
    "modernbert": "answerdotai/ModernBERT-base",
    "ettin": "jhu-clsp/ettin-encoder-150m",
}
K_VALUES: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
# Backbones whose modelling code lives on the hub: loaded only with an explicit --trust-remote-code.
REMOTE_CODE = frozenset({"Alibaba-NLP/gte-en-mlm-base"})


@dataclass(frozen=True)
class SpladeTrainConfig:
    """One SPLADE training + evaluation run (one grid cell).

    Units: learning rate per step, batch in (query, positive, negative) triples per optimizer step
    summed over all processes (the GLOBAL batch), lengths in tokens, steps in optimizer steps.
    """

    backbone: str = "bert-base-uncased"        # hub id or local folder of a masked-LM checkpoint
    k: float = ranged(1.0, "(0, inf)")          # W_head <- W_head / k before training (MLM-head rescaling)
    trust_remote_code: bool = False            # needed for Alibaba-NLP/gte-en-mlm-base only
    loss: Literal["mnrl", "margin_mse"] = "mnrl"  # in-batch negatives ranking loss [S1,S2]; margin-MSE [S3]
    learning_rate: float = ranged(2e-5, "(0, inf)")  # [N] splade.yaml lr
    global_batch_size: int = ranged(128, "[1, inf)")  # [N] splade.yaml train_batch_size (divides over 1/2/4/8 GPUs)
    max_steps: int = ranged(150_000, "[1, inf)")  # [N] splade.yaml nb_iterations
    warmup_steps: int = ranged(6_000, "[0, inf)")  # [N] splade.yaml warmup_steps (linear LR warm-up)
    weight_decay: float = ranged(0.01, "[0, inf)")  # [N] splade.yaml weight_decay (AdamW)
    query_max_length: int = ranged(64, "[3, inf)")  # our choice ([N] uses 256 for both); MS MARCO queries are far shorter
    doc_max_length: int = ranged(256, "[3, inf)")  # [N] splade.yaml max_length
    lambda_q: float = ranged(3e-4, "[0, inf)")  # [N] config_splade++_max.yaml FLOPS lambda_q
    lambda_d: float = ranged(1e-4, "[0, inf)")  # [N] config_splade++_max.yaml FLOPS lambda_d
    regularizer_warmup_ratio: float = ranged(1 / 3, "[0, 1]")  # [N] quadratic warm-up T = 50k of 150k steps = 1/3; [ST] default
    global_flops: bool = True                  # FLOPS regulariser on the all-gathered global batch (independent of #GPUs)
    seed: int = ranged(42, "[0, inf)")
    bf16: bool = True                          # bf16 autocast on CUDA (ignored on CPU); master weights stay weights_dtype
    weights_dtype: Literal["float32", "bfloat16", "float16", "stored"] = "float32"  # dtype of the trained (master)
                                               # weights, whatever the checkpoint stores; "stored" = the checkpoint's own
    head_engine: Literal["fused", "dense"] = "fused"  # SPLADE head in training and evaluation: fused (no (B, T, V)
                                               # logits; initlab.mlmhead.splade_encoder) or sentence-transformers' dense path
    train_source: str = "ir_datasets:msmarco-passage/train/triples-small"  # or a local triples TSV path
    train_collection: str = ""                 # collection.tsv for id triples (local files only)
    train_queries: str = ""                    # queries.train.tsv for id triples (local files only)
    train_limit: int = ranged(0, "[0, inf)")  # 0 = all triples (> 0 only for smoke tests)
    eval_sets: tuple[str, ...] = ("msmarco-dev", "trec-dl-2019")  # see data.load_eval_set
    beir: bool = True                          # add the BEIR-13 test sets
    nanobeir: bool = True                      # add the 13 NanoBEIR sets (nDCG@10 vs FLOPS per k)
    data_root: str = ""                        # local data folder instead of ir_datasets / hub ("" = download)
    eval_batch_size: int = ranged(128, "[1, inf)")
    top_k: int = ranged(1000, "[1, inf)")
    logging_steps: int = ranged(100, "[1, inf)")
    save_steps: int = ranged(10_000, "[1, inf)")  # trainer checkpoints (resume) every save_steps
    save_total_limit: int = ranged(2, "[1, inf)")
    # Tiny in-process backbone for tests and dry runs: "" = none; "bert" builds a 1-layer BERT MLM with the
    # tokenizer at tiny_vocab (a WordPiece vocab.txt). Never used by the paper runs.
    tiny_model: str = ""
    tiny_vocab: str = ""

    def __post_init__(self) -> None:
        check_ranges(self)


RECIPE = SpladeTrainConfig()

#: every run of ``initlab splade train|sweep``, one file each in ``runs/`` (:class:`initlab.runfile.RunFiles`;
#: docs/runs.md lists them): ``full`` (the recipe above), ``default`` (a shorter schedule) and ``quick`` (a tiny
#: in-process model, a few CPU steps). A grid cell's config is a run's plus backbone and k (:func:`cell_config`).
PRESETS: RunFiles[SpladeTrainConfig] = RunFiles(SpladeTrainConfig, Path(__file__).with_name("runs"))
#: former preset names still accepted, with a deprecation message: old name -> new name.
DEPRECATED_PRESETS: dict[str, str] = {"toy": "quick"}


def get_preset(name: str) -> SpladeTrainConfig:
    """The config of a run given by name (``quick``, ``default``, ``full``; ``toy`` is a deprecated alias of ``quick``,
    accepted with a ``FutureWarning``) or by the path of a run file.

    Raises:
        initlab.runfile.RunFileError: (a ``ValueError``) an unknown name or file, naming the choices; a run file with
            an unknown field or a value of the wrong type, naming the file and the field.
    """
    if name in DEPRECATED_PRESETS:
        import warnings

        new = DEPRECATED_PRESETS[name]
        warnings.warn(f"preset {name!r} is deprecated and will be removed in the next release; use {new!r} "
                      "(the same preset)", FutureWarning, stacklevel=2)
        name = new
    return PRESETS.resolve(name)


def cell_config(base: SpladeTrainConfig, backbone: str, k: float) -> SpladeTrainConfig:
    """The grid cell ``(backbone, k)`` of ``base``: ``backbone`` is a short name of :data:`BACKBONES` or a
    hub id / folder. gte-en-mlm-base needs ``trust_remote_code`` (raise ValueError otherwise). With the
    tiny in-process model (``base.tiny_model``, the quick preset) the backbone must be ``"tiny"`` or the
    tiny model's family (``"bert"``): another backbone would be recorded but not trained."""
    if base.tiny_model:
        if backbone not in ("tiny", base.tiny_model, BACKBONES.get(base.tiny_model)):
            raise ValueError(f"--backbone {backbone!r}: this preset trains the tiny in-process {base.tiny_model} "
                             f"(tiny_model={base.tiny_model!r}); pass --backbone tiny, or --set tiny_model='' to train "
                             f"{backbone!r} itself")
        backbone = base.tiny_model
    hub = BACKBONES.get(backbone, backbone)
    if hub in REMOTE_CODE and not base.trust_remote_code:
        raise ValueError(f"backbone {hub} runs code from the hub: pass --trust-remote-code explicitly")
    return derive(base, backbone=hub, k=float(k))


def cell_name(cfg: SpladeTrainConfig) -> str:
    """Folder-safe cell name, e.g. ``bert-base-uncased__k16``."""
    b = cfg.backbone.rstrip("/").split("/")[-1]
    if cfg.tiny_model:
        b = f"tiny-{cfg.tiny_model}"
    k = int(cfg.k) if float(cfg.k).is_integer() else cfg.k
    return f"{b}__k{k}"
