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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from initlab.runs import RunDir, check_same_record

from .config import K_VALUES, BACKBONES, SpladeTrainConfig, cell_config, cell_name

__all__ = ["resolve_eval_sets", "run_cell", "run_sweep", "eval_checkpoint"]


def resolve_eval_sets(cfg: SpladeTrainConfig, extra: Sequence[str] = ()) -> list[str]:
    """Names of the evaluation sets of ``cfg`` (see :func:`.data.load_eval_set`)."""
    from .data import BEIR13, NANOBEIR_NAMES

    names = list(cfg.eval_sets) + list(extra)
    if cfg.beir:
        names += list(BEIR13)
    if cfg.nanobeir:
        names += [f"nano:{n}" for n in NANOBEIR_NAMES]
    return list(dict.fromkeys(names))


def eval_checkpoint(model_dir: str | Path, set_names: Sequence[str], out: str | Path, *, data_root: str = "",
                    top_k: int = 1000, batch_size: int = 128, overwrite: bool = False, trust_remote_code: bool = False,
                    meta: dict | None = None, approx: bool = False) -> dict[str, Any]:
    """Evaluate the safetensors checkpoint ``model_dir`` on ``set_names``; write ``results.json|csv`` into ``out``."""
    from .data import load_eval_set
    from .evaluate import evaluate_set, summarise
    from .modeling import load_splade

    model = load_splade(model_dir, trust_remote_code=trust_remote_code)  # fails before anything is written
    # Cached per-set cells are only reused for the same checkpoint and settings: the key names the
    # checkpoint (resolved path, size and mtime of its weight files), top-k, data root and backend.
    mdir = Path(model_dir).resolve()
    key = {"model": str(mdir), "top_k": top_k, "data_root": str(data_root or ""), "approx": bool(approx),
           "weights": {p.name: [p.stat().st_size, p.stat().st_mtime_ns] for p in sorted(mdir.rglob("*.safetensors"))}}
    if not overwrite:
        check_same_record(Path(out) / "eval_key.json", key, what="evaluation (checkpoint or settings)")
    run = RunDir(out, overwrite=overwrite)
    run.write_json("eval_key.json", key)
    rows = []
    from tqdm.auto import tqdm

    for name in tqdm(list(set_names), desc="eval sets"):
        if run.has_cell(f"eval_{name}"):
            rows.append(run.load_cell(f"eval_{name}"))
            continue
        ds = load_eval_set(name, data_root=data_root or None)
        row = evaluate_set(model, ds, top_k=top_k, batch_size=batch_size, approx=approx)
        run.save_cell(f"eval_{name}", row)
        rows.append(row)
    summary = summarise(rows)
    res = {"model": str(model_dir), **(meta or {}), "summary": summary, "sets": rows}
    run.write_json("results.json", res)
    run.write_csv("results.csv", [{k: v for k, v in r.items() if k != "reasons"} for r in rows])
    return res


def run_cell(cfg: SpladeTrainConfig, out: str | Path, *, overwrite: bool = False, progress: bool = True) -> dict[str, Any]:
    """Train ``cfg`` into ``out`` then evaluate it; returns the flat cell result (also in ``out/results.json``)."""
    import os

    from .train import detect_collapse, train_splade

    out = Path(out)
    tr = train_splade(cfg, out, overwrite=overwrite, progress=progress)
    if int(os.environ.get("RANK", "0")) != 0:
        return {}
    sets = resolve_eval_sets(cfg)
    res = eval_checkpoint(out / "model", sets, out, data_root=cfg.data_root, top_k=cfg.top_k,
                          batch_size=cfg.eval_batch_size, trust_remote_code=cfg.trust_remote_code,
                          meta={"backbone": cfg.backbone, "k": cfg.k})
    losses = []
    if (out / "loss_curve.csv").exists():
        import csv

        with open(out / "loss_curve.csv") as fh:
            losses = [float(r["loss"]) for r in csv.DictReader(fh)]
    train_verdict = detect_collapse(losses=losses, q_active=None, d_active=None, vocab_size=1)
    s = res["summary"]
    collapsed = bool(s["collapsed"] or train_verdict["collapsed"])
    flat = {"cell": cell_name(cfg), "backbone": cfg.backbone if not cfg.tiny_model else f"tiny-{cfg.tiny_model}", "k": cfg.k, "steps": tr.get("steps"),
            "final_loss": tr.get("final_loss"), **{k: v for k, v in s.items() if k not in ("collapsed", "collapse_reasons")},
            "collapsed": collapsed, "collapse_reasons": "; ".join(s["collapse_reasons"] + train_verdict["reasons"])}
    for r in res["sets"]:
        flat[f"{r['set']}:nDCG@10"] = r["nDCG@10"]
    res["cell"] = flat
    from initlab.runs import atomic_write_json

    atomic_write_json(out / "results.json", res)
    from initlab.runs import atomic_write_text

    atomic_write_text(out / "DONE", "done\n")
    return flat


def run_sweep(base: SpladeTrainConfig, out: str | Path, *, backbones: Sequence[str] = tuple(BACKBONES),
              ks: Sequence[float] = K_VALUES, overwrite: bool = False, progress: bool = True) -> list[dict[str, Any]]:
    """Run every ``(backbone, k)`` cell of the grid into ``out``; finished cells are skipped (RunDir cells).
    Writes ``summary.csv|json`` and the NanoBEIR-vs-FLOPS figure after every cell."""
    from tqdm.auto import tqdm

    cells = [cell_config(base, b, k) for b in backbones for k in ks]  # validates (remote code, k) before writing
    run = RunDir(out, overwrite=overwrite)
    run.write_config(base)
    rows = []
    for cfg in tqdm(cells, desc="sweep cells", disable=not progress):
        name = cell_name(cfg)
        if run.has_cell(name):
            rows.append(run.load_cell(name))
            continue
        done = run.root / name / "results.json"
        if (run.root / name / "DONE").exists() and done.exists():  # finished but not yet recorded as a cell
            import json

            flat = json.loads(done.read_text())["cell"]
            run.save_cell(name, flat)
            rows.append(flat)
            continue
        flat = run_cell(cfg, run.root / name, progress=progress)
        run.save_cell(name, flat)
        rows.append(flat)
        run.write_csv("summary.csv", rows)
        run.write_json("summary.json", rows)
        try:
            from initlab.paper_figs.splade_scale_figures import plot_nanobeir_vs_flops

            plot_nanobeir_vs_flops(run.root / "summary.json", run.root / "nanobeir_vs_flops.png")
        except Exception as err:  # a figure never fails a sweep
            import warnings

            warnings.warn(f"figure not drawn: {err}")
    run.write_csv("summary.csv", rows)
    run.write_json("summary.json", rows)
    run.mark_done()
    return rows
