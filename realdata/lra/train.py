"""Self-pretraining and fine-tuning loops for LRA tasks (resumable, accelerate/DDP, bf16 on GPU).

``pretrain(cfg, out)``  -- SPT on the task's own training inputs (or another task's, ``cfg.spt_task``):
    masked denoising (loss on masked positions only) or causal next-token prediction. After every
    epoch the validation loss (fixed seeded masks) is measured; the best-validation backbone is kept in
    ``spt_best.safetensors``; ``milestones`` additionally freeze the best-so-far checkpoint after given
    epochs (``spt_best_e{E}.safetensors``), which for a constant schedule equals a separate E-epoch run.
``finetune(cfg, out, spt_ckpt)`` -- label training from scratch or from an SPT checkpoint (all
    weights, or a hybrid subset: W_Q,W_K / W_Q,W_K,W_V,W_O / FFN), optionally with frozen groups. The
    test accuracy reported is the one at the best validation epoch (Amos et al. 2024, §4).

Both write ``config.json`` (resolved :class:`LRAConfig`), ``history.csv``, ``results.json`` and
``DONE`` into a :class:`initlab.runs.RunDir`; ``ckpt/last.pt`` (plain state dicts, loaded with
``weights_only=True``) lets an interrupted run resume at the next epoch. Launch with
``accelerate launch`` or ``torchrun`` for multi-GPU DDP; each rank takes a disjoint share of each
epoch's seeded permutation, evaluation counts are summed over ranks.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from initlab.config import from_dict, to_dict
from initlab.realdata.lra.config import LRAConfig, INIT_GROUPS
from initlab.realdata.lra.data import (BYTE_VOCAB, LISTOPS_VOCAB, TASK_MAX_LEN, TASK_CLASSES, Split, TaskData,
                                       iter_batches, load_task, split_from_sequences)
from initlab.realdata.lra.listops import generate_examples, write_listops_tsv
from initlab.realdata.lra.masking import MASK_RATIO, causal_targets, mask_tokens, masked_loss
from initlab.realdata.lra.model import LRAModel, backbone_config
from initlab.runs import RunDir, atomic_write_bytes

__all__ = ["load_data", "build_model", "pretrain", "finetune", "evaluate_accuracy", "spt_val_loss", "make_accelerator",
           "save_weights", "load_weights", "ConfigMismatchError"]


class ConfigMismatchError(ValueError):
    """Resuming a run folder whose saved config differs from the requested one."""


# ---------------------------------------------------------------------------------------------- data & model
def task_vocab(task: str) -> int:
    return LISTOPS_VOCAB if task == "listops" else BYTE_VOCAB


def _data_dir(cfg: LRAConfig, task: str) -> str | None:
    """The folder ``task`` is read from: ``cfg.data_dir`` for the task itself, ``cfg.spt_data_dir`` for a cross-task SPT source."""
    return cfg.data_dir if task == cfg.task else cfg.spt_data_dir


def load_data(cfg: LRAConfig, task: str | None = None, data_dir: str | None = None, out: Path | None = None) -> TaskData:
    """Load ``task`` (default ``cfg.task``). ListOps without a ``data_dir`` is generated from
    ``cfg.listops_gen`` (written as ``basic_*.tsv`` into ``out/listops_data`` when ``out`` is given, then
    read back through the real loader)."""
    task = task or cfg.task
    data_dir = data_dir if data_dir is not None else _data_dir(cfg, task)
    if task == "listops" and data_dir is None:
        if cfg.listops_gen is None:
            raise ValueError("data_dir: ListOps needs --data-dir (basic_*.tsv) or a listops_gen config (generated data)")
        if out is not None:
            gen_dir = Path(out) / "listops_data"
            if not (gen_dir / "basic_test.tsv").exists():
                write_listops_tsv(gen_dir, cfg.listops_gen, overwrite=True)  # the run's own folder
            data_dir = str(gen_dir)
        else:
            ex = generate_examples(cfg.listops_gen)
            from initlab.realdata.lra.data import encode_listops

            L = cfg.max_len or TASK_MAX_LEN["listops"]
            sp = {k: split_from_sequences([encode_listops(s) for s, _ in v], [y for _, y in v], L) for k, v in ex.items()}
            return TaskData("listops", LISTOPS_VOCAB, L, 10, sp["train"], sp["val"], sp["test"])
    return load_task(task, data_dir, seed=cfg.seed, max_len=cfg.max_len if task == cfg.task else None, limit=cfg.limit)


def build_model(cfg: LRAConfig) -> LRAModel:
    """A freshly initialised model for ``cfg.task`` (seeded with ``cfg.seed``)."""
    torch.manual_seed(cfg.seed)
    mc = backbone_config(task_vocab(cfg.task), cfg.max_len or TASK_MAX_LEN[cfg.task], TASK_CLASSES[cfg.task],
                         n_layers=cfg.n_layers, d_model=cfg.d_model, n_heads=cfg.n_heads, d_ff=cfg.d_ff, dropout=cfg.dropout)
    return LRAModel(mc, pair=cfg.task == "retrieval")


def single_inputs(split: Split) -> Split:
    """Retrieval pairs (N, 2, T) -> the documents as N*2 single sequences (SPT inputs)."""
    if split.tokens.dim() == 2:
        return split
    N, _, T = split.tokens.shape
    return Split(split.tokens.reshape(N * 2, T), split.lengths.reshape(N * 2), split.labels.repeat_interleave(2))


def batch_tensors(split: Split, idx: torch.Tensor, device, max_len: int | None = None):
    """``(tokens long, pad_mask bool, labels)`` for rows ``idx``, trimmed to the longest real sequence
    (and to ``max_len``). Empty documents count one (pad) token as real so pooling is defined."""
    lengths = split.lengths[idx].clamp_min(1)
    T = int(lengths.max())
    if max_len is not None:
        T = min(T, max_len)
        lengths = lengths.clamp_max(max_len)
    tok = split.tokens[idx][..., :T].long()
    mask = torch.arange(T) < lengths[..., None]
    return tok.to(device), mask.to(device), split.labels[idx].to(device)


# ---------------------------------------------------------------------------------------------- runtime
def make_accelerator(cfg: LRAConfig):
    """An ``accelerate.Accelerator``: GPU with bf16 autocast when available (``cfg.device``), else CPU fp32.

    Raises:
        ValueError: ``device='cuda'`` without CUDA.
    """
    from accelerate import Accelerator

    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device: 'cuda' requested but torch.cuda.is_available() is False")
    use_cuda = cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())
    if not use_cuda and cfg.cpu_threads:
        torch.set_num_threads(cfg.cpu_threads)
    return Accelerator(cpu=not use_cuda, mixed_precision="bf16" if (use_cuda and cfg.bf16) else "no")


def _restore_last(last: Path, model, opt, sched) -> dict | None:
    """Restore model, optimizer and scheduler from the resumable checkpoint ``last`` (plain tensors and
    numbers, loaded with ``weights_only=True``); returns its saved state, or ``None`` if there is none yet."""
    if not last.exists():
        return None
    st = torch.load(last, map_location="cpu", weights_only=True)
    model.load_state_dict(st["model"])
    opt.load_state_dict(st["optim"])
    sched.load_state_dict(st["sched"])
    return st


def _schedule(cfg: LRAConfig, total_steps: int):
    def f(step: int) -> float:
        if cfg.warmup_steps and step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        if cfg.schedule == "cosine":
            prog = (step - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps)
            return 0.5 * (1 + math.cos(math.pi * min(1.0, prog)))
        return 1.0

    return f


def save_weights(state: dict[str, torch.Tensor], path: Path) -> Path:
    """A plain state dict as safetensors (atomically)."""
    from safetensors.torch import save

    return atomic_write_bytes(path, save({k: v.detach().cpu().contiguous() for k, v in state.items()}))


def load_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """Read a safetensors state dict. Raises ``FileNotFoundError`` naming the file."""
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: SPT checkpoint not found (expected a .safetensors file written by initlab lra pretrain)")
    return load_file(str(path))


def _save_state(path: Path, **state: Any) -> None:
    import io

    buf = io.BytesIO()
    torch.save(state, buf)
    atomic_write_bytes(path, buf.getvalue())


def _check_same_config(cfg_path: Path, cfg: LRAConfig, kind: str) -> None:
    saved = json.loads(cfg_path.read_text())
    if saved.get("config") != to_dict(cfg) or saved.get("kind", kind) != kind:
        raise ConfigMismatchError(f"{cfg_path}: this run was started with a different config; use another --out "
                                  "or --overwrite")


def _finished(out: Path, cfg: LRAConfig, kind: str, reuse: bool, overwrite: bool) -> dict | None:
    """Saved results of a finished run with the same config when ``reuse`` (sweeps), else None."""
    if reuse and not overwrite and (out / "DONE").exists():
        _check_same_config(out / "config.json", cfg, kind)
        return json.loads((out / "results.json").read_text())
    return None


def _open_run(cfg: LRAConfig, out: Path, overwrite: bool, kind: str, task: str) -> tuple[RunDir, TaskData]:
    """Open (or resume) the run folder and load ``task``'s data, in an order that writes nothing on bad input:
    a finished run or a config mismatch is refused first, then the data are read (a missing or malformed file
    raises here), and only then is the folder created. Generated ListOps is written into ``out/listops_data``
    after the folder exists (an ``--overwrite`` moves the old folder aside first)."""
    out = Path(out)
    if not overwrite and (out / "DONE").exists():
        RunDir(out, overwrite=False)  # raises RunExistsError naming the folder
    if not overwrite and (out / "config.json").exists():
        _check_same_config(out / "config.json", cfg, kind)
    generated = task == "listops" and _data_dir(cfg, task) is None
    data = None if generated else load_data(cfg, task)
    run = RunDir(out, overwrite=overwrite, resume=True)
    cfg_path = run.root / "config.json"
    if cfg_path.exists():
        _check_same_config(cfg_path, cfg, kind)
    else:
        run.write_json("config.json", {"config_class": "LRAConfig", "kind": kind, "config": to_dict(cfg)})
    if data is None:
        data = load_data(cfg, task, out=run.root)
    return run, data


def read_run_config(out: str | Path) -> LRAConfig:
    """The :class:`LRAConfig` saved in a run folder's ``config.json``."""
    p = Path(out) / "config.json"
    if not p.is_file():
        raise FileNotFoundError(f"{p}: not found (expected a run folder written by initlab lra)")
    return from_dict(LRAConfig, json.loads(p.read_text())["config"])


