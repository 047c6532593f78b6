"""Tables, claim verdicts and theory comparison of the synthetic SPLADE phase diagram (from saved cells).

Everything here reads the cell records written by :func:`initlab.synthetic.splade.phase.runner.run_phase` and
computes no training. Definitions (fixed before the runs; thresholds live in ``PhaseConfig``):

* ``roughness`` of a loss curve: RMS of the second differences of the logged InfoNCE part,
  ``sqrt(mean_i (r_{i+1} - 2 r_i + r_{i-1})^2)`` in nats (0 for a straight line; large for zig-zags);
* ``steps_to_threshold``: the first logged step whose InfoNCE part is <= ``loss_threshold`` (None: never);
* ``init_infonce`` / ``final_infonce``: InfoNCE (nats) of the first ``init_batch`` training pairs with
  in-batch negatives, before and after training (the same batch, so "equal steps" compares minima);
* a failed cell (non-finite gradient or loss) counts as nDCG@10 = 0 when choosing or scoring a k
  (its model is unusable), and is listed as failed;
* ``edge_k`` (the alternative rule, written down before any phase-diagram run and tested on seed 1):
  the grid k whose measured per-query score sd (``initlab mlmhead inspect``'s ``score_sd``) is closest
  to the InfoNCE saturation edge ``sqrt(2 ln B)`` in log scale, from either side:
  ``argmin_k |ln(score_sd(k) / sqrt(2 ln B))|`` (ties: smaller k). Rationale from the score-scale
  theory: above the edge the in-batch softmax saturates (one-hot, high initial loss); far below it the
  softmax is flat and the FLOPS gradient dominates (over-rescaling). ``inspect``'s rule takes the
  *smallest* k below the edge; since scores scale like 1/k^2, one grid step can put it far below;
* ``best_k`` of a (family, mode, s) row: the k with the highest seed-mean nDCG@10 (ties: smallest k);
  ``regret`` of the recommended k: ``nDCG@10(best_k) - nDCG@10(recommended k)``; a ``hit`` is
  ``recommended == best_k``, a ``near_hit`` a regret <= ``hit_tolerance``.

Claim verdicts (per family yes/no; overall ``reproduces`` in >= 3 of the families, ``partly`` in 1-2,
``not`` in none; m = ``harm_margin``; s_max / s_min the largest / smallest head scale; tied mode):

1. high-norm degradation fixed by rescaling: at s_max, ``max_{k>1} nDCG(k) - nDCG(k=1) > m``;
2. non-monotone optimum: at s = 1, ``best_k`` is neither the smallest nor the largest k and both
   ends are more than m below it;
3. over-rescaling collapse: at s = 1, a cell with k >= 16 is collapsed or failed;
4. small-norm harm: at s_min, ``nDCG(k=1) - nDCG(k=4) > m`` (the smallest k >= 4 of the grid);
5. high initial loss and poor minimum: at s_max, ``init_infonce(k=1) > init_infonce(best_k)`` and
   ``final_infonce(k=1) - final_infonce(best_k) > poor_min_loss_margin`` and
   ``nDCG(best_k) - nDCG(k=1) > m`` (best_k > 1);
6. input-side hypothesis, at (s = 1, k = 16), (s_min, k = 4) and (s_min, k = 16) (the last added by a
   second preregistration after the seed-0 run, tested on seed 1): with ``harm_tied = nDCG(s, 1) -
   nDCG_tied(s, k)`` and ``harm_output`` the same for output-only rescaling (``k_output``): *explains*
   if ``harm_tied > m`` and ``harm_output <= m``; *partly* if ``harm_output < harm_tied - m``;
   *does not* if ``harm_tied > m`` otherwise; *no harm to explain* if ``harm_tied <= m``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from initlab.config import derive

__all__ = ["roughness", "steps_to_threshold", "ndcg_or_zero", "phase_rows", "recommended_table", "regret_summary",
           "stability_table", "verdicts", "theory_rows", "theory_agreement", "predicted_infonce", "edge_k"]


def roughness(curve: list[dict[str, Any]]) -> float | None:
    """RMS second difference (nats) of the logged InfoNCE part ``ranking``; None with < 3 finite points."""
    r = [row["ranking"] for row in curve if _num(row.get("ranking")) is not None]
    if len(r) < 3:
        return None
    d2 = np.diff(np.asarray(r, dtype=float), n=2)
    return float(np.sqrt(np.mean(d2 ** 2)))


def steps_to_threshold(curve: list[dict[str, Any]], threshold: float) -> int | None:
    """First logged step whose InfoNCE part is <= ``threshold``; None if never."""
    for row in curve:
        if _num(row.get("ranking")) is not None and row["ranking"] <= threshold:
            return int(row["step"])
    return None


def _num(v: Any) -> float | None:
    """A finite float, or None (missing, or non-finite: saved as the strings "nan"/"inf")."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def ndcg_or_zero(cell: dict[str, Any]) -> float:
    """nDCG@10 of a cell, 0 for a failed cell (an unusable model)."""
    v = cell.get("ndcg@10")
    return 0.0 if v is None else float(v)


