"""Data, model and runtime helpers shared by the LRA training loops (:mod:`initlab.realdata.lra.train`).

Data (``load_data``: a task's splits, generated ListOps written into the run folder), models
(``build_model``: seeded, with the pixel input path of ``cfg.pixel_input``), batches
(``batch_tensors``), the accelerator (``make_accelerator``: bf16 on GPU, fp32 threads on CPU), the
learning-rate schedule (warm-up then constant or cosine, with an optional fixed cosine horizon), the
SPT stage's own optimisation fields (``spt_view``), checkpoint I/O (safetensors, plain state dicts) and the
run folders (``open_run``: refuse a finished run or another config before reading data; ``finished_results``:
the saved results a sweep reuses).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import torch

from initlab.config import from_dict, to_dict
from initlab.realdata.lra.config import LRAConfig
from initlab.realdata.lra.data import TASK_MAX_LEN, TASK_CLASSES, load_task
from initlab.realdata.lra.splits import Split, TaskData, split_fingerprint, split_from_sequences
from initlab.realdata.lra.tokens import BYTE_VOCAB, LISTOPS_VOCAB
from initlab.realdata.lra.listops import generate_examples, write_listops_tsv
from initlab.realdata.lra.model import LRAModel, backbone_config
from initlab.runs import (RunDir, atomic_write_bytes, check_finite_tensors, check_inputs, check_same_record, folder_where_file_expected,
                          unreadable_file)
from initlab.textio import read_json

__all__ = ["task_vocab", "load_data", "build_model", "single_inputs", "batch_tensors", "make_accelerator", "spt_view",
           "lr_schedule", "save_weights", "load_weights", "load_spt_checkpoint", "split_metadata", "recorded_split",
           "check_spt_split",
           "SplitMismatchError", "read_run_config", "run_record", "finished_results", "open_run"]


def spt_view(cfg: LRAConfig) -> LRAConfig:
    """``cfg`` with the SPT stage's batch size, warm-up and schedule in the generic fields (each ``spt_*``
    field that is ``None`` keeps the fine-tuning value), as the masked-pretraining files of Amos et al. set them.
    A cosine SPT schedule decays over the SPT run's own steps (``schedule_steps`` is a fine-tuning horizon)."""
    return replace(cfg, batch_size=cfg.spt_batch_size or cfg.batch_size,
                   warmup_steps=cfg.warmup_steps if cfg.spt_warmup_steps is None else cfg.spt_warmup_steps,
                   schedule=cfg.spt_schedule or cfg.schedule, schedule_steps=None)


def task_vocab(task: str) -> int:
    return LISTOPS_VOCAB if task == "listops" else BYTE_VOCAB


def _data_dir(cfg: LRAConfig, task: str) -> str | None:
    """The folder ``task`` is read from: ``cfg.data_dir`` for the task itself, ``cfg.spt_data_dir`` for a cross-task SPT source."""
    return cfg.data_dir if task == cfg.task else cfg.spt_data_dir


def load_data(cfg: LRAConfig, task: str | None = None, data_dir: str | None = None, out: Path | None = None) -> TaskData:
    """Load ``task`` (default ``cfg.task``). ListOps without a ``data_dir`` is generated from
    ``cfg.listops_gen`` (written as ``basic_*.tsv`` into ``out/listops_data`` when ``out`` is given, then
    read back through the real loader; without ``out`` kept in memory, the same tensors, ``limit`` included).
    The random hold-outs use ``cfg.split_seed``, never ``cfg.seed``."""
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
            from initlab.realdata.lra.tokens import encode_listops

            L = cfg.max_len or TASK_MAX_LEN["listops"]
            ex = {k: v[: cfg.limit] if cfg.limit is not None else v for k, v in ex.items()}  # as the TSV reader's limit
            sp = {k: split_from_sequences([encode_listops(s) for s, _ in v], [y for _, y in v], L) for k, v in ex.items()}
            return TaskData("listops", LISTOPS_VOCAB, L, 10, sp["train"], sp["val"], sp["test"])
    return load_task(task, data_dir, split_seed=cfg.split_seed, max_len=cfg.max_len if task == cfg.task else None,
                     limit=cfg.limit)


def build_model(cfg: LRAConfig) -> LRAModel:
    """A freshly initialised model for ``cfg.task`` (seeded with ``cfg.seed``)."""
    torch.manual_seed(cfg.seed)
    mc = backbone_config(task_vocab(cfg.task), cfg.max_len or TASK_MAX_LEN[cfg.task], TASK_CLASSES[cfg.task],
                         n_layers=cfg.n_layers, d_model=cfg.d_model, n_heads=cfg.n_heads, d_ff=cfg.d_ff, dropout=cfg.dropout)
    return LRAModel(mc, pair=cfg.task == "retrieval", pixel_input=cfg.pixel_input, pixel_head=cfg.spt_loss == "l1")


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


