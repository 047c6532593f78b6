"""Verdict rules on intervals: gain, equivalence, share, all-of, pass/fail checks.

Imported as ``initlab.evidence.rules``. A rule turns raw per-seed numbers into a :class:`Verdict`; it never
decides on a point estimate near a threshold. Every comparison with a threshold θ uses a stated tolerance
``tol``: an interval end counts as beyond θ only if it is beyond by more than ``tol``. An interval that
contains a threshold (or ends within ``tol`` of it) reads **inconclusive**, with the number of seeds that
a power computation at the observed mean and sd says would decide it (:mod:`initlab.evidence.stats`).

Words: ``reproduced``, ``partly``, ``not reproduced``, ``inconclusive``, and ``not run`` (the numbers are
absent). The rules:

* **gain** ("condition beats control by at least δ"), on the paired differences ``d = cond - control`` and
  their 95 % t-interval ``[lo, hi]``: *reproduced* if ``lo > δ``; *partly* if ``0 < lo`` and ``hi < δ``
  (a real gain, smaller than claimed); *not reproduced* if ``hi < δ`` and ``lo <= 0`` (the claimed gain is
  excluded); otherwise *inconclusive* (the interval contains δ).
* **equivalence** ("condition ≈ control within ±Δ"), the two one-sided tests at α = 0.05, i.e. the 90 %
  t-interval ``[lo, hi]``: *reproduced* if ``-Δ < lo`` and ``hi < Δ``; *not reproduced* if ``lo > Δ`` or
  ``hi < -Δ`` (a difference larger than the margin, one-sided at 5 %); otherwise *inconclusive*.
* **share** ("condition recovers at least σ of the full gain"), the Fieller 95 % interval ``[L, U]`` of
  ``mean(cond - control) / mean(full - control)``: *not reproduced* if the full gain is itself negative
  with a 95 % interval below 0 (nothing to share); *inconclusive* if the Fieller set is unbounded (the
  full gain is not significantly non-zero); *reproduced* if ``L > σ``; *partly* if ``0 < L`` and
  ``U < σ``; *not reproduced* if ``U < σ`` and ``L <= 0``; otherwise *inconclusive*.
* **all-of** (a claim made of parts, e.g. "at every depth"): decided parts combine as *reproduced* (all
  reproduced), *not reproduced* (none reproduced or partly), else *partly*; an inconclusive part makes
  the whole inconclusive only if some outcome of it would change the combined word.
* **check** (pass/fail checks, e.g. the theorem checks): *reproduced* if every check passes, *not
  reproduced* if one fails; the tolerance of each check is the check's own.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from initlab.evidence import stats

__all__ = ["evaluate_claims", "claim_by_id", "REPRODUCED", "PARTLY", "NOT", "INCONCLUSIVE", "NOT_RUN", "WORDS", "Verdict", "gain", "equivalence",
           "share", "all_of", "checks", "not_run", "paired_differences", "planned_seeds", "VerdictRecordError",
           "check_record"]

REPRODUCED, PARTLY, NOT, INCONCLUSIVE, NOT_RUN = "reproduced", "partly", "not reproduced", "inconclusive", "not run"
WORDS = (REPRODUCED, PARTLY, NOT, INCONCLUSIVE, NOT_RUN)


@dataclass(frozen=True)
class Verdict:
    """The outcome of one rule on raw numbers.

    ``estimate`` is the point estimate (mean difference, share) in the claim's units; ``lo``/``hi`` its
    interval at ``level``; ``thresholds`` the thresholds the rule compared with; ``margin`` the distance of
    the deciding interval end from its threshold (>= ``tol`` for a decided word; for an inconclusive
    one, how far inside the interval the nearest threshold sits, as a negative number); ``seeds_to_decide``
    (inconclusive only) the power-based seed count, None if no count would (the mean sits on a threshold,
    or the sd is unknown); ``parts`` the verdicts an all-of combined.
    """

    word: str
    rule: str
    estimate: float = math.nan
    lo: float = -math.inf
    hi: float = math.inf
    level: float = 0.95
    n: int = 0
    sd: float = math.nan
    thresholds: tuple[float, ...] = ()
    tol: float = 0.0
    margin: float = math.nan
    seeds_to_decide: int | None = None
    reason: str = ""
    parts: tuple["Verdict", ...] = field(default=())

    def __post_init__(self) -> None:
        if self.word not in WORDS:
            raise ValueError(f"Verdict.word: expected one of {list(WORDS)}, got {self.word!r}")

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("word", "rule", "estimate", "lo", "hi", "level", "n", "sd", "thresholds",
                                            "tol", "margin", "seeds_to_decide", "reason")}
        d["thresholds"] = list(self.thresholds)
        d["parts"] = [p.to_dict() for p in self.parts]
        return d


def not_run(rule: str, missing: Sequence[str]) -> Verdict:
    """The verdict of a claim whose numbers are absent (never guessed)."""
    return Verdict(NOT_RUN, rule, reason="missing: " + ", ".join(missing))


def evaluate_claims(claims: Sequence[Any], raw: Any, th: Any) -> dict[str, Verdict]:
    """Every claim's verdict, by id, in ``claims`` order (each claim has ``id`` and ``verdict(raw, th)``)."""
    return {c.id: c.verdict(raw, th) for c in claims}


