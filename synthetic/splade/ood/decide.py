"""The preregistered confirmation at 8192 ids with the imposed-norm arm: its claims, gate, rules and power.

Imported as ``initlab.synthetic.splade.ood.decide``. Preset ``confirm-v8k-imposed``
(:data:`initlab.synthetic.splade.ood.config.PRESETS`; preregistration in docs/synthetic_splade_ood.md,
"Confirmation at 8192 ids with the imposed-norm arm"). Every number is recomputed from the per-seed rows of the
run (:func:`initlab.synthetic.splade.ood.runner.rows`): ``ndcg_select`` the in-domain dev nDCG@10 (which chooses
every arm's k), ``ndcg_test`` the out-of-domain nDCG@10 on every held-out-domain query.

Claims, one function each (per seed, paired; 95 % t-intervals over seeds; :class:`SPLADEThresholds` ``min_gain``
and ``tol``):

* :func:`family_interaction` (primary, headline) -- modernbert's gain from k minus bert's (gain rule, δ = ``min_gain``);
* :func:`imposed_loss` (primary) -- nDCG@10 at k = 1 of bert minus bert with modernbert's head norm (excludes 0);
* :func:`imposed_recovery` (primary) -- the imposed arm's gain from k minus bert's (excludes 0);
* :func:`four_family_interaction` (secondary) -- :func:`initlab.synthetic.splade.claims.interaction` over every
  family (high-norm modernbert and roberta against normal-norm bert and albert).

"Gain from k" is ``nDCG(k*) - nDCG(k = 1)`` with ``k*`` the k of best in-domain dev nDCG@10
(:func:`initlab.synthetic.splade.claims.best_k`). "Excludes 0" (:func:`excludes_zero`) is the gain rule at
δ = 0 whose best word is **partly**: preregistered so where no affordable seed count gave 0.8 power to clear the
threshold.

Reported with no claim word: :func:`head_norm_share` (mean recovery over mean family interaction, Fieller
interval), :func:`oracle_k_sensitivity` (the two contrasts with every k chosen on the out-of-domain test queries),
:func:`regime_gate` and :func:`cap_rule`. :func:`decide` assembles them, with words only once the seeds are
complete (:func:`primary_complete`, :func:`all_complete`). :func:`power_markdown` prints the preregistration's
power table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from initlab.config import from_dict
from initlab.evidence import families, rules, stats
from initlab.evidence.families import Family
from initlab.evidence.rules import PARTLY, REPRODUCED, Verdict
from initlab.synthetic.splade import claims as sc
from initlab.synthetic.splade.claims import Raw, SPLADEThresholds

__all__ = ["PRESET", "CONTROL", "HIGH", "REGIME_MIN", "CAP_SHARE_MAX", "MIN_COMPLETE", "EXPLORATORY", "FAMILIES",
           "excludes_zero", "family_interaction", "imposed_loss", "imposed_recovery", "four_family_interaction",
           "head_norm_share", "oracle_k_sensitivity", "regime_gate", "cap_rule", "primary_complete", "all_complete",
           "decide", "primary_verdicts", "RESULTS", "readme_words", "readme_lead", "readme_headline", "power_rows",
           "power_markdown"]

#: the preset this module judges
PRESET = "confirm-v8k-imposed"
#: the control (normal norm) and the high-norm family whose head norm the imposed arm takes
CONTROL, HIGH = "bert", "modernbert"
#: the regime gate's threshold on the dev-selected best cell's ratio to BM25 (the preregistration argues it)
REGIME_MIN = 0.80
#: at most this share of trained cells may stop at the cap
CAP_SHARE_MAX = 0.25
#: the fewest complete seeds any word may use (a failed cell leaves its seed incomplete)
MIN_COMPLETE = 6
#: the power computation's inputs, as preregistered: per contrast, the per-seed values of the three exploratory
#: seeds at 8192 ids (9202: docs/results/synthetic_splade_ood_regime/results_explore-v8k-imposed.json; 6061, 6062:
#: the review of 6592cf6, the same preset), the smallest effect measured so far, the threshold the claim must clear
#: (plus the tolerance) and the one-sided level (Holm's first step in the primary family of three; the gate: 0.025)
EXPLORATORY: dict[str, dict[str, Any]] = {
    "family_interaction": {"values": (0.073, 0.086, 0.071), "smallest": 0.064, "threshold": 0.05,
                           "alpha": 0.025 / 3, "as": "beyond 0.05"},
    "imposed_loss": {"values": (0.038, 0.034, 0.010), "smallest": 0.027, "threshold": 0.0, "alpha": 0.025 / 3,
                     "as": "excludes 0 (partly)"},
    "imposed_recovery": {"values": (0.058, 0.041, 0.013), "smallest": 0.037, "threshold": 0.0, "alpha": 0.025 / 3,
                         "as": "excludes 0 (partly)"},
    "regime_gate": {"values": (0.85, 0.92, 0.82), "smallest": 0.863, "threshold": REGIME_MIN, "alpha": 0.025,
                    "as": "lower end >= 0.80", "tol": 0.0},
}

FAMILIES: tuple[Family, ...] = (
    Family("primary", ("family_interaction", "imposed_loss", "imposed_recovery"),
           "a large head norm degrades SPLADE out of domain and k fixes it beyond the normal-norm control, and the "
           "head norm alone (bert's backbone at modernbert's norm) loses at k = 1 and recovers with k"),
    Family("secondary", ("four_family_interaction", "in_domain/family_interaction", "in_domain/imposed_loss",
                         "in_domain/imposed_recovery", "in_domain/four_family_interaction"),
           "the four-family interaction and every claim on the in-domain dev queries"),
)


def excludes_zero(d: Sequence[float], *, tol: float, why: str) -> Verdict:
    """The gain rule at δ = 0 on per-seed differences ``d (n,)``, its "reproduced" read as **partly** (the claim
    was preregistered as "excludes 0", ``why``); "not reproduced" when the interval lies below ``-tol``."""
    v = rules.gain(d, min_gain=0.0, tol=tol)
    if v.word == REPRODUCED:
        return dataclasses.replace(v, word=PARTLY, reason=f"excludes 0, as preregistered ({why})")
    return v


def _arm(raw: Raw, imposed: bool) -> dict[int, dict[float, Mapping[str, Any]]]:
    """``{seed: {k: row}}`` of the control's natural (tied) rows or of its imposed-norm rows."""
    if not imposed:
        return sc.cells_by_seed(raw, CONTROL)
    out: dict[int, dict[float, Mapping[str, Any]]] = {}
    for r in raw["rows"]:
        if r["family"] == CONTROL and r.get("mode") == "imposed" and r.get("imposed") == HIGH:
            out.setdefault(int(r["seed"]), {})[float(r["k"])] = r
    return out


