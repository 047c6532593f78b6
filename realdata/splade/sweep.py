"""One grid cell = train + evaluate; the sweep runs the backbone x k grid, skipping finished cells.

Layout of a sweep folder ``OUT``::

    OUT/config.json                     the base config of the sweep
    OUT/cells/<cell>.json               finished cells (RunDir), skipped on resume
    OUT/<cell>/config.json              resolved config of the cell
    OUT/<cell>/model/                   safetensors checkpoint
    OUT/<cell>/checkpoints/             Trainer checkpoints (resume an interrupted training)
    OUT/<cell>/loss_curve.csv|png, flops_terms.json, train_results.json
    OUT/<cell>/results.json|csv         per-set metrics + summary
    OUT/summary.csv|json                one row per cell; OUT/nanobeir_vs_flops.png

The cells run through :func:`initlab.executor.run_cells`: in this process (``workers=1``, the library
default), in local worker processes (one per GPU on a GPU machine, each seeing only its GPU), or on a Dask
cluster (``scheduler``; start one Dask worker per GPU, docs/cluster.md). Multi-GPU training of one cell stays
with ``torchrun`` / ``accelerate`` (``torchrun --nproc_per_node N -m initlab.app.cli splade sweep ...`` runs the
cells one after another, each on N GPUs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from initlab.executor import Cell, Progress, check_scheduler, probe_scheduler, run_cells
from initlab.runs import INPUTS_FILE, RunDir, check_inputs, check_same_record, holds_run_folder
from initlab.textio import open_text, read_json

from .config import K_VALUES, BACKBONES, SpladeTrainConfig, cell_config, cell_name

__all__ = ["resolve_eval_sets", "run_cell", "run_sweep", "eval_checkpoint", "cell_train_eval", "absolute_inputs",
           "STEP_SECONDS"]

#: the cost model of the expected duration only: seconds per training step of one cell. "gpu": an assumed order
#: of magnitude for a base-size backbone on one GPU, NOT measured (this project has had no GPU); "tiny": the
#: quick preset's in-process model on one CPU core, also a rough figure (the cell's evaluation dominates).
STEP_SECONDS = {"gpu": 0.25, "tiny": 0.05}


def resolve_eval_sets(cfg: SpladeTrainConfig, extra: Sequence[str] = ()) -> list[str]:
    """Names of the evaluation sets of ``cfg`` (see :func:`.data.load_eval_set`)."""
    from .data import BEIR13, NANOBEIR_NAMES

    names = list(cfg.eval_sets) + list(extra)
    if cfg.beir:
        names += list(BEIR13)
    if cfg.nanobeir:
        names += [f"nano:{n}" for n in NANOBEIR_NAMES]
    return list(dict.fromkeys(names))


@holds_run_folder("out")
def eval_checkpoint(model_dir: str | Path, set_names: Sequence[str], out: str | Path, *, data_root: str = "",
                    top_k: int = 1000, batch_size: int = 128, overwrite: bool = False, trust_remote_code: bool = False,
                    meta: dict | None = None, approx: bool = False, mark_done: bool = True,
                    engine: str = "fused") -> dict[str, Any]:
    """Evaluate the safetensors checkpoint ``model_dir`` on ``set_names``; write ``results.json|csv`` into ``out``.

    ``engine``: the SPLADE head's path while encoding (``"fused"``, default, or ``"dense"``;
    :func:`.modeling.check_engine`); recorded in ``results.json`` (``head_engine``), not in the evaluation's key (both
    give the same vectors to rounding, so finished sets are reused across engines).

    ``out`` follows the run-folder rule: a finished evaluation (``DONE``, written at the end when
    ``mark_done``) is refused unless ``overwrite``; an interrupted one resumes its finished sets only under
    the same key (checkpoint, its weight files, sets, top-k, data root, backend; ``eval_key.json``), else
    :class:`initlab.runs.ConfigMismatchError`. Set names and the checkpoint are checked before anything is
    written, and an evaluation that fails before its first set is finished leaves nothing behind.
    """
    import shutil

    import sys

    from .data import check_eval_spec, load_eval_set
    from .evalset import DATA_RECALL_LEVEL
    from .evaluate import evaluate_set, summarise
    from .modeling import load_splade

    for name in set_names:
        check_eval_spec(name, data_root=data_root or None)
    inputs = eval_inputs(model_dir, set_names, data_root)
    model = load_splade(model_dir, trust_remote_code=trust_remote_code, engine=engine)  # fails before anything is written
    check_checkpoint_lengths(model, model_dir)
    check_checkpoint_vocab(model, model_dir)
    mdir = Path(model_dir).resolve()
    key = {"model": str(mdir), "sets": list(set_names), "top_k": top_k, "data_root": str(data_root or ""),
           "approx": bool(approx),
           "weights": {p.name: [p.stat().st_size, p.stat().st_mtime_ns] for p in sorted(mdir.rglob("*.safetensors"))}}
    out = Path(out)
    fresh = not out.exists()
    if not overwrite:
        check_same_record(out / "eval_key.json", key, what="evaluation (checkpoint, sets or settings)")
        check_inputs(out, inputs, write=False)  # finished sets are reused only on the checkpoint and data they saw
    had_inputs = (out / INPUTS_FILE).exists() and not overwrite
    run = RunDir(out, overwrite=overwrite, config=key, config_name="eval_key.json")
    check_inputs(out, inputs)
    rows = []
    from initlab.executor import progress_bar

    try:
        for name in progress_bar(list(set_names), desc="eval sets"):
            cell = f"eval_{name}"
            if run.has_cell(cell, key=key):
                rows.append(run.load_cell(cell, key=key))
                continue
            ds = load_eval_set(name, data_root=data_root or None)
            if ds.binary_rel_source != DATA_RECALL_LEVEL:  # a convention taken from the set's name: said, and recorded
                print(f"note: {ds.name}: recall counts grade >= {ds.binary_rel} as relevant ({ds.binary_rel_source}); "
                      "recorded in the row as recall_rel", file=sys.stderr, flush=True)
            row = {**evaluate_set(model, ds, top_k=top_k, batch_size=batch_size, approx=approx), "spec": name}
            run.save_cell(cell, row, key=key)
            rows.append(row)
    except BaseException:
        if not rows:  # nothing finished: leave no trace of this evaluation
            if fresh:
                shutil.rmtree(out, ignore_errors=True)
            else:
                (out / "eval_key.json").unlink(missing_ok=True)
                if not had_inputs:
                    (out / INPUTS_FILE).unlink(missing_ok=True)
                if (out / "cells").is_dir() and not any((out / "cells").iterdir()):
                    (out / "cells").rmdir()
        raise
    summary = summarise(rows)
    res = {"model": str(model_dir), **(meta or {}), "head_engine": engine, "summary": summary, "sets": rows}
    run.write_json("results.json", res)
    run.write_csv("results.csv", [_flat({k: v for k, v in r.items() if k != "reasons"}) for r in rows])
    if mark_done:
        run.mark_done()
    return res


def absolute_inputs(cfg: SpladeTrainConfig) -> SpladeTrainConfig:
    """``cfg`` with every local input named by a relative path made absolute in this process's working directory:
    the training files (not an ``ir_datasets:`` source), ``data_root``, a backbone that is a local folder (not a hub
    id) and the folders of ``beir:``/``msmarco:`` evaluation sets (:func:`.data.absolute_spec`). A sweep calls it
    before its cells leave the client, so that a Dask worker, in its own working directory, reads the files the
    client named; the saved configs record them so."""
    import os
    from dataclasses import replace

    from initlab.config import absolute_paths

    from .data import absolute_spec

    fields = ["train_collection", "train_queries", "data_root"]
    if not cfg.train_source.startswith("ir_datasets:"):
        fields.append("train_source")
    if not cfg.tiny_model and os.path.exists(cfg.backbone):
        fields.append("backbone")
    out = absolute_paths(cfg, fields)
    sets = tuple(absolute_spec(s) for s in cfg.eval_sets)
    return replace(out, eval_sets=type(cfg.eval_sets)(sets)) if list(sets) != list(cfg.eval_sets) else out


def sweep_inputs(base: SpladeTrainConfig, cells: Sequence[SpladeTrainConfig]) -> dict[str, Path]:
    """The inputs every cell of a sweep shares or reads (:func:`initlab.runs.check_inputs`): the training files,
    each local backbone folder and the local files of the evaluation sets."""
    from .data import local_set_files
    from .train import training_inputs

    inputs = {k: v for k, v in training_inputs(base).items() if k != "backbone" and v is not None}
    for c in cells:
        bb = training_inputs(c)["backbone"]
        if bb is not None:
            inputs[f"backbone {c.backbone}"] = bb
    for name in resolve_eval_sets(base):
        for p in local_set_files(name, data_root=base.data_root or None):
            inputs[f"set {name}: {p.name}"] = p.resolve()
    return inputs


def eval_inputs(model_dir: str | Path, set_names: Sequence[str], data_root: str | Path | None) -> dict[str, Path]:
    """The inputs of an evaluation (:func:`initlab.runs.check_inputs`): every file of the checkpoint folder (weights,
    tokenizer, configs) and the local files of each set (:func:`.data.local_set_files`)."""
    from .data import local_set_files

    inputs: dict[str, Path] = {"checkpoint": Path(model_dir).resolve()}
    for name in set_names:
        for p in local_set_files(name, data_root=data_root or None):
            inputs[f"set {name}: {p.name}"] = p.resolve()
    return inputs


def _flat(row: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A result row with nested dicts (``identical_ids``, ``truncation``) spread into ``outer.inner`` columns."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def check_checkpoint_lengths(model, model_dir: str | Path) -> None:
    """Length policy (:mod:`initlab.mlmhead.lengths`) for a saved checkpoint: its query, document and maximum
    sequence lengths must fit its backbone's position table; ValueError before anything is written."""
    from initlab.mlmhead.lengths import check_length

    tr = model[0]
    for name in ("max_seq_length", "query_length", "document_length"):
        value = getattr(tr, name, None)
        if value:
            check_length(int(value), tr.auto_model.config, flag=f"{model_dir}: {name}")


