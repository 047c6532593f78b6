"""Self-pretraining and fine-tuning loops for LRA tasks (resumable, accelerate/DDP, bf16 on GPU).

``pretrain(cfg, out)``  -- SPT on the task's own training inputs (or another task's, ``cfg.spt_task``):
    masked denoising (loss on masked positions only) or causal next-token prediction. After every
    epoch the validation loss (fixed seeded masks) is measured; the best-validation backbone is kept in
    ``spt_best.safetensors``; ``milestones`` additionally freeze the best-so-far checkpoint after given
    epochs (``spt_best_e{E}.safetensors``), which for a constant schedule equals a separate E-epoch run.
``finetune(cfg, out, spt_ckpt)`` -- label training from scratch or from an SPT checkpoint (all
    weights, or a hybrid subset: W_Q,W_K / W_Q,W_K,W_V,W_O / FFN), optionally with frozen groups. The
    test accuracy reported is the one at the best validation epoch (Amos et al. 2024, §4).

Budgets: ``spt_patience``/``patience`` stop a stage on a plateau (``spt_epochs``/``epochs`` are then
caps). Guards: a NaN/inf loss or gradient stops training with :class:`~initlab.runs.NonFiniteError`, a loss
past the divergence rule with its subclass :class:`~initlab.runs.DivergenceError` (one
:class:`~initlab.runs.LossGuard` per run)
(naming the step and the last finite checkpoint; ``results.json`` records the failure, no ``DONE``, no
checkpoint of the failing epoch); resuming a folder that holds another config raises
:class:`~initlab.runs.ConfigMismatchError`. Role of this module: the two training loops. Data, model, run-folder
and checkpoint helpers live in :mod:`initlab.realdata.lra.runtime`, the evaluations (validation loss,
accuracy, attention metrics) in :mod:`initlab.realdata.lra.evaluation`, the SPT objectives in
:mod:`initlab.realdata.lra.masking`.

Both write ``config.json`` (run kind and resolved :class:`LRAConfig`), ``history.csv``, ``results.json`` and
``DONE`` into a :class:`initlab.runs.RunDir`; ``ckpt/last.pt`` (plain state dicts, loaded with
``weights_only=True``) lets an interrupted run resume at the next epoch. Launch with
``accelerate launch`` or ``torchrun`` for multi-GPU DDP; each rank takes a disjoint share of each
epoch's seeded permutation, evaluation counts are summed over ranks.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from initlab.realdata.lra.config import LRAConfig, INIT_GROUPS
from initlab.realdata.lra.evaluation import attention_metrics_on, evaluate_accuracy, initial_attention_metrics, spt_val_loss
from initlab.realdata.lra.splits import TaskData, iter_batches
from initlab.realdata.lra.loop import optimizer_step, record_failure, dropout_seed, epochs_since_gain
from initlab.realdata.lra.masking import MASK_RATIO, spt_loss
from initlab.realdata.lra.model import LRAModel
from initlab.realdata.lra.runtime import (SplitMismatchError, restore_last, save_state, batch_tensors, build_model,
                                          check_spt_split, finished_results, load_data, load_spt_checkpoint, load_weights,
                                          lr_schedule, make_accelerator, open_run, read_run_config, recorded_split,
                                          run_inputs, save_weights, single_inputs, split_metadata, spt_view, task_vocab)
from initlab.runs import (ConfigMismatchError, LossGuard, NonFiniteError, RunDir, atomic_write_bytes, holds_run_folder,
                          rank_seed)

__all__ = ["load_data", "build_model", "pretrain", "finetune", "make_accelerator",
           "save_weights", "load_weights", "ConfigMismatchError", "NonFiniteError", "epochs_since_gain",
           "read_run_config", "task_vocab", "single_inputs", "batch_tensors", "split_metadata", "SplitMismatchError"]

# ---------------------------------------------------------------------------------------------- progress


def _progress(it, total: int, desc: str, enabled: bool):
    from initlab.executor import progress_bar

    return progress_bar(it, total=total, desc=desc, disable=not enabled, leave=False, mininterval=2.0)


# ---------------------------------------------------------------------------------------------- SPT


def _spt_setup(cfg: LRAConfig, out: Path, overwrite: bool, spt_task: str, accelerator):
    """Run folder (main process), data, model, optimizer and scheduler of an SPT stage."""
    run, data = open_run(cfg, out, overwrite, "pretrain", spt_task) if accelerator.is_main_process else (None, None)
    accelerator.wait_for_everyone()
    if run is None:
        run = RunDir(out, resume=True)
        data = load_data(cfg, spt_task, out=out)
    meta = split_metadata(data)  # recorded in every SPT checkpoint: fine-tuning checks it saw the same split
    train_split, val_split = single_inputs(data.train), single_inputs(data.val)
    model = build_model(cfg)
    model.set_stage("spt")
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    view = spt_view(cfg)
    steps_per_epoch = math.ceil((len(train_split) // accelerator.num_processes) / view.batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_schedule(view, steps_per_epoch * cfg.spt_epochs))
    return run, train_split, val_split, model, params, opt, sched, view, steps_per_epoch, meta


def _spt_epoch(model, opt, sched, params, train_split, cfg: LRAConfig, view: LRAConfig, ratio: float, accelerator,
               epoch: int, max_len: int, spe: int, last: Path, progress: bool, guard: LossGuard) -> float:
    """One epoch of self-pretraining; returns the mean training loss per target."""
    model.train()
    torch.manual_seed(dropout_seed(cfg.seed, epoch, accelerator.process_index))
    # the SPT masks: their own stream per rank (rank 0 keeps the single-process seed), distinct across ranks and
    # epochs for any world size (with ``+ rank``, rank 7 at epoch e drew the stream of rank 0 at epoch e + 1);
    # mod 2**32: torch's CPU generator keeps only the low 32 bits of a seed
    gen = torch.Generator().manual_seed(rank_seed(cfg.seed * 1_000_003 + epoch * 7, accelerator.process_index))
    batches = list(iter_batches(train_split, view.batch_size, shuffle=True, seed=cfg.seed, epoch=epoch,
                                rank=accelerator.process_index, world=accelerator.num_processes))
    tot, cnt = 0.0, 0
    for i, idx in enumerate(_progress(batches, len(batches), f"SPT {cfg.task} epoch {epoch + 1}/{cfg.spt_epochs}",
                                      progress)):
        tok, mask, _ = batch_tensors(train_split, idx, accelerator.device, max_len)
        with accelerator.autocast():
            loss, n = spt_loss(model, tok, mask, cfg, ratio, gen)
        value = optimizer_step(loss, model, opt, sched, params, accelerator, cfg, guard=guard, step=epoch * spe + i,
                                last=last)
        tot, cnt = tot + value * n, cnt + n
    return tot / max(cnt, 1)


def _spt_save_epoch(run: RunDir, model, opt, sched, val: float, best: float, epoch: int, milestones: Sequence[int],
                    history: list[dict], last: Path, meta: dict[str, str]) -> float:
    """Main process, after an SPT epoch: the best backbone (``spt_best.safetensors``, with the split ``meta``
    in its header), milestone copies, the resumable state ``last`` and ``history.csv``; returns the new best
    validation loss."""
    state = model.backbone.state_dict()
    if val < best:
        best = val
        save_weights(state, run.root / "spt_best.safetensors", metadata=meta)
    if epoch + 1 in set(milestones):
        atomic_write_bytes(run.root / f"spt_best_e{epoch + 1}.safetensors", (run.root / "spt_best.safetensors").read_bytes())
    save_state(last, model=model.state_dict(), optim=opt.state_dict(), sched=sched.state_dict(), epoch=epoch + 1,
                best=best, history=history)
    run.write_csv("history.csv", history)
    return best


@holds_run_folder("out")
def pretrain(cfg: LRAConfig, out: str | Path, *, overwrite: bool = False, milestones: Sequence[int] = (),
             progress: bool = True, reuse_finished: bool = False, report: Any = None, verbose: bool = True) -> dict:
    """Self-pretrain and return the results dict (also written to ``out/results.json``). See module doc.

    ``report``: an :class:`initlab.executor.Progress` told the epochs resumed from ``ckpt/last.pt``, each
    epoch done, and the epochs actually run after a plateau stop; ``verbose``: print one line per epoch.

    With ``cfg.spt_patience`` the stage stops once the validation loss has not improved by the relative
    margin ``cfg.spt_min_rel_gain`` for that many epochs (``cfg.spt_epochs`` is then a cap).

    Raises:
        ValueError: cross-task data with a different vocabulary, ``spt_epochs == 0``.
        ConfigMismatchError: ``out`` holds an unfinished run with another config.
        NonFiniteError: a NaN/inf loss or gradient (``results.json`` records the failure; no ``DONE``).
    """
    out = Path(out)
    if cfg.spt_epochs < 1:
        raise ValueError("spt_epochs: pretrain needs at least 1 epoch (0 epochs = fine-tune from scratch)")
    spt_task = cfg.spt_task or cfg.task
    if task_vocab(spt_task) != task_vocab(cfg.task):
        raise ValueError(f"spt_task: {spt_task!r} inputs use a different vocabulary from {cfg.task!r}; choose a task "
                         f"with the same tokens (e.g. image <-> pathfinder, text <-> retrieval)")
    done = finished_results(out, cfg, "pretrain", reuse_finished, overwrite, run_inputs(cfg, spt_task))
    if done is not None:
        if report is not None:  # finished earlier: resumed work, not speed
            report.start(done.get("epochs_run", cfg.spt_epochs), done.get("epochs_run", cfg.spt_epochs))
        return done
    accelerator = make_accelerator(cfg)
    main = accelerator.is_main_process
    run, train_split, val_split, model, params, opt, sched, view, spe, meta = _spt_setup(cfg, out, overwrite, spt_task,
                                                                                        accelerator)
    ratio = cfg.mask_ratio if cfg.mask_ratio is not None else MASK_RATIO[spt_task]
    max_len = model.backbone.cfg.max_len
    history: list[dict] = []
    best, start = float("inf"), 0
    last = run.root / "ckpt" / "last.pt"
    st = restore_last(last, model, opt, sched)
    if st is not None:
        start, best, history = int(st["epoch"]), float(st["best"]), list(st["history"])
        if main and verbose:
            print(f"[SPT {cfg.task}] resuming {run.root} after epoch {start}/{cfg.spt_epochs}", flush=True)
    if report is not None:
        report.start(start, cfg.spt_epochs)
    model, opt = accelerator.prepare(model, opt)
    guard = LossGuard(f"LRA SPT {cfg.task}")
    t0 = time.perf_counter()
    plateau = lambda: bool(cfg.spt_patience) and epochs_since_gain(  # noqa: E731
        [r["val_loss"] for r in history], higher_is_better=False, min_rel_gain=cfg.spt_min_rel_gain) >= cfg.spt_patience
    for epoch in range(start, cfg.spt_epochs):
        if plateau():
            break
        try:
            train_loss = _spt_epoch(model, opt, sched, params, train_split, cfg, view, ratio, accelerator, epoch, max_len,
                                    spe, last, progress and main, guard)
        except NonFiniteError as err:
            if main:
                record_failure(run, "pretrain", cfg, err, history)
            raise
        val = spt_val_loss(model, val_split, view, ratio, accelerator, max_len)
        row = {"epoch": epoch + 1, "train_loss": train_loss, "val_loss": val, "lr": sched.get_last_lr()[0],
               "seconds": time.perf_counter() - t0}
        history.append(row)
        if main:
            best = _spt_save_epoch(run, accelerator.unwrap_model(model), opt, sched, val, best, epoch, milestones, history,
                                   last, meta)
            if verbose:
                print(f"[SPT {cfg.task}] epoch {epoch + 1}: train {row['train_loss']:.4f} val {val:.4f} (best {best:.4f})",
                      flush=True)
        if report is not None:
            report.advance(1)
        accelerator.wait_for_everyone()
    if report is not None:
        report.set_total(len(history))
    if main:  # milestones past a plateau stop: the best checkpoint cannot change any more
        for e in sorted(set(milestones)):
            if e > len(history) and not (run.root / f"spt_best_e{e}.safetensors").exists():
                atomic_write_bytes(run.root / f"spt_best_e{e}.safetensors", (run.root / "spt_best.safetensors").read_bytes())
    result = {"kind": "pretrain", "task": cfg.task, "spt_task": spt_task, "objective": cfg.spt_objective, "mask_ratio": ratio,
              "spt_loss": cfg.spt_loss, "epochs": cfg.spt_epochs, "epochs_run": len(history),
              "stopped_on_plateau": len(history) < cfg.spt_epochs, "best_val_loss": best,
              "best_epoch": min(history, key=lambda r: r["val_loss"])["epoch"] if history else None,
              "checkpoint": str(run.root / "spt_best.safetensors"), "split_task": recorded_split(meta)["task"],
              "split_fingerprint": recorded_split(meta)["fingerprint"], "history": history,
              "world_size": accelerator.num_processes}
    if main:
        run.write_json("results.json", result)
        run.mark_done()
    accelerator.wait_for_everyone()
    return result


# ---------------------------------------------------------------------------------------------- fine-tuning


def init_from_spt(model: LRAModel, state: dict[str, torch.Tensor], groups: str) -> list[str]:
    """Copy SPT weights into ``model.backbone``: ``all`` = everything but the heads (embeddings, W_Q/W_K/
    W_V/W_O, FFN, LayerNorms); ``qk``/``qkvo``/``ffn`` = hybrid initialisation (rest stays random)."""
    from initlab.nn.encoder import load_partial

    if groups not in INIT_GROUPS:
        raise ValueError(f"init_groups: expected one of {list(INIT_GROUPS)}, got {groups!r}")
    sel = INIT_GROUPS[groups] or ("embeddings", "qkvo", "ffn", "layernorm")
    return load_partial(model.backbone, state, list(sel))


def _finetune_model(cfg: LRAConfig, spt_state: dict | None) -> tuple[LRAModel, list[str], list[str]]:
    """The model to fine-tune: seeded init, SPT weights copied (``cfg.init_groups``), groups frozen."""
    from initlab.nn.encoder import freeze

    model = build_model(cfg)
    copied = init_from_spt(model, spt_state, cfg.init_groups) if spt_state is not None else []
    frozen = freeze(model.backbone, list(cfg.freeze)) if cfg.freeze else []
    model.set_stage("finetune")
    for n in frozen:  # set_stage must not unfreeze a frozen group
        dict(model.backbone.named_parameters())[n].requires_grad_(False)
    return model, copied, frozen


def _finetune_epoch(model, opt, sched, params, data: TaskData, cfg: LRAConfig, accelerator, epoch: int, max_len: int,
                    spe: int, last: Path, progress: bool, guard: LossGuard) -> float:
    """One epoch of label training; returns the mean training loss."""
    model.train()
    torch.manual_seed(dropout_seed(cfg.seed, epoch, accelerator.process_index))
    batches = list(iter_batches(data.train, cfg.batch_size, shuffle=True, seed=cfg.seed, epoch=epoch,
                                rank=accelerator.process_index, world=accelerator.num_processes))
    tot, cnt = 0.0, 0
    for i, idx in enumerate(_progress(batches, len(batches), f"fine-tune {cfg.task} epoch {epoch + 1}/{cfg.epochs}",
                                      progress)):
        tok, mask, y = batch_tensors(data.train, idx, accelerator.device, max_len)
        with accelerator.autocast():
            loss = F.cross_entropy(model(tok, mask, mode="classify").float(), y)
        value = optimizer_step(loss, model, opt, sched, params, accelerator, cfg, guard=guard, step=epoch * spe + i,
                                last=last)
        tot, cnt = tot + value * len(y), cnt + len(y)
    return tot / max(cnt, 1)


def _finetune_setup(cfg: LRAConfig, out: Path, overwrite: bool, spt_state: dict | None, accelerator, check=None,
                    spt_ckpt: str | Path | None = None):
    """Run folder (main process), data, model (with SPT weights copied and groups frozen), optimizer and
    scheduler of a fine-tuning stage; also the copied and frozen parameter names and the steps per epoch.
    ``check(data)`` runs on the data before the folder is created (the SPT split check)."""
    inputs = run_inputs(cfg, cfg.task, spt_ckpt if cfg.init == "spt" else None)
    run, data = (open_run(cfg, out, overwrite, "finetune", cfg.task, check=check, inputs=inputs)
                 if accelerator.is_main_process else (None, None))
    accelerator.wait_for_everyone()
    if run is None:
        run = RunDir(out, resume=True)
        data = load_data(cfg, out=out)
    model, copied, frozen = _finetune_model(cfg, spt_state)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    spe = math.ceil((len(data.train) // accelerator.num_processes) / cfg.batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_schedule(cfg, spe * cfg.epochs))
    return run, data, model, copied, frozen, params, opt, sched, spe


@holds_run_folder("out")
def finetune(cfg: LRAConfig, out: str | Path, spt_ckpt: str | Path | None = None, *, overwrite: bool = False,
             progress: bool = True, reuse_finished: bool = False, report: Any = None, verbose: bool = True) -> dict:
    """Fine-tune on labels; returns the results dict (``test_acc`` at the best validation epoch).

    ``report`` and ``verbose``: as in :func:`pretrain` (epochs resumed, done, and run after a plateau stop).

    With ``cfg.patience`` the run stops once ``patience`` epochs pass without a new best validation
    accuracy (``cfg.epochs`` is then a cap). ``attention_metrics_init`` holds the attention metrics of the
    initial model (proximity mass at fine-tuning start), ``attention_metrics`` those of the best model.

    Raises:
        ValueError: ``epochs < 1``, ``init='spt'`` without ``spt_ckpt``, a checkpoint that is not safetensors.
        FileNotFoundError: missing checkpoint.
        SplitMismatchError (a ValueError): the SPT checkpoint records no split, or was pretrained on another
            split of this task (:func:`~initlab.realdata.lra.runtime.check_spt_split`); nothing is written.
        ConfigMismatchError: ``out`` holds an unfinished run with another config.
        NonFiniteError: a NaN/inf loss or gradient (``results.json`` records the failure; no ``DONE``).
    """
    out = Path(out)
    if cfg.epochs < 1:
        raise ValueError(f"epochs: fine-tuning needs at least 1 epoch, got {cfg.epochs}")
    if cfg.init == "spt" and spt_ckpt is None:
        raise ValueError("spt_ckpt: init='spt' needs an SPT checkpoint (.safetensors from initlab lra pretrain)")
    done = finished_results(out, cfg, "finetune", reuse_finished, overwrite,
                            run_inputs(cfg, cfg.task, spt_ckpt if cfg.init == "spt" else None))
    if done is not None:
        if report is not None:  # finished earlier: resumed work, not speed
            report.start(done.get("epochs_run", cfg.epochs), done.get("epochs_run", cfg.epochs))
        return done
    spt_state, check = None, None
    if cfg.init == "spt":
        spt_state, spt_meta = load_spt_checkpoint(spt_ckpt)
        check = lambda data: check_spt_split(spt_meta, spt_ckpt, data)  # noqa: E731
    accelerator = make_accelerator(cfg)
    main = accelerator.is_main_process
    run, data, model, copied, frozen, params, opt, sched, spe = _finetune_setup(cfg, out, overwrite, spt_state, accelerator,
                                                                                check, spt_ckpt)
    init_metrics = initial_attention_metrics(run, model, cfg, data.val) if main else None
    max_len = model.backbone.cfg.max_len
    history: list[dict] = []
    best = {"val_acc": -1.0, "test_acc": float("nan"), "epoch": 0}
    start = 0
    last = run.root / "ckpt" / "last.pt"
    st = restore_last(last, model, opt, sched)
    if st is not None:
        start, best, history = int(st["epoch"]), dict(st["best"]), list(st["history"])
        if main and verbose:
            print(f"[fine-tune {cfg.task}] resuming {run.root} after epoch {start}/{cfg.epochs}", flush=True)
    if report is not None:
        report.start(start, cfg.epochs)
    model, opt = accelerator.prepare(model, opt)
    guard = LossGuard(f"LRA fine-tune {cfg.task}")
    t0 = time.perf_counter()
    for epoch in range(start, cfg.epochs):
        if cfg.patience and len(history) - best["epoch"] >= cfg.patience:
            break  # plateau: no new best validation accuracy for `patience` epochs
        try:
            train_loss = _finetune_epoch(model, opt, sched, params, data, cfg, accelerator, epoch, max_len, spe, last,
                                         progress and main, guard)
        except NonFiniteError as err:
            if main:
                record_failure(run, "finetune", cfg, err, history)
            raise
        val_acc = evaluate_accuracy(model, data.val, cfg.batch_size, accelerator, max_len)
        improved = val_acc > best["val_acc"]
        if improved:  # the test set is read only at new best-validation epochs
            test_acc = evaluate_accuracy(model, data.test, cfg.batch_size, accelerator, max_len)
            best = {"val_acc": val_acc, "test_acc": test_acc, "epoch": epoch + 1}
        row = {"epoch": epoch + 1, "train_loss": train_loss, "val_acc": val_acc,
               "test_acc_if_best": best["test_acc"] if improved else "", "seconds": time.perf_counter() - t0}
        history.append(row)
        if main:
            if improved:
                save_weights(accelerator.unwrap_model(model).state_dict(), run.root / "best.safetensors")
            save_state(last, model=accelerator.unwrap_model(model).state_dict(), optim=opt.state_dict(),
                        sched=sched.state_dict(), epoch=epoch + 1, best=best, history=history)
            run.write_csv("history.csv", history)
            if verbose:
                print(f"[fine-tune {cfg.task}] epoch {epoch + 1}: loss {row['train_loss']:.4f} val acc {val_acc:.4f} "
                      f"(best {best['val_acc']:.4f} @ {best['epoch']}, test {best['test_acc']:.4f})", flush=True)
        if report is not None:
            report.advance(1)
        accelerator.wait_for_everyone()
    if report is not None:
        report.set_total(len(history))
    result = {"kind": "finetune", "task": cfg.task, "init": cfg.init, "init_groups": cfg.init_groups,
              "freeze": list(cfg.freeze), "spt_ckpt": None if spt_ckpt is None else str(spt_ckpt),
              "best_epoch": best["epoch"], "val_acc": best["val_acc"], "test_acc": best["test_acc"],
              "epochs_run": len(history), "stopped_on_plateau": len(history) < cfg.epochs,
              "n_copied_from_spt": len(copied), "n_frozen": len(frozen), "history": history,
              "world_size": accelerator.num_processes}
    if main:
        if init_metrics is not None:
            result["attention_metrics_init"] = init_metrics
        if cfg.metrics_examples:
            result["attention_metrics"] = attention_metrics_on(run.root / "best.safetensors", cfg, data.val)
        run.write_json("results.json", result)
        run.mark_done()
    accelerator.wait_for_everyone()
    return result
