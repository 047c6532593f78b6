"""Train one SPLADE model (backbone x k) with sentence-transformers' SparseEncoderTrainer.

Loss: ranking loss + FLOPS regularisers on queries and documents over the global batch, with the quadratic
weight warm-up (:mod:`initlab.realdata.splade.losses`).

Role of this module: checks before anything is written, the training triples, the NaN guard, the training
run and its outputs.

Multi-GPU: run the same command under ``torchrun --nproc_per_node N -m initlab.app.cli splade train ...``;
the Trainer uses DDP and the per-device batch is ``global_batch_size / N``.

NaN policy: before every optimizer step the loss of the step and the gradients are checked
(:class:`NonFiniteGuard`; under DDP the loss and the verdict are all-reduced so every process stops at the
same step). A non-finite value stops training with :class:`initlab.runs.NonFiniteError`, a loss past the
divergence rule (:class:`initlab.runs.LossGuard`: 10^4 times the first step's loss) with its subclass
:class:`initlab.runs.DivergenceError`; either names the step and the last
complete Trainer checkpoint (all of them hold finite weights: the optimizer never applied a non-finite
update); ``failure.json`` records it, no model, results or ``DONE`` are written. The Trainer's own
``logging_nan_inf_filter`` (which replaces a NaN loss by the mean of earlier ones in the logs) is off, so
a NaN is never logged as a number.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from initlab.config import to_dict
from initlab.executor import is_terminal
from initlab.nn.collapse import detect_collapse as shared_detect_collapse
from initlab.runs import (LossGuard, NonFiniteError, RunDir, RunExistsError, atomic_write_csv, atomic_write_json,
                          check_finite_tensors, check_input_path, check_inputs, check_same_record, holds_run_folder,
                          rank_seed)
from initlab.textio import read_json

from .config import SpladeTrainConfig
from .losses import make_loss, regularizer_weight

__all__ = ["leave_process_group", "NonFiniteGuard", "check_backbone", "check_lengths", "last_complete_checkpoint", "check_resume_checkpoint", "load_training_triples", "train_splade", "detect_collapse", "tiny_texts"]


def load_training_triples(cfg: SpladeTrainConfig) -> dict[str, list]:
    """Training columns ``query``, ``positive``, ``negative`` (and ``label`` = teacher margin for margin-MSE).

    ``cfg.train_source`` is ``ir_datasets:<id>`` or a local TSV path (see :mod:`.data`).
    """
    from . import triples

    limit = cfg.train_limit or None
    if cfg.loss == "margin_mse":
        if cfg.train_source.startswith("ir_datasets:"):
            raise ValueError("loss margin_mse needs teacher scores: set train_source to a local scores file "
                             "'pos_score<TAB>neg_score<TAB>qid<TAB>pos_pid<TAB>neg_pid' with train_collection and train_queries")
        rows = triples.read_margin_triples(cfg.train_source, collection=cfg.train_collection, queries=cfg.train_queries, limit=limit)
        return {"query": [r[0] for r in rows], "positive": [r[1] for r in rows], "negative": [r[2] for r in rows],
                "label": [r[3] for r in rows]}
    if cfg.train_source.startswith("ir_datasets:"):
        rows = triples.iter_ir_datasets_triples(cfg.train_source.split(":", 1)[1], limit=limit)
    else:
        rows = triples.read_triples(cfg.train_source, collection=cfg.train_collection or None,
                                 queries=cfg.train_queries or None, limit=limit)
    return {"query": [r[0] for r in rows], "positive": [r[1] for r in rows], "negative": [r[2] for r in rows]}


def tiny_texts(columns: dict[str, list]) -> list[str]:
    return [t for col in ("query", "positive", "negative") for t in columns.get(col, [])]


def detect_collapse(*, losses: list[float], q_active: float | None, d_active: float | None, vocab_size: int,
                    near_full: float = 0.9, **more: Any) -> dict[str, Any]:
    """Collapse verdict from the one detector :func:`initlab.nn.collapse.detect_collapse` (``more``: its
    ``doc_vectors`` / ``scores`` arguments). Returns ``{"collapsed": bool, "reasons": [...], ...stats}`` and
    warns when collapsed."""
    verdict = shared_detect_collapse(losses=losses, q_active=q_active, d_active=d_active, vocab_size=vocab_size,
                                     dense_fraction=near_full, **more)
    if verdict.collapsed:
        warnings.warn("SPLADE collapse: " + "; ".join(verdict.reasons), RuntimeWarning, stacklevel=2)
    return verdict.as_dict()


def check_backbone(backbone: str, *, trust_remote_code: bool = False):
    """The backbone's transformers config; raise ValueError unless ``backbone`` is a local folder with
    ``config.json`` or a hub id whose config can be fetched (or is cached); names the short names of
    :data:`.config.BACKBONES`."""
    from transformers import AutoConfig

    from .config import BACKBONES

    path = Path(backbone)
    if path.exists() and not (path / "config.json").is_file():
        raise ValueError(f"backbone {backbone!r}: a local path must be a model folder holding config.json")
    if not path.exists() and backbone.startswith((".", "/", "~")):
        raise ValueError(f"backbone {backbone!r}: no such folder; expected one of the short names {sorted(BACKBONES)}, "
                         "a hub id, or a model folder")
    try:
        return AutoConfig.from_pretrained(backbone, trust_remote_code=trust_remote_code)
    except Exception as err:  # OSError (unknown id / offline), ValueError (remote code refused), ...
        raise ValueError(f"backbone {backbone!r}: not a local model folder with config.json and not loadable from the "
                         f"hub or its cache ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
                         f"expected one of the short names {sorted(BACKBONES)}, a hub id, or a folder") from None


def check_lengths(cfg: SpladeTrainConfig, backbone_config: Any) -> None:
    """Length policy (:mod:`initlab.mlmhead.lengths`): ``query_max_length`` and ``doc_max_length`` must fit the
    backbone's position table; raise ValueError naming the field before anything is written."""
    from initlab.mlmhead.lengths import check_length

    for name in ("query_max_length", "doc_max_length"):
        check_length(getattr(cfg, name), backbone_config, flag=f"--set {name}")