def claim_by_id(claims: Sequence[Any], claim_id: str) -> Any:
    """The claim of ``claims`` whose ``id`` is ``claim_id``.

    Raises:
        KeyError: naming the unknown id and the known ones.
    """
    for c in claims:
        if c.id == claim_id:
            return c
    raise KeyError(f"claim_id: unknown {claim_id!r}; expected one of {[c.id for c in claims]}")


def paired_differences(cond: dict[int, float], control: dict[int, float], what: str) -> list[float]:
    """``cond[s] - control[s]`` over the seeds ``s`` of ``cond``, in seed order. The control may hold more
    seeds (a condition run on the first n seeds only, ``seed_counts``); those are not used.

    Raises:
        ValueError: naming ``what`` and the seeds, when ``cond`` holds a seed its control lacks (a paired
            statistic needs every seed on both sides).
    """
    extra = sorted(set(cond) - set(control))
    if extra:
        raise ValueError(f"{what}: the condition and its control must share their seeds; seeds {extra} of the "
                         f"condition are missing in the control (condition {sorted(cond)}, control {sorted(control)})")
    return [float(cond[s]) - float(control[s]) for s in sorted(cond)]


def _need(iv: stats.Interval, threshold: float, level: float, tol: float) -> int | None:
    return stats.seeds_for_gain(iv.estimate, iv.sd, threshold, level=level, tol=tol)


def gain(d: Sequence[float], *, min_gain: float, tol: float, level: float = 0.95) -> Verdict:
    """The gain rule (module docstring) on per-seed paired differences ``d (n,)`` in the claim's units."""
    iv = stats.t_interval(d, level)
    base = dict(rule="gain", estimate=iv.estimate, lo=iv.lo, hi=iv.hi, level=level, n=iv.n, sd=iv.sd,
                thresholds=(0.0, min_gain), tol=tol)
    if iv.lo > min_gain + tol:
        return Verdict(REPRODUCED, margin=iv.lo - min_gain, **base)
    if iv.hi < min_gain - tol:
        if iv.lo > tol:
            return Verdict(PARTLY, margin=min(min_gain - iv.hi, iv.lo), **base)
        return Verdict(NOT, margin=min_gain - iv.hi, **base)
    # the interval contains min_gain (within tol): more seeds would move it off min_gain
    return Verdict(INCONCLUSIVE, margin=-min(min_gain - iv.lo, iv.hi - min_gain),
                   seeds_to_decide=_need(iv, min_gain, level, tol), **base)