def _progress(it, total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(it, total=total, desc=desc, disable=not enabled, leave=False, mininterval=2.0)


# ---------------------------------------------------------------------------------------------- SPT
def _spt_loss(model, tok, mask, objective: str, ratio: float, gen: torch.Generator):
    if objective == "masked":
        corrupted, masked = mask_tokens(tok, mask, ratio, gen)
        logits = model(corrupted, mask, mode="masked")
        return masked_loss(logits, tok, masked)
    targets, valid = causal_targets(tok, mask)
    logits = model(tok, mask, mode="causal")
    return masked_loss(logits, targets, valid)


@torch.no_grad()
def spt_val_loss(model, split: Split, cfg: LRAConfig, ratio: float, accelerator, max_len: int) -> float:
    """Mean SPT loss on ``split`` with masks fixed by ``cfg.seed`` (same masks every epoch); sharded over ranks.
    Runs the unwrapped module: ranks may have unequal batch counts, and a DDP forward is a collective."""
    model = accelerator.unwrap_model(model)
    model.eval()
    gen = torch.Generator().manual_seed(cfg.seed + 7919)
    tot = torch.zeros(2, dtype=torch.float64, device=accelerator.device)
    order = torch.arange(len(split))
    for i in range(0, len(order), cfg.batch_size):
        if (i // cfg.batch_size) % accelerator.num_processes != accelerator.process_index:
            continue  # batches are dealt round-robin over ranks
        idx = order[i : i + cfg.batch_size]
        tok, mask, _ = batch_tensors(split, idx, accelerator.device, max_len)
        gb = torch.Generator().manual_seed(int(gen.initial_seed()) + i)  # batch-local masks: independent of sharding
        with accelerator.autocast():
            loss, n = _spt_loss(model, tok, mask, cfg.spt_objective, ratio, gb)
        tot += torch.tensor([float(loss) * n, n], dtype=torch.float64, device=accelerator.device)
    tot = accelerator.reduce(tot, "sum")
    model.train()
    return float(tot[0] / tot[1]) if tot[1] > 0 else float("nan")


def pretrain(cfg: LRAConfig, out: str | Path, *, overwrite: bool = False, milestones: Sequence[int] = (),
             progress: bool = True, reuse_finished: bool = False) -> dict:
    """Self-pretrain and return the results dict (also written to ``out/results.json``). See module doc.

    Raises:
        ValueError: cross-task data with a different vocabulary, ``spt_epochs == 0``, a config that
            differs from an unfinished run in ``out``.
    """
    out = Path(out)
    if cfg.spt_epochs < 1:
        raise ValueError("spt_epochs: pretrain needs at least 1 epoch (0 epochs = fine-tune from scratch)")
    spt_task = cfg.spt_task or cfg.task
    if task_vocab(spt_task) != task_vocab(cfg.task):
        raise ValueError(f"spt_task: {spt_task!r} inputs use a different vocabulary from {cfg.task!r}; choose a task "
                         f"with the same tokens (e.g. image <-> pathfinder, text <-> retrieval)")
    done = _finished(out, cfg, "pretrain", reuse_finished, overwrite)
    if done is not None:
        return done
    accelerator = make_accelerator(cfg)
    main = accelerator.is_main_process
    run, data = _open_run(cfg, out, overwrite, "pretrain", spt_task) if main else (None, None)
    accelerator.wait_for_everyone()
    if run is None:
        run = RunDir(out, resume=True)
        data = load_data(cfg, spt_task, out=out)
    train_split, val_split = single_inputs(data.train), single_inputs(data.val)
    ratio = cfg.mask_ratio if cfg.mask_ratio is not None else MASK_RATIO[spt_task]
    model = build_model(cfg)
    model.set_stage("spt")
    max_len = model.backbone.cfg.max_len
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    steps_per_epoch = math.ceil((len(train_split) // accelerator.num_processes) / cfg.batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _schedule(cfg, steps_per_epoch * cfg.spt_epochs))
    history: list[dict] = []
    best = float("inf")
    start = 0
    last = run.root / "ckpt" / "last.pt"
    st = _restore_last(last, model, opt, sched)
    if st is not None:
        start, best, history = int(st["epoch"]), float(st["best"]), list(st["history"])
        if main:
            print(f"[SPT {cfg.task}] resuming {run.root} after epoch {start}/{cfg.spt_epochs}", flush=True)
    model, opt = accelerator.prepare(model, opt)
    t0 = time.perf_counter()
    for epoch in range(start, cfg.spt_epochs):
        model.train()
        torch.manual_seed(cfg.seed * 1000 + epoch)
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + epoch * 7 + accelerator.process_index)
        batches = list(iter_batches(train_split, cfg.batch_size, shuffle=True, seed=cfg.seed, epoch=epoch,
                                    rank=accelerator.process_index, world=accelerator.num_processes))
        tot, cnt = 0.0, 0
        for idx in _progress(batches, len(batches), f"SPT {cfg.task} epoch {epoch + 1}/{cfg.spt_epochs}", progress and main):
            tok, mask, _ = batch_tensors(train_split, idx, accelerator.device, max_len)
            with accelerator.autocast():
                loss, n = _spt_loss(model, tok, mask, cfg.spt_objective, ratio, gen)
            opt.zero_grad(set_to_none=True)
            accelerator.backward(loss)
            if cfg.grad_clip:
                accelerator.clip_grad_norm_(params, cfg.grad_clip)
            opt.step()
            sched.step()
            tot, cnt = tot + float(loss.detach()) * n, cnt + n
        val = spt_val_loss(model, val_split, cfg, ratio, accelerator, max_len)
        row = {"epoch": epoch + 1, "train_loss": tot / max(cnt, 1), "val_loss": val, "lr": sched.get_last_lr()[0],
               "seconds": time.perf_counter() - t0}
        history.append(row)
        if main:
            state = accelerator.unwrap_model(model).backbone.state_dict()
            if val < best:
                best = val
                save_weights(state, run.root / "spt_best.safetensors")
            if epoch + 1 in set(milestones):
                atomic_write_bytes(run.root / f"spt_best_e{epoch + 1}.safetensors", (run.root / "spt_best.safetensors").read_bytes())
            _save_state(last, model=accelerator.unwrap_model(model).state_dict(), optim=opt.state_dict(),
                        sched=sched.state_dict(), epoch=epoch + 1, best=best, history=history)
            run.write_csv("history.csv", history)
            print(f"[SPT {cfg.task}] epoch {epoch + 1}: train {row['train_loss']:.4f} val {val:.4f} (best {best:.4f})", flush=True)
        accelerator.wait_for_everyone()
    result = {"kind": "pretrain", "task": cfg.task, "spt_task": spt_task, "objective": cfg.spt_objective, "mask_ratio": ratio,
              "epochs": cfg.spt_epochs, "best_val_loss": best,
              "best_epoch": min(history, key=lambda r: r["val_loss"])["epoch"] if history else None,
              "checkpoint": str(run.root / "spt_best.safetensors"), "history": history,
              "world_size": accelerator.num_processes}
    if main:
        run.write_json("results.json", result)
        run.mark_done()
    accelerator.wait_for_everyone()
    return result


# ---------------------------------------------------------------------------------------------- fine-tuning
@torch.no_grad()
def evaluate_accuracy(model, split: Split, batch_size: int, accelerator, max_len: int) -> float:
    """Classification accuracy on ``split`` (sharded over ranks, counts summed; unwrapped module, see
    :func:`spt_val_loss`)."""
    model = accelerator.unwrap_model(model)
    model.eval()
    tot = torch.zeros(2, dtype=torch.float64, device=accelerator.device)
    idx_all = torch.arange(len(split))[accelerator.process_index :: accelerator.num_processes]
    for i in range(0, len(idx_all), batch_size):
        tok, mask, y = batch_tensors(split, idx_all[i : i + batch_size], accelerator.device, max_len)
        with accelerator.autocast():
            pred = model(tok, mask, mode="classify").argmax(-1)
        tot += torch.tensor([float((pred == y).sum()), len(y)], dtype=torch.float64, device=accelerator.device)
    tot = accelerator.reduce(tot, "sum")
    model.train()
    return float(tot[0] / tot[1])


def init_from_spt(model: LRAModel, state: dict[str, torch.Tensor], groups: str) -> list[str]:
    """Copy SPT weights into ``model.backbone``: ``all`` = everything but the heads (embeddings, W_Q/W_K/
    W_V/W_O, FFN, LayerNorms); ``qk``/``qkvo``/``ffn`` = hybrid initialisation (rest stays random)."""
    from initlab.nn.encoder import load_partial

    if groups not in INIT_GROUPS:
        raise ValueError(f"init_groups: expected one of {list(INIT_GROUPS)}, got {groups!r}")
    sel = INIT_GROUPS[groups] or ("embeddings", "qkvo", "ffn", "layernorm")
    return load_partial(model.backbone, state, list(sel))


def finetune(cfg: LRAConfig, out: str | Path, spt_ckpt: str | Path | None = None, *, overwrite: bool = False,
             progress: bool = True, reuse_finished: bool = False) -> dict:
    """Fine-tune on labels; returns the results dict (``test_acc`` at the best validation epoch).

    Raises:
        ValueError: ``epochs < 1``, ``init='spt'`` without ``spt_ckpt``, a config that differs from an
            unfinished run in ``out``. FileNotFoundError: missing checkpoint.
    """
    from initlab.nn.encoder import freeze

    out = Path(out)
    if cfg.epochs < 1:
        raise ValueError(f"epochs: fine-tuning needs at least 1 epoch, got {cfg.epochs}")
    if cfg.init == "spt" and spt_ckpt is None:
        raise ValueError("spt_ckpt: init='spt' needs an SPT checkpoint (.safetensors from initlab lra pretrain)")
    done = _finished(out, cfg, "finetune", reuse_finished, overwrite)
    if done is not None:
        return done
    spt_state = load_weights(spt_ckpt) if cfg.init == "spt" else None
    accelerator = make_accelerator(cfg)
    main = accelerator.is_main_process
    run, data = _open_run(cfg, out, overwrite, "finetune", cfg.task) if main else (None, None)
    accelerator.wait_for_everyone()
    if run is None:
        run = RunDir(out, resume=True)
        data = load_data(cfg, out=out)
    model = build_model(cfg)
    copied = init_from_spt(model, spt_state, cfg.init_groups) if spt_state is not None else []
    frozen = freeze(model.backbone, list(cfg.freeze)) if cfg.freeze else []
    model.set_stage("finetune")
    for n in frozen:  # set_stage must not unfreeze a frozen group
        dict(model.backbone.named_parameters())[n].requires_grad_(False)
    max_len = model.backbone.cfg.max_len
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    steps_per_epoch = math.ceil((len(data.train) // accelerator.num_processes) / cfg.batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _schedule(cfg, steps_per_epoch * cfg.epochs))
    history: list[dict] = []
    best = {"val_acc": -1.0, "test_acc": float("nan"), "epoch": 0}
    start = 0
    last = run.root / "ckpt" / "last.pt"
    st = _restore_last(last, model, opt, sched)
    if st is not None:
        start, best, history = int(st["epoch"]), dict(st["best"]), list(st["history"])
        if main:
            print(f"[fine-tune {cfg.task}] resuming {run.root} after epoch {start}/{cfg.epochs}", flush=True)
    model, opt = accelerator.prepare(model, opt)
    t0 = time.perf_counter()
    for epoch in range(start, cfg.epochs):
        model.train()
        torch.manual_seed(cfg.seed * 1000 + epoch)
        batches = list(iter_batches(data.train, cfg.batch_size, shuffle=True, seed=cfg.seed, epoch=epoch,
                                    rank=accelerator.process_index, world=accelerator.num_processes))
        tot, cnt = 0.0, 0
        for idx in _progress(batches, len(batches), f"fine-tune {cfg.task} epoch {epoch + 1}/{cfg.epochs}", progress and main):
            tok, mask, y = batch_tensors(data.train, idx, accelerator.device, max_len)
            with accelerator.autocast():
                loss = F.cross_entropy(model(tok, mask, mode="classify").float(), y)
            opt.zero_grad(set_to_none=True)
            accelerator.backward(loss)
            if cfg.grad_clip:
                accelerator.clip_grad_norm_(params, cfg.grad_clip)
            opt.step()
            sched.step()
            tot, cnt = tot + float(loss.detach()) * len(y), cnt + len(y)
        val_acc = evaluate_accuracy(model, data.val, cfg.batch_size, accelerator, max_len)
        improved = val_acc > best["val_acc"]
        if improved:  # the test set is read only at new best-validation epochs
            test_acc = evaluate_accuracy(model, data.test, cfg.batch_size, accelerator, max_len)
            best = {"val_acc": val_acc, "test_acc": test_acc, "epoch": epoch + 1}
        row = {"epoch": epoch + 1, "train_loss": tot / max(cnt, 1), "val_acc": val_acc,
               "test_acc_if_best": best["test_acc"] if improved else "", "seconds": time.perf_counter() - t0}
        history.append(row)
        if main:
            if improved:
                save_weights(accelerator.unwrap_model(model).state_dict(), run.root / "best.safetensors")
            _save_state(last, model=accelerator.unwrap_model(model).state_dict(), optim=opt.state_dict(),
                        sched=sched.state_dict(), epoch=epoch + 1, best=best, history=history)
            run.write_csv("history.csv", history)
            print(f"[fine-tune {cfg.task}] epoch {epoch + 1}: loss {row['train_loss']:.4f} val acc {val_acc:.4f} "
                  f"(best {best['val_acc']:.4f} @ {best['epoch']}, test {best['test_acc']:.4f})", flush=True)
        accelerator.wait_for_everyone()
    result = {"kind": "finetune", "task": cfg.task, "init": cfg.init, "init_groups": cfg.init_groups,
              "freeze": list(cfg.freeze), "spt_ckpt": None if spt_ckpt is None else str(spt_ckpt),
              "best_epoch": best["epoch"], "val_acc": best["val_acc"], "test_acc": best["test_acc"],
              "n_copied_from_spt": len(copied), "n_frozen": len(frozen), "history": history,
              "world_size": accelerator.num_processes}
    if main:
        if cfg.metrics_examples:
            result["attention_metrics"] = attention_metrics_on(run.root / "best.safetensors", cfg, data.val)
        run.write_json("results.json", result)
        run.mark_done()
    accelerator.wait_for_everyone()
    return result


def attention_metrics_on(weights: Path, cfg: LRAConfig, split: Split) -> dict:
    """Attention metrics of a saved model on the first ``cfg.metrics_examples`` rows of ``split`` (CPU)."""
    from initlab.realdata.lra.metrics import attention_metrics

    model = build_model(replace(cfg, dropout=0.0))
    model.load_state_dict(load_weights(weights))
    return attention_metrics(model, single_inputs(split), cfg.metrics_examples)
