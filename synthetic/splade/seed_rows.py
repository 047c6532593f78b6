"""The raw per-seed numbers the synthetic SPLADE claims read: the rows of a run, the complete seeds, each
(family, seed)'s cells by k, the best k and the k a rule picks, paired differences across seeds."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from initlab.evidence.rules import Verdict
from initlab.synthetic.splade.thresholds import ALL_RULES, Raw

__all__ = ['finite_or_none', 'as_raw', 'complete_seeds', 'on_seeds', 'ndcg_of', 'cells_by_seed', 'best_k', 'families_in', 'inspect_report', 'rule_k', 'with_label', 'paired_by_seed', 'ndcg_at']


def finite_or_none(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def as_raw(phase: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` (module docstring) from a loaded ``phase.json``: its ``rows`` (nDCG@10 per split, InfoNCE), its
    ``inspect`` reports and the InfoNCE batch ``config.init_batch``.

    Raises:
        KeyError: ``phase`` lacks ``rows`` or ``config.init_batch``.
    """
    keep = ("family", "mode", "s", "k", "seed", "ndcg_select", "ndcg_test", "init_infonce", "final_infonce",
            "collapsed", "failed")
    rows = [{key: r.get(key) for key in keep} for r in phase["rows"]]
    insp = [{"family": i["family"], "s": float(i["s"]), "seed": int(i["seed"]), "recommended_k": float(i["recommended_k"]),
             "table": [{"k": float(t["k"]), "score_sd": float(t["score_sd"])} for t in i["table"]]}
            for i in phase.get("inspect", [])]
    return {"rows": rows, "inspect": insp, "batch": int(phase["config"]["init_batch"])}


def complete_seeds(rows: Sequence[Mapping[str, Any]], families: Sequence[str], ks: Sequence[float]) -> list[int]:
    """The seeds whose every tied (``family``, ``k``) cell of the grid ``families x ks`` (s = 1) has a row: the
    seeds a run cut short may be judged on (a seed missing a k would choose its best k on a smaller grid)."""
    want = {(f, float(k)) for f in families for k in ks}
    have: dict[int, set[tuple[str, float]]] = {}
    for r in rows:
        if r.get("mode", "tied") == "tied" and float(r.get("s", 1.0)) == 1.0:
            have.setdefault(int(r["seed"]), set()).add((r["family"], float(r["k"])))
    return sorted(s for s, got in have.items() if want <= got)


def on_seeds(raw: Raw, seeds: Sequence[int]) -> dict[str, Any]:
    """``raw`` restricted to the rows and inspect reports of ``seeds``."""
    keep = {int(s) for s in seeds}
    return {**raw, "rows": [r for r in raw["rows"] if int(r["seed"]) in keep],
            "inspect": [i for i in raw.get("inspect", []) if int(i["seed"]) in keep]}


def ndcg_of(r: Mapping[str, Any], split: str) -> float:
    """One row's nDCG@10 on ``split`` (``"select"`` or ``"test"``: the half of the dev queries), in [0, 1]; a failed
    cell (a missing or non-finite value) counts as 0."""
    v = finite_or_none(r.get(f"ndcg_{split}"))
    return 0.0 if v is None else v  # a failed cell: nDCG 0 (an unusable model)


def cells_by_seed(raw: Raw, family: str, mode: str = "tied", s: float = 1.0) -> dict[int, dict[float, Mapping[str, Any]]]:
    """``{seed: {k: row}}`` of one (family, mode, s): the rows of ``raw["rows"]`` with that family, ``mode`` (e.g.
    ``"tied"``, ``"k_output"``) and head scale ``s``, by seed then k; empty when there are none."""
    out: dict[int, dict[float, Mapping[str, Any]]] = {}
    for r in raw["rows"]:
        if r["family"] == family and r["mode"] == mode and float(r["s"]) == s:
            out.setdefault(int(r["seed"]), {})[float(r["k"])] = r
    return out


def best_k(by_k: Mapping[float, Mapping[str, Any]]) -> float:
    """The best k of one (family, seed): highest ``ndcg_select``, ties to the smaller k (module docstring).

    Raises:
        ValueError: no cells.
    """
    if not by_k:
        raise ValueError("best_k: expected at least one cell")
    return min(by_k, key=lambda k: (-ndcg_of(by_k[k], "select"), k))


def families_in(raw: Raw, wanted: Sequence[str]) -> list[str]:
    present = {r["family"] for r in raw["rows"]}
    return [f for f in wanted if f in present]


def inspect_report(raw: Raw, family: str, seed: int, s: float = 1.0) -> Mapping[str, Any] | None:
    for i in raw.get("inspect", []):
        if i["family"] == family and int(i["seed"]) == seed and float(i["s"]) == s:
            return i
    return None


def _closest(table: Sequence[Mapping[str, float]], target: float) -> float | None:
    ok = [t for t in table if t["score_sd"] > 0 and math.isfinite(t["score_sd"])]
    if not ok or not (target > 0 and math.isfinite(target)):
        return None
    return float(min(ok, key=lambda t: (abs(math.log(t["score_sd"] / target)), t["k"]))["k"])


def rule_k(raw: Raw, rule: str, family: str, seed: int, s: float = 1.0, fixed_k: float = 4.0) -> float | None:
    """The k that ``rule`` (module docstring) picks for one backbone, or None if its inspect report (or, for
    ``bert``, the same seed's bert report) is absent. ``fixed_k``: the ``fixed`` rule's k.

    Raises:
        ValueError: unknown ``rule``.
    """
    if rule not in ALL_RULES:
        raise ValueError(f"rule: expected one of {list(ALL_RULES)}, got {rule!r}")
    if rule == "fixed":
        return float(fixed_k)
    if rule == "none":
        return 1.0
    rep = inspect_report(raw, family, seed, s)
    if rep is None:
        return None
    if rule == "inspect":
        return float(rep["recommended_k"])
    if rule == "edge":
        return _closest(rep["table"], math.sqrt(2 * math.log(raw["batch"])))
    ref = inspect_report(raw, "bert", seed, 1.0)
    if ref is None:
        return None
    ref_sd = next((t["score_sd"] for t in ref["table"] if t["k"] == 1.0), None)
    return None if ref_sd is None else _closest(rep["table"], ref_sd)


def with_label(v: Verdict, label: str) -> Verdict:
    """``v`` with ``label`` in front of its reason (``"label (reason)"``, or ``"label"`` without one): the label that
    :func:`part_label` reads back and the README rows show."""
    return dataclasses.replace(v, reason=label + (f" ({v.reason})" if v.reason else ""))


def paired_by_seed(raw: Raw, family: str, pick: Callable[[dict[float, Mapping[str, Any]], int], tuple[float | None, float | None]],
            what: str) -> list[float] | None:
    """Per seed ``a - b`` with ``(a, b) = pick(cells of that seed, seed)``; None if some seed lacks a value."""
    cells = cells_by_seed(raw, family)
    if not cells:
        return None
    d = []
    for seed in sorted(cells):
        a, b = pick(cells[seed], seed)
        if a is None or b is None:
            return None
        d.append(a - b)
    return d


def ndcg_at(by_k: Mapping[float, Mapping[str, Any]], k: float | None) -> float | None:
    return None if k is None or k not in by_k else ndcg_of(by_k[k], "test")
