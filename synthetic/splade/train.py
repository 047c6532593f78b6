"""The SparseEncoder of one synthetic SPLADE cell: building it over the cached backbone and training it.

Role: the training loop of a sentence-transformers ``SparseEncoder`` (``Transformer(fill-mask)`` +
``SpladePooling("max")``, term weight ``a_j = max_t log(1 + ReLU(z_tj))``, SPLADE v2, arXiv:2109.10086, eq. 1;
built by :mod:`initlab.synthetic.splade.phase.cell`): :func:`train_cell` runs ``SparseEncoderTrainer`` with
``SpladeLoss(SparseMultipleNegativesRankingLoss)`` and the FLOPS regulariser (Paria et al., ICLR 2020),
stopping at the first non-finite gradient or loss (:func:`finite_guard_callback`). :func:`quiet`
silences the libraries' logs inside a cell.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import warnings
from pathlib import Path
from typing import Any, Sequence

import torch

from initlab.synthetic.splade.config import TrainingRecipe
from initlab.synthetic.splade.data import SyntheticCorpus

__all__ = ["quiet", "TokenCache", "load_encoder", "finite_guard_callback", "train_cell"]


@contextlib.contextmanager
def quiet():
    """Silence transformers / sentence-transformers info logs and known-benign warnings inside a cell."""
    import transformers

    old = transformers.logging.get_verbosity()
    st_logger = logging.getLogger("sentence_transformers")
    old_st = st_logger.level
    bars = transformers.logging.is_progress_bar_enabled()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    st_logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*deprecated.*")
            yield
    finally:
        if bars:
            transformers.logging.enable_progress_bar()
        transformers.logging.set_verbosity(old)
        st_logger.setLevel(old_st)


class TokenCache:
    """A text tokenised once per encoder, not once per batch: the ``preprocess`` of a sentence-transformers model
    (``model``, a ``SparseEncoder``: what its trainer's collator and its ``encode`` call) with each plain text's token
    rows kept and a batch assembled from them; ``module`` is the model's ``Transformer`` input module (its tokenizer
    and ``max_seq_length``; default ``model[0]``).

    A training cell of the OOD synthetic SPLADE tokenises the same few thousand texts over and over (each training
    pair about four times in 300 steps, the evaluation documents at every checkpoint, the dev pairs at every
    plateau check); the rows are the tokenizer's own (``module.preprocess`` on the texts not seen yet, padding
    stripped by their attention mask) and the batch is padded as the tokenizer pads (right, ``pad_token_id``,
    attention 0, ``pad_token_type_id``), so every batch is the same tensors, bit for bit, as ``model.preprocess``
    gives (tested). A row is kept per (text, ``max_seq_length``, keyword arguments): the truncation length is part
    of the row. Anything else (a prompt, inputs that are not all ``str``, a tokenizer padding left, an output with
    keys other than ``input_ids`` / ``attention_mask`` / ``token_type_ids`` and ``modality = "text"``) goes to
    ``model.preprocess`` unchanged (a text seen before is not inferred a modality again: it was plain text). ``hits`` / ``misses`` count the texts served from the rows and tokenised.
    """

    _ROWS = ("input_ids", "token_type_ids", "attention_mask")

    def __init__(self, model, module=None) -> None:
        self.module = model[0] if module is None else module
        self.inner = model.preprocess
        self.rows: dict[tuple, dict[str, torch.Tensor]] = {}
        self.hits = self.misses = 0
        self.off = False  # set once an output this cache does not rebuild was seen

    def __call__(self, inputs, prompt=None, **kwargs):
        tok = getattr(self.module, "tokenizer", None)
        if (self.off or prompt is not None or tok is None or getattr(tok, "padding_side", "right") != "right"
                or not isinstance(inputs, (list, tuple)) or not inputs or not all(type(t) is str for t in inputs)):
            return self.inner(inputs, prompt=prompt, **kwargs)
        try:
            ctx = (self.module.max_seq_length, tuple(sorted(kwargs.items())))
            hash(ctx)
        except TypeError:  # an unhashable keyword argument: nothing to key a row on
            return self.inner(inputs, prompt=prompt, **kwargs)
        missing = list(dict.fromkeys(t for t in inputs if (ctx, t) not in self.rows))
        if missing:
            out = self.inner(missing, prompt=None, **kwargs)
            if (out.get("modality") != "text" or "attention_mask" not in out or "input_ids" not in out
                    or set(out) - {"modality", *self._ROWS}
                    or any(out[k].dim() != 2 for k in self._ROWS if k in out)):
                self.off = True
                return self.inner(inputs, prompt=prompt, **kwargs)
            n = out["attention_mask"].sum(1).tolist()
            for i, t in enumerate(missing):
                self.rows[(ctx, t)] = {k: out[k][i, :n[i]].clone() for k in out if k != "modality"}
        self.misses += len(missing)
        self.hits += len(inputs) - len(missing)
        rows = [self.rows[(ctx, t)] for t in inputs]
        pad = {"input_ids": tok.pad_token_id, "attention_mask": 0, "token_type_ids": tok.pad_token_type_id}
        batch: dict[str, object] = {k: torch.nn.utils.rnn.pad_sequence([r[k] for r in rows], batch_first=True,
                                                                        padding_value=pad[k])
                                    for k in rows[0]}
        batch["modality"] = "text"
        return batch


def load_encoder(backbone_dir: Path, max_seq_length: int, seed: int, engine: str = "dense", token_cache: bool = False):
    """The SparseEncoder of a cell: ``Transformer(fill-mask)`` over the saved backbone in ``backbone_dir`` (its head
    tied again) + ``SpladePooling("max")``, in float32 whatever the saved config records
    (:mod:`initlab.mlmhead.precision`), ``max_seq_length`` tokens, on the CPU; ``torch.manual_seed(seed)`` first.
    ``engine``: the SPLADE head's engine (:func:`initlab.mlmhead.splade_encoder.use_engine`: ``"dense"``,
    sentence-transformers' own path, or ``"fused"``, the same vectors without the ``(B, T, V)`` logits).
    ``token_cache``: each text tokenised once for this encoder (:class:`TokenCache`; the same batches, bit for bit).

    Raises:
        ValueError: a damaged saved backbone (:func:`initlab.mlmhead.checkpoint.check_checkpoint_weights`), refused
            before anything is trained with random tensors; an unknown ``engine``.
    """
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    from initlab.mlmhead.checkpoint import check_checkpoint_weights
    from initlab.mlmhead.precision import dtype_kwargs
    from initlab.mlmhead.splade_encoder import ENGINES, use_engine

    if engine not in ENGINES:
        raise ValueError(f"engine: expected one of {list(ENGINES)}, got {engine!r}")

    with quiet():  # a damaged saved backbone is refused, never trained with random tensors (no RNG drawn here)
        check_checkpoint_weights(backbone_dir, what=f"backbone {backbone_dir}")
    torch.manual_seed(seed)
    with quiet():  # float32 master weights, whatever the saved backbone's config records (initlab.mlmhead.precision)
        tr = Transformer(str(backbone_dir), transformer_task="fill-mask", max_seq_length=max_seq_length,
                         model_kwargs=dtype_kwargs(torch.float32))
        tr.auto_model.tie_weights()
        enc = use_engine(SparseEncoder(modules=[tr, SpladePooling(pooling_strategy="max")], device="cpu"), engine)
    if token_cache:  # an instance attribute: the trainer's collator and encode() both call model.preprocess
        enc.preprocess = TokenCache(enc, tr)
    return enc


def finite_guard_callback(where: str):
    """A transformers ``TrainerCallback`` that stops training at the first non-finite gradient, non-finite
    logged loss or diverged logged total loss.

    Gradients are checked after the backward pass of every optimizer step (before the update), the
    logged losses at every log; either raises :class:`initlab.runs.NonFiniteError` naming the step
    (1-based optimizer step) and ``where``. A non-finite loss always gives non-finite gradients, so the
    gradient check also stops a NaN/inf loss at the step it occurs. The logged total ``loss`` also goes
    through the divergence rule (:class:`initlab.runs.LossGuard`: more than 10^4 times the first logged
    value raises :class:`initlab.runs.DivergenceError`); its parts are not, since the FLOPS terms start at
    weight 0 and grow by design.
    """
    from transformers import TrainerCallback

    from initlab.runs import LossGuard, check_finite

    class FiniteGuard(TrainerCallback):
        #: ``{step: {"lambda_q": .., "lambda_d": ..}}`` as set by the regulariser-weight scheduler, which
        #: adds them to the logs after the trainer has copied the logs into ``state.log_history``.
        weights: dict[int, dict[str, float]] = {}

        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            for p in model.parameters():
                if p.grad is not None and not bool(torch.isfinite(p.grad).all()):
                    check_finite(float("nan"), where=where, step=state.global_step + 1, what="gradient")

        def on_log(self, args, state, control, logs=None, **kwargs):
            logs = logs or {}
            self.weights[state.global_step] = {"lambda_q": logs.get("query_regularizer_weight"),
                                               "lambda_d": logs.get("document_regularizer_weight")}
            for key, v in (logs or {}).items():
                if "loss" in key and isinstance(v, (int, float)):
                    check_finite(float(v), where=f"{where} ({key})", step=state.global_step, what="loss")
            if isinstance(logs.get("loss"), (int, float)):
                self.loss_guard.check(float(logs["loss"]), step=state.global_step)

    guard = FiniteGuard()
    guard.weights = {}
    guard.loss_guard = LossGuard(f"{where} (loss)")
    return guard


def train_cell(model, corpus: SyntheticCorpus, cfg: TrainingRecipe, seed: int, work_dir: Path,
               callbacks: Sequence[Any] = ()) -> list[dict[str, float]]:
    """SPLADE training of ``model`` with SparseEncoderTrainer; returns the logged loss curve.

    ``callbacks``: extra transformers ``TrainerCallback`` objects (e.g. progress per step); they do not
    change the training.

    Each row: ``step``, ``loss`` (total), ``ranking`` (InfoNCE part), ``flops_q`` / ``flops_d`` (the
    weighted FLOPS parts as added to the loss), ``lambda_q`` / ``lambda_d`` (current weights), all
    averaged over the ``log_every`` steps before ``step`` by the trainer.

    Raises:
        initlab.runs.NonFiniteError: a non-finite gradient or logged loss (training stops at that step;
            see :func:`finite_guard_callback`).
    """
    from datasets import Dataset
    from sentence_transformers.sparse_encoder import SparseEncoderTrainer, SparseEncoderTrainingArguments
    from sentence_transformers.sparse_encoder.callbacks import SpladeRegularizerWeightSchedulerCallback
    from sentence_transformers.sparse_encoder.losses import SparseMultipleNegativesRankingLoss, SpladeLoss

    model.max_seq_length = cfg.doc_max_len
    ds = Dataset.from_dict({
        "query": [q for q, _ in corpus.train_pairs],
        "document": [corpus.docs[d] for _, d in corpus.train_pairs],
    })
    loss = SpladeLoss(model, SparseMultipleNegativesRankingLoss(model),
                      document_regularizer_weight=cfg.lambda_d, query_regularizer_weight=cfg.lambda_q)
    args = SparseEncoderTrainingArguments(
        output_dir=str(work_dir), max_steps=cfg.steps, per_device_train_batch_size=cfg.batch_size,
        learning_rate=cfg.lr, warmup_steps=max(1, int(round(cfg.lr_warmup_ratio * cfg.steps))),
        logging_steps=cfg.log_every, logging_nan_inf_filter=False, save_strategy="no", report_to="none",
        use_cpu=True, seed=seed, data_seed=seed, dataloader_num_workers=0, disable_tqdm=True,
        batch_sampler="no_duplicates",
    )
    guard = finite_guard_callback(f"synthetic SPLADE training (seed {seed})")
    with quiet():
        import io

        with contextlib.redirect_stderr(io.StringIO()):  # the model card's "Computing widget examples" bar
            trainer = SparseEncoderTrainer(
                model=model, args=args, train_dataset=ds, loss=loss,
                callbacks=[SpladeRegularizerWeightSchedulerCallback(loss, scheduler_type="quadratic",
                                                                    warmup_ratio=cfg.reg_warmup_ratio), guard,
                           *callbacks],
            )
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        trainer.remove_callback(PrinterCallback)  # logs go to the cell's loss curve, not stdout
        trainer.remove_callback(ProgressCallback)
        try:
            trainer.train()
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)
    curve = []
    for row in trainer.state.log_history:
        if "base_loss" not in row:
            continue
        step = int(row["step"])
        curve.append({
            "step": step,
            "loss": _opt(row.get("loss")),
            "ranking": _opt(row["base_loss"]),
            "flops_q": _opt(row.get("query_regularizer_loss")),
            "flops_d": _opt(row.get("document_regularizer_loss")),
            "lambda_q": _opt(guard.weights.get(step, {}).get("lambda_q")),
            "lambda_d": _opt(guard.weights.get(step, {}).get("lambda_d")),
        })
    return curve


def _opt(v: Any) -> float | None:
    """``float(v)``, or None for a missing value (never a made-up number)."""
    return None if v is None else float(v)