class NonFiniteGuard(TrainerCallback):
    """Trainer callback: before each optimizer step, stop on a non-finite or diverged loss or a non-finite
    gradient (NaN policy in the module docstring; the loss rule is :class:`initlab.runs.LossGuard`).
    ``trainer`` must be set to the :func:`_guarded_trainer` instance after construction."""

    def __init__(self, checkpoints: str | Path):
        self.checkpoints = Path(checkpoints)
        self.trainer = None
        self.loss_guard = LossGuard("SPLADE training")

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        loss = getattr(self.trainer, "last_step_loss", None)
        grads = [p.grad for p in model.parameters() if p.grad is not None] if model is not None else []
        grad_bad = bool(grads) and not bool(torch.isfinite(torch.stack([g.detach().float().norm() for g in grads]).sum()))
        device = grads[0].device if grads else "cpu"
        mean_loss = loss.detach().float().mean().to(device) if loss is not None else torch.zeros((), device=device)
        flags = torch.stack([mean_loss, torch.tensor(float(grad_bad), device=device)])
        world = 1
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            # every process sees the sum of the losses and of the gradient verdicts: they all stop together
            torch.distributed.all_reduce(flags, op=torch.distributed.ReduceOp.SUM)
            world = torch.distributed.get_world_size()
        step = state.global_step + 1
        err = self.loss_guard.verdict(flags[0] / world, step=step) if loss is not None else None
        if err is None and bool(flags[1] > 0):
            err = NonFiniteError("SPLADE training", step, "gradient", float("nan"))
        if err is not None:
            raise err.with_checkpoint(last_complete_checkpoint(self.checkpoints))
        return control


