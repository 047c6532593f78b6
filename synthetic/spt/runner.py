"""The run of a synthetic SPT experiment: its cells, what each depends on, their cost, and how they run.

:func:`plan` lists every :class:`initlab.executor.Cell` of a config in claim order
(:data:`initlab.synthetic.spt.arms.CLAIM_ORDER`: the cells a reader needs first run first, so a run stopped
early has the main rows), each SPT run before the fine-tuning cells that load its checkpoints. :func:`cell_key` is what a saved cell depends on (a resumed run under another config
is refused cell by cell). :func:`run` executes them (locally or on Dask), resumes, and writes the outputs.

A run folder holds ``config.json`` (the resolved :class:`SPTConfig`), ``cells/`` (one JSON per finished
cell, each with a ``.key`` file holding the config it was computed under: a resumed run under another
config raises :class:`initlab.runs.ConfigMismatchError` instead of reusing it), ``resume/`` (per-epoch
checkpoints of running cells), ``ckpt/`` (SPT checkpoints), ``maps/``, ``metrics.json`` (config, summary
and per-seed raw numbers), ``metrics.csv``, ``history.csv``, ``verdicts.json`` (a record: every reader
recomputes the verdicts from the raw numbers and refuses a record that disagrees), ``report.md`` (=
``summary.md``) and the figures (drawn by the caller's ``draw``), then ``DONE``.

**Cost model.** A cell's cost is ``units x unit_seconds``: units are epochs, ``unit_seconds`` the seconds of one
epoch of the cell's model shape on the reference machine of :mod:`initlab.executor` (one undisturbed core), from
:data:`REFERENCE_EPOCH_SECONDS`; the executor multiplies them by this machine's measured speed factor
(:func:`initlab.executor.measure_speed`). The table is measured by ``python benchmarks/bench_cost_model.py
--stages spt`` (:func:`measure_epoch_seconds` divided by the speed factor measured beside it). Expected epochs per
cell come from :data:`EXPECTED_EPOCHS` (the mean epochs of each kind of cell in the exploratory run, see
docs/synthetic_spt.md); the upper bound from the budgets (``spt_max_epochs``, ``finetune_max_epochs``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import torch

from initlab.config import to_dict
from initlab.executor import Cell, check_scheduler, estimate, probe_scheduler, remaining_cells, run_cells
from initlab.runs import RunDir, atomic_write_json, atomic_write_text, holds_run_folder
from initlab.synthetic.spt import arms
from initlab.synthetic.spt.cells import (finetune_cell, finetune_group_cell, ft_cell_name, group_cell_name, init_grad_cell,
                                         spt_cell, spt_cell_name, spt_group_cell)
from initlab.synthetic.spt.config import SPTConfig, condition_names, condition_seeds, condition_spec, label_lr
from initlab.synthetic.spt.report import report_markdown, summarize, verdicts

__all__ = ["EXPECTED_EPOCHS", "REFERENCE_EPOCH_SECONDS", "plan", "cell_key", "NOT_IN_KEY", "measure_epoch_seconds",
           "reference_epoch_seconds", "expected_epochs", "grouped", "expand_groups", "run", "partial_report",
           "expected_seconds", "WORKER_START_SECONDS"]

#: expected epochs per kind of cell, for the up-front estimate and the progress bar (an overrun only makes the bar's
#: total grow): SPT runs per source, label-only and SPT-initialised fine-tuning. Measured means of the exploratory
#: run, except ``spt_nopos`` (a source the exploratory run did not have): the mean stop epoch of SPT without position
#: codes in the saved ``causal`` run, 42 (37-44 over its 4 seeds; docs/results/synthetic_spt_causal, ``spt_runs``),
#: the recipe ``initlab reproduce``'s default repeats (tests/synthetic/spt/test_plan.py checks every entry that
#: recipe uses against that run)
EXPECTED_EPOCHS: dict[str, float] = {"spt_local": 115.0, "spt_count": 115.0, "spt_iid": 30.0, "spt_nopos": 42.0,
                                     "ft_label_only": 45.0,
                                     "ft_spt": 85.0}

#: fields of the config a cell's result does not depend on (which conditions or seeds are run, the
#: verdict thresholds, which seed's maps are kept; a cell's own seed and learning rate are in its args)
#: seconds of one epoch on the reference machine, per (kind, variant, depth) at the base sizes (n_train 1024, n_val
#: 512, batch 64, T 100, d 32, d_ff 64); PROVISIONAL until bench_cost_model.py --stages spt measures them
REFERENCE_EPOCH_SECONDS: dict[tuple[str, str, int], float] = {
    ("finetune", "full", 1): 0.42, ("finetune", "attn_only", 1): 0.28, ("finetune", "full", 2): 0.82,
    ("finetune", "full", 4): 1.45, ("spt", "full", 1): 0.43, ("spt", "attn_only", 1): 0.33, ("spt", "full", 2): 0.84,
    ("spt", "full", 4): 1.31}

#: the config fields left out of a cell's key (:func:`cell_key`): they choose which cells run or how results are
#: read, not what one cell computes
NOT_IN_KEY = ("seeds", "conditions", "seed_counts", "label_lr", "lr_grid", "lr_sweep", "map_seed", "thresholds", "depths",
              "spt_sweep_epochs")


def cell_key(cfg: SPTConfig, args: dict[str, Any]) -> dict[str, Any]:
    """What a cell's result depends on: the training config (not which conditions, seeds or thresholds are
    requested) and the cell's own arguments (``args`` without the ``config`` that travels with them)."""
    d = {k: v for k, v in to_dict(cfg).items() if k not in NOT_IN_KEY}
    return {"config": d, "cell": {k: v for k, v in args.items() if k != "config"}}