def phase_rows(points: list[dict[str, Any]], cells: dict[str, dict[str, Any]], cfg) -> list[dict[str, Any]]:
    """One flat row per grid point (family, mode, s, k, seed) with the metrics of its cell."""
    rows = []
    for p in points:
        c = cells[p["cell"]]
        curve = c["loss_curve"]
        last = curve[-1] if curve else {}
        fin = c.get("final") or {}
        rows.append({
            **{key: p[key] for key in ("family", "mode", "s", "k", "seed", "cell")},
            "tied": c["tied"], "e": c["e"], "h": c["h"],
            "ndcg@10": c.get("ndcg@10"), "mrr@10": c.get("mrr@10"), "flops": c.get("flops"),
            "q_active_dims": c.get("q_active_dims"), "d_active_dims": c.get("d_active_dims"),
            "collapsed": bool(c["collapse"]), "failed": c["failed"] is not None, "collapse": "; ".join(c["collapse"]),
            "mean_doc_cosine": c.get("collapse_stats", {}).get("mean_doc_cosine"),
            "same_ranking_share": c.get("collapse_stats", {}).get("same_ranking_share"),
            "init_infonce": _num(c["init"]["ranking_loss"]), "final_infonce": _num(fin.get("ranking_loss")),
            "first_logged_ranking": _num(curve[0]["ranking"]) if curve else None,
            "final_logged_ranking": _num(last.get("ranking")), "final_logged_loss": _num(last.get("loss")),
            "steps_to_threshold": steps_to_threshold(curve, cfg.loss_threshold), "roughness": roughness(curve),
            **{f"init_{key}": _num(c["init"][key]) for key in ("logit_std", "head_norm", "active_fraction", "flops",
                                                              "d_active_dims")},
            "hidden_rel_change": _num(c["hidden_rel_change"]),
            "tied_after": c.get("tied_after"), "seconds": c["seconds"],
        })
    return rows


def _mean_ndcg(rows: list[dict[str, Any]], family: str, mode: str, s: float, k: float) -> float | None:
    vals = [0.0 if r["ndcg@10"] is None else r["ndcg@10"] for r in rows
            if (r["family"], r["mode"], r["s"], r["k"]) == (family, mode, s, k)]
    return float(np.mean(vals)) if vals else None


def _best_k(rows: list[dict[str, Any]], family: str, mode: str, s: float) -> tuple[float | None, float | None]:
    ks = sorted({r["k"] for r in rows if (r["family"], r["mode"], r["s"]) == (family, mode, s)})
    if not ks:
        return None, None
    scores = [(_mean_ndcg(rows, family, mode, s, k), k) for k in ks]
    best = max(scores, key=lambda t: (t[0], -t[1]))
    return best[1], best[0]


