"""Evaluation noise of the OOD synthetic SPLADE: a within-seed bootstrap over the out-of-domain test queries.

Role: how much of a seed's estimate is query noise. For one seed of a finished run, the out-of-domain test queries
(per held-out domain: the odd positions with ``select_k_on = "heldout"``, every query with ``"in_domain"``;
:mod:`initlab.synthetic.splade.ood.config`) are resampled with replacement, per domain and *paired* (the same
resampled queries for every cell and for BM25), ``cfg.bootstrap`` times; each statistic is recomputed on each
resample from the per-query nDCG@10 the cells saved at their stop (``per_query``,
:func:`initlab.synthetic.splade.ood.evaluate.ndcg_of_run`), and its sample sd over the resamples is reported (Efron &
Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 6). The best k of each (family, arm) is the one the rows
chose (:func:`initlab.synthetic.splade.claims.best_k` on ``ndcg_select``) and is held fixed: the sd is that of the
test estimate given the choice, not of the choice.

Statistics (nDCG@10 on the out-of-domain test queries, the mean over held-out domains of each domain's mean):

* ``gain/<family>``: nDCG(best k) - nDCG(k = 1) of each family (tied);
* ``interaction``: the mean gain of the high-norm families minus that of the normal-norm families (the headline's
  per-seed number, :func:`initlab.synthetic.splade.claims.interaction`);
* ``imposed/<family>@<high>``: the imposed-norm arm's gain minus the natural backbone's
  (:func:`initlab.synthetic.splade.ood.claims.imposed_interaction`'s per-seed number);
* ``bm25_ratio``: the best SPLADE cell's nDCG@10 (the cell with the highest point estimate, chosen on the
  *test* queries: a descriptive figure, not a claim) over BM25's.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["test_positions", "cell_vectors", "seed_bootstrap", "seeds_for_power"]


def seeds_for_power(sd: float, effect: float, threshold: float, alpha: float, power: float = 0.8) -> int:
    """The number of seeds at which a one-sided one-sample t-test of ``mean > threshold`` at level ``alpha`` has
    ``power`` against a true mean ``effect`` when the per-seed values have sd ``sd``: the smallest integer at or
    above statsmodels' ``TTestPower().solve_power`` (noncentral t; effect size ``(effect - threshold) / sd``). A
    gain claim's 95 % t-interval clearing its threshold at Holm's first step in a family of m claims is this test
    at ``alpha = 0.025 / m``.

    Raises:
        ValueError: ``sd`` <= 0, ``effect`` <= ``threshold``, or ``alpha`` / ``power`` outside (0, 1).
    """
    from statsmodels.stats.power import TTestPower

    if not sd > 0 or not effect > threshold:
        raise ValueError(f"sd, effect: expected sd > 0 and effect > threshold, got sd={sd!r}, effect={effect!r}, "
                         f"threshold={threshold!r}")
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha, power: expected values in (0, 1), got {alpha!r}, {power!r}")
    n = TTestPower().solve_power(effect_size=(effect - threshold) / sd, alpha=alpha, power=power, alternative="larger")
    return int(np.ceil(n - 1e-9))


def test_positions(n: int, select_k_on: str) -> np.ndarray:
    """The positions of the out-of-domain test queries among ``n`` queries of one set: odd positions (the *test*
    half) with ``"heldout"``, all with ``"in_domain"``.

    Raises:
        ValueError: an unknown ``select_k_on``.
    """
    if select_k_on == "heldout":
        return np.arange(1, n, 2)
    if select_k_on == "in_domain":
        return np.arange(n)
    raise ValueError(f"select_k_on: expected 'heldout' or 'in_domain', got {select_k_on!r}")


def cell_vectors(evaluation: Mapping[str, Any], set_names: Sequence[str], select_k_on: str) -> list[np.ndarray] | None:
    """Per held-out set (in ``set_names`` order), the test queries' nDCG@10 of one evaluation (a cell's ``final``
    or a BM25 cell: ``{"ood": {set name: {"per_query": [...]}}}``); None when a set lacks ``per_query`` (a cell
    saved before it was recorded)."""
    out = []
    for name in set_names:
        pq = (evaluation.get("ood") or {}).get(name, {}).get("per_query")
        if pq is None:
            return None
        v = np.asarray(pq, dtype=np.float64)
        out.append(v[test_positions(len(v), select_k_on)])
    return out


def seed_bootstrap(rows: Sequence[Mapping[str, Any]], cells: Mapping[str, Mapping[str, Any]],
                   bm25: Mapping[str, Any] | None, seed: int, high_norm: Sequence[str], normal_norm: Sequence[str],
                   select_k_on: str, resamples: int, cell_names: Mapping[tuple, str]) -> dict[str, Any]:
    """The within-seed bootstrap of ``seed`` (module docstring).

    Args:
        rows: the run's rows (:func:`initlab.synthetic.splade.ood.runner.rows`); only ``seed``'s are read.
        cells: finished cell records by name; ``cell_names`` maps ``(family, k, imposed or None)`` to a cell name.
        bm25: the seed's BM25 cell (or None: no ``bm25_ratio``).
        resamples: B (>= 2).
    Returns:
        ``{"seed", "resamples", "test_queries", "stats": {name: {"estimate", "sd"}}}``; a statistic whose cells
        lack ``per_query`` is left out; ``stats`` is empty when no cell has it.
    Raises:
        ValueError: ``resamples`` < 2.
    """
    from initlab.synthetic.splade.claims import best_k

    if resamples < 2:
        raise ValueError(f"resamples: expected >= 2, got {resamples!r}")
    mine = [r for r in rows if r["seed"] == seed]
    arms: dict[tuple[str, str | None], dict[float, Mapping[str, Any]]] = {}
    for r in mine:
        arms.setdefault((r["family"], r.get("imposed")), {})[float(r["k"])] = r
    names: list[str] = []
    vecs: dict[tuple[str, str | None, float], list[np.ndarray]] = {}
    for (f, hi), by_k in arms.items():
        for k in by_k:
            c = cells.get(cell_names[(f, k, hi)]) or {}
            fin = c.get("final") or {}
            names = names or sorted((fin.get("ood") or {}))
            v = cell_vectors(fin, names, select_k_on) if names else None
            if v is not None:
                vecs[(f, hi, k)] = v
    out: dict[str, Any] = {"seed": seed, "resamples": resamples, "stats": {}}
    if not vecs:
        return out
    sizes = [len(v) for v in next(iter(vecs.values()))]
    out["test_queries"] = int(sum(sizes))
    rng = np.random.default_rng([int(seed), 7001])
    idx = [rng.integers(n, size=(resamples, n)) for n in sizes]  # per held-out set, paired across cells

    def mean_of(v: list[np.ndarray]) -> tuple[float, np.ndarray]:
        point = float(np.mean([x.mean() for x in v]))
        boot = np.mean([x[i].mean(axis=1) for x, i in zip(v, idx)], axis=0)
        return point, boot

    m = {key: mean_of(v) for key, v in vecs.items()}

    def gain(f: str, hi: str | None) -> tuple[float, np.ndarray] | None:
        by_k = arms.get((f, hi))
        if not by_k or 1.0 not in by_k:
            return None
        b = best_k(by_k)
        if (f, hi, b) not in m or (f, hi, 1.0) not in m:
            return None
        return m[(f, hi, b)][0] - m[(f, hi, 1.0)][0], m[(f, hi, b)][1] - m[(f, hi, 1.0)][1]

    def put(name: str, point: float, boot: np.ndarray) -> None:
        out["stats"][name] = {"estimate": float(point), "sd": float(np.std(boot, ddof=1))}

    gains = {f: g for f in dict.fromkeys(f for f, hi in arms if hi is None) if (g := gain(f, None)) is not None}
    for f, (p, b) in gains.items():
        put(f"gain/{f}", p, b)
    hi_g = [gains[f] for f in high_norm if f in gains]
    lo_g = [gains[f] for f in normal_norm if f in gains]
    if hi_g and lo_g:
        put("interaction", np.mean([g[0] for g in hi_g]) - np.mean([g[0] for g in lo_g]),
            np.mean([g[1] for g in hi_g], axis=0) - np.mean([g[1] for g in lo_g], axis=0))
    for f, hi in arms:
        if hi is not None and f in gains and (g := gain(f, hi)) is not None:
            put(f"imposed/{f}@{hi}", g[0] - gains[f][0], g[1] - gains[f][1])
    if bm25 is not None and (bv := cell_vectors(bm25, names, select_k_on)) is not None:
        best = max(m, key=lambda key: m[key][0])
        bp, bb = mean_of(bv)
        if bp > 0:
            put("bm25_ratio", m[best][0] / bp, m[best][1] / np.where(bb > 0, bb, np.nan))
            out["stats"]["bm25_ratio"]["cell"] = cell_names[(best[0], best[2], best[1])]
            out["stats"]["bm25_ratio"]["bm25"] = bp
            out["stats"]["bm25_ratio"]["splade"] = m[best][0]
    return out
