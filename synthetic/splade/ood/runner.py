"""The OOD synthetic SPLADE sweep: backbones, BM25 and training cells on the executor, then the report.

Role: :func:`run_ood` runs (or resumes) one preset of :mod:`initlab.synthetic.splade.ood.config` into a run folder
(``config.json``, ``backbone/<family>_seed=S/``, ``cells/*.json``, ``results.json``, ``summary.md``, ``DONE``);
:func:`rows` turns the cells into the per-seed rows the claim functions of :mod:`initlab.synthetic.splade.claims`
read (primary metric: out-of-domain nDCG@10, mean over the held-out domains; ``id_*`` the in-domain dev set).
``initlab synthetic splade-ood --preset NAME --out DIR [--workers N]`` runs a preset
(:func:`initlab.synthetic.splade.ood.command.splade_ood_main`; ``python -m initlab.synthetic.splade.ood.runner`` is the
same for a checkout without the console script).

Cost model: :mod:`initlab.synthetic.splade.ood.cost`.
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path
from typing import Any, Sequence

from initlab.config import to_dict
from initlab.executor import Cell, Progress, check_scheduler, probe_scheduler, run_cells
from initlab.runs import RunDir, atomic_write_text, check_input_path, holds_run_folder
from initlab.synthetic.splade.ood.config import (OODConfig, backbone_for, cell_name, check_config, flops_weights,
                                                 bm25_key, config_record, pretrain_key, train_key)
from initlab.synthetic.splade.ood.cost import eval_seconds, mlm_step_seconds, step_seconds
from initlab.synthetic.splade.ood.decide import id_rows

__all__ = ["run_ood", "plan", "rows", "summary_markdown", "report_partial"]

def _bb(family: str, seed: int) -> str:
    return f"backbone/{family}_seed={seed}"


def _config(args: dict[str, Any]) -> OODConfig:
    """The run's :class:`OODConfig` a cell receives in ``args["config"]`` (the plan's object itself).

    Raises:
        TypeError: ``args["config"]`` is not an :class:`OODConfig`.
    """
    cfg = args["config"]
    if not isinstance(cfg, OODConfig):
        raise TypeError(f'args["config"]: expected an OODConfig, got {type(cfg).__name__}')
    return cfg


def cell_pretrain(root: str, name: str, args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    from initlab.synthetic.splade.ood.cell import pretrain

    cfg = _config(args)
    pretrain(str(Path(root) / args["folder"]), args["family"], cfg, args["seed"], on_step=lambda: progress.advance(1))
    from initlab.textio import read_json

    return {"family": args["family"], "seed": args["seed"], **read_json(Path(root) / args["folder"] / "natural_scale.json")}


def cell_train(root: str, name: str, args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """One SPLADE training cell: ``args = {config, family, k, seed, backbone}``; an imposed-norm cell also has
    ``imposed`` (the high-norm family) and receives ``imposed_backbone``, the finished result of that family's
    backbone cell of the same seed (:attr:`initlab.executor.Cell.receives`), whose natural head norm it imposes."""
    from initlab.synthetic.splade.ood.cell import run_cell

    cfg = _config(args)
    norm = None
    if args.get("imposed"):  # the imposed-norm arm: the high-norm backbone's natural head norm, same seed
        norm = float(args["imposed_backbone"]["head_frobenius"])
    rec = run_cell(str(Path(root) / args["backbone"]), cfg, args["family"], args["k"], args["seed"],
                   str(Path(root) / "trainer_tmp" / name), progress=progress, imposed_norm=norm)
    if args.get("imposed"):
        rec["imposed"] = args["imposed"]
    return rec


def cell_inspect(root: str, name: str, args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    from initlab.synthetic.splade.ood.cell import inspect_cell

    return inspect_cell(str(Path(root) / args["backbone"]), _config(args), args["family"],
                        args["seed"])


def cell_bm25(root: str, name: str, args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    from initlab.synthetic.splade.ood.cell import bm25_cell

    return bm25_cell(_config(args), args["seed"])


def plan(cfg: OODConfig) -> list[Cell]:
    """The cells of ``cfg``, seed by seed (a run cut short has whole seeds): BM25, per family the backbone and its
    ``mlmhead inspect`` report, then the training cells (k = 1 of every family first, then the high-norm families'
    other k, then the rest), then the imposed-norm arm's cells (``cfg.imposed``; k = 1 first). The families of
    ``cfg.late_families`` follow, seed by seed, once every seed's other cells are planned. A backbone's cell has
    its folder as its artifact: on a fresh clone holding the finished cells' results it is trained again (the same
    seed, the same backbone on the same machine) only while one of its cells is still to run."""
    conf = cfg  # every cell receives the config object itself (pickled to a worker), never a dict rebuilt per cell
    V = cfg.corpus.vocab_size
    evals = (len(cfg.checkpoints) + 1) * eval_seconds(V, cfg.engine) / cfg.max_steps
    cells = []
    early = tuple(f for f in cfg.families if f not in cfg.late_families)
    for s in cfg.seeds:
        cells += _seed_cells(cfg, conf, s, early, evals, first=True)
    for s in cfg.seeds:
        cells += _seed_cells(cfg, conf, s, cfg.late_families, evals, first=False)
    return cells


def _seed_cells(cfg: OODConfig, conf: OODConfig, s: int, families: Sequence[str], evals: float, first: bool
                ) -> list[Cell]:
    """The cells of seed ``s`` for ``families`` (:func:`plan`): with ``first``, BM25 and the imposed-norm arm too."""
    from initlab.synthetic.splade.ood.cell import INSPECT_TEXTS

    V = cfg.corpus.vocab_size
    cells = []
    if first:
        cells.append(Cell(f"bm25_seed={s}", cell_bm25, {"config": conf, "seed": s},
                          bm25_key(cfg, s), unit_seconds=5.0))
    for f in families:
        bb = backbone_for(cfg, f)
        cells.append(Cell(f"pretrain_{f}_seed={s}", cell_pretrain,
                          {"config": conf, "family": f, "seed": s, "folder": _bb(f, s)}, pretrain_key(cfg, f, s),
                          units=bb.mlm_steps, unit_seconds=mlm_step_seconds(V), artifact=_bb(f, s)))
        cells.append(Cell(f"inspect_{f}_seed={s}", cell_inspect,
                          {"config": conf, "family": f, "seed": s, "backbone": _bb(f, s)},
                          {"backbone": pretrain_key(cfg, f, s), "ks": list(cfg.ks), "texts": INSPECT_TEXTS,
                           "batch": cfg.batch_size, "max_length": cfg.doc_max_len},
                          needs=(f"pretrain_{f}_seed={s}",), unit_seconds=eval_seconds(V) / 4))
    order = sorted(((f, k) for f in families for k in cfg.ks),
                   key=lambda x: (x[1] != 1.0, x[0] not in cfg.claims.high_norm, cfg.ks.index(x[1]),
                                  cfg.families.index(x[0])))
    for f, k in order:
        cells.append(Cell(cell_name(f, k, s), cell_train,
                          {"config": conf, "family": f, "k": k, "seed": s, "backbone": _bb(f, s)},
                          train_key(cfg, f, k, s), needs=(f"pretrain_{f}_seed={s}",), units=cfg.max_steps,
                          unit_seconds=step_seconds(V, cfg.engine, f) + evals))
    for k in sorted(cfg.ks, key=lambda k: (k != 1.0, cfg.ks.index(k))) if first else ():
        for f, hi in cfg.imposed:
            cells.append(Cell(cell_name(f, k, s, hi), cell_train,
                              {"config": conf, "family": f, "k": k, "seed": s, "backbone": _bb(f, s), "imposed": hi},
                              train_key(cfg, f, k, s, hi), needs=(f"pretrain_{f}_seed={s}", f"pretrain_{hi}_seed={s}"),
                              receives={"imposed_backbone": f"pretrain_{hi}_seed={s}"},
                              units=cfg.max_steps, unit_seconds=step_seconds(V, cfg.engine, f) + evals))
    return cells


def rows(cfg: OODConfig, cells: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (family, k, seed) the row the claim functions read (``raw["rows"]`` of :mod:`initlab.synthetic.splade.claims`):
    ``ndcg_select`` / ``ndcg_test`` = out-of-domain nDCG@10 (mean over the held-out domains) on the two query halves
    at the stop; ``id_select`` / ``id_test`` the in-domain dev set's; ``init_infonce``, ``final_infonce`` (the
    in-domain dev loss at the stop), ``steps``, ``stopped_by``, ``collapsed``, ``failed``; ``ood_at`` /
    ``id_at`` ``{step: nDCG@10 test half}`` and ``ood_select_at`` / ``id_select_at`` (select half) at the checkpoints
    and the stop (a length past the stop has the stop's value: the model the rule kept); with ``cfg.query_shift``,
    ``shift_at`` / ``shift_select_at`` ``{"id@p<p>" | "ood@p<p>": {step: nDCG@10}}`` the same on the query-shift
    sets.

    With ``cfg.select_k_on == "in_domain"``, ``ndcg_select`` is the in-domain dev set's nDCG@10 on *all* its
    queries and ``ndcg_test`` the out-of-domain nDCG@10 on *all* held-out-domain queries (no labelled
    out-of-domain query chooses anything); ``id_*`` and the ``*_at`` series keep the halves. The imposed-norm
    arm's rows have ``mode = "imposed"``, ``s`` its factor and ``imposed`` the high-norm family."""
    out = []
    grid = [(f, k, s, None) for f in cfg.families for k in cfg.ks for s in cfg.seeds]
    grid += [(f, k, s, hi) for f, hi in cfg.imposed for k in cfg.ks for s in cfg.seeds]
    for f, k, s, hi in grid:
        if cell_name(f, k, s, hi) not in cells:  # not run (a partial report)
            continue
        c = cells[cell_name(f, k, s, hi)]
        fin = c.get("final") or {}
        tr = c.get("training") or {}
        ood, dev = fin.get("ood_mean", {}), fin.get("dev", {})
        cps = {int(st): v for st, v in (tr.get("checkpoints") or {}).items()}
        at_ood, at_id, sel_ood, sel_id = {}, {}, {}, {}
        shift_at: dict[str, dict[str, float]] = {}
        shift_sel: dict[str, dict[str, float]] = {}
        for L in sorted(set(cfg.checkpoints) | set(cps)):
            src = cps.get(L) or (fin if tr and L >= tr.get("steps", 0) else None)
            if src:
                at_ood[str(L)], at_id[str(L)] = src["ood_mean"]["ndcg_test"], src["dev"]["ndcg_test"]
                sel_ood[str(L)], sel_id[str(L)] = src["ood_mean"]["ndcg_select"], src["dev"]["ndcg_select"]
                for g, m in (src.get("shift") or {}).items():
                    shift_at.setdefault(g, {})[str(L)] = m["ndcg_test"]
                    shift_sel.setdefault(g, {})[str(L)] = m["ndcg_select"]
        sel, test = ((dev.get("ndcg@10"), ood.get("ndcg@10")) if cfg.select_k_on == "in_domain"
                     else (ood.get("ndcg_select"), ood.get("ndcg_test")))
        out.append({"family": f, "mode": "imposed" if hi else "tied",
                    "s": float(c.get("imposed_s", 1.0)) if hi else 1.0, "k": float(k), "seed": s,
                    **({"imposed": hi} if hi else {}),
                    "ndcg_select": sel, "ndcg_test": test,
                    "id_select": dev.get("ndcg_select"), "id_test": dev.get("ndcg_test"),
                    "init_infonce": c.get("init_infonce"), "final_infonce": c.get("final_dev_loss"),
                    "steps": tr.get("steps"), "stopped_by": tr.get("stopped_by"),
                    "collapsed": bool(c.get("collapse")), "failed": bool(c.get("failed")),
                    "d_active_dims": fin.get("d_active_dims"), "q_active_dims": fin.get("q_active_dims"),
                    "head_frobenius": c.get("head_frobenius"), "cpu_seconds": c.get("cpu_seconds"),
                    "cpu_seconds_per_step": c.get("cpu_seconds_per_step"), "ood_at": at_ood, "id_at": at_id,
                    "ood_select_at": sel_ood, "id_select_at": sel_id,
                    **({"shift_at": shift_at, "shift_select_at": shift_sel} if shift_at else {})})
    return out