def edge_k(table: list[dict[str, Any]], batch: int) -> float:
    """The alternative rule (module docstring): the k of ``table`` (inspect rows with ``k``, ``score_sd``)
    whose score sd is closest to ``sqrt(2 ln B)`` in log scale; rows with score sd <= 0 are skipped.

    Raises:
        ValueError: no row with a positive score sd.
    """
    thr = math.sqrt(2 * math.log(batch))
    rows = [r for r in table if r["score_sd"] > 0 and math.isfinite(r["score_sd"])]
    if not rows:
        raise ValueError("edge_k: no k with a positive, finite score sd")
    return float(min(rows, key=lambda r: (abs(math.log(r["score_sd"] / thr)), r["k"]))["k"])


def recommended_table(rows: list[dict[str, Any]], inspects: list[dict[str, Any]], cfg) -> list[dict[str, Any]]:
    """Per (family, s): ``initlab mlmhead inspect``'s recommended k beside the tied grid's best k and the regret."""
    out = []
    for rep in sorted(inspects, key=lambda r: (cfg.families.index(r["family"]), r["s"])):
        f, s = rep["family"], rep["s"]
        rec_k = float(rep["recommended"]["k"])
        best_k, best = _best_k(rows, f, "tied", s)
        at_rec = _mean_ndcg(rows, f, "tied", s, rec_k)
        out_k, out_best = _best_k(rows, f, "k_output", s)
        regret = None if best is None or at_rec is None else best - at_rec
        e_k = edge_k(rep["table"], cfg.batch_size)
        at_edge = _mean_ndcg(rows, f, "tied", s, e_k)
        out.append({"family": f, "s": s, "recommended_k": rec_k, "rule": rep["recommended"]["rule"],
                    "edge_k": e_k, "ndcg_edge": at_edge,
                    "regret_edge": None if best is None or at_edge is None else best - at_edge,
                    "hit_edge": best_k == e_k,
                    "best_k": best_k, "ndcg_best": best, "ndcg_recommended": at_rec, "regret": regret,
                    "hit": best_k == rec_k, "near_hit": regret is not None and regret <= cfg.hit_tolerance,
                    "best_k_output": out_k, "ndcg_best_output": out_best,
                    "score_sd_k1": next((r["score_sd"] for r in rep["table"] if r["k"] == 1.0), None)})
    return out


def regret_summary(rec: list[dict[str, Any]], tolerance: float = 0.01, rule: str = "") -> dict[str, Any]:
    """Hit rate, near-hit rate (regret <= ``tolerance``) and mean / max regret over the (family, s) rows.

    ``rule``: ``""`` for ``inspect``'s recommended k (keys ``regret``, ``hit``), ``"edge"`` for
    :func:`edge_k` (keys ``regret_edge``, ``hit_edge``).
    """
    rk, hk = ("regret_edge", "hit_edge") if rule == "edge" else ("regret", "hit")
    rs = [r for r in rec if r[rk] is not None]
    if not rs:
        return {"rows": 0, "hit_rate": None, "near_hit_rate": None, "mean_regret": None, "max_regret": None}
    return {"rows": len(rs), "hit_rate": float(np.mean([r[hk] for r in rs])),
            "near_hit_rate": float(np.mean([r[rk] <= tolerance for r in rs])),
            "mean_regret": float(np.mean([r[rk] for r in rs])), "max_regret": float(max(r[rk] for r in rs))}


def _row(rows, family, mode, s, k) -> dict[str, Any] | None:
    for r in rows:
        if (r["family"], r["mode"], r["s"], r["k"]) == (family, mode, s, k):
            return r
    return None


def stability_table(rows: list[dict[str, Any]], cfg) -> list[dict[str, Any]]:
    """Per (family, s), tied mode: the k = 1 run against the best-k run at equal steps (seed 0 rows)."""
    out = []
    for f in cfg.families:
        for s in cfg.head_scales:
            best_k, best = _best_k(rows, f, "tied", s)
            a, b = _row(rows, f, "tied", s, 1.0), _row(rows, f, "tied", s, best_k)
            if a is None or b is None:
                continue
            fa, fb = a["final_infonce"], b["final_infonce"]
            poor = (best_k != 1.0 and fa is not None and fb is not None and fa - fb > cfg.poor_min_loss_margin
                    and best - (a["ndcg@10"] or 0.0) > cfg.harm_margin)
            out.append({"family": f, "s": s, "best_k": best_k,
                        **{f"{key}_k1": a[key] for key in ("init_infonce", "steps_to_threshold", "final_infonce",
                                                            "final_logged_ranking", "roughness", "ndcg@10")},
                        **{f"{key}_best": b[key] for key in ("init_infonce", "steps_to_threshold", "final_infonce",
                                                              "final_logged_ranking", "roughness", "ndcg@10")},
                        "poor_minimum": bool(poor)})
    return out


