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

Role of this module: the sweep (:func:`run_phase`: backbones, cells in worker processes, resumable cells,
report, figures). The grid and its config are :mod:`initlab.synthetic.splade.phase.config`, one cell
:mod:`initlab.synthetic.splade.phase.cell`.
"""

from __future__ import annotations

import os
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable

import torch

from initlab.config import to_dict
from initlab.runs import RunDir
from initlab.synthetic.splade.phase.cell import inspect_cell, pretrain_family, run_phase_cell
from initlab.synthetic.splade.phase.config import (PRESETS, CellSpec, PhaseConfig, backbone_for, cell_key, cell_spec,
                                                   check_config, grid)

#: ``PRESETS`` is re-exported: ``initlab.synthetic.splade.phase.runner.PRESETS`` is the documented name of the presets.
__all__ = ["PRESETS", "run_phase", "inspect_name"]


# ------------------------------------------------------------------------------------------------
# worker processes
# ------------------------------------------------------------------------------------------------


class _InlinePool:
    """``workers = 1``: run each job at submit time in this process (no process start-up, same results)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def submit(self, fn, *args):
        from concurrent.futures import Future

        fut: Future = Future()
        try:
            fut.set_result(fn(*args))
        except Exception as err:  # re-raised by fut.result(), as in a process pool
            fut.set_exception(err)
        return fut


def _pool(workers: int):
    if workers == 1:
        return _InlinePool()
    import multiprocessing

    return ProcessPoolExecutor(max_workers=workers, initializer=_worker_init, mp_context=multiprocessing.get_context("spawn"))


def _worker_init() -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ["TQDM_DISABLE"] = "1"  # the model-card and weight-loading bars of every cell
    torch.set_num_threads(1)
    import transformers

    transformers.logging.disable_progress_bar()


# ------------------------------------------------------------------------------------------------
# the sweep
# ------------------------------------------------------------------------------------------------
def run_phase(out: Path, cfg: PhaseConfig, overwrite: bool = False, progress: bool = True,
              draw: Callable[[Path], Any] | None = None, workers: int = 2) -> RunDir:
    """Run (or resume) the phase diagram of ``cfg`` into ``out``; finished cells are not redone.

    Backbones are pretrained once per (family, seed); each distinct cell is trained once, in
    ``workers`` processes (results do not depend on it). Then :func:`initlab.synthetic.splade.phase.summary.write_report` writes the
    tables, ``draw(out)`` the figures (from the saved files), and ``DONE`` is written.

    Raises:
        ValueError: a bad grid (unknown family or mode, a scale that is not a power of two), workers < 1.
        initlab.runs.RunExistsError: ``out`` holds a finished run and ``overwrite`` is False.
        initlab.runs.ConfigMismatchError: ``out`` holds an unfinished run (or a cell) of another config.
    """
    from tqdm.auto import tqdm

    from initlab.synthetic.splade.phase.summary import write_report

    check_config(cfg)
    if workers < 1:
        raise ValueError(f"workers: expected >= 1, got {workers}")
    rd = RunDir(out, overwrite=overwrite, resume=True, config=cfg)
    points = grid(cfg)
    specs: dict[str, CellSpec] = {}
    for p in points:
        specs.setdefault(p["cell"], cell_spec(p["family"], p["mode"], p["s"], p["k"], p["seed"]))
    todo = [sp for name, sp in specs.items() if not rd.has_cell(name, key=cell_key(cfg, sp))]
    inspect_todo = [(f, s, seed) for f in cfg.families for s in cfg.head_scales for seed in cfg.seeds
                    if not rd.has_cell(inspect_name(f, s, seed), key=_inspect_key(cfg, f, s, seed))]
    bb = {(f, seed): str(rd.root / "backbone" / f"{f}_seed={seed}") for f in cfg.families for seed in cfg.seeds}
    t0 = time.perf_counter()
    with _pool(workers) as pool:
        futs = [pool.submit(pretrain_family, folder, f, cfg, seed) for (f, seed), folder in bb.items()]
        for fut in tqdm(futs, desc="MLM pretraining (families)", disable=not progress):
            fut.result()
        jobs = {pool.submit(run_phase_cell, bb[(sp.family, sp.seed)], cfg, sp, str(rd.root / "trainer_tmp" / sp.name)): sp
                for sp in todo}
        jobs.update({pool.submit(inspect_cell, bb[(f, seed)], cfg, f, s, seed): (f, s, seed) for f, s, seed in inspect_todo})
        bar = tqdm(total=len(jobs), desc="synthetic SPLADE cells", disable=not progress)
        from concurrent.futures import as_completed

        for fut in as_completed(jobs):
            what = jobs[fut]
            res = fut.result()
            if isinstance(what, CellSpec):
                rd.save_cell(what.name, res, key=cell_key(cfg, what))
                if res["collapse"]:
                    warnings.warn(f"SPLADE cell {what.name}: {'; '.join(res['collapse'])}", RuntimeWarning, stacklevel=2)
            else:
                rd.save_cell(inspect_name(*what), res, key=_inspect_key(cfg, *what))
            bar.update(1)
        bar.close()
    import shutil

    shutil.rmtree(rd.root / "trainer_tmp", ignore_errors=True)
    write_report(rd, cfg, points, seconds=time.perf_counter() - t0)
    if draw is not None:
        try:
            draw(rd.root)
        except Exception as err:  # a figure must never lose the results; say so loudly
            warnings.warn(f"synthetic SPLADE figures failed: {type(err).__name__}: {err}", RuntimeWarning)
    rd.mark_done()
    return rd


def inspect_name(family: str, s: float, seed: int) -> str:
    """The cell name of the ``mlmhead inspect`` report of one (family, s, seed) backbone."""
    return f"inspect_{family}_s={s:g}_seed={seed}"


def _inspect_key(cfg: PhaseConfig, family: str, s: float, seed: int) -> dict[str, Any]:
    return {"family": family, "s": s, "ks": list(cfg.ks), "batch": cfg.batch_size, "texts": cfg.inspect_texts,
            "backbone": to_dict(backbone_for(cfg, family)), "corpus": to_dict(cfg.corpus), "seed": seed}
