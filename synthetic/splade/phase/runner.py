"""Synthetic SPLADE phase diagram: four tiny backbone families x head scale s x MLM-head rescaling k.

Per family (:mod:`initlab.synthetic.splade.families`) one tied backbone is MLM-pretrained on the
synthetic corpus. A cell of the diagram multiplies the head by ``s`` and divides it by ``k`` in one
of three ways (``modes``):

* ``tied`` -- ``s`` and ``k`` both on the tied matrix (a high-norm tied checkpoint, rescaled with
  ``initlab mlmhead rescale``): input embeddings ``e = s / k``, head ``h = s / k``, still tied;
* ``k_output`` -- ``s`` on the tied matrix, ``k`` on the output projection only
  (``initlab mlmhead rescale --untie``): ``e = s``, ``h = s / k``, untied unless ``k = 1``;
* ``s_output`` -- a checkpoint whose untied output projection alone is ``s`` times larger, rescaled
  output-only: ``e = 1``, ``h = s / k``, untied.

Every (mode, s, k) maps to one trained model ``(family, tied, e, h, seed)``; different (mode, s, k)
that give the same weights (e.g. tied s = 16, k = 16 and tied s = 1, k = 1; bitwise the same for
powers of two) share that one cell, so a cell is trained once. Each cell: scale quantities at
initialisation, SPLADE training with sentence-transformers' SparseEncoderTrainer (the recipe of
:mod:`initlab.synthetic.splade.train`), evaluation (nDCG@10, MRR@10 by ``ir_measures``, active dims, FLOPS),
the collapse verdict of :func:`initlab.nn.collapse.detect_collapse` (empty, dense or near-constant
vectors, identical rankings, non-finite values) and the scale quantities again after training. A
non-finite gradient or loss stops the cell, which is recorded as failed (collapsed, with the step)
and the sweep goes on. Per (family, s) the report of ``initlab mlmhead inspect``
(:func:`initlab.mlmhead.report.inspect_model`) on the scaled, tied backbone gives its recommended k.

Outputs: ``config.json``, ``backbone/<family>/`` (pretrained, with ``natural_scale.json``),
``cells/*.json`` (resumable, each keyed by its own config), then the tables and figures written by
:mod:`initlab.synthetic.splade.phase.summary`, then ``DONE``.

Role of this module: the sweep (:func:`run_phase`: the backbones, training and inspect cells as
:class:`initlab.executor.Cell` objects run by :func:`initlab.executor.run_cells` in local worker processes
or on a Dask cluster, resumable cells, report, figures). The grid and its config are :mod:`initlab.synthetic.splade.phase.config`, one cell
:mod:`initlab.synthetic.splade.phase.cell`.
"""

from __future__ import annotations

import shutil
import sys
import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Mapping

from initlab.config import from_dict, to_dict
from initlab.executor import Cell, Progress, check_scheduler, probe_scheduler, estimate, remaining_cells, run_cells
from initlab.runs import RunDir, cell_file, holds_run_folder
from initlab.textio import read_json
from initlab.synthetic.splade.phase.cell import inspect_cell, pretrain_family, run_phase_cell
from initlab.synthetic.splade.phase.config import (PRESETS, CellSpec, PhaseConfig, backbone_for, cell_key, cell_spec, inspect_name,
                                                   check_config, grid)

#: ``PRESETS`` is re-exported: ``initlab.synthetic.splade.phase.runner.PRESETS`` is the documented name of the presets.
__all__ = ["PRESETS", "run_phase", "plan", "collapse_note", "cell_pretrain", "cell_train", "cell_inspect",
           "STEP_SECONDS"]

#: The cost model: CPU seconds per SPLADE training step on one core of the reference machine, per family (a
#: cell's set-up, evaluation and scale measurements spread over its steps), of one MLM pretraining step, and of
#: one ``mlmhead inspect`` cell. Measured with ``python benchmarks/bench_cost_model.py --preset quick --stages
#: splade`` (load 10 on 2 shared cores: bert 0.082, modernbert 0.078 per training step, MLM steps 0.036-0.077,
#: inspect 0.2 s); the other families and ModernBERT's larger default-preset cost from the cell times of the
#: default run (docs/results/synthetic_splade_default/phase.json: roberta 1.08x, albert 0.93x, modernbert 2.1x
#: bert's). docs/cluster.md#cost-model.
STEP_SECONDS = {"bert": 0.082, "roberta": 0.089, "albert": 0.076, "modernbert": 0.17}
MLM_STEP_SECONDS = {"bert": 0.05, "roberta": 0.05, "albert": 0.05, "modernbert": 0.05}
INSPECT_SECONDS = 0.2
#: CPU seconds a worker process needs to import torch, transformers and sentence-transformers (9.8 s measured
#: at load 8 on 2 shared cores: ``python -c "import torch, transformers, sentence_transformers"``)
WORKER_START_SECONDS = 10.0