def _cell(cfg: SPTConfig, name: str, fn: Any, args: dict[str, Any], **kw: Any) -> Cell:
    """A cell whose arguments carry the run's config itself (``args["config"]``, the frozen :class:`SPTConfig`: it
    travels to a worker pickled, never as a dict rebuilt per cell), keyed by :func:`cell_key`."""
    return Cell(name, fn, {**args, "config": cfg}, cell_key(cfg, args), **kw)


def expected_epochs(cfg: SPTConfig, kind: str, condition: str | None = None, source: str | None = None) -> tuple[float, float]:
    """(expected, at most) epochs of a cell: ``kind`` ``"spt"`` (with ``source``) or ``"finetune"`` (with ``condition``)."""
    if kind == "spt":
        return min(EXPECTED_EPOCHS.get(f"spt_{source}", 110.0), cfg.spt_max_epochs), float(cfg.spt_max_epochs)
    spec = condition_spec(cfg)[condition]
    if spec["budget"] == "matched":
        e_spt, m_spt = expected_epochs(cfg, "spt", source="local")
        e_ft, m_ft = expected_epochs(cfg, "finetune", "spt")
        return e_spt + e_ft, m_spt + m_ft
    e = EXPECTED_EPOCHS["ft_label_only" if spec["spt"] is None else "ft_spt"]
    cap = float(cfg.finetune_max_epochs)
    return (min(e, cap), cap) if cfg.finetune_patience > 0 else (cap, cap)


_SPEED: dict[tuple, float] = {}


