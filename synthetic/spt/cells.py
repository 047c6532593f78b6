"""The cells of a synthetic SPT run: one SPT run, one fine-tuning or one gradient measurement, per seed.

Every cell function has the executor's signature ``fn(root, name, args, progress) -> result`` (see
:mod:`initlab.executor`): ``root`` the run folder, ``args`` the cell (``kind``, ``seed``, ...) and ``config``, the
run's :class:`SPTConfig` itself (:func:`cell_config`),
``progress`` the executor's progress reporter; the result is a
JSON-ready dict the executor saves as ``cells/<name>.json``. Per-epoch resume files live in
``<root>/resume/<name>.pt`` (removed when the cell finishes); SPT checkpoints in
``<root>/ckpt/spt_<source>_<variant>_d<depth>_seed<s>_e<E>.pt`` with ``E`` a sweep epoch or ``rule``.

Data seeds of seed s (conditions share them, so every comparison is paired): training ``1000 s + 1``,
test ``1000 s + 2``, validation ``1000 s + 6``; SPT inputs of the ``count`` / ``iid`` sources ``1000 s + 3``
/ ``+ 4`` (validation ``+ 7`` / ``+ 8``). Initialisation: ``torch.manual_seed(s)``; the batch-order (and
mask) generator ``7919 s + 3`` (fine-tuning) and ``7919 s + 17 + depth`` (SPT).

The batched engine (``SPTConfig.engine = "batched"``) trains the seeds of one SPT source or one fine-tuned arm as one
batched model (:mod:`initlab.synthetic.spt.batched`): :func:`spt_seeds` and :func:`finetune_seeds` build each seed's
model, data and generator as the one-seed cells do and return the one-seed cells' results, keyed by their names; the
executor runs them as group cells (:func:`spt_group_cell`, :func:`finetune_group_cell`).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from initlab.config import derive
from initlab.nn.attention_metrics import attention_entropy, proximity_mass, relative_position_score
from initlab.nn.encoder import SequenceTransformer, freeze, load_partial
from initlab.nn.masking import mask_tokens
from initlab.runs import NonFiniteError, RunDir, atomic_write_bytes, check_finite_tensors
from initlab.synthetic.spt.config import SPTConfig, condition_spec, model_config, spt_model_overrides
from initlab.synthetic.spt.metrics import score_gradients_at_init
from initlab.synthetic.spt.tasks import MASK_ID, make_task
from initlab.synthetic.spt.batched import finetune_batched, pretrain_batched
from initlab.synthetic.spt.training import Checkpoint, finetune, pretrain

__all__ = ["seed_data", "spt_inputs", "probe", "ckpt_path", "spt_cell_name", "ft_cell_name", "spt_cell", "finetune_cell",
           "init_grad_cell", "cell_config", "spt_seeds", "finetune_seeds", "group_cell_name", "spt_group_cell",
           "finetune_group_cell"]


def cell_config(args: Mapping[str, Any]) -> SPTConfig:
    """The run's :class:`SPTConfig` a cell receives in ``args["config"]`` (the plan's object itself, typed and checked
    when it was built: no dict rebuilt per cell).

    Raises:
        KeyError: ``args`` has no ``config``.
        TypeError: ``args["config"]`` is not an :class:`SPTConfig`.
    """
    cfg = args["config"]
    if not isinstance(cfg, SPTConfig):
        raise TypeError(f'args["config"]: expected an SPTConfig, got {type(cfg).__name__}')
    return cfg


def seed_data(cfg: SPTConfig, seed: int) -> dict[str, torch.Tensor]:
    """The local task's train/validation/test sets of ``seed`` and the probe batch (first test sequences)."""
    xtr, ytr = make_task("local", cfg.n_train, 1000 * seed + 1, cfg.task)
    xte, yte = make_task("local", cfg.n_test, 1000 * seed + 2, cfg.task)
    xva, yva = make_task("local", cfg.n_val, 1000 * seed + 6, cfg.task)
    return {"xtr": xtr, "ytr": ytr, "xva": xva, "yva": yva, "xte": xte, "yte": yte, "probe": xte[: cfg.probe_size]}


