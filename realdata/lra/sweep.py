"""Ablation sweeps of Amos et al. (arXiv:2310.02980): SPT epochs, depth, cross-task SPT data, frozen attention, hybrid init.

``run_sweep(ablation, base, out, seeds)`` runs every condition of ``config.ABLATIONS[ablation]`` on
top of the task preset ``base``, for each seed, as resumable cells of one :class:`RunDir`:

* an SPT stage is shared by all conditions that need the same pretraining (its folder name is a hash
  of the pretraining-relevant fields), under ``out/pretrain/<key>/``;
* the SPT-epochs ablation runs one pretraining of ``max(E)`` epochs and freezes the best-so-far
  checkpoint after each E (``milestones``): with the constant schedule of the presets this equals
  separate E-epoch runs (with a cosine schedule each E gets its own run);
* each fine-tune goes to ``out/finetune/<condition>-seed<S>/``; a finished cell is not redone.

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

from initlab.config import derive, to_dict
from initlab.realdata.lra.config import ABLATIONS, BASE, CROSS_TASK, LRAConfig
from initlab.runs import NonFiniteError, RunDir, check_same_record
from initlab.textio import read_json

__all__ = ["expand_conditions", "pretrain_config", "pretrain_key", "run_sweep"]

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


def run_sweep(ablation: str, base: LRAConfig, out: str | Path, seeds: Sequence[int] = (0,), *, overwrite: bool = False,
              progress: bool = True, figure: bool = True) -> list[dict]:
    """Run (or resume) the sweep; returns the result rows (see module doc). A finished sweep with the same
    config is read back, not redone.

    Raises:
        ValueError: ``out`` holds a sweep with another ablation, seeds or config (unless ``overwrite``).
    """
    meta = {"kind": "sweep", "ablation": ablation, "seeds": list(seeds), "config": to_dict(base)}
    if not overwrite:  # another ablation/seeds/config in `out`: ConfigMismatchError naming the keys, nothing written
        check_same_record(Path(out) / "config.json", meta, what="sweep config")
    if (Path(out) / "DONE").exists() and not overwrite:  # finished with the same config: read back, never redone
        return [_revive(r) for r in read_json(Path(out) / "results.json")["rows"]]
    conds = [(s, *c) for s in seeds for c in expand_conditions(ablation, base, s)]  # bad ablation: nothing written
    fresh = not Path(out).exists()
    run = RunDir(out, overwrite=overwrite, resume=True, config=meta)
    try:
        rows = _run_cells(run, ablation, conds, progress)
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


def _revive(row: dict) -> dict:
    """A saved row with the non-finite numbers that JSON stores as strings turned back into floats."""
    return {k: float(v) if isinstance(v, str) and v in ("nan", "inf", "-inf") else v for k, v in row.items()}


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


def _run_cell(run: RunDir, ablation: str, seed: int, name: str, cfg: LRAConfig, ms: int | None,
              milestones: dict[str, set[int]], progress: bool) -> dict:
    """Pretrain (shared, reused when finished) and fine-tune one cell; returns its row."""
    from initlab.realdata.lra.train import finetune, pretrain

    ckpt, spt_run = None, None
    if cfg.init == "spt":
        key = pretrain_key(cfg)
        pdir = run.root / "pretrain" / key
        spt_run = pretrain(pretrain_config(cfg), pdir, milestones=sorted(milestones.get(key, ())), progress=progress,
                           reuse_finished=True)
        ckpt = pdir / (f"spt_best_e{ms}.safetensors" if ms is not None else "spt_best.safetensors")
    res = finetune(cfg, run.root / "finetune" / f"{name}-seed{seed}", ckpt, progress=progress, reuse_finished=True)
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


def _run_cells(run: RunDir, ablation: str, conds: list, progress: bool) -> list[dict]:
    """Run (or read back) every ``(seed, condition, config, milestone)`` cell; returns the rows in order.

    Each cell is keyed by its own config (and SPT milestone): a finished cell computed under another
    config raises :class:`~initlab.runs.ConfigMismatchError`. A cell whose training hits a NaN/inf loss or
    gradient is recorded as failed (``failed``, ``error``, accuracies NaN) and the sweep goes on.
    """
    milestones: dict[str, set[int]] = {}
    for _, _, cfg, ms in conds:
        if cfg.init == "spt" and ms is not None:
            milestones.setdefault(pretrain_key(cfg), set()).add(ms)
    rows = []
    for seed, name, cfg, ms in conds:
        cell, key = f"{name}-seed{seed}", {"config": to_dict(cfg), "spt_milestone": ms}
        if not run.has_cell(cell, key=key):
            try:
                row = _run_cell(run, ablation, seed, name, cfg, ms, milestones, progress)
            except NonFiniteError as err:
                print(f"[sweep] cell {cell} failed: {err}", flush=True)
                row = {"ablation": ablation, "condition": name, "seed": seed, "task": cfg.task, "init": cfg.init,
                       "test_acc": float("nan"), "val_acc": float("nan"), "best_epoch": None, "failed": True,
                       "error": str(err)}
            run.save_cell(cell, row, key=key)
        rows.append(_revive(run.load_cell(cell, key=key)))
    return rows