@holds_run_folder("out")
def run_ood(out: Path, cfg: OODConfig, workers: int | None = None, progress: bool = True,
            overwrite: bool = False, scheduler: str | None = None) -> RunDir:
    """Run (or resume) ``cfg`` into ``out``; writes ``results.json`` and ``summary.md`` from the cells, then ``DONE``.
    ``workers`` local processes or the Dask cluster at ``scheduler`` (:func:`initlab.executor.run_cells`).

    Raises:
        ValueError: a bad config (:func:`check_config`), workers < 1.
        initlab.runs.RunExistsError / ConfigMismatchError: as :class:`initlab.runs.RunDir`.
    """
    check_config(cfg)
    if scheduler is not None:
        check_scheduler(scheduler)
        probe_scheduler(scheduler)  # one line, before the run folder is made
    rd = RunDir(out, overwrite=overwrite, resume=True, config=config_record(cfg))
    t0 = time.perf_counter()
    run_cells(rd, plan(cfg), workers=workers, scheduler=scheduler, progress=progress, desc="OOD synthetic SPLADE",
              preload=("transformers", "sentence_transformers"), startup=10.0)
    shutil.rmtree(rd.root / "trainer_tmp", ignore_errors=True)
    write_report(rd, cfg, seconds=time.perf_counter() - t0)
    rd.mark_done()
    return rd