def _overall(yes: dict[str, bool]) -> str:
    n = sum(yes.values())
    return "reproduces" if n >= 3 else ("partly" if n >= 1 else "not")


def verdicts(rows: list[dict[str, Any]], stab: list[dict[str, Any]], cfg) -> dict[str, Any]:
    """The six claim verdicts of the module docstring, per family and overall."""
    m, fams = cfg.harm_margin, cfg.families
    s_max, s_min = max(cfg.head_scales), min(cfg.head_scales)
    ks = sorted(cfg.ks)
    nd = lambda f, s, k, mode="tied": _mean_ndcg(rows, f, mode, s, k)  # noqa: E731
    res: dict[str, Any] = {}

    def high_norm(f):
        k1, others = nd(f, s_max, 1.0), [nd(f, s_max, k) for k in ks if k > 1]
        return k1 is not None and bool(others) and max(others) - k1 > m
    res["high_norm_fixed_by_rescaling"] = {f: high_norm(f) for f in fams}

    def non_monotone(f):
        bk, best = _best_k(rows, f, "tied", 1.0)
        return bk is not None and ks[0] < bk < ks[-1] and best - nd(f, 1.0, ks[0]) > m and best - nd(f, 1.0, ks[-1]) > m
    res["non_monotone_optimum"] = {f: non_monotone(f) for f in fams}
    res["over_rescaling_collapse"] = {f: any(r["collapsed"] for r in rows if r["family"] == f and r["mode"] == "tied"
                                             and r["s"] == 1.0 and r["k"] >= 16) for f in fams}
    k4 = next((k for k in ks if k >= 4), None)

    def small_norm(f):
        a, b = nd(f, s_min, 1.0), nd(f, s_min, k4) if k4 else None
        return a is not None and b is not None and a - b > m
    res["small_norm_harm"] = {f: small_norm(f) for f in fams}
    res["high_initial_loss_and_poor_minimum"] = {
        f: any(r["family"] == f and r["s"] == s_max and r["poor_minimum"] and None not in (r["init_infonce_k1"], r["init_infonce_best"])
               and r["init_infonce_k1"] > r["init_infonce_best"] for r in stab) for f in fams}
    verdict = {key: {"per_family": val, "overall": _overall(val)} for key, val in res.items()}
    points = ((1.0, 16.0), (s_min, 4.0), (s_min, 16.0))  # the last: the second preregistration (seed 1)
    verdict["input_side"] = {f: {f"s={s:g},k={k:g}": _input_side(rows, f, s, k, m) for s, k in points} for f in fams}
    return verdict


def _input_side(rows, f, s, k, m) -> dict[str, Any]:
    base, tied, out = _mean_ndcg(rows, f, "tied", s, 1.0), _mean_ndcg(rows, f, "tied", s, k), _mean_ndcg(rows, f, "k_output", s, k)
    if None in (base, tied, out):
        return {"verdict": "not in grid"}
    ht, ho = base - tied, base - out
    if ht <= m:
        v = "no harm to explain"
    elif ho <= m:
        v = "explains"
    elif ho < ht - m:
        v = "partly"
    else:
        v = "does not"
    return {"verdict": v, "harm_tied": ht, "harm_output": ho}