def _gain(by_k: Mapping[float, Mapping[str, Any]], oracle: bool = False) -> float:
    """``nDCG_test(k*) - nDCG_test(k = 1)``, k* chosen on the dev queries (or, ``oracle``, on the test queries)."""
    k = max(by_k, key=lambda k: (sc.ndcg_of(by_k[k], "test"), -k)) if oracle else sc.best_k(by_k)
    return sc.ndcg_of(by_k[k], "test") - sc.ndcg_of(by_k[1.0], "test")


def _paired(a: Mapping[int, Mapping[float, Any]], b: Mapping[int, Mapping[float, Any]]) -> list[int]:
    return sorted(s for s in set(a) & set(b) if 1.0 in a[s] and 1.0 in b[s])


def _interaction_values(raw: Raw, oracle: bool = False) -> tuple[list[int], list[float]]:
    hi, lo = sc.cells_by_seed(raw, HIGH), sc.cells_by_seed(raw, CONTROL)
    seeds = _paired(hi, lo)
    return seeds, [_gain(hi[s], oracle) - _gain(lo[s], oracle) for s in seeds]


def _recovery_values(raw: Raw, oracle: bool = False) -> tuple[list[int], list[float]]:
    arm, nat = _arm(raw, True), _arm(raw, False)
    seeds = _paired(arm, nat)
    return seeds, [_gain(arm[s], oracle) - _gain(nat[s], oracle) for s in seeds]


