"""Running the synthetic SPT experiments: plan, execute (locally or on Dask), resume, write the outputs.

A run folder holds ``config.json`` (the resolved :class:`SPTConfig`), ``cells/`` (one JSON per finished
cell, each with a ``.key`` file holding the config it was computed under: a resumed run under another
config raises :class:`initlab.runs.ConfigMismatchError` instead of reusing it), ``resume/`` (per-epoch
checkpoints of running cells), ``ckpt/`` (SPT checkpoints), ``maps/``, ``metrics.json`` (config, summary
and per-seed raw numbers), ``metrics.csv``, ``history.csv``, ``verdicts.json`` (a record: every reader
recomputes the verdicts from the raw numbers and refuses a record that disagrees), ``report.md`` (=
``summary.md``) and the figures (drawn by the caller's ``draw``), then ``DONE``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from initlab.config import to_dict
from initlab.executor import check_scheduler, estimate, probe_scheduler, remaining_cells, run_cells
from initlab.runs import RunDir, atomic_write_json, atomic_write_text, holds_run_folder
from initlab.synthetic.spt.config import SPTConfig
from initlab.synthetic.spt.plan import expand_groups, plan
from initlab.synthetic.spt.report import report_markdown, summarize, verdicts

__all__ = ["run", "partial_report", "expected_seconds", "WORKER_START_SECONDS"]

#: reference seconds a worker process needs to import torch and the SPT cells (measured like the other stages'
#: start-up times, docs/cluster.md)
WORKER_START_SECONDS = 3.0


def _write_outputs(cfg: SPTConfig, rd: RunDir, results: dict[str, Any], prefix: str = "") -> tuple[dict[str, Any], str]:
    summ = summarize(cfg, results)
    vs = verdicts(cfg, summ)
    rd.write_json(f"{prefix}metrics.json", {"config": to_dict(cfg), "summary": summ})
    rd.write_json(f"{prefix}verdicts.json", {k: v.to_dict() for k, v in vs.items()})
    ft = [r for r in results.values() if r.get("kind") == "finetune"]
    rd.write_csv(f"{prefix}metrics.csv", [{k: v for k, v in r.items() if k not in ("history", "loaded", "frozen")} for r in ft])
    rd.write_csv(f"{prefix}history.csv", [{"condition": r["condition"], "seed": r["seed"], "lr": r["lr"], **h}
                                          for r in ft for h in r["history"]])
    return summ, report_markdown(cfg, summ)


@holds_run_folder("out")
def run(
    cfg: SPTConfig, out: str | Path, overwrite: bool = False, progress: bool = True,
    draw: Callable[[Path], list[Path]] | None = None, workers: int | None = None, scheduler: str | None = None,
) -> str:
    """Run (or resume) every cell of ``cfg`` into ``out``; write metrics, verdicts, figures, ``report.md``.

    Args:
        workers: processes running cells in parallel (None: every core of this machine; 1: in this process).
        scheduler: a Dask scheduler address, or ``local:N`` for an in-process cluster (see :mod:`initlab.executor`).
    Returns the markdown report (also ``summary.md``).
    Raises:
        initlab.runs.RunExistsError: ``out`` holds a finished run and ``overwrite`` is False.
        initlab.runs.ConfigMismatchError: ``out`` holds an unfinished run (or a cell) of another config.
        initlab.runs.NonFiniteError: a loss or gradient became NaN/inf (no ``DONE`` is written).
        ValueError: ``workers`` < 1.
    """
    if workers is not None and workers < 1:
        raise ValueError(f"workers (--workers): expected an int >= 1, got {workers}")
    t0 = time.perf_counter()
    if scheduler is not None:
        check_scheduler(scheduler)
        probe_scheduler(scheduler)  # one line, before the run folder is made
    rd = RunDir(out, overwrite=overwrite, resume=True, config=cfg)
    cells = plan(cfg)
    run_cells(rd, cells, workers=workers, scheduler=scheduler, progress=progress, desc="synthetic SPT (epochs)",
              preload=("initlab.synthetic.spt.cells",), startup=WORKER_START_SECONDS)
    results = expand_groups({c.name: rd.load_cell(c.name, key=c.key) for c in cells})
    summ, md = _write_outputs(cfg, rd, results)
    md += f"\nWall time of this invocation: {time.perf_counter() - t0:.0f} s (cells already finished are not redone).\n"
    if draw is not None:  # the figures, drawn from the files just written
        figs = [p for p in draw(rd.root) if p.suffix == ".png"]
        md += "\n" + "\n".join(f"![{p.stem}]({p.name})" for p in figs) + "\n"
    atomic_write_text(rd.root / "report.md", md)
    atomic_write_text(rd.root / "summary.md", md)
    rd.mark_done()
    return md


def expected_seconds(cfg: SPTConfig, out: str | Path | None, workers: int, speed: float = 1.0) -> tuple[float, float]:
    """(expected, at most) wall seconds of the cells of ``cfg`` not yet saved in ``out`` (None: all), from the
    cost model (:mod:`initlab.synthetic.spt.plan`) at ``speed`` (:func:`initlab.executor.measure_speed`), with the
    workers' start-up (:data:`WORKER_START_SECONDS`). Nothing is created or checked (``initlab reproduce`` calls it
    before the run)."""
    cells = plan(cfg) if out is None else remaining_cells(out, plan(cfg))
    return estimate(cells, workers, speed=speed, startup=WORKER_START_SECONDS)


def partial_report(cfg: SPTConfig, out: str | Path) -> str:
    """The report of an unfinished run from the cells finished so far (``report_partial.md`` and
    ``partial/metrics.json``; no ``DONE``). Claims whose conditions are missing read *not run*; the report
    names the missing cells.

    Raises:
        initlab.runs.ConfigMismatchError: ``out`` holds a run of another config.
    """
    rd = RunDir(out, resume=True, config=cfg)
    cells = plan(cfg)
    done = {c.name: rd.load_cell(c.name, key=c.key) for c in cells if rd.has_cell(c.name, key=c.key)}
    missing = [c.name for c in cells if c.name not in done]
    results = expand_groups(done)
    (rd.root / "partial").mkdir(exist_ok=True)
    _, md = _write_outputs(cfg, rd, results, prefix="partial/")
    atomic_write_json(rd.root / "partial" / "missing.json", missing)
    md = f"**Partial report: {len(results)} of {len(cells)} cells finished; missing: {', '.join(missing) or 'none'}.**\n\n" + md
    atomic_write_text(rd.root / "report_partial.md", md)
    return md
