"""Tables of the synthetic SPLADE phase diagram, from saved cells (no training here).

Everything here reads the cell records written by :func:`initlab.synthetic.splade.phase.runner.run_phase`.
The claim verdicts are not decided here: every consumer calls :mod:`initlab.synthetic.splade.claims` on the
per-seed rows this module flattens. Definitions:

* ``roughness`` of a loss curve: RMS of the second differences of the logged InfoNCE part,
  ``sqrt(mean_i (r_{i+1} - 2 r_i + r_{i-1})^2)`` in nats (0 for a straight line; large for zig-zags);
* ``steps_to_threshold``: the first logged step whose InfoNCE part is <= ``loss_threshold`` (None: never);
* ``init_infonce`` / ``final_infonce``: InfoNCE (nats) of the first ``init_batch`` training pairs with
  in-batch negatives, before and after training (the same batch, so "equal steps" compares minima);
* a failed cell (non-finite gradient or loss) counts as nDCG@10 = 0 when choosing or scoring a k
  (its model is unusable), and is listed as failed;
* the best k of a (family, s, seed) and the rules for k (``inspect``, ``edge``, ``bert``) are those of
  :mod:`initlab.synthetic.splade.claims` (best k chosen on the ``select`` half of the dev queries, scored on
  the ``test`` half).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from initlab.config import derive
from initlab.synthetic.splade.measure import inspect_rows

__all__ = ["roughness", "steps_to_threshold", "ndcg_or_zero", "phase_rows", "inspect_rows", "recommended_table",
           "stability_table", "theory_rows", "theory_agreement", "predicted_infonce", "mean_sd"]


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
            "ndcg@10": c.get("ndcg@10"), "ndcg_select": c.get("ndcg_select"), "ndcg_test": c.get("ndcg_test"),
            "mrr@10": c.get("mrr@10"), "flops": c.get("flops"),
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
            "tied_after": c.get("tied_after"), "seconds": c["seconds"], "cpu_seconds": c.get("cpu_seconds"),
        })
    return rows


def mean_sd(values: list[float | None]) -> tuple[float | None, float | None, int]:
    """Mean, sample sd (None for one value) and count of the finite ``values``."""
    v = [x for x in values if _num(x) is not None]
    if not v:
        return None, None, 0
    return float(np.mean(v)), (float(np.std(v, ddof=1)) if len(v) > 1 else None), len(v)


def _by_k(rows: list[dict[str, Any]], family: str, mode: str, s: float, seed: int) -> dict[float, dict[str, Any]]:
    return {float(r["k"]): r for r in rows if (r["family"], r["mode"], r["s"], r["seed"]) == (family, mode, s, seed)}


def recommended_table(rows: list[dict[str, Any]], inspects: list[dict[str, Any]], cfg) -> list[dict[str, Any]]:
    """Per (family, s, seed): the best tied k (chosen on the select queries) and, for each rule of
    :data:`initlab.synthetic.splade.claims.RULES`, its k, its nDCG@10 on the test queries and its regret."""
    from initlab.synthetic.splade import claims as sc

    raw = {"rows": rows, "inspect": inspect_rows(inspects), "batch": cfg.init_batch}
    out = []
    for rep in sorted(raw["inspect"], key=lambda r: (cfg.families.index(r["family"]), r["s"], r["seed"])):
        f, s, seed = rep["family"], rep["s"], rep["seed"]
        by_k = _by_k(rows, f, "tied", s, seed)
        if not by_k:
            continue
        bk = sc.best_k(by_k)
        best = ndcg_or_zero({"ndcg@10": by_k[bk].get("ndcg_test")})
        row = {"family": f, "s": s, "seed": seed, "best_k": bk, "ndcg_best_test": best,
               "score_sd_k1": next((t["score_sd"] for t in rep["table"] if t["k"] == 1.0), None)}
        for rule in sc.RULES:
            k = sc.rule_k(raw, rule, f, seed, s)
            at = None if k is None or k not in by_k else ndcg_or_zero({"ndcg@10": by_k[k].get("ndcg_test")})
            row.update({f"k_{rule}": k, f"ndcg_{rule}": at, f"regret_{rule}": None if at is None else best - at})
        out.append(row)
    return out


def stability_table(rows: list[dict[str, Any]], cfg) -> list[dict[str, Any]]:
    """Per (family, s, seed), tied mode: the k = 1 run against the best-k run at equal steps."""
    from initlab.synthetic.splade import claims as sc

    out = []
    keys = ("init_infonce", "steps_to_threshold", "final_infonce", "final_logged_ranking", "roughness", "ndcg_test")
    for f in cfg.families:
        for s in cfg.head_scales:
            for seed in cfg.seeds:
                by_k = _by_k(rows, f, "tied", s, seed)
                if 1.0 not in by_k:
                    continue
                bk = sc.best_k(by_k)
                a, b = by_k[1.0], by_k[bk]
                out.append({"family": f, "s": s, "seed": seed, "best_k": bk, **{f"{key}_k1": a[key] for key in keys},
                            **{f"{key}_best": b[key] for key in keys}})
    return out


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