def measure_epoch_seconds(cfg: SPTConfig, kind: str, variant: str, depth: int, steps: int = 3) -> float:
    """Seconds of one epoch of ``kind`` (``"spt"`` or ``"finetune"``) for a model shape, measured here and now:
    ``steps`` timed training steps (after one warm-up step) scaled to an epoch, plus one validation pass;
    one torch thread, as the workers run. Cached per process."""
    key = (kind, variant, depth, cfg.d_model, cfg.d_ff, cfg.n_heads, cfg.batch_size, cfg.n_train, cfg.n_val, cfg.task.T)
    if key in _SPEED:
        return _SPEED[key]
    from initlab.runs import torch_threads
    from initlab.synthetic.spt.cells import fresh_model, seed_data
    from initlab.synthetic.spt.training import accuracy, masked_loss
    import torch.nn.functional as F

    with torch_threads(1):
        model = fresh_model(cfg, depth, variant, 0)
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
        x = torch.randint(2, 2 + cfg.task.n_content, (cfg.batch_size, cfg.task.T))
        y = torch.randint(0, 2, (cfg.batch_size,))
        masked = torch.rand(x.shape) < cfg.mask_rate
        masked[:, 0] = True

        def step() -> None:
            loss = masked_loss(model.reconstruct(x), x, masked) if kind == "spt" else F.cross_entropy(model.classify(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

        step()
        t = time.perf_counter()
        for _ in range(steps):
            step()
        per_step = (time.perf_counter() - t) / steps
        xv = torch.randint(2, 2 + cfg.task.n_content, (cfg.n_val, cfg.task.T))
        t = time.perf_counter()
        if kind == "spt":
            with torch.no_grad():
                model.reconstruct(xv)
        else:
            accuracy(model, xv, torch.zeros(cfg.n_val, dtype=torch.long))
        val = time.perf_counter() - t
    _SPEED[key] = per_step * -(-cfg.n_train // cfg.batch_size) + val
    return _SPEED[key]


def _sort_key(cond: str) -> int:
    order = arms.CLAIM_ORDER  # read at call time: the arms table's claim order
    return order.index(cond) if cond in order else len(order)


def reference_epoch_seconds(cfg: SPTConfig, kind: str, variant: str, depth: int) -> float:
    """:data:`REFERENCE_EPOCH_SECONDS` of a shape, scaled to ``cfg``'s training-set size (steps per epoch); a
    depth not in the table is interpolated linearly in depth."""
    table = {k[2]: v for k, v in REFERENCE_EPOCH_SECONDS.items() if k[:2] == (kind, variant)} or \
        {k[2]: v for k, v in REFERENCE_EPOCH_SECONDS.items() if k[:2] == (kind, "full")}
    if depth in table:
        base = table[depth]
    else:
        d1, dmax = min(table), max(table)
        base = table[d1] + (table[dmax] - table[d1]) * (depth - d1) / max(dmax - d1, 1)
    return base * (cfg.n_train / 1024)


def plan(cfg: SPTConfig) -> list[Cell]:
    """Every cell of ``cfg`` in claim order (module docstring), with the cost model's units and seconds.

    Raises:
        ValueError: ``scratch_matched`` runs on a seed where ``spt`` does not (it needs that seed's SPT and
            fine-tuning step counts), or a learning-rate selection (``lr_sweep``) includes an SPT-initialised arm.
    """
    spec = condition_spec(cfg)
    names = sorted(condition_names(cfg), key=_sort_key)
    if "scratch_matched" in names and not set(condition_seeds(cfg, "scratch_matched")) <= set(
            condition_seeds(cfg, "spt") if "spt" in names else ()):
        raise ValueError("SPTConfig.seed_counts: scratch_matched needs the spt condition on each of its seeds")
    if cfg.lr_sweep and "scratch_matched" in names:
        raise ValueError("SPTConfig.conditions: a learning-rate selection (lr_sweep) cannot hold scratch_matched (its "
                         "budget is that of one spt fine-tuning)")

    def sec(kind: str, variant: str, depth: int) -> float:
        return reference_epoch_seconds(cfg, kind, variant, depth)

    # every SPT cell keeps the snapshots of cfg.spt_sweep_epochs, whichever spt_e<E> conditions the run has: a
    # run of fewer conditions (the default preset) then has the same SPT cells, keys included, as the full run
    snapshots = sorted(int(e) for e in cfg.spt_sweep_epochs)
    cells: list[Cell] = []
    for s in cfg.seeds:
        a = {"kind": "init_grad", "seed": s}
        cells.append(_cell(cfg, f"init_grad__seed{s}", init_grad_cell, a, units=1.0, max_units=1.0, unit_seconds=1.0))
    placed: set[str] = set()
    for n in names:
        sp = spec[n]
        lrs = list(cfg.lr_sweep) if cfg.lr_sweep else [None]
        for s in condition_seeds(cfg, n):
            needs: list[str] = []
            if sp["spt"] is not None:
                src = sp["spt"][0]
                sname = spt_cell_name(src, sp["variant"], sp["depth"], s)
                needs.append(sname)
                if sname not in placed:
                    a = {"kind": "spt", "source": src, "variant": sp["variant"], "depth": sp["depth"], "seed": s,
                         "snapshots": snapshots}
                    exp, cap = expected_epochs(cfg, "spt", source=src)
                    cap = max(cap, max(a["snapshots"], default=0))
                    cells.append(_cell(cfg, sname, spt_cell, a, units=exp, max_units=cap,
                                       unit_seconds=sec("spt", sp["variant"], sp["depth"])))
                    placed.add(sname)
            receives: dict[str, str] = {}
            if sp["budget"] == "matched":  # its budget is the seed's SPT run and spt fine-tuning: their results
                receives = {"spt_run": spt_cell_name("local", "full", 1, s), "spt_finetune": ft_cell_name("spt", s)}
                needs += list(receives.values())
            for lr in lrs:
                a = {"kind": "finetune", "condition": n, "seed": s, "lr": label_lr(cfg, n) if lr is None else lr}
                if lr is not None:
                    a["lr_sweep"] = True
                exp, cap = expected_epochs(cfg, "finetune", n)
                cells.append(_cell(cfg, ft_cell_name(n, s, lr), finetune_cell, a, needs=tuple(needs), units=exp,
                                   max_units=cap, unit_seconds=sec("finetune", sp["variant"], sp["depth"]),
                                   receives=receives))
    return grouped(cfg, cells) if cfg.engine == "batched" else cells


def grouped(cfg: SPTConfig, cells: list[Cell]) -> list[Cell]:
    """The batched engine's cells from the one-seed plan ``cells``: the SPT cells of one (source, variant, depth) form
    one group cell (:func:`initlab.synthetic.spt.cells.spt_group_cell`), the fine-tuning cells of one condition
    another (every rate of it in a learning-rate selection; :func:`initlab.synthetic.spt.cells.finetune_group_cell`);
    the gradient cells stay one per seed. A group sits where its first member was, needs the groups its members
    needed, and its units are its members' sum (its progress advances once per model and epoch)."""
    members: dict[tuple, list[Cell]] = {}
    for c in cells:
        a = c.args
        key = (("spt", a["source"], a["variant"], a["depth"]) if a["kind"] == "spt"
               else ("finetune", a["condition"]) if a["kind"] == "finetune" else ("one", c.name))
        members.setdefault(key, []).append(c)
    name_of: dict[str, str] = {}
    for key, group in members.items():
        seeds = list(dict.fromkeys(int(c.args["seed"]) for c in group))
        if key[0] == "spt":
            prefix = f"spt_{key[1]}_{key[2]}_d{key[3]}"
        elif key[0] == "finetune":
            prefix = f"ft_{key[1]}" + ("__sweep" if any("lr_sweep" in c.args for c in group) else "")
        for c in group:
            name_of[c.name] = c.name if key[0] == "one" else group_cell_name(prefix, seeds)
    out: list[Cell] = []
    for key, group in members.items():
        if key[0] == "one":
            out.append(group[0])
            continue
        first = group[0]
        name = name_of[first.name]
        needs = tuple(dict.fromkeys(name_of[n] for c in group for n in c.needs if name_of[n] != name))
        units = sum(c.units for c in group)
        max_units = sum(c.max_units if c.max_units is not None else c.units for c in group)
        if key[0] == "spt":
            a = {"kind": "spt_group", "source": key[1], "variant": key[2], "depth": key[3],
                 "seeds": [int(c.args["seed"]) for c in group], "snapshots": first.args["snapshots"]}
            fn = spt_group_cell
        else:
            a = {"kind": "finetune_group", "condition": key[1], "seeds": [int(c.args["seed"]) for c in group],
                 "lrs": [float(c.args["lr"]) for c in group], "lr_sweep": any("lr_sweep" in c.args for c in group),
                 "matched_from": list(needs) if condition_spec(cfg)[key[1]]["budget"] == "matched" else []}
            fn = finetune_group_cell
        out.append(_cell(cfg, name, fn, a, needs=needs, units=units, max_units=max_units, unit_seconds=first.unit_seconds,
                         receives={g: g for g in a.get("matched_from", ())}))
    return out


def expand_groups(results: dict[str, Any]) -> dict[str, Any]:
    """``{cell name: result}`` with every group cell's result (``kind`` ``"group"``) replaced by its members' results,
    each under its one-seed cell name: what the report reads, whichever engine ran."""
    out: dict[str, Any] = {}
    for name, r in results.items():
        if isinstance(r, dict) and r.get("kind") == "group":
            out.update(r["cells"])
        else:
            out[name] = r
    return out


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
    cost model (module docstring) at ``speed`` (:func:`initlab.executor.measure_speed`), with the
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