def _guarded_trainer(**kwargs):
    """A SparseEncoderTrainer that keeps the loss of its last training step (for :class:`NonFiniteGuard`)."""
    from sentence_transformers.sparse_encoder import SparseEncoderTrainer

    class GuardedSparseEncoderTrainer(SparseEncoderTrainer):
        last_step_loss = None

        def training_step(self, *args, **kw):
            loss = super().training_step(*args, **kw)
            self.last_step_loss = loss.detach()
            return loss

    return GuardedSparseEncoderTrainer(**kwargs)


def last_complete_checkpoint(folder: str | Path, *, remove_incomplete: bool = False) -> str | None:
    """The newest ``folder/checkpoint-<step>`` that the Trainer finished writing (it writes
    ``trainer_state.json`` last, after the weights, optimizer, scheduler and RNG states), or None.

    A run killed while saving leaves a checkpoint without ``trainer_state.json``; resuming from it fails, so
    it is skipped (and deleted with ``remove_incomplete``, with a warning)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    ckpts = sorted((p for p in folder.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()),
                   key=lambda p: int(p.name.split("-")[-1]), reverse=True)
    for p in ckpts:
        if (p / "trainer_state.json").is_file():
            return str(p)
        warnings.warn(f"{p}: incomplete checkpoint (no trainer_state.json; the run was interrupted while saving)"
                      + ("; deleted" if remove_incomplete else "; skipped"), RuntimeWarning, stacklevel=2)
        if remove_incomplete:
            import shutil

            shutil.rmtree(p)
    return None


def check_resume_checkpoint(folder: str | Path) -> None:
    """Refuse to resume from the Trainer checkpoint ``folder`` when a tensor it holds is NaN or infinite: its
    weights (every ``*.safetensors``) and its optimizer state (``optimizer.pt``, read with ``weights_only=True``).

    Raises:
        initlab.runs.NonFiniteCheckpointError: naming the checkpoint and the tensors.
    """
    from safetensors.torch import load_file

    folder = Path(folder)
    state: dict[str, Any] = {str(p.relative_to(folder)): load_file(str(p)) for p in sorted(folder.rglob("*.safetensors"))}
    if (folder / "optimizer.pt").is_file():
        try:
            state["optimizer.pt"] = torch.load(folder / "optimizer.pt", map_location="cpu", weights_only=True)
        except Exception:  # noqa: BLE001 -- not a plain-tensor file: the Trainer's own load names it
            pass
    check_finite_tensors(f"resume checkpoint {folder}", state)


def _world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


@holds_run_folder("out")
def train_splade(cfg: SpladeTrainConfig, out: str | Path, *, overwrite: bool = False, progress: bool = True,
                 reuse_finished: bool = False) -> dict[str, Any]:
    """Train the cell ``cfg`` into ``out`` (resumable from the Trainer's checkpoints under ``out/checkpoints``).

    Writes (rank 0): ``config.json``, ``model/`` (safetensors), ``loss_curve.csv`` (+ png),
    ``flops_terms.json`` (unweighted query/document FLOPS term of every step from ``first_step``; a resumed
    run holds the steps after its checkpoint only), ``train_results.json`` (with ``truncation``: the training
    queries and documents the length limits cut, :func:`training_truncation`).
    A finished training (``out/train_results.json`` and ``out/model``) is refused unless ``overwrite``
    (moved aside); ``reuse_finished=True`` (used by :func:`.sweep.run_cell` to resume a cell whose
    evaluation was interrupted) returns its saved results instead. Everything that can be checked (config
    of an existing folder, backbone, lengths, training data) is checked before anything is written.

    Raises:
        ValueError: global batch not divisible by the number of processes; bad config values; a length
            beyond the backbone's positions; ``data_root`` set but not a folder.
        RunExistsError: ``out`` holds a finished training and neither ``overwrite`` nor ``reuse_finished``.
        ConfigMismatchError: ``out`` holds a run of another config, or was started on other inputs (the training
            files, a local backbone; :func:`training_inputs`).
        NonFiniteError: the loss or a gradient became NaN/inf (``out/failure.json`` records it).
    """
    from datasets import Dataset

    from .modeling import build_splade, build_tiny_backbone

    out = Path(out)
    check_input_path(cfg.data_root or None, flag="data_root (--data-root)", kind="folder")  # never recorded unchecked
    world = _world_size()
    if cfg.global_batch_size % world:
        raise ValueError(f"global_batch_size {cfg.global_batch_size} is not divisible by the number of processes {world}")
    rank = int(os.environ.get("RANK", "0"))
    done = _finished_training(cfg, out, overwrite, reuse_finished)
    if done is not None:
        return done
    _check_model_lengths(cfg)  # everything that can be checked cheaply, before anything is written into ``out``
    columns = load_training_triples(cfg)
    if rank == 0:
        RunDir(out, overwrite=overwrite, config=cfg)
        check_inputs(out, training_inputs(cfg))  # recorded for a resume (compared above, before anything was read)
        (out / "failure.json").unlink(missing_ok=True)  # a resumed run starts without the old failure record
    backbone = cfg.backbone
    if cfg.tiny_model:
        backbone = str(build_tiny_backbone(out / "tiny_backbone", tiny_texts(columns), seed=cfg.seed)) if rank == 0 else str(out / "tiny_backbone")
    args = _training_arguments(cfg, out, world, progress)
    if world > 1 and torch.distributed.is_initialized():
        torch.distributed.barrier()  # rank 0 has written the tiny backbone / run folder
    torch.manual_seed(cfg.seed)
    model = build_splade(backbone, k=cfg.k, query_max_length=cfg.query_max_length, doc_max_length=cfg.doc_max_length,
                         trust_remote_code=cfg.trust_remote_code, weights_dtype=cfg.weights_dtype, engine=cfg.head_engine)
    text_cut = training_truncation(model, columns)  # counted on every training text, warned above a small share
    loss, reg_cb = make_loss(model, cfg, world)
    guard = NonFiniteGuard(out / "checkpoints")
    trainer = _guarded_trainer(model=model, args=args, train_dataset=Dataset.from_dict(columns), loss=loss,
                               callbacks=[reg_cb, guard])
    guard.trainer = trainer
    if rank:  # the Trainer seeded every process with cfg.seed: same dropout masks on same-shaped batches
        torch.manual_seed(rank_seed(cfg.seed, rank))  # (a resumed run restores each rank's saved state instead)
    last = last_complete_checkpoint(out / "checkpoints", remove_incomplete=rank == 0)
    if last is not None:
        check_resume_checkpoint(last)
    try:
        trainer.train(resume_from_checkpoint=last)
    except NonFiniteError as err:
        if rank == 0:
            atomic_write_json(out / "failure.json", {"status": "failed", "error": str(err), "step": err.step,
                                                     "what": err.what, "last_checkpoint": err.last_checkpoint})
        raise
    if not trainer.is_world_process_zero():
        return {}
    return _write_results(cfg, out, model, trainer, loss, reg_cb, last, world, text_cut)


def leave_process_group() -> None:
    """Under torchrun: wait for every rank, then tear the process group down, once a process's last training run is
    done (the end of ``initlab splade train``). Without it each rank exits with the group's communication threads
    still running, and a rank can abort at interpreter exit ("terminate called without an active exception",
    SIGABRT), failing the whole launch after a finished run. Nothing happens in a single process.
    """
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()  # rank 0 has written the results the other ranks skipped
        torch.distributed.destroy_process_group()


def training_truncation(model, columns: dict[str, list]) -> dict[str, Any] | None:
    """How many training queries and documents (positives and negatives) the model's query and document length
    limits cut, and the share of their tokens cut (:func:`initlab.mlmhead.lengths.truncation_counts`); a
    ``RuntimeWarning`` above :data:`~initlab.mlmhead.lengths.TRUNCATION_WARN_SHARE`. ``None`` without a tokenizer."""
    from initlab.mlmhead.lengths import truncation_counts, warn_truncation

    from .modeling import text_module

    mod = text_module(model)
    if mod is None:
        return None
    tok, q_len, d_len = mod
    docs = list(columns.get("positive", [])) + list(columns.get("negative", []))
    out = {"queries": truncation_counts(tok, columns.get("query", []), q_len), "documents": truncation_counts(tok, docs, d_len)}
    for kind, counts in out.items():
        warn_truncation(f"training {kind}", counts, stacklevel=2)
    return out


def training_inputs(cfg: SpladeTrainConfig) -> dict[str, Path | None]:
    """The input files of a training (:func:`initlab.runs.check_inputs`): the local training files (not an
    ``ir_datasets:`` source) and a local backbone folder (its weights, tokenizer and config; not a hub id, not the
    tiny in-process model, which is built from the training texts)."""
    def local(value: str) -> Path | None:
        return Path(value).resolve() if value and not value.startswith("ir_datasets:") and Path(value).is_file() else None

    backbone = Path(cfg.backbone) if not cfg.tiny_model and Path(cfg.backbone).is_dir() else None
    return {"train_source": local(cfg.train_source), "train_collection": local(cfg.train_collection),
            "train_queries": local(cfg.train_queries), "backbone": backbone.resolve() if backbone else None}


def _finished_training(cfg: SpladeTrainConfig, out: Path, overwrite: bool, reuse_finished: bool) -> dict[str, Any] | None:
    """The saved results of a finished training in ``out`` when ``reuse_finished``, else None (must train).

    Raises:
        ConfigMismatchError: ``out`` holds a run of another config or other inputs (unless ``overwrite``).
        RunExistsError: ``out`` holds a finished training and neither ``overwrite`` nor ``reuse_finished``.
    """
    if not overwrite:  # never resume or reuse a folder that holds another configuration, or other inputs
        check_same_record(out / "config.json", to_dict(cfg), what="training config")
        check_inputs(out, training_inputs(cfg), write=False)
    if (out / "train_results.json").exists() and (out / "model").is_dir() and not overwrite:
        if not reuse_finished:
            raise RunExistsError(f"{out}: already holds a finished training; choose another --out or pass --overwrite "
                                 f"(the old folder is then moved aside); to evaluate it: initlab splade eval --model {out / 'model'}")
        return read_json(out / "train_results.json")
    return None


def _check_model_lengths(cfg: SpladeTrainConfig) -> None:
    """The tiny-model name, the query/document lengths against the backbone's positions, and the backbone's
    checkpoint (loaded once to check that no tensor would be initialised at random).

    Raises:
        ValueError: an unknown ``tiny_model``, a length beyond the backbone's usable length, an incomplete backbone
            checkpoint (:func:`.modeling.check_backbone_checkpoint`).
    """
    from .modeling import TINY_POSITIONS

    if cfg.tiny_model and cfg.tiny_model != "bert":
        raise ValueError(f"tiny_model: expected '' or 'bert', got {cfg.tiny_model!r}")
    if cfg.tiny_model:
        from transformers import BertConfig

        check_lengths(cfg, BertConfig(max_position_embeddings=TINY_POSITIONS))
    else:
        from .modeling import check_backbone_checkpoint

        check_lengths(cfg, check_backbone(cfg.backbone, trust_remote_code=cfg.trust_remote_code))
        check_backbone_checkpoint(cfg.backbone, trust_remote_code=cfg.trust_remote_code)


def _training_arguments(cfg: SpladeTrainConfig, out: Path, world: int, progress: bool):
    """The Trainer's arguments: per-device batch ``global_batch_size / world``, checkpoints under ``out/checkpoints``,
    bf16 on CUDA only, the NaN policy's ``logging_nan_inf_filter=False``."""
    from sentence_transformers.sparse_encoder import SparseEncoderTrainingArguments

    use_cuda = torch.cuda.is_available()
    return SparseEncoderTrainingArguments(
        output_dir=str(out / "checkpoints"),
        max_steps=cfg.max_steps,
        per_device_train_batch_size=cfg.global_batch_size // world,
        learning_rate=cfg.learning_rate,
        weight_decay=cfg.weight_decay,
        warmup_steps=cfg.warmup_steps,
        logging_steps=cfg.logging_steps,
        save_strategy="steps",
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        seed=cfg.seed,
        data_seed=cfg.seed,
        bf16=bool(cfg.bf16 and use_cuda),
        use_cpu=not use_cuda,
        report_to=[],
        router_mapping={"query": "query", "positive": "document", "negative": "document"},
        dataloader_drop_last=True,
        # the Trainer's own tqdm bar redraws in place; into a log (not a terminal) its PrinterCallback's plain lines,
        # one per logging step, are the progress instead (initlab.executor.progress_bar's rule)
        disable_tqdm=not progress or not is_terminal(sys.stderr),
        ddp_find_unused_parameters=False,
        logging_nan_inf_filter=False,  # never log the mean of earlier losses in place of a NaN (NaN policy)
    )


def _write_results(cfg: SpladeTrainConfig, out: Path, model, trainer, loss, reg_cb, last: str | None,
                   world: int, text_cut: dict[str, Any] | None = None) -> dict[str, Any]:
    """Rank 0 after training: ``model/``, ``loss_curve.csv`` (+ png), ``flops_terms.json``, ``train_results.json``;
    returns the results dict."""
    model.save(str(out / "model"), safe_serialization=True)
    log = [dict(r) for r in trainer.state.log_history if "loss" in r]
    curve = [{"step": r["step"], "loss": float(r["loss"]), "base_loss": r.get("base_loss"),
              "query_regularizer_loss": r.get("query_regularizer_loss"),
              "document_regularizer_loss": r.get("document_regularizer_loss"),
              # the Trainer stores its log entry before the callback adds the weights, so recompute them from
              # the callback's schedule: weight used in step s is set from global_step s - 1
              "query_regularizer_weight": regularizer_weight(reg_cb, r["step"], cfg.lambda_q),
              "document_regularizer_weight": regularizer_weight(reg_cb, r["step"], cfg.lambda_d)} for r in log]
    atomic_write_csv(out / "loss_curve.csv", curve)
    q_reg, d_reg = loss.query_regularizer, loss.document_regularizer
    first = int(Path(last).name.split("-")[-1]) + 1 if last else 1  # a resumed run records its new steps only
    atomic_write_json(out / "flops_terms.json", {
        "first_step": first,
        "query": list(getattr(q_reg, "history", [])), "document": list(getattr(d_reg, "history", [])),
        "note": "unweighted FLOPS regulariser of every training call, over the global batch" if cfg.global_flops else
                "per-process batch (global_flops=False)"})
    try:
        from initlab.paper_figs.splade_scale_figures import plot_loss_curve

        plot_loss_curve(out / "loss_curve.csv", out / "loss_curve.png", title=Path(out).name)
    except Exception as err:  # a figure never fails a training run
        warnings.warn(f"loss-curve figure not drawn: {err}")
    losses = [c["loss"] for c in curve]
    res = {
        "backbone": cfg.backbone if not cfg.tiny_model else f"tiny-{cfg.tiny_model} (in-process, not {cfg.backbone})", "k": cfg.k, "steps": trainer.state.global_step, "world_size": world,
        "final_loss": losses[-1] if losses else float("nan"),
        "nan_loss": any(not math.isfinite(x) for x in losses),
        "train_runtime_s": next((r.get("train_runtime") for r in trainer.state.log_history if "train_runtime" in r), None),
        "train_samples_per_second": next((r.get("train_samples_per_second") for r in trainer.state.log_history if "train_samples_per_second" in r), None),
        "weights_dtype": str(next(model.parameters()).dtype).replace("torch.", ""),  # the trained master weights
        "head_engine": cfg.head_engine,  # the SPLADE head's path (fused: no (B, T, V) logits)
        "truncation": text_cut,
        "config": to_dict(cfg),
    }
    atomic_write_json(out / "train_results.json", res)
    return res