def write_report(rd: RunDir, cfg: OODConfig, seconds: float | None = None, partial: bool = False) -> dict[str, Any]:
    """``results.json`` (config, natural scales, BM25, rows, cap-binding counts, costs, verdicts recomputed by
    :mod:`initlab.synthetic.splade.claims` on the OOD rows and on the in-domain rows) and ``summary.md``.
    ``partial``: from the cells finished so far (a run cut short; ``results.json`` says how many of the planned
    cells it holds, and ``DONE`` is not written), else every cell must be finished. The verdicts are computed on
    the ``complete_seeds`` only (every (family, k) cell of the seed finished,
    :func:`initlab.synthetic.splade.claims.complete_seeds`); the rows keep every finished cell."""
    from initlab.synthetic.splade import claims as sc
    from initlab.synthetic.splade.ood import claims as oc

    planned = plan(cfg)
    cells = {c.name: rd.load_cell(c.name, key=c.key) for c in planned if not partial or rd.has_cell(c.name, key=c.key)}
    if partial and len(cells) == len(planned):  # every cell finished: not a partial report
        partial = False
        if seconds is None and (rd.root / "results.json").is_file():  # keep the finished sweep's wall time
            from initlab.textio import read_json

            seconds = read_json(rd.root / "results.json").get("sweep_seconds")
    r = rows(cfg, cells)
    fn = {c.name: c.fn for c in planned}  # each cell's kind is its function in the plan, never read off its name
    nat = {n: v for n, v in cells.items() if fn[n] is cell_pretrain}
    bm25 = {n: v for n, v in cells.items() if fn[n] is cell_bm25}
    from initlab.synthetic.splade.measure import inspect_rows

    insp = inspect_rows([v for n, v in cells.items() if fn[n] is cell_inspect])
    raw = {"rows": r, "inspect": insp, "batch": cfg.init_batch}
    complete = sc.complete_seeds(r, cfg.families, cfg.ks)  # verdicts on whole seeds only (a run cut short)
    judged = sc.on_seeds(raw, complete)
    extra = _noise_and_anchor(cfg, r, cells, {n: v for n, v in cells.items() if fn[n] is cell_train}, bm25)
    if cfg.holm_families == "splade_ood_v8k_imposed":  # its own preregistered claims; no word before completion
        from initlab.synthetic.splade.ood.decide import decide

        extra["preregistered"] = decide(config_record(cfg), r, bm25)
        verdicts, id_verdicts = {}, {}
    else:
        verdicts = {k: v.to_dict() for k, v in sc.evaluate_all(judged, cfg.claims).items()}
        id_verdicts = {k: v.to_dict() for k, v in sc.evaluate_all({**judged, "rows": id_rows(judged["rows"])},
                                                                  cfg.claims).items()}
    if cfg.imposed and "preregistered" not in extra:  # the imposed-norm arm's claim (not a phase-experiment claim)
        extra["verdicts_imposed"] = {
            "out_of_domain": oc.imposed_interaction(judged, cfg.claims).to_dict(),
            "in_domain": oc.imposed_interaction({**judged, "rows": id_rows(judged["rows"])}, cfg.claims).to_dict()}
    if cfg.holm_families == "splade_ood_v8k":
        from initlab.evidence import families

        both = {**oc.evaluate_ood(judged, cfg.claims),
                **{f"in_domain/{k}": v for k, v in oc.evaluate_ood({**judged, "rows": id_rows(judged["rows"])},
                                                                   cfg.claims).items()}}
        extra["verdicts_holm"] = {k: v.to_dict() for k, v in
                                  families.corrected(both, oc.SPLADE_OOD_V8K_FAMILIES).items()}
    rep = {"config": to_dict(cfg), "role": cfg.role, "select_k_on": cfg.select_k_on, **extra,
           "flops_weights": list(flops_weights(cfg)), "natural_scale": nat, "bm25": bm25,
           "rows": r, "inspect": insp, "complete_seeds": complete, "verdicts": verdicts, "verdicts_in_domain": id_verdicts,
           "cap_bound": sum(x["stopped_by"] == "cap" for x in r), "trained": len(r), "sweep_seconds": seconds,
           "cells_finished": len(cells), "cells_planned": len(planned), "partial": partial,
           "pretrain_cpu_seconds": {n: v.get("pretrain_cpu_seconds") for n, v in nat.items()}}
    rd.write_json("results.json", rep)
    atomic_write_text(rd.root / "summary.md", summary_markdown(rep))
    return rep


