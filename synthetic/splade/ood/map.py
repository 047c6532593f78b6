"""The exploratory map of the OOD synthetic SPLADE: where does head scale matter?

Role: read finished OOD runs (``results.json`` of :mod:`initlab.synthetic.splade.ood.runner`) and tabulate, per
(vocabulary V, cap C, training length L, domain: out of domain or in domain, family, seed), the
*loss of k = 1*: ``nDCG@10(best k) - nDCG@10(k = 1)`` on the test half of the queries, the best k chosen on the
select half at the same length. The axes: head norm by recipe (the families: standard vs long recipe), training
length (the checkpoints, past a cell's stop its stop's value; and the cap C, over which the learning rate decays:
runs with different caps are different map points), vocabulary size (the runs), shift: domain (held-out
domains against the in-domain dev set) crossed, in runs with ``query_shift``, with the query vocabulary (the same
sets with their queries written anew at other synonym rates, domains ``"ood@p<p>"`` / ``"id@p<p>"``,
:func:`domain_label`). A map point is *in the region* when every high-norm family loses at least
``min_gain`` (0.05) at k = 1 and no normal-norm family does; the *nearest miss* is the point with the largest
high-norm loss minus normal-norm loss (over every domain, query-shift sets included). A point is one seed; over
several seeds (:func:`across_seeds`) the map adds, per (vocabulary, cap, length, domain, family), the mean and
sample sd of the loss over the seeds, and per (vocabulary, cap, length, domain) on how many seeds the point is in
the region. Each run's families get a "why there" row (:func:`scale_rows`: natural head norm, InfoNCE at the start
and the stop, sparsity, cap-bound cells). Descriptive, no verdict (the verdicts are
:mod:`initlab.synthetic.splade.claims`'s, on the confirmation). Runs with different k grids are pooled as they are
(each run's grid is listed in ``runs``); one (vocabulary, cap, seed, family) from two runs is refused.

``python -m initlab.synthetic.splade.ood.map RUN_DIR [RUN_DIR ...] --out map.json`` writes the map (and ``map.md``,
:func:`map_markdown`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Sequence

from initlab.runs import atomic_write_text
from initlab.textio import read_json

__all__ = ["map_points", "domain_order", "domain_label", "region", "scale_rows", "across_seeds", "build_map",
           "map_markdown", "main"]


def map_points(rep: dict[str, Any]) -> list[dict[str, Any]]:
    """The map points of one run report: ``{vocab, cap, length, domain, family, seed, k_best, best, k1, loss}``
    (nDCG@10 on the test half; ``loss = best - k1``), at the run's checkpoints (``config.checkpoints``; else the
    lengths every k's cell has), where every k of the family and seed has a value."""
    V, cap = rep["config"]["corpus"]["vocab_size"], rep["config"]["max_steps"]
    out = []
    by: dict[tuple[str, int], dict[float, dict[str, Any]]] = {}
    for r in rep["rows"]:
        by.setdefault((r["family"], r["seed"]), {})[float(r["k"])] = r
    for (fam, seed), ks in sorted(by.items()):
        if 1.0 not in ks:
            continue
        # the run's checkpoints (a cell's own stop step, e.g. 625, is not a length of the other k's cells)
        lengths = sorted(int(L) for L in rep["config"].get("checkpoints") or
                         set.intersection(*({int(L) for L in r["ood_at"]} for r in ks.values())))
        doms = ["ood", "id", *sorted({g for r in ks.values() for g in r.get("shift_at", {})}, key=domain_order)]

        def at(r: dict[str, Any], dom: str, half: str) -> dict[str, float]:
            if dom in ("ood", "id"):
                return r.get(f"{dom}_{half}", {})
            return r.get("shift_at" if half == "at" else "shift_select_at", {}).get(dom, {})

        for L in lengths:
            for dom in doms:
                have = {k: r for k, r in ks.items() if str(L) in at(r, dom, "at") and str(L) in at(r, dom, "select_at")}
                if len(have) < len(ks):  # the best k is chosen among the whole grid or not at all
                    continue
                kb = min(have, key=lambda k: (-at(have[k], dom, "select_at")[str(L)], k))
                best, k1 = at(have[kb], dom, "at")[str(L)], at(have[1.0], dom, "at")[str(L)]
                out.append({"vocab": V, "cap": cap, "length": L, "domain": dom, "family": fam, "seed": seed, "k_best": kb,
                            "best": best, "k1": k1, "loss": best - k1})
    return out