# ------------------------------------------------------------------------------------------------
# theory comparison
# ------------------------------------------------------------------------------------------------
def predicted_infonce(score_spread: float, batch: int, draws: int = 2000, seed: int = 0) -> float:
    """InfoNCE (nats) of B candidates whose scores are i.i.d. Gaussian with pairwise-gap RMS ``score_spread``
    (per-score sd ``score_spread / sqrt(2)``), no signal: ``E[logsumexp_j s_j - s_0]`` by Monte Carlo."""
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(draws, batch, generator=g, dtype=torch.float64) * (score_spread / math.sqrt(2))
    return float((torch.logsumexp(s, dim=1) - s[:, 0]).mean())


def theory_rows(cells: dict[str, dict[str, Any]], vocab: int, cfg) -> list[dict[str, Any]]:
    """Per cell: measured initial InfoNCE, active fraction and FLOPS beside their predictions, at the cell's own
    logits (k = 1: the cell is already scaled).

    * InfoNCE: from the score spread of the i.i.d. Gaussian logit model
      (:func:`initlab.theory.score_scale.closed_form.theory_row` at the measured logit mean and sigma, L_q, L_d
      measured, B = ``init_batch``) and i.i.d. Gaussian scores (:func:`predicted_infonce`);
    * active fraction and FLOPS: the per-entry Gaussian logit model with position classes
      (:mod:`initlab.theory.score_scale.per_entry`, measured by :func:`initlab.synthetic.splade.measure.measure_init`;
      ``None`` for cells measured before it existed); the i.i.d. model's values are kept as ``iid_active_fraction``
      and ``iid_flops`` (it does not hold for these backbones: one N(mu, sigma^2) for every entry and token).

    Cells with non-finite initial measurements are left out."""
    from initlab.theory.score_scale.closed_form import BASE as SS, theory_row

    out = []
    keys = ("L_q", "L_d", "bias_mean", "logit_mean", "logit_std", "ranking_loss", "active_fraction", "flops",
            "score_spread")
    for name, c in sorted(cells.items()):
        i = c["init"]
        if any(_num(i.get(key)) is None for key in keys):
            continue  # a non-finite model at initialisation has nothing to compare
        tcfg = derive(SS, vocab=vocab, L_q=max(1, round(i["L_q"])), L_d=max(1, round(i["L_d"])), batch=cfg.init_batch,
                      lambda_q=cfg.lambda_q, lambda_d=cfg.lambda_d, mu_b=i["bias_mean"],
                      mu_h=i["logit_mean"] - i["bias_mean"], pooling="max", mc_batches=2)
        t = theory_row(tcfg, max(i["logit_std"], 1e-12), 1.0)
        out.append({"cell": name, "family": c["family"], "tied": c["tied"], "e": c["e"], "h": c["h"],
                    "sigma": i["logit_std"], "measured_infonce": i["ranking_loss"],
                    "predicted_infonce": predicted_infonce(t["score_spread"], cfg.init_batch),
                    "measured_active_fraction": i["active_fraction"],
                    "predicted_active_fraction": _num(i.get("pred_active_fraction")), "iid_active_fraction": t["active_d"],
                    "measured_flops": i["flops"], "predicted_flops": _num(i.get("pred_flops")), "iid_flops": t["flops_cost"],
                    "measured_score_spread": i["score_spread"], "predicted_score_spread": t["score_spread"]})
    return out


def theory_agreement(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median, min and max over the cells of measured / predicted, for each prediction of :func:`theory_rows`
    (``predicted_*``: the model the figure draws; ``iid_*``: the i.i.d. model's active fraction and FLOPS), and the
    number of cells compared. A ratio of 1 is agreement."""
    out: dict[str, Any] = {}
    for name, meas in (("predicted_infonce", "measured_infonce"), ("predicted_active_fraction", "measured_active_fraction"),
                       ("iid_active_fraction", "measured_active_fraction"), ("predicted_flops", "measured_flops"),
                       ("iid_flops", "measured_flops")):
        r = [row[meas] / row[name] for row in rows
             if _num(row.get(name)) is not None and _num(row.get(meas)) is not None and row[name] > 0]
        out[name] = ({"median": float(np.median(r)), "min": float(min(r)), "max": float(max(r)), "cells": len(r)}
                     if r else {"median": None, "min": None, "max": None, "cells": 0})
    return out