def _noise_and_anchor(cfg: OODConfig, r: list[dict[str, Any]], cells: dict[str, Any], trained: dict[str, Any],
                      bm25: dict[str, Any]) -> dict[str, Any]:
    """``best_vs_bm25``: per seed the best SPLADE cell's out-of-domain nDCG@10 (test queries) against BM25's on the
    same queries (``ndcg@10`` with ``select_k_on = "in_domain"``, the test half otherwise), descriptive (the best
    cell is picked on the test queries); ``bootstrap``: per seed the within-seed query bootstrap
    (:func:`initlab.synthetic.splade.ood.noise.seed_bootstrap`; none with ``cfg.bootstrap`` = 0); ``per_query``:
    per training cell (``trained``) and BM25 cell (``bm25``), in the plan's order (``cells``), each query's nDCG@10
    at the stop (``{"ood": {set: [...]}, "dev": [...]}``, in the sets' query order), so the bootstrap can be redone
    from ``results.json`` alone."""
    from initlab.synthetic.splade.ood.noise import seed_bootstrap

    key = "ndcg@10" if cfg.select_k_on == "in_domain" else "ndcg_test"
    anchor, boot = [], []
    for s in cfg.seeds:
        mine = [x for x in r if x["seed"] == s and x["ndcg_test"] is not None]
        b = bm25.get(f"bm25_seed={s}")
        if mine and b:
            best = max(mine, key=lambda x: x["ndcg_test"])
            ref = b["ood_mean"][key]
            anchor.append({"seed": s, "cell": cell_name(best["family"], best["k"], s, best.get("imposed")),
                           "splade": best["ndcg_test"], "bm25": ref, "ratio": best["ndcg_test"] / ref if ref else None,
                           "cap_bound": sum(x["stopped_by"] == "cap" for x in mine), "trained": len(mine)})
        if cfg.bootstrap and mine:
            names = {(x["family"], float(x["k"]), x.get("imposed")): cell_name(x["family"], x["k"], s, x.get("imposed"))
                     for x in mine}
            boot.append(seed_bootstrap(r, trained, b, s, cfg.claims.high_norm, cfg.claims.normal_norm, cfg.select_k_on,
                                       cfg.bootstrap, names))
    per_query = {name: {"ood": {k: v["per_query"] for k, v in (ev.get("ood") or {}).items() if "per_query" in v},
                        "dev": (ev.get("dev") or {}).get("per_query")}
                 for name, ev in (((n, c or {}) if n in bm25 else (n, c.get("final") or {}))
                                  for n, c in cells.items() if n in bm25 or n in trained)
                 if any("per_query" in v for v in (ev.get("ood") or {}).values())}
    return {"best_vs_bm25": anchor, "bootstrap": boot, "per_query": per_query}