def equivalence(d: Sequence[float], *, margin: float, tol: float, alpha: float = 0.05) -> Verdict:
    """The equivalence rule (TOST at ``alpha``; module docstring) on per-seed paired differences ``d``."""
    iv = stats.tost_interval(d, alpha)
    level = 1 - 2 * alpha
    base = dict(rule="equivalence", estimate=iv.estimate, lo=iv.lo, hi=iv.hi, level=level, n=iv.n, sd=iv.sd,
                thresholds=(-margin, margin), tol=tol)
    if iv.lo > -margin + tol and iv.hi < margin - tol:
        return Verdict(REPRODUCED, margin=min(iv.lo + margin, margin - iv.hi), **base)
    if iv.lo > margin + tol or iv.hi < -margin - tol:
        return Verdict(NOT, margin=max(iv.lo - margin, -margin - iv.hi), **base)
    if abs(iv.estimate) < margin - tol:
        need = stats.seeds_for_equivalence(iv.estimate, iv.sd, margin, alpha=alpha, tol=tol)
    else:
        need = stats.seeds_for_gain(abs(iv.estimate), iv.sd, margin, level=level, tol=tol)
    inside = min(abs(iv.lo + margin), abs(margin - iv.hi))
    return Verdict(INCONCLUSIVE, margin=-inside, seeds_to_decide=need, **base)


def share(cond_gain: Sequence[float], full_gain: Sequence[float], *, min_share: float, tol: float,
          level: float = 0.95) -> Verdict:
    """The share rule (module docstring): per-seed ``cond_gain = cond - control`` and ``full_gain = full -
    control`` (paired, same seeds), Fieller interval of the ratio of their means."""
    full = stats.t_interval(full_gain, level, "full_gain")
    iv = stats.fieller_interval(cond_gain, full_gain, level)
    base = dict(rule="share", estimate=iv.estimate, lo=iv.lo, hi=iv.hi, level=level, n=iv.n, sd=iv.sd,
                thresholds=(0.0, min_share), tol=tol)
    if full.hi < 0:
        return Verdict(NOT, reason="the full gain is negative (95 % interval below 0): nothing to share",
                       margin=-full.hi, **base)
    if not iv.bounded:
        need = stats.seeds_for_gain(full.estimate, full.sd, 0.0, level=level) if full.estimate > 0 else None
        return Verdict(INCONCLUSIVE, reason="the full gain is not significantly above 0, so the share is unbounded",
                       seeds_to_decide=need, **base)
    if iv.lo > min_share + tol:
        return Verdict(REPRODUCED, margin=iv.lo - min_share, **base)
    if iv.hi < min_share - tol:
        if iv.lo > tol:
            return Verdict(PARTLY, margin=min(min_share - iv.hi, iv.lo), **base)
        return Verdict(NOT, margin=min_share - iv.hi, **base)
    return Verdict(INCONCLUSIVE, margin=-min(min_share - iv.lo, iv.hi - min_share),
                   seeds_to_decide=_need(iv, min_share, level, tol), **base)


def _combine(words: Sequence[str]) -> str:
    if all(w == REPRODUCED for w in words):
        return REPRODUCED
    if all(w == NOT for w in words):
        return NOT
    return PARTLY


def all_of(parts: Sequence[Verdict], rule: str = "all_of") -> Verdict:
    """Combine part verdicts (module docstring). A ``not run`` part makes the whole ``not run``.

    Raises:
        ValueError: no parts.
    """
    if not parts:
        raise ValueError("parts: expected at least one part verdict")
    if any(p.word == NOT_RUN for p in parts):
        return Verdict(NOT_RUN, rule, reason="; ".join(p.reason for p in parts if p.word == NOT_RUN), parts=tuple(parts))
    options = [[p.word] if p.word != INCONCLUSIVE else [REPRODUCED, PARTLY, NOT] for p in parts]
    outcomes = {_combine(ws) for ws in itertools.product(*options)}
    if len(outcomes) == 1:
        word = outcomes.pop()
        need = None
    else:
        word = INCONCLUSIVE
        counts = [p.seeds_to_decide for p in parts if p.word == INCONCLUSIVE]
        need = None if any(c is None for c in counts) else max(counts)
    return Verdict(word, rule, n=min(p.n for p in parts), seeds_to_decide=need, parts=tuple(parts))


