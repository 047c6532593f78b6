"""Running the synthetic SPT experiments: the plan of cells, resume under config keys, the outputs.

A run folder holds ``config.json`` (the resolved :class:`SPTConfig`), ``cells/`` (one JSON per finished
cell, each with a ``.key`` file holding the config it was computed under: a resumed run under another
config raises :class:`initlab.runs.ConfigMismatchError` instead of reusing it), ``ckpt/`` (SPT
checkpoints), ``maps/``, ``metrics.json``, ``metrics.csv``, ``history.csv``, ``verdicts.json``,
``report.md`` (= ``summary.md``) and figures (drawn by the caller's ``draw``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import torch

from initlab.config import to_dict
from initlab.runs import NonFiniteError, RunDir, atomic_write_json, atomic_write_text, torch_threads
from initlab.synthetic.spt.cells import finetune_condition, init_gradients, pretrain_source
from initlab.synthetic.spt.config import SPTConfig, condition_names, condition_spec
from initlab.synthetic.spt.report import report_markdown, summarize

__all__ = ["plan", "run", "summarize", "partial_report"]


# claim order: the cells a reader needs first run first (a run stopped early has the main rows)
_PRIORITY = ["scratch", "spt", "frozen_attn", "hybrid_qk", "hybrid_qkvo", "hybrid_ffn", "spt_e10", "spt_e1", "spt_e50",
             "hybrid_qk_emb", "hybrid_qk_ln", "hybrid_qk_emb_ln", "attn_scratch", "attn_spt", "attn_qk",
             "cross_count", "cross_iid", "depth2_scratch", "depth2_spt", "depth4_scratch", "depth4_spt"]


def _spt_cell(src: str, variant: str, depth: int) -> str:
    return f"spt_{src}_{variant}_d{depth}"


def plan(cfg: SPTConfig) -> list[tuple[str, dict[str, Any]]]:
    """Cells in priority order (init gradients, then the fine-tuning conditions in claim order, each SPT
    run placed just before the first condition that needs it); ``c["needs"]`` names the SPT cell a
    fine-tuning cell loads from."""
    spec = condition_spec(cfg)
    names = sorted(condition_names(cfg), key=lambda n: _PRIORITY.index(n) if n in _PRIORITY else len(_PRIORITY))
    snaps: dict[tuple[str, str, int], set[int]] = {}
    for n in names:
        if spec[n]["spt"] is not None:
            src, e = spec[n]["spt"]
            ss = snaps.setdefault((src, spec[n]["variant"], spec[n]["depth"]), set())
            if e != "rule":
                ss.add(int(e))
    cells: list[tuple[str, dict[str, Any]]] = [(f"init_grad__seed{s}", dict(kind="init_grad", seed=s)) for s in cfg.seeds]
    placed: set[str] = set()
    for n in names:
        needs = None
        if spec[n]["spt"] is not None:
            k = (spec[n]["spt"][0], spec[n]["variant"], spec[n]["depth"])
            needs = _spt_cell(*k)
            if needs not in placed:
                cells.append((needs, dict(kind="spt", source=k[0], variant=k[1], depth=k[2], snapshots=sorted(snaps[k]))))
                placed.add(needs)
        cells.append((f"ft_{n}", dict(kind="finetune", condition=n, needs=needs)))
    return cells


def cell_key(cfg: SPTConfig, c: dict[str, Any]) -> dict[str, Any]:
    """What a cell's result depends on: the whole training config (but not which conditions or which
    seed's maps are requested) and the cell itself."""
    d = to_dict(cfg)
    d.pop("conditions", None)
    d.pop("map_seed", None)
    d.pop("thresholds", None)
    return {"config": d, "cell": {k: v for k, v in c.items() if k != "needs"}}


def _run_cell(cfg: SPTConfig, rd: RunDir, name: str, c: dict[str, Any]) -> None:
    if c["kind"] == "init_grad":
        res: Any = init_gradients(cfg, c["seed"])
    elif c["kind"] == "spt":
        res = pretrain_source(cfg, c["source"], c["variant"], c["depth"], c["snapshots"], rd)
    else:
        res = {"kind": "finetune", "condition": c["condition"], "seeds": finetune_condition(cfg, c["condition"], rd)}
    rd.save_cell(name, res, key=cell_key(cfg, c))


def _worker(args: tuple[dict[str, Any], str, str, dict[str, Any], int]) -> NonFiniteError | None:
    """Worker process: one cell. A NaN/inf or divergence error comes back as the error object (it pickles), to
    be raised in the parent."""
    from initlab.config import from_dict

    cfg_dict, out, name, c, threads = args
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    cfg = from_dict(SPTConfig, cfg_dict)
    try:
        _run_cell(cfg, RunDir(out, resume=True), name, c)
    except NonFiniteError as err:
        return err
    return None