def _f(v: Any, spec: str = ".3f") -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


def summary_markdown(rep: dict[str, Any]) -> str:
    """The run's tables: corpus, BM25, natural head norms, nDCG@10 per (family, k) out of domain and in domain, the
    stopping rule's outcome, the costs; exploratory unless the run was preregistered (said by the reader)."""
    cfg = rep["config"]
    L = ["## OOD synthetic SPLADE" + (f" ({rep['role']})" if rep.get("role") else ""), "",
         f"Vocabulary {cfg['corpus']['vocab_size']}, {cfg['corpus']['n_domains']} domains ({cfg['corpus']['n_heldout']} "
         f"held out), {cfg['corpus']['docs_per_domain']} documents per domain; SPLADE cap {cfg['max_steps']} steps, plateau "
         f"rule: patience {cfg['patience']} x {cfg['eval_every']} steps, {cfg['plateau_rel']:g} relative; FLOPS weights "
         f"lambda_q {rep['flops_weights'][0]:.3g}, lambda_d {rep['flops_weights'][1]:.3g}; seeds {cfg['seeds']}; "
         f"cap-bound cells {rep['cap_bound']} of {rep['trained']}"
         + (f"; PARTIAL: {rep['cells_finished']} of {rep['cells_planned']} cells finished" if rep.get("partial") else "")
         + (f"; sweep {rep['sweep_seconds']:.0f} s." if rep.get("sweep_seconds") else ".")
         + (f" Best k chosen on {'the in-domain dev queries (all held-out-domain queries are test queries)' if rep.get('select_k_on') == 'in_domain' else 'the select half of the held-out-domain queries'}."
            if rep.get("select_k_on") else ""), ""]
    if rep.get("best_vs_bm25"):
        L += ["| seed | best SPLADE cell (OOD, test queries) | its nDCG@10 | BM25 | of BM25 | cap-bound cells |",
              "| ---: | --- | ---: | ---: | ---: | ---: |"]
        L += [f"| {a['seed']} | {a['cell']} | {_f(a['splade'])} | {_f(a['bm25'])} | {_f(a['ratio'], '.2f')} | "
              f"{a['cap_bound']} of {a['trained']} |" for a in rep["best_vs_bm25"]]
        L.append("")
    if any(b.get("stats") for b in rep.get("bootstrap", [])):
        L += ["Within-seed bootstrap over the out-of-domain test queries (paired, best k held fixed; sd over "
              "resamples):", "", "| seed | test queries | statistic | estimate | bootstrap sd |",
              "| ---: | ---: | --- | ---: | ---: |"]
        L += [f"| {b['seed']} | {b.get('test_queries', '-')} | {n} | {_f(v['estimate'])} | {_f(v['sd'])} |"
              for b in rep["bootstrap"] for n, v in b["stats"].items()]
        L.append("")
    L += ["| seed | BM25 nDCG@10 OOD (test half) | BM25 in-domain | types seen | singleton share | mean doc length | "
          "query words in the source document |", "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for b in rep["bm25"].values():
        cs = b["corpus"]
        L.append(f"| {b['seed']} | {_f(b['ood_mean']['ndcg_test'])} | {_f(b['dev']['ndcg_test'])} | {cs['types_seen']} | "
                 f"{_f(cs['singleton_share'], '.2f')} | {_f(cs['mean_doc_len'], '.1f')} | {_f(cs['query_doc_overlap'], '.2f')} |")
    L += ["", "| backbone | head Frobenius | logit std | MLM CPU s |", "| --- | ---: | ---: | ---: |"]
    for n, v in rep["natural_scale"].items():
        L.append(f"| {n[len('pretrain_'):]} | {_f(v.get('head_frobenius'), '.1f')} | {_f(v.get('logit_std'), '.2f')} | "
                 f"{_f(v.get('pretrain_cpu_seconds'), '.0f')} |")
    L += ["", "| family | k | seed | nDCG@10 OOD (test) | in-domain (test) | OOD at checkpoints | initial InfoNCE | "
          "dev loss at stop | steps (stopped by) | active dims d | CPU s / step |",
          "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: | ---: |"]
    for x in rep["rows"]:
        at = ", ".join(f"{k}: {v:.3f}" for k, v in x["ood_at"].items())
        fam = x["family"] + (f"@{x['imposed']} (s = {x['s']:.2f})" if x.get("imposed") else "")
        L.append(f"| {fam} | {x['k']:g} | {x['seed']} | {_f(x['ndcg_test'])} | {_f(x['id_test'])} | {at} | "
                 f"{_f(x['init_infonce'], '.2f')} | {_f(x['final_infonce'], '.2f')} | {x['steps']} ({x['stopped_by']}) | "
                 f"{_f(x['d_active_dims'], '.0f')} | {_f(x['cpu_seconds_per_step'], '.2f')} |")
    L += _decide_lines(rep["preregistered"]) if "preregistered" in rep else _landscape_lines(rep)
    return "\n".join(L) + "\n"


def _decide_lines(pre: dict[str, Any]) -> list[str]:
    """The preregistered confirmation's section of ``summary.md`` (:func:`initlab.synthetic.splade.ood.decide.decide`):
    per-seed numbers always; words, share, sensitivity and gate only once the seeds are complete."""
    n = len(pre["seeds"])
    L = ["", f"Preregistered ({pre['preset']}): primary cells complete on {len(pre['primary_complete'])} of {n} seeds, "
         f"every cell on {len(pre['all_complete'])} of {n}; cap-bound cells {pre['cap']['cap_bound']} of "
         f"{pre['cap']['trained']}.", "", "| seed | family interaction (OOD) | imposed recovery (OOD) |",
         "| ---: | ---: | ---: |"]
    for s in pre["seeds"]:
        fi, ir = pre["numbers"]["family_interaction"].get(str(s)), pre["numbers"]["imposed_recovery"].get(str(s))
        L.append(f"| {s} | {_f(fi, '+.3f')} | {_f(ir, '+.3f')} |")
    if pre["primary"] is None:
        return L + ["", "No claim word: the preregistered seeds are not complete (numbers only)."]
    L += ["", "| claim (Holm within its family) | word | estimate [95 % interval] (seeds) |", "| --- | --- | --- |"]
    for fam in ("primary", "secondary"):
        for cid, v in (pre[fam] or {}).items():
            L.append(f"| {cid} ({fam}) | {v['word']} | {_f(v.get('estimate'), '+.3f')} [{_f(v.get('lo'), '+.3f')}, "
                     f"{_f(v.get('hi'), '+.3f')}] ({v.get('n')}) |")
    sh, g = pre["share"], pre["gate"]
    L += ["", f"Share of the family interaction carried by the head norm alone (no word): {_f(sh['estimate'], '.2f')} "
          f"[{_f(sh['lo'], '.2f')}, {_f(sh['hi'], '.2f')}].",
          f"Regime gate: {g['outcome']}; dev-selected best cell / BM25 {_f(g['estimate'], '.2f')} "
          f"[{_f(g['lo'], '.2f')}, {_f(g['hi'], '.2f')}] (threshold {g['threshold']:.2f}).",
          "Sensitivity, k chosen on the out-of-domain test queries (no word): family interaction "
          f"{_f(pre['sensitivity']['family_interaction']['estimate'], '+.3f')}, imposed recovery "
          f"{_f(pre['sensitivity']['imposed_recovery']['estimate'], '+.3f')}."]
    return L


def _landscape_lines(rep: dict[str, Any]) -> list[str]:
    """The landscape (every rule's regret beside each backbone's range) and the interaction, out of domain and in
    domain, on the complete seeds (:mod:`initlab.synthetic.splade.claims`; recomputed, not read)."""
    from initlab.config import from_dict
    from initlab.synthetic.splade import claims as sc
    from initlab.synthetic.splade.ood import claims as oc

    th = from_dict(sc.SPLADEThresholds, rep["config"]["claims"])
    seeds = rep.get("complete_seeds", [])
    raw = sc.on_seeds({"rows": rep["rows"], "inspect": rep.get("inspect", []), "batch": rep["config"]["init_batch"]},
                      seeds)
    L = ["", f"Verdicts on the complete seeds {seeds} (every (family, k) cell finished):"]
    for name, rr in (("out of domain", raw), ("in domain", {**raw, "rows": id_rows(raw["rows"])})):
        if not rr["rows"]:
            L += ["", f"{name}: no complete seed, no verdict."]
            continue
        L += ["", f"**{name}**: interaction " + sc.describe_claim(sc.interaction(rr, th))]
        if any(x.get("mode") == "imposed" for x in rr["rows"]):
            L += ["", f"**{name}**: imposed-norm interaction " + sc.describe_claim(oc.imposed_interaction(rr, th))]
        L += ["", sc.landscape_markdown(rr, th)]
    return L


def report_partial(out: str | Path, cfg: OODConfig) -> RunDir:
    """Write ``results.json`` and ``summary.md`` of the run folder ``out`` (of ``cfg``) from the cells finished so far
    (a run cut short; trains nothing) and return the folder.

    Takes no lock: the folder may be a live run's (its report is rewritten when it ends).

    Raises:
        InputPathError: ``out`` is not an existing folder (a report of a run that exists, never of a fresh folder).
        ConfigMismatchError: ``out`` holds a run of another config.
    """
    check_input_path(out, flag="--out", kind="folder", what="the folder of an initlab synthetic splade-ood run")
    rd = RunDir(out, resume=True, config=config_record(cfg))
    write_report(rd, cfg, partial=True)
    return rd