def spt_inputs(cfg: SPTConfig, source: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """SPT ``(train inputs, validation inputs)`` of ``source`` (``local`` uses the task's own sets).

    Raises:
        ValueError: unknown ``source``.
    """
    if source in ("local", "nopos"):  # nopos: the task's own inputs, pretrained without position codes
        return make_task("local", cfg.n_train, 1000 * seed + 1, cfg.task)[0], make_task("local", cfg.n_val, 1000 * seed + 6, cfg.task)[0]
    if source not in ("count", "iid"):
        raise ValueError(f"source: expected 'local', 'nopos', 'count' or 'iid', got {source!r}")
    k = {"count": 3, "iid": 4}[source]
    return make_task(source, cfg.n_train, 1000 * seed + k, cfg.task)[0], make_task(source, cfg.n_val, 1000 * seed + k + 4, cfg.task)[0]


def fresh_model(cfg: SPTConfig, depth: int, variant: str, seed: int, qk_scale: float = 1.0, **overrides: Any) -> SequenceTransformer:
    """A freshly initialised model of seed ``seed``; ``qk_scale`` multiplies the initial W_Q, W_K weights of every
    layer (1: the default initialisation; the draw is the same, so a scaled arm differs from scratch only by it)."""
    torch.manual_seed(seed)
    model = SequenceTransformer(model_config(cfg, depth, variant, **overrides))
    if qk_scale != 1.0:
        with torch.no_grad():
            for blk in model.blocks:
                blk.attn.W_Q.weight.mul_(qk_scale)
                blk.attn.W_K.weight.mul_(qk_scale)
    return model


def ckpt_path(root: str | Path, source: str, variant: str, depth: int, seed: int, epoch: int | str) -> Path:
    return Path(root) / "ckpt" / f"spt_{source}_{variant}_d{depth}_seed{seed}_e{epoch}.pt"


def spt_cell_name(source: str, variant: str, depth: int, seed: int) -> str:
    return f"spt_{source}_{variant}_d{depth}__seed{seed}"


def ft_cell_name(condition: str, seed: int, lr: float | None = None) -> str:
    """``ft_<condition>__seed<s>``, or ``ft_<condition>__lr<lr>__seed<s>`` in a learning-rate selection."""
    return f"ft_{condition}__seed{seed}" if lr is None else f"ft_{condition}__lr{lr:g}__seed{seed}"


def _resume(root: str | Path, name: str) -> Checkpoint:
    return Checkpoint(Path(root) / "resume" / f"{name}.pt")


@torch.no_grad()
def probe(model: SequenceTransformer, x: torch.Tensor, w: int) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """First-layer attention metrics on the probe batch ``x (B, T)``, plus its batch-mean map and scores
    (head 0, ``(T, T)`` each)."""
    was = model.training
    model.eval()
    _, maps = model.encode(x, return_attn=True)
    S = model.blocks[0].attn.last_scores
    model.blocks[0].attn.last_scores = None
    A = maps[0]
    out = {"prox": proximity_mass(A, w), "relpos": relative_position_score(S), "entropy": attention_entropy(A),
           "prox_layers": [proximity_mass(a, w) for a in maps]}
    model.train(was)
    return out, A[:, 0].mean(0).numpy(), S[:, 0].mean(0).numpy()


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def _save_state(path: Path, state: dict[str, torch.Tensor]) -> None:
    buf = io.BytesIO()
    torch.save(state, buf)
    atomic_write_bytes(path, buf.getvalue())


def _map_seed(cfg: SPTConfig) -> int:
    return cfg.seeds[0] if cfg.map_seed == -1 else cfg.map_seed


# -- the cells -----------------------------------------------------------------------------------------------
def _spt_where(src: str, variant: str, depth: int, s: int) -> str:
    return f"synthetic SPT pretrain ({src}, {variant}, depth {depth}, seed {s})"


def _spt_setup(cfg: SPTConfig, src: str, variant: str, depth: int, s: int):
    """The SPT run of one seed before training: ``(model, inputs, validation inputs, generator, val_mask_seed)``."""
    x, xv = spt_inputs(cfg, src, s)
    model = fresh_model(cfg, depth, variant, s, **spt_model_overrides(src))
    return model, x, xv, torch.Generator().manual_seed(7919 * s + 17 + depth), s + 5


def _spt_result(root: str, cfg: SPTConfig, src: str, variant: str, depth: int, s: int, r: dict[str, Any]) -> dict[str, Any]:
    """The SPT cell's result from the loop's ``r``: writes the rule's and the snapshot checkpoints (and the map
    seed's maps), probes every saved checkpoint."""
    px = seed_data(cfg, s)["probe"]  # always the local task's probe batch
    probes, maps = {}, {}
    for e, state in r["states"].items():
        _save_state(ckpt_path(root, src, variant, depth, s, e), state)
        m = SequenceTransformer(model_config(cfg, depth, variant, **spt_model_overrides(src)))
        m.load_state_dict(state)
        probes[str(e)], maps[f"attn_e{e}"], maps[f"scores_e{e}"] = probe(m, px, cfg.proximity_w)
    if s == _map_seed(cfg) and src == "local" and variant == "full" and depth == 1:
        _save_npz(RunDir(root, resume=True).path("maps", f"spt_local_seed{s}.npz"), maps)
    return {"kind": "spt", "source": src, "variant": variant, "depth": depth, "seed": s, "val_loss": r["val_loss"],
            "rule_epoch": r["best_epoch"], "stop_epoch": r["stop_epoch"], "epochs_run": r["epochs_run"],
            "steps": r["steps"], "capped": r["stop_epoch"] >= cfg.spt_max_epochs, "probes": probes}


def spt_cell(root: str, name: str, args: Mapping[str, Any], progress: Any = None) -> dict[str, Any]:
    """SPT of one seed on one source: ``args = {source, variant, depth, seed, snapshots}``; writes the rule's
    and the snapshot checkpoints; returns the validation curve, the rule's epoch, the stopping epoch and the
    probe metrics of every saved checkpoint."""
    cfg = cell_config(args)
    src, variant, depth, s = args["source"], args["variant"], int(args["depth"]), int(args["seed"])
    model, x, xv, gen, val_seed = _spt_setup(cfg, src, variant, depth, s)
    r = pretrain(model, x, xv, gen, val_seed, lr=cfg.lr,
                 weight_decay=cfg.weight_decay, batch_size=cfg.batch_size, mask_rate=cfg.mask_rate, mask_id=MASK_ID,
                 window=cfg.spt_window, min_rel=cfg.spt_min_rel_improvement, max_epochs=cfg.spt_max_epochs,
                 snapshots=tuple(args["snapshots"]), checkpoint=_resume(root, name), progress=progress,
                 where=_spt_where(src, variant, depth, s))
    return _spt_result(root, cfg, src, variant, depth, s, r)


def matched_epochs(spt_run: Mapping[str, Any], spt_finetune: Mapping[str, Any]) -> int:
    """Fine-tuning epochs of ``scratch_matched`` for a seed: the seed's SPT epochs (to the stopping rule's epoch, local
    source, depth 1; ``spt_run``, that SPT cell's result) plus the epochs of its ``spt`` fine-tuning (``spt_finetune``,
    that cell's result; one epoch = the same number of optimiser steps in both). The cell receives both results in its
    arguments (:attr:`initlab.executor.Cell.receives`)."""
    return int(spt_run["stop_epoch"]) + int(spt_finetune["epochs_run"])


def _no_matched(seed: int) -> int:
    raise KeyError(f"seed {seed}: the compute-matched budget needs the seed's SPT and spt fine-tuning results in the "
                   "cell's arguments ('spt_run', 'spt_finetune'; the plan has the executor hand them over)")


def _ft_where(cond: str, s: int, lr: float) -> str:
    return f"synthetic SPT fine-tune ({cond}, seed {s}, lr {lr:g})"


def _ft_setup(root: str, cfg: SPTConfig, cond: str, s: int, matched: Callable[[int], int]) -> dict[str, Any]:
    """The fine-tuning of one condition and seed before training: its model (SPT groups loaded, groups frozen),
    data, probe at the start, budget and generator. ``matched(seed)``: the compute-matched budget."""
    spec = condition_spec(cfg)[cond]
    d = seed_data(cfg, s)
    model = fresh_model(cfg, spec["depth"], spec["variant"], s, spec["qk_scale"], **spec["model"])
    loaded: list[str] = []
    if spec["spt"] is not None:
        source, e = spec["spt"]
        ck = ckpt_path(root, source, spec["variant"], spec["depth"], s, e)
        if not ck.exists():
            raise FileNotFoundError(f"{ck}: SPT checkpoint missing (its SPT cell should have written it)")
        state = torch.load(ck, weights_only=True)
        check_finite_tensors(f"SPT checkpoint {ck}", state)
        loaded = load_partial(model, state, spec["load"])
    frozen = freeze(model, spec["freeze"]) if spec["freeze"] else []
    start, A0, S0 = probe(model, d["probe"], cfg.proximity_w)
    if spec["budget"] == "matched":
        max_epochs, patience = matched(s), 0
    else:
        max_epochs, patience = cfg.finetune_max_epochs, cfg.finetune_patience
    return {"spec": spec, "data": d, "model": model, "loaded": loaded, "frozen": frozen, "start": (start, A0, S0),
            "max_epochs": max_epochs, "patience": patience, "gen": torch.Generator().manual_seed(7919 * s + 3),
            "warmup_epochs": cfg.warmup_epochs if spec["budget"] != "matched" else 0}


def _ft_diverged(cond: str, s: int, lr: float, su: dict[str, Any], err: NonFiniteError) -> dict[str, Any]:
    """In a learning-rate selection a diverged rate is an outcome, not a failure of the run: it is recorded with
    validation (and test) accuracy 0, so it is never chosen, and its error is kept."""
    spec, start = su["spec"], su["start"][0]
    return {"kind": "finetune", "condition": cond, "seed": s, "lr": lr, "depth": spec["depth"],
            "variant": spec["variant"], "diverged": str(err), "test_acc": 0.0, "val_acc": 0.0, "best_epoch": 0,
            "epochs_run": 0, "steps": 0, "capped": False, "final_train_acc": 0.0, "prox_start": start["prox"],
            "prox_end": start["prox"], "relpos_start": start["relpos"], "relpos_end": start["relpos"],
            "entropy_start": start["entropy"], "entropy_end": start["entropy"], "history": []}


def _ft_result(root: str, cfg: SPTConfig, cond: str, s: int, lr: float, su: dict[str, Any], r: dict[str, Any],
               trained: SequenceTransformer, lr_sweep: bool) -> dict[str, Any]:
    """The fine-tuning cell's result from the loop's ``r`` and the final model (probe at the end; the map seed's maps)."""
    spec, d = su["spec"], su["data"]
    start, A0, S0 = su["start"]
    max_epochs, patience = su["max_epochs"], su["patience"]
    end, A1, S1 = probe(trained, d["probe"], cfg.proximity_w)
    if s == _map_seed(cfg) and cond in ("scratch", "spt", "frozen_attn", "attn_scratch", "attn_spt") and not lr_sweep:
        _save_npz(RunDir(root, resume=True).path("maps", f"ft_{cond}_seed{s}.npz"),
                  {"attn_start": A0, "scores_start": S0, "attn_end": A1, "scores_end": S1})
    return {"kind": "finetune", "condition": cond, "seed": s, "lr": lr, "depth": spec["depth"], "variant": spec["variant"],
            "spt": list(spec["spt"]) if spec["spt"] else None, "loaded": su["loaded"], "frozen": su["frozen"],
            "budget": spec["budget"], "max_epochs": max_epochs, "patience": patience, "schedule": cfg.ft_schedule,
            "test_acc": r["test_acc"], "val_acc": r["val_acc"], "best_epoch": r["best_epoch"],
            "epochs_run": r["epochs_run"], "steps": r["steps"], "capped": patience > 0 and r["epochs_run"] >= max_epochs,
            "final_test_acc": r["final_test_acc"], "init_test_acc": r["init_test_acc"],
            "final_train_acc": r["history"][-1]["train_acc"],
            **{f"{k}_start": start[k] for k in ("prox", "relpos", "entropy")},
            **{f"{k}_end": end[k] for k in ("prox", "relpos", "entropy")},
            "history": r["history"]}


def finetune_cell(root: str, name: str, args: Mapping[str, Any], progress: Any = None) -> dict[str, Any]:
    """Label training of one condition and seed: ``args = {condition, seed, lr}`` (``lr`` the learning rate
    to use); returns the history, the test accuracy at the best validation epoch and the probe metrics at
    fine-tuning start and end."""
    cfg = cell_config(args)
    cond, s, lr = args["condition"], int(args["seed"]), float(args["lr"])
    matched = ((lambda seed: matched_epochs(args["spt_run"], args["spt_finetune"])) if "spt_run" in args
               else _no_matched)
    su = _ft_setup(root, cfg, cond, s, matched)
    try:
        r, trained = finetune(su["model"], su["data"], su["gen"], lr=lr, weight_decay=cfg.weight_decay,
                              batch_size=cfg.batch_size, max_epochs=su["max_epochs"], patience=su["patience"],
                              checkpoint=_resume(root, name), progress=progress, schedule=cfg.ft_schedule,
                              warmup_epochs=su["warmup_epochs"], where=_ft_where(cond, s, lr))
    except NonFiniteError as err:
        if "lr_sweep" not in args:
            raise
        _resume(root, name).clear()
        return _ft_diverged(cond, s, lr, su, err)
    return _ft_result(root, cfg, cond, s, lr, su, r, trained, "lr_sweep" in args)


def init_grad_cell(root: str, name: str, args: Mapping[str, Any], progress: Any = None) -> dict[str, Any]:
    """Score gradients of the label and masked-reconstruction losses at initialisation (first layer), seed
    ``args["seed"]``.

    ``model``: the depth-1 model of the experiments (float32); ``theorem``: the theorem's setting, one
    attention layer without FFN or LayerNorm, W_Q = W_K = 0 (exactly uniform attention), float64.
    """
    cfg = cell_config(args)
    seed = int(args["seed"])
    if progress is not None:
        progress.start(0)
    d = seed_data(cfg, seed)
    x, y = d["xtr"][:64], d["ytr"][:64]
    inp, masked = mask_tokens(x, cfg.mask_rate, torch.Generator().manual_seed(seed + 11), mask_id=MASK_ID, at_least_one=True)
    out: dict[str, Any] = {"kind": "init_grad", "seed": seed}
    out["model"] = score_gradients_at_init(fresh_model(cfg, 1, "full", seed), x, y, inp, masked)
    torch.manual_seed(seed)
    th = SequenceTransformer(derive(model_config(cfg, 1), use_ffn=False, use_layernorm=False)).double()
    with torch.no_grad():
        for lin in (th.blocks[0].attn.W_Q, th.blocks[0].attn.W_K):
            lin.weight.zero_()
            lin.bias.zero_()
    out["theorem"] = score_gradients_at_init(th, x, y, inp, masked)
    if progress is not None:
        progress.advance(1)
    return out


# -- the batched engine: the seeds (and learning rates) of one arm as one batched model ---------------------------
def spt_seeds(root: str | Path, cfg: SPTConfig, source: str, variant: str, depth: int, seeds: Sequence[int],
              snapshots: Sequence[int], progress: Any = None) -> dict[str, dict[str, Any]]:
    """The SPT cells of ``seeds`` (one source, variant and depth) trained as one batched model
    (:func:`initlab.synthetic.spt.batched.pretrain_batched`): ``{spt_cell_name: result}``, each result in
    :func:`spt_cell`'s format, with the same checkpoints and maps written. Each seed's model, data, generator and
    validation masks are :func:`spt_cell`'s.

    Raises:
        initlab.runs.NonFiniteError: a seed's loss or gradient became non-finite (the first such seed's error, after
            the others finished; nothing is written for the failed seed).
    """
    root = str(root)
    setups = [_spt_setup(cfg, source, variant, depth, s) for s in seeds]
    rs = pretrain_batched([u[0] for u in setups], [u[1] for u in setups], [u[2] for u in setups],
                          [u[3] for u in setups], [u[4] for u in setups], lrs=[cfg.lr] * len(seeds),
                          weight_decay=cfg.weight_decay, batch_size=cfg.batch_size, mask_rate=cfg.mask_rate,
                          mask_id=MASK_ID, window=cfg.spt_window, min_rel=cfg.spt_min_rel_improvement,
                          max_epochs=cfg.spt_max_epochs, snapshots=tuple(snapshots), progress=progress,
                          wheres=[_spt_where(source, variant, depth, s) for s in seeds])
    errors = [r["error"] for r in rs if "error" in r]
    if errors:
        raise errors[0]
    return {spt_cell_name(source, variant, depth, s): _spt_result(root, cfg, source, variant, depth, s, r)
            for s, r in zip(seeds, rs)}


def finetune_seeds(root: str | Path, cfg: SPTConfig, condition: str, seeds: Sequence[int], lrs: Sequence[float],
                   *, lr_sweep: bool = False, matched: Callable[[int], int] | None = None,
                   progress: Any = None) -> dict[str, dict[str, Any]]:
    """The fine-tuning cells of ``condition`` for the pairs ``(seeds[i], lrs[i])`` trained as one batched model
    (:func:`initlab.synthetic.spt.batched.finetune_batched`): ``{ft_cell_name: result}``, each in
    :func:`finetune_cell`'s format (names with the rate when ``lr_sweep``). Each model's data, initialisation,
    SPT checkpoint, frozen groups, generator, budget and schedule are :func:`finetune_cell`'s; ``matched(seed)`` gives
    the compute-matched arm's budget (needed for that arm only).

    Raises:
        ValueError: ``seeds`` and ``lrs`` of different lengths, or no pair.
        FileNotFoundError: a needed SPT checkpoint is missing.
        initlab.runs.NonFiniteError: a model's loss or gradient became non-finite outside a learning-rate selection
            (in one, the model is recorded as diverged, as :func:`finetune_cell` records it).
    """
    if len(seeds) != len(lrs) or not seeds:
        raise ValueError(f"seeds, lrs: expected lists of one length >= 1, got {len(seeds)} and {len(lrs)}")
    root = str(root)
    matched = matched or _no_matched
    setups = [_ft_setup(root, cfg, condition, s, matched) for s in seeds]
    rs = finetune_batched([u["model"] for u in setups], [u["data"] for u in setups], [u["gen"] for u in setups],
                          lrs=list(lrs), weight_decay=cfg.weight_decay, batch_size=cfg.batch_size,
                          max_epochs=[u["max_epochs"] for u in setups], patience=[u["patience"] for u in setups],
                          progress=progress, wheres=[_ft_where(condition, s, lr) for s, lr in zip(seeds, lrs)],
                          schedule=cfg.ft_schedule, warmup_epochs=[u["warmup_epochs"] for u in setups])
    out: dict[str, dict[str, Any]] = {}
    for s, lr, su, r in zip(seeds, lrs, setups, rs):
        name = ft_cell_name(condition, s, lr if lr_sweep else None)
        if isinstance(r, dict):  # {"error": NonFiniteError}
            if not lr_sweep:
                raise r["error"]
            out[name] = _ft_diverged(condition, s, lr, su, r["error"])
            continue
        res, state = r
        trained = SequenceTransformer(su["model"].cfg)
        trained.load_state_dict(state)
        out[name] = _ft_result(root, cfg, condition, s, lr, su, res, trained, lr_sweep)
    return out


def group_cell_name(prefix: str, seeds: Sequence[int]) -> str:
    """The executor name of a batched group: ``<prefix>__seeds<s1>-<s2>-...``."""
    return f"{prefix}__seeds{'-'.join(str(s) for s in seeds)}"


def spt_group_cell(root: str, name: str, args: Mapping[str, Any], progress: Any = None) -> dict[str, Any]:
    """The executor cell of :func:`spt_seeds`: ``args = {source, variant, depth, seeds, snapshots}``; returns
    ``{"kind": "group", "cells": {spt_cell_name: result}}``."""
    cfg = cell_config(args)
    cells = spt_seeds(root, cfg, args["source"], args["variant"], int(args["depth"]), [int(s) for s in args["seeds"]],
                      tuple(args["snapshots"]), progress)
    return {"kind": "group", "cells": cells}


def finetune_group_cell(root: str, name: str, args: Mapping[str, Any], progress: Any = None) -> dict[str, Any]:
    """The executor cell of :func:`finetune_seeds`: ``args = {condition, seeds, lrs, lr_sweep, matched_from}``
    (``matched_from``: for the compute-matched arm, the names of the group cells holding each seed's SPT and ``spt``
    fine-tuning results, each received as the argument of its name); returns ``{"kind": "group", "cells": {ft_cell_name: result}}``."""
    cfg = cell_config(args)
    found: dict[str, Any] = {}
    for g in args.get("matched_from", ()):  # each group's result, handed over by the executor under its name
        found.update(args[g]["cells"])

    def matched(seed: int) -> int:
        return matched_epochs(found[spt_cell_name("local", "full", 1, seed)], found[ft_cell_name("spt", seed)])

    cells = finetune_seeds(root, cfg, args["condition"], [int(s) for s in args["seeds"]],
                           [float(x) for x in args["lrs"]], lr_sweep=bool(args["lr_sweep"]),
                           matched=matched if args.get("matched_from") else None, progress=progress)
    return {"kind": "group", "cells": cells}