def _run_cells(cfg: SPTConfig, rd: RunDir, todo: list[tuple[str, dict[str, Any]]], workers: int, threads: int, bar) -> None:
    """Run ``todo`` in order; with ``workers > 1`` in a process pool, a fine-tuning cell starting only
    once the SPT cell it needs has finished."""
    if workers <= 1 or len(todo) <= 1:
        with torch_threads(threads):
            torch.use_deterministic_algorithms(True, warn_only=True)
            for name, c in todo:
                bar.set_postfix_str(name)
                _run_cell(cfg, rd, name, c)
                bar.update(1)
        return
    import multiprocessing as mp

    pending = list(todo)
    waiting = {name for name, _ in todo}
    with mp.get_context("spawn").Pool(min(workers, len(todo))) as pool:
        running: dict[str, Any] = {}
        while pending or running:
            for name, c in list(pending):
                if len(running) >= workers:
                    break
                if c.get("needs") in waiting:
                    continue  # its SPT checkpoint is not written yet
                running[name] = pool.apply_async(_worker, ((to_dict(cfg), str(rd.root), name, c, threads),))
                pending.remove((name, c))
            done = [n for n, job in running.items() if job.ready()]
            if not done:
                time.sleep(0.5)
            for n in done:
                err = running.pop(n).get()  # re-raises a worker's other errors
                if err is not None:
                    pool.terminate()
                    raise err
                waiting.discard(n)
                bar.set_postfix_str(n)
                bar.update(1)


def run(
    cfg: SPTConfig, out: str | Path, overwrite: bool = False, progress: bool = True,
    draw: Callable[[Path], list[Path]] | None = None, workers: int = 1, threads: int = 1,
) -> str:
    """Run (or resume) every cell of ``cfg`` into ``out``; write metrics, verdicts, figures, ``report.md``.

    Args:
        workers: processes running cells in parallel (1 = in this process); SPT cells run before the
            fine-tuning cells that load their checkpoints.
        threads: torch intra-op threads per process.
    Returns the markdown report (also ``summary.md``).
    Raises:
        initlab.runs.RunExistsError: ``out`` holds a finished run and ``overwrite`` is False.
        initlab.runs.ConfigMismatchError: ``out`` holds an unfinished run of another config.
        initlab.runs.NonFiniteError: a loss or gradient became NaN/inf (no ``DONE`` is written).
        ValueError: ``workers`` or ``threads`` < 1.
    """
    from tqdm.auto import tqdm

    for name, value in (("workers (--workers)", workers), ("threads (--threads)", threads)):
        if value < 1:
            raise ValueError(f"{name}: expected an integer >= 1, got {value}")
    t0 = time.perf_counter()
    rd = RunDir(out, overwrite=overwrite, resume=True, config=cfg)
    cells = plan(cfg)
    bar = tqdm(total=len(cells), desc="synthetic SPT cells", unit="cell", disable=not progress)
    bar.update(sum(rd.has_cell(n, key=cell_key(cfg, c)) for n, c in cells))
    _run_cells(cfg, rd, [(n, c) for n, c in cells if not rd.has_cell(n, key=cell_key(cfg, c))], workers, threads, bar)
    bar.close()
    results = {n: rd.load_cell(n, key=cell_key(cfg, c)) for n, c in cells}
    summ = summarize(cfg, results)
    rd.write_json("metrics.json", {"config": to_dict(cfg), "summary": summ, "cells": results})
    rd.write_json("verdicts.json", summ["verdicts"])
    ft = [s for r in results.values() if r.get("kind") == "finetune" for s in r["seeds"]]
    rd.write_csv("metrics.csv", [{k: v for k, v in s.items() if k not in ("history", "loaded", "frozen")} for s in ft])
    rd.write_csv("summary.csv", summ["conditions"])
    rd.write_csv("history.csv", [{"condition": s["condition"], "seed": s["seed"], **h} for s in ft for h in s["history"]])
    md = report_markdown(cfg, summ, time.perf_counter() - t0)
    if draw is not None:  # the figures, drawn from the files just written
        figs = draw(rd.root)
        md += "\nFigures: " + ", ".join(f"`{p.name}`" for p in figs if p.suffix == ".png") + "\n"
    atomic_write_text(rd.root / "report.md", md)
    atomic_write_text(rd.root / "summary.md", md)
    rd.mark_done()
    return md


def partial_report(cfg: SPTConfig, out: str | Path) -> str:
    """The report of an unfinished run from the cells finished so far (written to
    ``report_partial.md``, with ``partial/metrics.json`` for the figure script; no ``DONE``). Claims whose conditions are missing are
    left out of the verdict table, and the report says which cells are missing.

    Raises:
        initlab.runs.ConfigMismatchError: ``out`` holds a run of another config.
    """
    rd = RunDir(out, resume=True, config=cfg)
    cells = plan(cfg)
    results = {n: rd.load_cell(n, key=cell_key(cfg, c)) for n, c in cells if rd.has_cell(n, key=cell_key(cfg, c))}
    missing = [n for n, _ in cells if n not in results]
    summ = summarize(cfg, results)
    atomic_write_json(rd.root / "partial" / "metrics.json", {"config": to_dict(cfg), "summary": summ, "cells": results, "missing": missing})
    md = report_markdown(cfg, summ)
    md = (f"**Partial report: {len(results)} of {len(cells)} cells finished; missing: {', '.join(missing) or 'none'}.**\n\n") + md
    atomic_write_text(rd.root / "report_partial.md", md)
    return md