def checks(results: dict[str, bool], rule: str = "check") -> Verdict:
    """Pass/fail checks ``{name: passed}``: reproduced if all pass, not reproduced if any fails.

    Raises:
        ValueError: no checks.
    """
    if not results:
        raise ValueError("results: expected at least one check")
    failed = sorted(k for k, ok in results.items() if not ok)
    if failed:
        return Verdict(NOT, rule, n=len(results), reason="failed: " + ", ".join(failed))
    return Verdict(REPRODUCED, rule, n=len(results))


def planned_seeds(v: Verdict, power: float = 0.8) -> int | None:
    """Seeds a fresh run needs for ``v``'s rule to reach the word its estimate points to, with ``power``, if the
    true mean and sd were ``v``'s (the planning use of :mod:`initlab.evidence.stats`; exploratory numbers in,
    a preregistered seed count out).

    Gain: an estimate above δ (or below 0) must keep its interval off δ; one in (0, δ) off both 0 and δ.
    Equivalence: TOST inside the margin if the estimate is inside it, else the 90 % interval off the margin.
    Share: the delta-method sd of the ratio against σ (and 0 for an estimate in (0, σ)). All-of: the largest
    part. None where no count up to :data:`initlab.evidence.stats.MAX_SEEDS` would do, or for ``not run``.
    """
    if v.word == NOT_RUN:
        return None
    if v.rule == "all_of":
        counts = [planned_seeds(p, power) for p in v.parts]
        return None if not counts or any(c is None for c in counts) else max(counts)
    if v.rule == "check":
        return None
    m, sd = v.estimate, v.sd
    if v.rule == "equivalence":
        margin = v.thresholds[1]
        alpha = (1 - v.level) / 2
        if abs(m) < margin - v.tol:
            return stats.seeds_for_equivalence(m, sd, margin, alpha=alpha, power=power, tol=v.tol)
        return stats.seeds_for_gain(abs(m), sd, margin, level=v.level, power=power, tol=v.tol)
    lo_t, hi_t = v.thresholds  # (0, δ) for gains, (0, σ) for shares
    need = [hi_t] if (m >= hi_t or m <= lo_t) else [lo_t, hi_t]
    counts = [stats.seeds_for_gain(m, sd, t, level=v.level, power=power, tol=v.tol) for t in need]
    return None if any(c is None for c in counts) else max(counts)


class VerdictRecordError(ValueError):
    """A saved verdict record disagrees with the verdicts recomputed from the saved raw numbers (or is missing)."""


class SummaryRecordError(ValueError):
    """A stored summary number (a mean, a seed list, a count) disagrees with its per-seed records."""


def check_summary(where: str, fields: list[tuple[str, Any, Any]]) -> None:
    """Refuse a stored summary whose numbers its per-seed records no longer give.

    ``fields``: ``(name, stored, recomputed from the records)``; numbers compare to ``1e-9`` relative, lists and
    other values exactly. Stored numbers are never shown: this only refuses a file edited on one side.

    Raises:
        SummaryRecordError: naming ``where`` and every field that differs.
    """
    def same(a: Any, b: Any) -> bool:
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
            return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
        return a == b

    bad = [f"{name}: stored {stored!r}, the records give {got!r}" for name, stored, got in fields if not same(stored, got)]
    if bad:
        raise SummaryRecordError(f"{where}: the stored summary disagrees with its per-seed records (" + "; ".join(bad)
                                 + "); regenerate the summary from the records, or restore the edited records")


def check_record(saved: dict[str, Any], recomputed: dict[str, Verdict], where: str) -> None:
    """Compare a saved verdict record (``{claim id: {"word": ...}}``, as written by ``Verdict.to_dict``) with
    the verdicts recomputed from the raw numbers. Saved words are never used; this only refuses a record
    that no longer matches its numbers (a hand-edited word, or numbers edited after the record was written).

    Raises:
        VerdictRecordError: naming ``where`` and every claim whose saved word differs or is missing.
    """
    bad = [f"{k}: saved {saved[k].get('word')!r}, recomputed {v.word!r}" for k, v in recomputed.items()
           if k in saved and saved[k].get("word") != v.word]
    bad += [f"{k}: not in the record" for k in recomputed if k not in saved]
    if bad:
        raise VerdictRecordError(f"{where}: the saved verdicts disagree with the raw numbers (" + "; ".join(bad) + ")")