# ------------------------------------------------------------------------------------------------
# the cells (run in a worker: arguments are JSON, the config travels as a dict)
# ------------------------------------------------------------------------------------------------
def _bb_folder(family: str, seed: int) -> str:
    return f"backbone/{family}_seed={seed}"


def cell_pretrain(root: str, name: str, args: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
    """Executor cell: MLM-pretrain (or reuse) one family's backbone under ``root/backbone/``."""
    cfg = from_dict(PhaseConfig, args["config"])
    pretrain_family(str(Path(root) / args["folder"]), args["family"], cfg, args["seed"], on_step=lambda: progress.advance(1))
    return {"family": args["family"], "seed": args["seed"], "folder": args["folder"]}


def cell_train(root: str, name: str, args: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
    """Executor cell: train and evaluate one :class:`CellSpec` (:func:`run_phase_cell`); one unit per step."""
    cfg = from_dict(PhaseConfig, args["config"])
    spec = CellSpec(**args["spec"])
    return run_phase_cell(str(Path(root) / args["backbone"]), cfg, spec, str(Path(root) / "trainer_tmp" / spec.name),
                          progress=progress)


def cell_inspect(root: str, name: str, args: Mapping[str, Any], progress: Progress) -> dict[str, Any]:
    """Executor cell: ``initlab mlmhead inspect`` on one family's backbone scaled by ``s``."""
    cfg = from_dict(PhaseConfig, args["config"])
    return inspect_cell(str(Path(root) / args["backbone"]), cfg, args["family"], args["s"], args["seed"])


def plan(cfg: PhaseConfig) -> list[Cell]:
    """Every cell of ``cfg``: the backbones (one per family and seed), then the distinct training cells in grid
    order, then the ``mlmhead inspect`` cells; training and inspect cells need their family's backbone."""
    conf = to_dict(cfg)
    cells = []
    for f in cfg.families:
        for seed in cfg.seeds:
            bb = backbone_for(cfg, f)
            key = {"family": f, "seed": seed, "backbone": to_dict(bb), "corpus": to_dict(cfg.corpus)}
            cells.append(Cell(f"pretrain_{f}_seed={seed}", cell_pretrain,
                              {"config": conf, "family": f, "seed": seed, "folder": _bb_folder(f, seed)}, key,
                              units=bb.mlm_steps, unit_seconds=MLM_STEP_SECONDS.get(f, 0.03)))
    seen: set[str] = set()
    for p in grid(cfg):
        if p["cell"] in seen:
            continue
        seen.add(p["cell"])
        sp = cell_spec(p["family"], p["mode"], p["s"], p["k"], p["seed"])
        cells.append(Cell(sp.name, cell_train,
                          {"config": conf, "spec": asdict(sp), "backbone": _bb_folder(sp.family, sp.seed)},
                          cell_key(cfg, sp), needs=(f"pretrain_{sp.family}_seed={sp.seed}",), units=cfg.steps,
                          unit_seconds=STEP_SECONDS.get(sp.family, 0.1)))
    for f in cfg.families:
        for s in cfg.head_scales:
            for seed in cfg.seeds:
                cells.append(Cell(inspect_name(f, s, seed), cell_inspect,
                                  {"config": conf, "family": f, "s": s, "seed": seed, "backbone": _bb_folder(f, seed)},
                                  _inspect_key(cfg, f, s, seed), needs=(f"pretrain_{f}_seed={seed}",),
                                  unit_seconds=INSPECT_SECONDS))
    return cells


# ------------------------------------------------------------------------------------------------
# the sweep
# ------------------------------------------------------------------------------------------------

def expected_seconds(out_dir: str | Path, cfg: PhaseConfig, workers: int) -> tuple[float, float]:
    """``(expected, at most)`` reference seconds of the cells of ``cfg`` not yet saved in ``out_dir``, with the
    workers' start-up (:data:`WORKER_START_SECONDS`); nothing is created or checked."""
    return estimate(remaining_cells(out_dir, plan(cfg)), workers, startup=WORKER_START_SECONDS)


@holds_run_folder("out")
def run_phase(out: Path, cfg: PhaseConfig, overwrite: bool = False, progress: bool = True,
              draw: Callable[[Path], Any] | None = None, workers: int | None = None,
              scheduler: str | None = None) -> RunDir:
    """Run (or resume) the phase diagram of ``cfg`` into ``out``; finished cells are not redone.

    Backbones are pretrained once per (family, seed); each distinct cell is trained once, by
    :func:`initlab.executor.run_cells` (``workers`` local processes, default one per core, or the Dask
    cluster at ``scheduler``; results do not depend on either). Then
    :func:`initlab.synthetic.splade.phase.summary.write_report` writes the tables, ``draw(out)`` the figures
    (from the saved files), and ``DONE`` is written. Collapsed cells are listed once on stderr
    (:func:`collapse_note`).

    Raises:
        ValueError: a bad grid (unknown family or mode, a scale that is not a power of two), workers < 1, a
            bad scheduler address.
        initlab.runs.RunExistsError: ``out`` holds a finished run and ``overwrite`` is False.
        initlab.runs.ConfigMismatchError: ``out`` holds an unfinished run (or a cell) of another config.
    """
    from initlab.synthetic.splade.phase.summary import write_report

    check_config(cfg)
    if workers is not None and workers < 1:
        raise ValueError(f"workers (--workers): expected >= 1, got {workers}")
    if scheduler is not None:
        check_scheduler(scheduler)  # before the run folder is made
        probe_scheduler(scheduler)
    rd = RunDir(out, overwrite=overwrite, resume=True, config=cfg)
    points = grid(cfg)
    t0 = time.perf_counter()
    run_cells(rd, plan(cfg), workers=workers, scheduler=scheduler, progress=progress, desc="synthetic SPLADE",
              preload=("transformers", "sentence_transformers"), startup=WORKER_START_SECONDS)
    shutil.rmtree(rd.root / "trainer_tmp", ignore_errors=True)
    write_report(rd, cfg, points, seconds=time.perf_counter() - t0)
    note = collapse_note(rd.root, cfg)
    if note:
        print(note, file=sys.stderr, flush=True)
    if draw is not None:
        try:
            draw(rd.root)
        except Exception as err:  # a figure must never lose the results; say so loudly
            warnings.warn(f"synthetic SPLADE figures failed: {type(err).__name__}: {err}", RuntimeWarning)
    rd.mark_done()
    return rd


def collapse_note(root: Path, cfg: PhaseConfig) -> str:
    """One message on the collapsed cells of the grid saved in run folder ``root`` ('' if none), saying which
    are expected.

    A collapse is a result of the phase diagram, which scales the head on purpose: a collapsed cell whose
    output scale ``h`` or input scale ``e`` is off 1 lies where the diagram looks for collapse (expected);
    one at the backbone's own scale (``e = h = 1``) is not, and is listed as unexpected.
    """
    expected, unexpected = [], []
    for sp in {c.name: c for c in (cell_spec(p["family"], p["mode"], p["s"], p["k"], p["seed"]) for p in grid(cfg))}.values():
        path = cell_file(root, sp.name)
        rec = read_json(path) if path.exists() else {}
        if not rec.get("collapse"):
            continue
        line = f"  {sp.name}: {'; '.join(rec['collapse'])}"
        (unexpected if (sp.e == 1.0 and sp.h == 1.0) or rec.get("failed") else expected).append(line)
    if not expected and not unexpected:
        return ""
    n = len({p["cell"] for p in grid(cfg)})
    out = []
    if expected:
        out.append(f"synthetic SPLADE: {len(expected)} of {n} cells collapsed where the grid scales the input "
                   "embeddings (e) or the MLM head (h) away from the backbone's own scale: expected, these are results "
                   "of the phase diagram (marked C in its figures; docs/synthetic_splade.md), not errors:")
        out += expected
    if unexpected:
        out.append(f"synthetic SPLADE: WARNING: {len(unexpected)} cells collapsed or failed at the backbone's own "
                   "scale (e = h = 1) or with a non-finite loss; not expected:")
        out += unexpected
    return "\n".join(out)


def _inspect_key(cfg: PhaseConfig, family: str, s: float, seed: int) -> dict[str, Any]:
    return {"family": family, "s": s, "ks": list(cfg.ks), "batch": cfg.batch_size, "texts": cfg.inspect_texts,
            "backbone": to_dict(backbone_for(cfg, family)), "corpus": to_dict(cfg.corpus), "seed": seed}