def restore_last(last: Path, model, opt, sched) -> dict | None:
    """Restore model, optimizer and scheduler from the resumable checkpoint ``last`` (plain tensors and
    numbers, loaded with ``weights_only=True``); returns its saved state, or ``None`` if there is none yet.

    Raises:
        initlab.runs.NonFiniteCheckpointError: a tensor of ``last`` (weights or optimizer state) holds NaN or
            infinity, naming them.
    """
    if not last.exists():
        return None
    st = torch.load(last, map_location="cpu", weights_only=True)
    check_finite_tensors(f"resume checkpoint {last}", {"model": st.get("model"), "optim": st.get("optim")})
    model.load_state_dict(st["model"])
    opt.load_state_dict(st["optim"])
    sched.load_state_dict(st["sched"])
    return st


def lr_schedule(cfg: LRAConfig, total_steps: int):
    """Multiplier of the learning rate at optimizer step ``step`` (0-based): linear warm-up over
    ``cfg.warmup_steps``, then 1 (constant) or a half cosine to 0 at ``cfg.schedule_steps`` (when set, as
    the Text file's ``num_training_steps``) or at ``total_steps``, held at 0 afterwards."""
    horizon = cfg.schedule_steps or total_steps

    def f(step: int) -> float:
        if cfg.warmup_steps and step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        if cfg.schedule == "cosine":
            prog = (step - cfg.warmup_steps) / max(1, horizon - cfg.warmup_steps)
            return 0.5 * (1 + math.cos(math.pi * min(1.0, prog)))
        return 1.0

    return f


def save_weights(state: dict[str, torch.Tensor], path: Path, metadata: dict[str, str] | None = None) -> Path:
    """A plain state dict as safetensors (atomically); ``metadata`` (str -> str) goes into the file's header
    (an SPT checkpoint carries :func:`split_metadata` there)."""
    from safetensors.torch import save

    return atomic_write_bytes(path, save({k: v.detach().cpu().contiguous() for k, v in state.items()}, metadata=metadata))