def domain_order(dom: str) -> tuple[int, float]:
    """Sort key of a map domain: out of domain before in domain, the corpus's own queries before the query-shift
    sets, those by synonym rate."""
    base, _, p = dom.partition("@p")
    return (0 if base == "ood" else 1, float(p) if p else -1.0)


def domain_label(dom: str) -> str:
    """Words for a map domain: ``"ood"`` out of domain, ``"id"`` in domain (the corpus's queries, at its
    ``p_synonym``), ``"ood@p1"`` out of domain with the queries at synonym rate 1 (the query-shift sets)."""
    base, _, p = dom.partition("@p")
    words = "out of domain" if base == "ood" else "in domain"
    return f"{words}, synonym rate {p}" if p else words


def region(points: list[dict[str, Any]], high: Sequence[str], normal: Sequence[str], min_gain: float = 0.05
           ) -> dict[str, Any]:
    """Per (vocab, cap, length, domain, seed): the high-norm families' smallest loss, the normal-norm families' largest,
    ``in_region`` (high >= ``min_gain`` and normal < ``min_gain``) and the ``gap`` (high mean - normal mean);
    returns ``{"cells": [...], "region": [in-region cells], "nearest_miss": the out-of-region cell with the largest
    gap, or None}``."""
    groups: dict[tuple, dict[str, float]] = {}
    for p in points:
        groups.setdefault((p["vocab"], p["cap"], p["length"], p["domain"], p["seed"]), {})[p["family"]] = p["loss"]
    cells = []
    for (V, cap, L, dom, seed), fam in sorted(groups.items()):
        hi = [fam[f] for f in high if f in fam]
        lo = [fam[f] for f in normal if f in fam]
        if not hi or not lo:
            continue
        cells.append({"vocab": V, "cap": cap, "length": L, "domain": dom, "seed": seed, "high_min": min(hi),
                      "normal_max": max(lo),
                      "gap": sum(hi) / len(hi) - sum(lo) / len(lo),
                      "in_region": min(hi) >= min_gain and max(lo) < min_gain})
    inside = [c for c in cells if c["in_region"]]
    outside = [c for c in cells if not c["in_region"]]
    return {"cells": cells, "region": inside, "nearest_miss": max(outside, key=lambda c: c["gap"]) if outside else None,
            "min_gain": min_gain, "high_norm": list(high), "normal_norm": list(normal)}


def _sd(v: list[float]) -> float | None:
    if len(v) < 2:
        return None
    m = sum(v) / len(v)
    return (sum((x - m) ** 2 for x in v) / (len(v) - 1)) ** 0.5