def family_interaction(raw: Raw, th: SPLADEThresholds) -> Verdict:
    """modernbert's gain from k minus bert's, per seed (gain rule, δ = ``th.min_gain``); ``not run`` without
    both families at k = 1 on a common seed."""
    seeds, d = _interaction_values(raw)
    if not seeds:
        return rules.not_run("gain", [f"{HIGH} and {CONTROL} with k = 1 on a common seed"])
    return sc.with_label(rules.gain(d, min_gain=th.min_gain, tol=th.tol),
                         f"{HIGH} − {CONTROL}: nDCG@10 dev-chosen k − k = 1")


def imposed_loss(raw: Raw, th: SPLADEThresholds) -> Verdict:
    """nDCG@10 at k = 1 of bert's natural head minus bert's head at modernbert's norm, per seed (excludes 0)."""
    arm, nat = _arm(raw, True), _arm(raw, False)
    seeds = _paired(arm, nat)
    if not seeds:
        return rules.not_run("gain", [f"{CONTROL} and its imposed-norm arm at k = 1 on a common seed"])
    d = [sc.ndcg_of(nat[s][1.0], "test") - sc.ndcg_of(arm[s][1.0], "test") for s in seeds]
    return sc.with_label(excludes_zero(d, tol=th.tol, why="below the threshold at any affordable seed count"),
                         f"{CONTROL} − {CONTROL} at {HIGH}'s head norm: nDCG@10 at k = 1")


def imposed_recovery(raw: Raw, th: SPLADEThresholds) -> Verdict:
    """The imposed arm's gain from k minus bert's natural gain, per seed (excludes 0)."""
    seeds, d = _recovery_values(raw)
    if not seeds:
        return rules.not_run("gain", [f"{CONTROL} and its imposed-norm arm at k = 1 on a common seed"])
    return sc.with_label(excludes_zero(d, tol=th.tol, why="below the threshold at any affordable seed count"),
                         f"{CONTROL} at {HIGH}'s head norm − {CONTROL}: nDCG@10 dev-chosen k − k = 1")


def four_family_interaction(raw: Raw, th: SPLADEThresholds) -> Verdict:
    """:func:`initlab.synthetic.splade.claims.interaction` on the natural (tied) rows of every family."""
    return sc.interaction({**raw, "rows": [r for r in raw["rows"] if r.get("mode", "tied") == "tied"]}, th)


_CLAIMS = {"family_interaction": family_interaction, "imposed_loss": imposed_loss,
           "imposed_recovery": imposed_recovery, "four_family_interaction": four_family_interaction}


def head_norm_share(raw: Raw, level: float = 0.95) -> dict[str, Any]:
    """Mean imposed recovery over mean family interaction on their common seeds, with its Fieller interval
    (:func:`initlab.evidence.stats.fieller_interval`); no claim word. ``{"estimate", "lo", "hi", "bounded", "n"}``."""
    s1, rec = _recovery_values(raw)
    s2, inter = _interaction_values(raw)
    common = sorted(set(s1) & set(s2))
    if len(common) < 2:
        return {"estimate": None, "lo": None, "hi": None, "bounded": False, "n": len(common)}
    r = [rec[s1.index(s)] for s in common]
    i = [inter[s2.index(s)] for s in common]
    iv = stats.fieller_interval(r, i, level)
    return {"estimate": iv.estimate, "lo": iv.lo, "hi": iv.hi, "bounded": bool(iv.bounded), "n": iv.n}


def _interval(values: Sequence[float], level: float = 0.95) -> dict[str, Any]:
    if len(values) < 2:
        return {"estimate": values[0] if values else None, "lo": None, "hi": None, "n": len(values)}
    iv = stats.t_interval(values, level)
    return {"estimate": iv.estimate, "lo": iv.lo, "hi": iv.hi, "n": iv.n, "sd": iv.sd}


def oracle_k_sensitivity(raw: Raw) -> dict[str, Any]:
    """The family interaction and the imposed recovery with every arm's k chosen on the out-of-domain test
    queries themselves (an oracle): estimate and 95 % t-interval each, no claim word."""
    return {"family_interaction": _interval(_interaction_values(raw, oracle=True)[1]),
            "imposed_recovery": _interval(_recovery_values(raw, oracle=True)[1])}