def check_checkpoint_vocab(model, model_dir: str | Path) -> None:
    """Every token id of the checkpoint's tokenizer has a vocabulary row and the MLM-head bias its size
    (:func:`initlab.mlmhead.heads.check_vocab`); ValueError (one line, both sizes and the fix) before anything is
    written."""
    from .modeling import vocab_rows

    try:
        vocab_rows(model)
    except ValueError as err:
        raise ValueError(f"{model_dir}: {err}") from None


@holds_run_folder("out")
def run_cell(cfg: SpladeTrainConfig, out: str | Path, *, overwrite: bool = False, progress: bool = True) -> dict[str, Any]:
    """Train ``cfg`` into ``out`` then evaluate it; returns the flat cell result (also in ``out/results.json``).

    A cell whose training finished but whose evaluation was interrupted resumes with the evaluation.

    Raises:
        ValueError: ``cfg`` has no evaluation sets (nothing would be measured).
        NonFiniteError: training diverged (``out/failure.json`` records it; no ``DONE``).
    """
    import os

    from .train import detect_collapse, train_splade

    out = Path(out)
    sets = resolve_eval_sets(cfg)
    if not sets:
        raise ValueError("--eval: the config has no evaluation sets (eval_sets is empty and beir, nanobeir are off, as "
                         "in the quick preset); add e.g. --set 'eval_sets=[\"msmarco-dev\"]' --data-root DIR, or drop --eval")
    tr = train_splade(cfg, out, overwrite=overwrite, progress=progress, reuse_finished=True)
    if int(os.environ.get("RANK", "0")) != 0:
        return {}
    res = eval_checkpoint(out / "model", sets, out, data_root=cfg.data_root, top_k=cfg.top_k,
                          batch_size=cfg.eval_batch_size, trust_remote_code=cfg.trust_remote_code,
                          meta={"backbone": cfg.backbone, "k": cfg.k}, mark_done=False, engine=cfg.head_engine)
    losses = []
    if (out / "loss_curve.csv").exists():
        import csv

        with open_text(out / "loss_curve.csv", newline="") as fh:
            losses = [float(r["loss"]) for r in csv.DictReader(fh)]
    train_verdict = detect_collapse(losses=losses, q_active=None, d_active=None, vocab_size=1)
    s = res["summary"]
    collapsed = bool(s["collapsed"] or train_verdict["collapsed"])
    flat = {"cell": cell_name(cfg), "backbone": cfg.backbone if not cfg.tiny_model else f"tiny-{cfg.tiny_model}", "k": cfg.k,
            "status": "finished", "steps": tr.get("steps"), "final_loss": tr.get("final_loss"),
            **{k: v for k, v in s.items() if k not in ("collapsed", "collapse_reasons", "sets")},
            "collapsed": collapsed, "collapse_reasons": "; ".join(s["collapse_reasons"] + train_verdict["reasons"])}
    for r in res["sets"]:
        flat[f"{r['set']}:nDCG@10"] = r["nDCG@10"]
    res["cell"] = flat
    from initlab.runs import atomic_write_json, atomic_write_text

    atomic_write_json(out / "results.json", res)
    atomic_write_text(out / "DONE", "done\n")
    return flat