def across_seeds(points: list[dict[str, Any]], cells: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Over the seeds: ``{"families": [{vocab, cap, length, domain, family, seeds, loss_mean, loss_sd, best_mean,
    k1_mean}], "points": [{vocab, cap, length, domain, seeds, in_region, gap_mean, gap_sd}]}`` (sample sd; None for one
    seed) from :func:`map_points`' points and :func:`region`'s cells."""
    fam: dict[tuple, list[dict[str, Any]]] = {}
    for p in points:
        fam.setdefault((p["vocab"], p["cap"], p["length"], p["domain"], p["family"]), []).append(p)
    out_f = [{"vocab": V, "cap": cap, "length": L, "domain": dom, "family": f, "seeds": sorted(p["seed"] for p in ps),
              "loss_mean": sum(p["loss"] for p in ps) / len(ps), "loss_sd": _sd([p["loss"] for p in ps]),
              "best_mean": sum(p["best"] for p in ps) / len(ps), "k1_mean": sum(p["k1"] for p in ps) / len(ps)}
             for (V, cap, L, dom, f), ps in sorted(fam.items())]
    pts: dict[tuple, list[dict[str, Any]]] = {}
    for c in cells:
        pts.setdefault((c["vocab"], c["cap"], c["length"], c["domain"]), []).append(c)
    out_p = [{"vocab": V, "cap": cap, "length": L, "domain": dom, "seeds": sorted(c["seed"] for c in cs),
              "in_region": sum(c["in_region"] for c in cs), "gap_mean": sum(c["gap"] for c in cs) / len(cs),
              "gap_sd": _sd([c["gap"] for c in cs])}
             for (V, cap, L, dom), cs in sorted(pts.items())]
    return {"families": out_f, "points": out_p}


def scale_rows(rep: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (vocabulary, family) of one run report, means over its seeds of what could explain where k matters: the
    natural head (``head_frobenius``, ``logit_std`` of the pretrained MLM head), the in-batch InfoNCE at the start and
    at the stop (nats; chance ``ln B``) for k = 1 and for the other k, the active dimensions of a document vector at
    k = 1 and the cap-bound cells: ``{vocab, family, seeds, head_frobenius, logit_std, init_infonce_k1,
    init_infonce_other, final_infonce_k1, final_infonce_other, d_active_k1, cap_bound, cells, max_steps,
    ln_batch}`` (None where the report lacks the number; ``ln_batch``: chance InfoNCE of the initial batch)."""
    V = rep["config"]["corpus"]["vocab_size"]
    mean = lambda v: sum(v) / len(v) if v else None  # noqa: E731
    out = []
    for fam in sorted({r["family"] for r in rep["rows"]}):
        rows = [r for r in rep["rows"] if r["family"] == fam]
        nat = [v for v in rep.get("natural_scale", {}).values() if v.get("family") == fam]
        k1 = [r for r in rows if float(r["k"]) == 1.0 and r.get("init_infonce") is not None]
        other = [r for r in rows if float(r["k"]) != 1.0 and r.get("init_infonce") is not None]
        fin = lambda rs: mean([r["final_infonce"] for r in rs if r.get("final_infonce") is not None])  # noqa: E731
        out.append({"vocab": V, "family": fam, "seeds": sorted({int(r["seed"]) for r in rows}),
                    "head_frobenius": mean([v["head_frobenius"] for v in nat]),
                    "logit_std": mean([v["logit_std"] for v in nat]),
                    "init_infonce_k1": mean([r["init_infonce"] for r in k1]),
                    "init_infonce_other": mean([r["init_infonce"] for r in other]),
                    "final_infonce_k1": fin(k1), "final_infonce_other": fin(other),
                    "d_active_k1": mean([r["d_active_dims"] for r in k1 if r.get("d_active_dims") is not None]),
                    "cap_bound": sum(r.get("stopped_by") == "cap" for r in rows), "cells": len(rows),
                    "max_steps": rep["config"].get("max_steps"),
                    "ln_batch": math.log(rep["config"]["init_batch"]) if rep["config"].get("init_batch") else None})
    return out


def build_map(run_dirs: Sequence[Path]) -> dict[str, Any]:
    """The map over the finished runs ``run_dirs`` (each a run folder with ``results.json``, or such a file itself,
    e.g. a copy under docs/results): ``{"exploratory", "runs", "points", "bm25", "scales", "cells", "region",
    "nearest_miss", "min_gain", "high_norm", "normal_norm", "across_seeds"}``; each point and BM25 entry names its
    ``run`` (the folder's name, or the file's stem).

    Raises:
        FileNotFoundError: a run folder without ``results.json`` (named).
        ValueError: two runs holding the same (vocabulary, cap, seed, family) (both named): a seed would count twice.
    """
    points, bm25, runs, scales = [], [], [], []
    seen: dict[tuple, str] = {}
    high = normal = None
    for d in run_dirs:
        path = Path(d) if Path(d).is_file() else Path(d) / "results.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: expected a finished OOD synthetic SPLADE run (results.json)")
        rep = read_json(path)
        label = path.parent.name if path.name == "results.json" else path.stem
        mine = [dict(p, run=label) for p in map_points(rep)]
        for key in sorted({(p["vocab"], p["cap"], p["seed"], p["family"]) for p in mine}):
            if key in seen:
                raise ValueError(f"run_dirs: {seen[key]} and {label} both hold vocabulary {key[0]}, cap {key[1]}, seed "
                                 f"{key[2]}, family {key[3]}; expected each seed once (drop one of the two runs)")
            seen[key] = label
        points += mine
        scales += [dict(x, run=label) for x in scale_rows(rep)]
        high, normal = rep["config"]["claims"]["high_norm"], rep["config"]["claims"]["normal_norm"]
        V, cap = rep["config"]["corpus"]["vocab_size"], rep["config"]["max_steps"]
        runs.append({"dir": str(d), "vocab": V, "cap": cap, "cap_bound": rep["cap_bound"], "trained": rep["trained"],
                     "sweep_seconds": rep.get("sweep_seconds"), "ks": rep["config"].get("ks"),
                     "seeds": sorted({int(r["seed"]) for r in rep["rows"]}), "partial": bool(rep.get("partial")),
                     "p_synonym": rep["config"]["corpus"].get("p_synonym"),
                     "query_shift": rep["config"].get("query_shift", [])})
        for b in rep["bm25"].values():
            bm25.append({"run": label, "vocab": V, "cap": cap, "seed": b["seed"], "ood": b["ood_mean"]["ndcg_test"],
                         "id": b["dev"]["ndcg_test"],
                         **({"shift": {g: m["ndcg_test"] for g, m in b["shift"].items()}} if b.get("shift") else {})})
    fams = {p["family"] for p in points}
    reg = region(points, [f for f in high or () if f in fams], [f for f in normal or () if f in fams])
    return {"exploratory": True, "runs": runs, "points": points, "bm25": bm25, "scales": scales, **reg,
            "across_seeds": across_seeds(points, reg["cells"])}