def regime_gate(rows: Sequence[Mapping[str, Any]], bm25: Mapping[str, Mapping[str, Any]], seeds: Sequence[int]
                ) -> dict[str, Any]:
    """Per seed of ``seeds``, the cell with the best in-domain dev nDCG@10 (``ndcg_select``) among all its rows
    and its out-of-domain nDCG@10 over BM25's (``bm25["bm25_seed=S"]["ood_mean"]["ndcg@10"]``: every
    held-out-domain query); the mean ratio's 95 % t-interval and the outcome: ``"in the seed's regime"`` (lower end
    >= :data:`REGIME_MIN`), ``"outside the seed's regime"`` (upper end below it) or ``"undecided"``."""
    per_seed = []
    for s in seeds:
        mine = [r for r in rows if int(r["seed"]) == s and r.get("ndcg_select") is not None]
        b = bm25.get(f"bm25_seed={s}")
        if not mine or not b:
            continue
        best = max(mine, key=lambda r: r["ndcg_select"])
        ref = b["ood_mean"]["ndcg@10"]
        per_seed.append({"seed": s, "family": best["family"], "imposed": best.get("imposed"), "k": best["k"],
                         "splade": best["ndcg_test"], "bm25": ref, "ratio": best["ndcg_test"] / ref})
    iv = _interval([p["ratio"] for p in per_seed])
    if iv["lo"] is None:
        outcome = "undecided"
    elif iv["lo"] >= REGIME_MIN:
        outcome = "in the seed's regime"
    elif iv["hi"] < REGIME_MIN:
        outcome = "outside the seed's regime"
    else:
        outcome = "undecided"
    return {"per_seed": per_seed, **iv, "threshold": REGIME_MIN, "outcome": outcome}


def cap_rule(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How many trained cells stopped at the cap; ``holds`` when at most :data:`CAP_SHARE_MAX` of them did."""
    cap = sum(r.get("stopped_by") == "cap" for r in rows)
    return {"cap_bound": cap, "trained": len(rows), "holds": cap <= CAP_SHARE_MAX * len(rows)}


def _complete(rows: Sequence[Mapping[str, Any]], seed: int, families_: Sequence[str], ks: Sequence[float],
              imposed: bool) -> bool:
    have = {(r["family"], r.get("mode", "tied"), float(r["k"])) for r in rows
            if int(r["seed"]) == seed and not r.get("failed")}
    need = {(f, "tied", float(k)) for f in families_ for k in ks}
    if imposed:
        need |= {(CONTROL, "imposed", float(k)) for k in ks}
    return need <= have


def primary_complete(cfg: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """The seeds of ``cfg`` (a config record) whose primary cells (bert, modernbert and the imposed arm at every
    k) are finished without failure."""
    return [int(s) for s in cfg["seeds"] if _complete(rows, int(s), (CONTROL, HIGH), cfg["ks"], True)]


def all_complete(cfg: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[int]:
    """The seeds of ``cfg`` whose every cell (every family at every k and the imposed arm) is finished."""
    return [int(s) for s in cfg["seeds"] if _complete(rows, int(s), cfg["families"], cfg["ks"], True)]


def id_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The same rows with the in-domain dev nDCG@10 as the metric (the in-domain claims read them)."""
    return [dict(r, ndcg_select=r["id_select"], ndcg_test=r["id_test"]) for r in rows]


def _raw(rows: Sequence[Mapping[str, Any]], seeds: Sequence[int], batch: int = 32) -> Raw:
    """The claim functions' input (:data:`initlab.synthetic.splade.claims.Raw`) on ``seeds`` only."""
    return sc.on_seeds({"rows": list(rows), "inspect": [], "batch": batch}, seeds)


def decide(cfg: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], bm25: Mapping[str, Mapping[str, Any]]
           ) -> dict[str, Any]:
    """The preregistered report of a (possibly partial) run: ``cfg`` its config record, ``rows`` the runner's rows,
    ``bm25`` its BM25 cells. Always: ``numbers`` (per-seed values of every contrast on the seeds that have them,
    no word), ``primary_complete`` / ``all_complete`` seeds and ``cap``. Once every seed's primary cells are
    finished (or, with failed cells, at least :data:`MIN_COMPLETE` seeds): ``primary`` (the Holm-corrected
    verdicts of the primary family, as dicts), ``share``, ``sensitivity`` and ``gate``; once every cell is:
    ``secondary``. Otherwise those keys hold None: no claim word before the seeds are complete."""
    seeds = [int(s) for s in cfg["seeds"]]
    p_seeds, a_seeds = primary_complete(cfg, rows), all_complete(cfg, rows)
    raw_all = {"rows": list(rows), "inspect": [], "batch": cfg.get("init_batch", 32)}
    numbers = {name: {str(s): v for s, v in zip(*values(raw_all))}
               for name, values in (("family_interaction", _interaction_values), ("imposed_recovery", _recovery_values))}
    out: dict[str, Any] = {"preset": PRESET, "seeds": seeds, "primary_complete": p_seeds, "all_complete": a_seeds,
                           "numbers": numbers, "cap": cap_rule(rows), "primary": None, "share": None,
                           "sensitivity": None, "gate": None, "secondary": None}

    raw = _ready_raw(cfg, rows, p_seeds)
    if raw is not None:
        out["primary"] = {k: x.to_dict() for k, x in primary_verdicts(cfg, rows).items()}
        out["share"] = head_norm_share(raw)
        out["sensitivity"] = oracle_k_sensitivity(raw)
        out["gate"] = regime_gate(raw["rows"], bm25, p_seeds)
    v2 = secondary_verdicts(cfg, rows)
    if v2 is not None:
        out["secondary"] = {k: x.to_dict() for k, x in v2.items()}
    return out