def load_spt_checkpoint(path: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """``(state dict, header metadata)`` of a safetensors file (metadata ``{}`` when it has none).

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is not a readable safetensors file (empty, truncated, another format), naming it; a
            tensor holds NaN or infinity (:class:`initlab.runs.NonFiniteCheckpointError`, naming the tensors).
    """
    from safetensors import safe_open

    path = Path(path)
    expected = "a .safetensors file written by initlab lra pretrain"
    if path.is_dir():
        raise FileNotFoundError(folder_where_file_expected(path, "SPT checkpoint") + f" ({expected})")
    if not path.is_file():
        raise FileNotFoundError(f"SPT checkpoint {path}: not found (expected {expected})")
    try:
        with safe_open(str(path), framework="pt") as fh:
            meta = dict(fh.metadata() or {})
            state = {k: fh.get_tensor(k) for k in fh.keys()}
    except Exception as err:  # safetensors raises its own SafetensorError (HeaderTooSmall, InvalidHeader, ...)
        raise unreadable_file(f"SPT checkpoint {path}", err, "safetensors file written by initlab lra pretrain") from None
    check_finite_tensors(f"SPT checkpoint {path}", state)
    return state, meta


def load_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """Read a safetensors state dict. Raises ``FileNotFoundError`` or ``ValueError`` (not safetensors) naming the file."""
    return load_spt_checkpoint(path)[0]


class SplitMismatchError(ValueError):
    """An SPT checkpoint was pretrained on another split of the fine-tuning task (or records none)."""


def split_metadata(data: TaskData) -> dict[str, str]:
    """What an SPT checkpoint records about its pretraining data, as its safetensors header metadata: one key,
    ``initlab_split``, holding the JSON ``{"fingerprint": ..., "task": ...}`` (the task whose inputs it read and
    :func:`~initlab.realdata.lra.splits.split_fingerprint`). One key, so the header (and the file) is
    byte-identical from run to run: safetensors writes several keys in a random order."""
    return {"initlab_split": json.dumps({"fingerprint": split_fingerprint(data), "task": data.name}, sort_keys=True)}


def recorded_split(meta: dict[str, str]) -> dict[str, str] | None:
    """The ``{"fingerprint", "task"}`` an SPT checkpoint's header records (:func:`split_metadata`), or None."""
    try:
        rec = json.loads(meta["initlab_split"])
    except (KeyError, TypeError, ValueError):
        return None
    return rec if isinstance(rec, dict) and rec.get("fingerprint") and rec.get("task") else None


def check_spt_split(meta: dict[str, str], ckpt: str | Path, data: TaskData) -> None:
    """Refuse to fine-tune on ``data`` from an SPT checkpoint that saw another split of the same task.

    ``meta`` is the checkpoint's header (:func:`load_spt_checkpoint`). A checkpoint pretrained on another
    task's inputs (cross-task SPT) cannot hold this task's examples and passes.

    Raises:
        SplitMismatchError: the checkpoint records no split, or another split of ``data.name``.
    """
    rec = recorded_split(meta)
    if rec is None:
        raise SplitMismatchError(
            f"SPT checkpoint {ckpt}: records no data split (it was not written by initlab lra pretrain, or by a "
            "version before splits were recorded), so fine-tuning could test on examples it was pretrained on; "
            "pretrain again with initlab lra pretrain")
    task, fp = rec["task"], rec["fingerprint"]
    if task != data.name:
        return
    mine = split_fingerprint(data)
    if fp != mine:
        raise SplitMismatchError(
            f"SPT checkpoint {ckpt}: pretrained on another split of {task} (split fingerprint {fp}; this fine-tuning's "
            f"data: {mine}), so fine-tuning could test on examples it was pretrained on. Pretrain and fine-tune with "
            "the same data folder, limit, max_len and split_seed")


def save_state(path: Path, **state: Any) -> None:
    """Write ``state`` (plain tensors and numbers, what :func:`restore_last` reads back) to ``path`` with
    ``torch.save``, atomically."""
    import io

    buf = io.BytesIO()
    torch.save(state, buf)
    atomic_write_bytes(path, buf.getvalue())




def read_run_config(out: str | Path) -> LRAConfig:
    """The :class:`LRAConfig` saved in a run folder's ``config.json``."""
    p = Path(out) / "config.json"
    if not p.is_file():
        raise FileNotFoundError(f"{p}: not found (expected a run folder written by initlab lra)")
    return from_dict(LRAConfig, read_json(p)["config"])


def run_record(cfg: LRAConfig, kind: str) -> dict:
    """What ``config.json`` holds and a resumed run must match: the run kind and the resolved config."""
    return {"kind": kind, "config": to_dict(cfg)}


def run_inputs(cfg: LRAConfig, task: str, spt_ckpt: str | Path | None = None) -> dict[str, Path | None]:
    """The input files of a run (:func:`initlab.runs.check_inputs`): the data folder of ``task`` (None when the
    data are generated or downloaded) and the SPT checkpoint a fine-tuning starts from."""
    data_dir = _data_dir(cfg, task)
    return {"data": Path(data_dir) if data_dir else None,
            "spt_checkpoint": Path(spt_ckpt) if spt_ckpt is not None else None}


def finished_results(out: Path, cfg: LRAConfig, kind: str, reuse: bool, overwrite: bool,
                     inputs: dict[str, Path | None] | None = None) -> dict | None:
    """Saved results of a finished run with the same config and inputs when ``reuse`` (sweeps), else None.

    Raises:
        ConfigMismatchError: the folder holds another config, or was run on other inputs (``inputs``,
            :func:`initlab.runs.check_inputs`).
    """
    if reuse and not overwrite and (out / "DONE").exists():
        check_same_record(out / "config.json", run_record(cfg, kind))  # ConfigMismatchError naming the keys
        check_inputs(out, inputs or {}, write=False)  # a reused result proves its data and checkpoint
        return read_json(out / "results.json")
    return None


def open_run(cfg: LRAConfig, out: Path, overwrite: bool, kind: str, task: str,
             check: Callable[[TaskData], None] | None = None,
             inputs: dict[str, Path | None] | None = None) -> tuple[RunDir, TaskData]:
    """Open (or resume) the run folder and load ``task``'s data, in an order that writes nothing on bad input:
    a finished run or a config mismatch is refused first, then a resumed run's inputs are compared with those it
    started on (``inputs``, :func:`initlab.runs.check_inputs`: the data files, the SPT checkpoint), then the data
    are read (a missing or malformed file raises here) and handed to ``check`` (which raises to refuse them), and
    only then is the folder created. The inputs and the fingerprint of the loaded splits are recorded in
    ``inputs.json``. Generated ListOps is written into ``out/listops_data`` after the folder exists (an
    ``--overwrite`` moves the old folder aside first); ``check`` sees it generated in memory, the same tensors the
    run reads back."""
    out = Path(out)
    inputs = dict(inputs if inputs is not None else run_inputs(cfg, task))
    if not overwrite and (out / "DONE").exists():
        RunDir(out, overwrite=False)  # raises RunExistsError naming the folder
    if not overwrite:
        check_same_record(out / "config.json", run_record(cfg, kind))  # ConfigMismatchError before any data is read
        check_inputs(out, inputs, write=False)  # a resumed run: the files it started on, before any data is read
    generated = task == "listops" and _data_dir(cfg, task) is None
    data = None if generated else load_data(cfg, task)
    if check is not None:
        early = data if data is not None else load_data(cfg, task)  # generated in memory
        check(early)
    run = RunDir(out, overwrite=overwrite, resume=True, config=run_record(cfg, kind))
    if data is None:
        data = load_data(cfg, task, out=run.root)
        if check is not None and split_fingerprint(data) != split_fingerprint(early):
            raise RuntimeError(f"{run.root / 'listops_data'}: the generated ListOps read back differs from the one "
                               "generated in memory")  # pragma: no cover - an invariant (tested)
    check_inputs(run.root, {**inputs, "splits": split_fingerprint(data)})  # compared on resume, recorded when new
    return run, data