def _steps(x: dict[str, Any], caps: set) -> str:
    """The training length of a map entry: the steps, with the run's cap when the map holds several caps."""
    return f"{x['length']}" if len(caps) <= 1 else f"{x['length']} (cap {x['cap']})"


def map_markdown(m: dict[str, Any]) -> str:
    """The map in words and tables: every point (vocabulary, length, domain, family: best k, nDCG@10 at it and at
    k = 1, the loss of k = 1), BM25 per run and seed, the region or, if there is none, a statement that none exists;
    over several seeds the means and sds and the region counts; the "why there" table (:func:`scale_rows`); the
    nearest miss. The training length shows its cap when the map holds several caps."""
    L = ["| vocabulary | steps | domain | family | best k | nDCG@10 best k | nDCG@10 k = 1 | loss of k = 1 |",
         "| ---: | ---: | --- | --- | ---: | ---: | ---: | ---: |"]
    caps = {p["cap"] for p in m["points"]}
    for p in sorted(m["points"], key=lambda p: (p["vocab"], p["cap"], p["seed"], domain_order(p["domain"]),
                                                p["length"], p["family"])):
        L.append(f"| {p['vocab']} | {_steps(p, caps)} | {domain_label(p['domain'])} | "
                 f"{p['family']} | {p['k_best']:g} | {p['best']:.3f} | {p['k1']:.3f} | {p['loss']:+.3f} |")
    if any("@p" in p["domain"] for p in m["points"]):
        rates = sorted({r.get("p_synonym") for r in m.get("runs", []) if r.get("query_shift")})
        L.append("")
        L.append(f"Rows without a synonym rate are the corpus's own queries, at the training queries' rate "
                 f"({', '.join(f'{r:g}' for r in rates if r is not None)}).")
    L.append("")
    for b in m["bm25"]:
        shift = "".join(f", {domain_label(g)} {v:.3f}" for g, v in sorted(b.get("shift", {}).items(),
                                                                            key=lambda x: domain_order(x[0])))
        L.append(f"BM25 at {b['vocab']} ids ({b.get('run', 'run')}, seed {b['seed']}): out of domain {b['ood']:.3f}, "
                 f"in domain {b['id']:.3f}{shift}.")
    high, normal, g = ", ".join(m["high_norm"]), ", ".join(m["normal_norm"]), m["min_gain"]
    if m["region"]:
        where = "; ".join(f"{c['vocab']} ids, {_steps(c, caps)} steps, {domain_label(c['domain'])}, seed {c['seed']}"
                          for c in m["region"])
        L.append(f"\nRegion (every high-norm family ({high}) loses at least {g:g} at k = 1, no normal-norm family "
                 f"({normal}) does): {where}.")
    else:
        L.append(f"\nNo map point has every high-norm family ({high}) losing at least {g:g} nDCG@10 at k = 1 while "
                 f"no normal-norm family ({normal}) does.")
    acr = m.get("across_seeds")
    if acr and any(len(x["seeds"]) > 1 for x in acr["families"]):
        L += ["", "Over the seeds (mean ± sample sd of the loss of k = 1; descriptive, no verdict):", "",
              "| vocabulary | steps | domain | family | seeds | loss of k = 1 | nDCG@10 best k (mean) | k = 1 (mean) |",
              "| ---: | ---: | --- | --- | ---: | ---: | ---: | ---: |"]
        for x in sorted(acr["families"], key=lambda x: (x["vocab"], x["cap"], domain_order(x["domain"]),
                                                        x["length"], x["family"])):
            sd = "" if x["loss_sd"] is None else f" ± {x['loss_sd']:.3f}"
            L.append(f"| {x['vocab']} | {_steps(x, caps)} | {domain_label(x['domain'])} | "
                     f"{x['family']} | {len(x['seeds'])} | {x['loss_mean']:+.3f}{sd} | {x['best_mean']:.3f} | "
                     f"{x['k1_mean']:.3f} |")
        L += ["", "| vocabulary | steps | domain | seeds in the region | high-norm − normal-norm loss (mean ± sd) |",
              "| ---: | ---: | --- | ---: | ---: |"]
        for x in sorted(acr["points"], key=lambda x: (x["vocab"], x["cap"], domain_order(x["domain"]), x["length"])):
            sd = "" if x["gap_sd"] is None else f" ± {x['gap_sd']:.3f}"
            L.append(f"| {x['vocab']} | {_steps(x, caps)} | {domain_label(x['domain'])} | "
                     f"{x['in_region']} of {len(x['seeds'])} | {x['gap_mean']:+.3f}{sd} |")
        L.append("")
    if m.get("scales"):
        L += ["", "Why there (means over each run's seeds; InfoNCE in nats against its chance level ln B; k ≠ 1: the "
              "run's other k pooled):", "",
              "| run | vocabulary | cap | family | head Frobenius | logit sd | chance ln B | InfoNCE start, k = 1 | k ≠ 1 | "
              "InfoNCE stop, k = 1 | k ≠ 1 | active doc dims, k = 1 | cap-bound |",
              "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        f = lambda v, spec=".2f": "" if v is None else format(v, spec)  # noqa: E731
        for x in m["scales"]:
            L.append(f"| {x['run']} | {x['vocab']} | {x['max_steps']} | {x['family']} | "
                     f"{f(x['head_frobenius'], '.1f')} | {f(x['logit_std'])} | {f(x.get('ln_batch'))} | "
                     f"{f(x['init_infonce_k1'])} | {f(x['init_infonce_other'])} | "
                     f"{f(x['final_infonce_k1'])} | {f(x['final_infonce_other'])} | {f(x['d_active_k1'], '.0f')} | "
                     f"{x['cap_bound']} of {x['cells']} |")
        L.append("")
    c = m["nearest_miss"]
    if c:
        L.append(f"Nearest miss (largest high-norm minus normal-norm loss outside the region): {c['vocab']} ids, "
                 f"{_steps(c, caps)} steps, {domain_label(c['domain'])}, seed {c['seed']}: "
                 f"high-norm loss "
                 f"{c['high_min']:+.3f}, normal-norm {c['normal_max']:+.3f}, difference {c['gap']:+.3f}.")
    return "\n".join(L) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m initlab.synthetic.splade.ood.map", description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path,
                   help="finished (or partially reported) OOD run folders, or their results.json files")
    p.add_argument("--out", type=Path, required=True, help="map.json to write (and map.md beside it)")
    a = p.parse_args(argv)
    m = build_map(a.runs)
    atomic_write_text(a.out, json.dumps(m, indent=1))
    atomic_write_text(a.out.with_suffix(".md"), map_markdown(m))
    print(f"{len(m['points'])} map points, {len(m['region'])} in the region; nearest miss: {m['nearest_miss']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