def secondary_verdicts(cfg: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, Verdict] | None:
    """The secondary family's Holm-corrected verdicts (the four-family interaction, and the primary claims in
    domain) on the seeds where every cell is finished, or None while they are not complete (:func:`decide`'s rule)."""
    raw = _ready_raw(cfg, rows, all_complete(cfg, rows))
    if raw is None:
        return None
    th = from_dict(SPLADEThresholds, cfg["claims"])
    raw_id = {**raw, "rows": id_rows(raw["rows"])}
    v = {"four_family_interaction": four_family_interaction(raw, th),
         **{f"in_domain/{c}": _CLAIMS[c](raw_id, th) for c in _CLAIMS}}
    return families.corrected(v, FAMILIES[1:])


def _ready(seeds: Sequence[int], done: Sequence[int], failed: set[int]) -> bool:
    """Words may be computed: every seed done, or the missing ones failed and at least :data:`MIN_COMPLETE` done."""
    return len(done) == len(seeds) or (set(seeds) - set(done) <= failed and len(done) >= MIN_COMPLETE)


def _ready_raw(cfg: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], done: Sequence[int]) -> Raw | None:
    """The claim functions' input on the ``done`` seeds (:func:`_raw`), or None while :func:`_ready` says no word may
    be computed on them (a seed missing that did not fail)."""
    seeds = [int(s) for s in cfg["seeds"]]
    if not _ready(seeds, done, {int(r["seed"]) for r in rows if r.get("failed")}):
        return None
    return _raw(rows, done, cfg.get("init_batch", 32))


