"""Ablation sweeps of Amos et al. (arXiv:2310.02980): SPT epochs, depth, cross-task SPT data, frozen attention, hybrid init.

``run_sweep(ablation, base, out, seeds)`` runs every condition of ``config.ABLATIONS[ablation]`` on
top of the task preset ``base``, for each seed, as resumable cells of one :class:`RunDir`:

* an SPT stage is shared by all conditions that need the same pretraining (its folder name is a hash
  of the pretraining-relevant fields), under ``out/pretrain/<key>/``;
* the SPT-epochs ablation runs one pretraining of ``max(E)`` epochs and freezes the best-so-far
  checkpoint after each E (``milestones``): with the constant schedule of the presets this equals
  separate E-epoch runs (with a cosine schedule each E gets its own run);
* each fine-tune goes to ``out/finetune/<condition>-seed<S>/``; a finished cell is not redone;
* the pretraining and fine-tuning cells are :class:`initlab.executor.Cell` objects run by
  :func:`initlab.executor.run_cells` (``workers`` local processes, one torch thread each, or a Dask cluster
  at ``scheduler``; on a machine with GPUs one worker per GPU); a fine-tune starts once the pretraining it
  loads has finished. Inside a cell, multi-GPU training stays with ``accelerate`` / ``torchrun``.

Outputs: ``results.json`` / ``results.csv`` (one row per condition and seed: test accuracy at the
best validation epoch, attention metrics of the first and last layer), ``config.json``, a bar chart
(:mod:`initlab.paper_figs.lra_figures`), ``DONE``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from initlab.config import absolute_paths, derive, from_dict, to_dict
from initlab.executor import Cell, Progress, check_scheduler, probe_scheduler, run_cells
from initlab.realdata.lra.config import ABLATIONS, BASE, CROSS_TASK, LRAConfig
from initlab.realdata.lra.runtime import run_inputs
from initlab.runs import NonFiniteError, RunDir, check_inputs, check_same_record, holds_run_folder, revive_nonfinite
from initlab.textio import read_json

__all__ = ["expand_conditions", "pretrain_config", "pretrain_key", "run_sweep", "run_sweep_cells", "plan", "cell_pretrain", "cell_finetune"]

_FT_ONLY = ("init", "init_groups", "freeze", "epochs", "patience", "schedule_steps", "metrics_examples")


def expand_conditions(ablation: str, base: LRAConfig, seed: int) -> list[tuple[str, LRAConfig, int | None]]:
    """``[(condition, config, spt_milestone_or_None)]`` for one seed.

    Raises:
        ValueError: unknown ablation, or cross-task on a task without a same-vocabulary partner.
    """
    if ablation not in ABLATIONS:
        raise ValueError(f"ablation: expected one of {sorted(ABLATIONS)}, got {ablation!r}")
    out = []
    for name, fields in ABLATIONS[ablation]:
        fields = dict(fields)
        if fields.get("n_layers", 0) is None:
            fields["n_layers"] = base.n_layers
            name = name.replace("LNone", f"L{base.n_layers}")
        if fields.get("spt_task") == "__other__":
            partner = CROSS_TASK.get(base.task)
            if partner is None:
                raise ValueError(f"cross-task: task {base.task!r} has no partner with the same vocabulary "
                                 f"(available: {[k for k, v in CROSS_TASK.items() if v]})")
            fields["spt_task"] = partner
        milestone = None
        if ablation == "spt-epochs":
            milestone = fields["spt_epochs"] or None
            if base.schedule == "constant":
                fields["spt_epochs"] = max(e for _, f in ABLATIONS["spt-epochs"] for e in [f["spt_epochs"]])
            else:
                milestone = None
        if name in [n for n, _, _ in out]:  # e.g. depth on a 1-layer preset: "1 layer" is the task's depth
            continue
        out.append((name, derive(base, seed=seed, **fields), milestone))
    return out


def pretrain_config(cfg: LRAConfig) -> LRAConfig:
    """``cfg`` with fine-tune-only fields reset to :data:`BASE` (what an SPT stage is run with)."""
    return replace(cfg, **{k: getattr(BASE, k) for k in _FT_ONLY})


def pretrain_key(cfg: LRAConfig) -> str:
    """Short hash of the fields that determine the SPT stage (fine-tune-only fields ignored)."""
    d = to_dict(pretrain_config(cfg))
    return hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:10]


@holds_run_folder("out")
def run_sweep(ablation: str, base: LRAConfig, out: str | Path, seeds: Sequence[int] = (0,), *, overwrite: bool = False,
              progress: bool = True, figure: bool = True, workers: int | None = 1, scheduler: str | None = None) -> list[dict]:
    """Run (or resume) the sweep; returns the result rows (see module doc). A finished sweep with the same
    config is read back, not redone. ``workers``: local worker processes (None: one per core; 1: in this
    process); ``scheduler``: a Dask scheduler address or ``local:N`` (:func:`initlab.executor.run_cells`).

    Relative data folders (``data_dir``, ``spt_data_dir``) are made absolute here, in the client's working
    directory, before any cell is planned: a Dask worker resolves a relative path in its own directory. The saved
    config and ``inputs.json`` record the absolute folders.

    Raises:
        ValueError: ``out`` holds a sweep with another ablation, seeds or config (unless ``overwrite``).
    """
    if scheduler is not None:
        check_scheduler(scheduler)  # before anything is written
        probe_scheduler(scheduler)
    base = absolute_paths(base, ("data_dir", "spt_data_dir"))  # a Dask worker reads the folders the client named
    meta = {"kind": "sweep", "ablation": ablation, "seeds": list(seeds), "config": to_dict(base)}
    conds = [(s, *c) for s in seeds for c in expand_conditions(ablation, base, s)]  # bad ablation: nothing written
    inputs = sweep_inputs(base, conds)
    if not overwrite:  # another ablation/seeds/config in `out`: ConfigMismatchError naming the keys, nothing written
        check_same_record(Path(out) / "config.json", meta, what="sweep config")
        check_inputs(out, inputs, write=False)  # finished cells are reused only on the data they were run on
    if (Path(out) / "DONE").exists() and not overwrite:  # finished with the same config: read back, never redone
        return [_revive(r) for r in read_json(Path(out) / "results.json")["rows"]]
    fresh = not Path(out).exists()
    run = RunDir(out, overwrite=overwrite, resume=True, config=meta)
    check_inputs(run.root, inputs)
    try:
        rows = run_sweep_cells(run, ablation, conds, progress, workers=workers, scheduler=scheduler)
    except (ValueError, TypeError, FileNotFoundError):
        # bad input (e.g. a missing or malformed data file) before any stage started: remove the folder this
        # call created, so a corrected command is not refused as "another config"; never touches runs in progress
        if fresh and not any((run.root / d).exists() for d in ("pretrain", "finetune")) and not any(run.root.glob("cells/*")):
            import shutil

            shutil.rmtree(run.root)
        raise
    run.write_json("results.json", {"ablation": ablation, "rows": rows})
    run.write_csv("results.csv", rows)
    if figure:
        from initlab.paper_figs.lra_figures import plot_sweep

        plot_sweep(rows, run.root / f"{ablation}.png", title=f"{base.task}: {ablation}")
    run.mark_done()
    return rows


def sweep_inputs(base: LRAConfig, conds: Sequence[tuple]) -> dict[str, Path]:
    """The data folders every condition of the sweep reads (its task's and, for cross-task SPT, the SPT task's),
    fingerprinted at the sweep's root (:func:`initlab.runs.check_inputs`): the executor skips finished cells by
    their keys, so the sweep itself proves its data unchanged."""
    folders: dict[str, Path] = {}
    for c in conds:
        cfg = next((x for x in c if isinstance(x, LRAConfig)), base)
        for task in (cfg.task, cfg.spt_task or cfg.task):
            d = run_inputs(cfg, task)["data"]
            if d is not None:
                folders[f"data {task}"] = d.resolve()
    return folders


def _revive(row: dict) -> dict:
    """A saved row with the non-finite numbers that JSON stores as strings turned back into floats."""
    return revive_nonfinite(row)


def _metric_columns(res: dict) -> dict:
    """First- and last-layer attention metrics of a fine-tune result: at fine-tuning start (``*_init``)
    and at the best validation epoch."""
    out = {}
    for tag, key in (("_init", "attention_metrics_init"), ("", "attention_metrics")):
        layers = res.get(key, {}).get("layers", [])
        if layers:
            out.update({f"prox_first{tag}": layers[0]["proximity_mass"], f"rps_first{tag}": layers[0]["relative_position_score"],
                        f"prox_last{tag}": layers[-1]["proximity_mass"], f"rps_last{tag}": layers[-1]["relative_position_score"]})
            out["uniform_proximity"] = res[key]["uniform_proximity"]
    return out


#: the cost model of the expected duration: seconds per epoch on one core of the reference machine, by task.
#: ListOps: 2.3 s, measured for the CPU ListOps presets on one thread at load 0.5 (docs/lra.md); any other task
#: (GPU-sized presets): 60 s, an assumed order of magnitude, not measured.
EPOCH_SECONDS = {"listops": 2.3}


def _row(ablation: str, seed: int, name: str, cfg: LRAConfig, ms: int | None, spt_run: dict | None, res: dict) -> dict:
    row = {"ablation": ablation, "condition": name, "seed": seed, "task": cfg.task, "n_layers": cfg.n_layers,
           "init": cfg.init, "init_groups": cfg.init_groups, "freeze": "+".join(cfg.freeze),
           "spt_epochs": (ms if ms is not None else cfg.spt_epochs) if cfg.init == "spt" else 0,
           "spt_epochs_run": spt_run["epochs_run"] if spt_run and "epochs_run" in spt_run else "",
           "spt_best_epoch": spt_run["best_epoch"] if spt_run else "",
           "spt_task": (cfg.spt_task or cfg.task) if cfg.init == "spt" else "", "test_acc": res["test_acc"],
           "val_acc": res["val_acc"], "best_epoch": res["best_epoch"], "epochs_run": res.get("epochs_run", ""),
           "failed": False}
    row.update(_metric_columns(res))
    return row


def _failed_row(ablation: str, seed: int, name: str, cfg: LRAConfig, error: str) -> dict:
    return {"ablation": ablation, "condition": name, "seed": seed, "task": cfg.task, "init": cfg.init,
            "test_acc": float("nan"), "val_acc": float("nan"), "best_epoch": None, "failed": True, "error": error}


def cell_pretrain(root: str, name: str, args: dict, progress: Progress) -> dict:
    """Executor cell: one shared SPT stage (``root/pretrain/<key>/``); a non-finite loss is recorded, not raised
    (the fine-tunes that need it are then recorded as failed, as the sweep always did)."""
    from initlab.realdata.lra.train import pretrain

    cfg = from_dict(LRAConfig, args["config"])
    try:
        res = pretrain(cfg, Path(root) / args["dir"], milestones=args["milestones"], progress=False, reuse_finished=True,
                       report=progress, verbose=False)
    except NonFiniteError as err:
        return {"failed": True, "error": str(err)}
    return {"failed": False, **{k: res.get(k) for k in ("epochs_run", "best_epoch", "best_val_loss", "stopped_on_plateau")}}


def cell_finetune(root: str, name: str, args: dict, progress: Progress) -> dict:
    """Executor cell: one fine-tune (from scratch or from its SPT cell's checkpoint); returns its result row."""
    from initlab.realdata.lra.train import finetune

    cfg = from_dict(LRAConfig, args["config"])
    seed, cond, ms, ablation = args["seed"], args["condition"], args["milestone"], args["ablation"]
    ckpt, spt_run = None, None
    if cfg.init == "spt":
        spt_run = RunDir(root, resume=True).load_cell(args["pretrain_cell"])
        if spt_run["failed"]:
            return _failed_row(ablation, seed, cond, cfg, spt_run["error"])
        pdir = Path(root) / "pretrain" / pretrain_key(cfg)
        ckpt = pdir / (f"spt_best_e{ms}.safetensors" if ms is not None else "spt_best.safetensors")
    try:
        res = finetune(cfg, Path(root) / "finetune" / name, ckpt, progress=False, reuse_finished=True, report=progress,
                       verbose=False)
    except NonFiniteError as err:
        return _failed_row(ablation, seed, cond, cfg, str(err))
    return _row(ablation, seed, cond, cfg, ms, spt_run, res)


def plan(ablation: str, conds: list) -> list[Cell]:
    """The cells of ``conds`` (``(seed, condition, config, milestone)``): one pretraining per distinct SPT stage
    (placed before the first fine-tune that needs it), then each fine-tune; units are epochs."""
    milestones: dict[str, set[int]] = {}
    for _, _, cfg, ms in conds:
        if cfg.init == "spt" and ms is not None:
            milestones.setdefault(pretrain_key(cfg), set()).add(ms)
    cells: list[Cell] = []
    placed: set[str] = set()
    for seed, name, cfg, ms in conds:
        sec = EPOCH_SECONDS.get(cfg.task, 60.0)
        needs: tuple[str, ...] = ()
        pcell = None
        if cfg.init == "spt":
            key = pretrain_key(cfg)
            pcell = f"pretrain_{key}"
            needs = (pcell,)
            if pcell not in placed:
                pcfg = pretrain_config(cfg)
                ms_list = sorted(milestones.get(key, ()))
                cells.append(Cell(pcell, cell_pretrain,
                                  {"config": to_dict(pcfg), "milestones": ms_list, "dir": f"pretrain/{key}"},
                                  {"config": to_dict(pcfg), "milestones": ms_list}, units=pcfg.spt_epochs, unit_seconds=sec))
                placed.add(pcell)
        cells.append(Cell(f"{name}-seed{seed}", cell_finetune,
                          {"config": to_dict(cfg), "seed": seed, "condition": name, "milestone": ms, "ablation": ablation,
                           "pretrain_cell": pcell},
                          {"config": to_dict(cfg), "spt_milestone": ms}, needs=needs, units=cfg.epochs, unit_seconds=sec))
    return cells


def run_sweep_cells(run: RunDir, ablation: str, conds: list, progress: bool, *, workers: int | None = 1,
               scheduler: str | None = None) -> list[dict]:
    """Run (or read back) every ``(seed, condition, config, milestone)`` cell; returns the rows in order.

    Each cell is keyed by its own config (and SPT milestone): a finished cell computed under another
    config raises :class:`~initlab.runs.ConfigMismatchError`. A cell whose training hits a NaN/inf loss or
    gradient is recorded as failed (``failed``, ``error``, accuracies NaN) and the sweep goes on.
    """
    import torch

    cells = plan(ablation, conds)
    run_cells(run, cells, workers=workers, scheduler=scheduler, progress=progress, desc=f"LRA {ablation}",
              gpus=torch.cuda.is_available())
    return [_revive(run.load_cell(c.name, key=c.key)) for c in cells if c.fn is cell_finetune]