def cell_train_eval(root: str, name: str, args: dict, progress: Progress) -> dict[str, Any]:
    """Executor cell: train and evaluate one grid cell into ``root/<cell>`` (:func:`run_cell`); a finished cell
    folder not yet recorded as a cell is read back instead."""
    from initlab.config import from_dict

    cfg = from_dict(SpladeTrainConfig, args["config"])
    out = Path(root) / name
    done = out / "results.json"
    if (out / "DONE").exists() and done.exists():  # finished but not yet recorded as a cell
        check_same_record(out / "config.json", args["config"], what="training config")
        return read_json(done)["cell"]
    return run_cell(cfg, out, progress=args.get("progress", False))


@holds_run_folder("out")
def run_sweep(base: SpladeTrainConfig, out: str | Path, *, backbones: Sequence[str] = tuple(BACKBONES),
              ks: Sequence[float] = K_VALUES, overwrite: bool = False, progress: bool = True, workers: int | None = 1,
              scheduler: str | None = None) -> list[dict[str, Any]]:
    """Run every ``(backbone, k)`` cell of the grid into ``out``; finished cells are skipped (RunDir cells,
    keyed by the cell's config). Writes ``summary.csv|json`` and the NanoBEIR-vs-FLOPS figure at the end.

    ``workers``: local worker processes (1: in this process; None: one per GPU, else one per core);
    ``scheduler``: a Dask scheduler address or ``local:N`` (:func:`initlab.executor.run_cells`). A cell whose
    training diverges (NaN/inf) is recorded as ``status: failed`` with its error and the sweep goes on; the
    sweep is then not marked ``DONE`` (a rerun retries the failed cells only).

    Raises:
        ConfigMismatchError: ``out`` holds a sweep of another base config, or a cell of another config.
    """
    import os

    import torch

    from initlab.config import to_dict

    base = absolute_inputs(base)  # a Dask worker resolves a relative path in its own working directory
    cells = [absolute_inputs(cell_config(base, b, k)) for b in backbones for k in ks]  # validates before writing
    if scheduler is not None:
        check_scheduler(scheduler)
        probe_scheduler(scheduler)  # one line, before the sweep's folder is made
    if not resolve_eval_sets(base):
        raise ValueError("the sweep's config has no evaluation sets; set eval_sets, beir or nanobeir")
    inputs = sweep_inputs(base, cells)
    if not overwrite:  # finished cells are skipped by their keys: the sweep proves the inputs they saw unchanged
        check_inputs(out, inputs, write=False)
    run = RunDir(out, overwrite=overwrite, config=base)
    check_inputs(run.root, inputs)
    gpus = torch.cuda.is_available()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # under torchrun: every rank runs each cell, one after another
        workers, scheduler = 1, None
    elif workers is None:
        workers = torch.cuda.device_count() if gpus else None
    inline = workers == 1 and scheduler is None
    plan = [Cell(cell_name(cfg), cell_train_eval, {"config": to_dict(cfg), "progress": progress and inline},
                 to_dict(cfg), units=cfg.max_steps, unit_seconds=STEP_SECONDS["tiny" if cfg.tiny_model else "gpu"])
            for cfg in cells]
    rep = run_cells(run, plan, workers=workers, scheduler=scheduler, progress=progress and not inline,
                    desc="SPLADE sweep", on_error="record", gpus=gpus)
    rows = []
    for cfg, c in zip(cells, plan):
        if c.name in rep.failed:
            rows.append({"cell": c.name, "backbone": cfg.backbone, "k": cfg.k, "status": "failed", "error": rep.failed[c.name]})
            print(f"cell {c.name} FAILED: {rep.failed[c.name]}")
        else:
            rows.append(run.load_cell(c.name, key=c.key))
    _write_summary(run, rows)
    if all(r.get("status", "finished") != "failed" for r in rows):
        run.mark_done()
    return rows


def _write_summary(run: RunDir, rows: list[dict[str, Any]]) -> None:
    run.write_csv("summary.csv", rows)
    run.write_json("summary.json", rows)
    try:
        from initlab.paper_figs.splade_scale_figures import plot_nanobeir_vs_flops

        plot_nanobeir_vs_flops(run.root / "summary.json", run.root / "nanobeir_vs_flops.png")
    except Exception as err:  # a figure never fails a sweep
        import warnings

        warnings.warn(f"figure not drawn: {err}")