def primary_verdicts(cfg: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> dict[str, Verdict] | None:
    """The primary family's Holm-corrected verdicts on the primary-complete seeds, or None while the seeds are not
    complete (:func:`decide`'s rule)."""
    raw = _ready_raw(cfg, rows, primary_complete(cfg, rows))
    if raw is None:
        return None
    th = from_dict(SPLADEThresholds, cfg["claims"])
    return families.corrected({c: _CLAIMS[c](raw, th) for c in FAMILIES[0].claims}, FAMILIES[:1])


#: the run's report under docs/results (the README's SPLADE rows read it when present)
RESULTS = "synthetic_splade_ood_confirm_v8k_imposed/results.json"


def readme_words(r: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the README's SPLADE rows take from this run, or None while they must not change (the preregistration's
    "What decides the README"): ``r[RESULTS]`` loaded, its primary words computable, the regime gate "in the seed's
    regime" and the cap rule holding. Everything is recomputed from the saved rows and BM25 cells, never read from
    a saved word: ``{"v": primary verdicts, "share", "gate", "seeds", "vocab"}``."""
    if RESULTS not in r:
        return None
    rep = r[RESULTS]
    cfg, rows = rep["config"], rep["rows"]
    v = primary_verdicts(cfg, rows)
    if v is None:
        return None
    done = primary_complete(cfg, rows)
    gate = regime_gate([x for x in rows if int(x["seed"]) in done], rep["bm25"], done)
    if gate["outcome"] != "in the seed's regime" or not cap_rule(rows)["holds"]:
        return None
    raw = _raw(rows, done)
    return {"v": v, "share": head_norm_share(raw), "gate": gate, "seeds": done,
            "vocab": cfg["corpus"]["vocab_size"]}


def readme_lead(r: Mapping[str, Any], claims: tuple[str, ...], secondary: tuple[str, ...] = ()) -> str:
    """A README row's lead from this run when it takes its words (:func:`readme_words`): the words of ``claims``,
    the gate's interval and the share, the words of the ``secondary`` claims once every cell is finished, then
    "Earlier confirmation, kept beside it: "; '' otherwise."""
    from initlab.experiment import text
    from initlab.experiment.rows import seeds_text

    w = readme_words(r)
    if w is None:
        return ""
    g, sh = w["gate"], w["share"]
    words = "; ".join(f"{c.replace('_', ' ')} " + sc.describe_claim(w["v"][c]) for c in claims)
    v2 = secondary_verdicts(r[RESULTS]["config"], r[RESULTS]["rows"]) if secondary else None
    later = ("Secondary (Holm within its family): "
             + "; ".join(f"{c.replace('_', ' ')} " + sc.describe_claim(v2[c]) for c in secondary) + ". "
             if v2 is not None else "")
    return (f"{w['vocab']}-id confirmation with the imposed-norm arm ({seeds_text(w['seeds'])}; every k chosen on "
            f"in-domain dev queries; dev-selected best cell {g['estimate']:.2f} of BM25 [{g['lo']:.2f}, "
            f"{g['hi']:.2f}]): {words}; share of the family interaction carried by the head norm alone "
            f"{text.number(sh['estimate'], 'share')} [{sh['lo']:.2f}, {sh['hi']:.2f}] (no word). {later}"
            "Earlier confirmation, kept beside it: ")


def readme_headline(r: Mapping[str, Any], claims: tuple[str, ...], earlier: Any) -> Any:
    """A README row's headline cells (:class:`initlab.experiment.rows.Headline`): this run's ``claims`` when it takes
    its words (:func:`readme_words`), ``earlier``'s word kept beside them; else ``earlier`` unchanged."""
    from initlab.experiment.rows import Headline, headline

    w = readme_words(r)
    if w is None:
        return earlier
    h = headline([(c.replace("_", " "), w["v"][c], "ndcg") for c in claims])
    return Headline(h.word + f" ({w['vocab']}-id confirmation)", h.estimate + f"; earlier: {earlier.word}")


def power_rows(n: int = 8, power: float = 0.8) -> list[dict[str, Any]]:
    """The preregistration's power table from :data:`EXPLORATORY`: per contrast its sd over the exploratory
    seeds, the smallest effect, the seeds for ``power`` (:func:`initlab.synthetic.splade.ood.noise.seeds_for_power`)
    and the power at ``n`` seeds (statsmodels' ``TTestPower``, one-sided, against the threshold plus the tolerance
    0.002 for the claims)."""
    import statistics

    from statsmodels.stats.power import TTestPower

    from initlab.synthetic.splade.ood.noise import seeds_for_power

    out = []
    for name, e in EXPLORATORY.items():
        sd = statistics.stdev(e["values"])
        bar = e["threshold"] + e.get("tol", 0.002)
        out.append({"contrast": name, "sd": sd, "smallest": e["smallest"], "clears": bar, "alpha": e["alpha"],
                    "as": e["as"], "seeds": seeds_for_power(sd, e["smallest"], bar, e["alpha"], power),
                    f"power_at_{n}": float(TTestPower().power(effect_size=(e["smallest"] - bar) / sd, nobs=n,
                                                              alpha=e["alpha"], alternative="larger"))})
    return out


def power_markdown(n: int = 8) -> str:
    """:func:`power_rows` as a markdown table."""
    lines = [f"| contrast | sd (3 seeds) | smallest effect | must clear | one-sided α | preregistered as | seeds for 0.8 | "
             f"power at {n} |", "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |"]
    for r in power_rows(n):
        lines.append(f"| {r['contrast']} | {r['sd']:.4f} | {r['smallest']:.3f} | {r['clears']:.3f} | {r['alpha']:.4f} | "
                     f"{r['as']} | {r['seeds']} | {r[f'power_at_{n}']:.2f} |")
    return "\n".join(lines)
