"""Words for verdicts: one formatter used by every report and table, so the same numbers read the same.

Imported as ``initlab.experiment.text``. :func:`describe` writes a :class:`initlab.evidence.rules.Verdict` as
``**word**: estimate [lo, hi] (what the interval is, n seeds)`` plus, for an inconclusive verdict, how many
seeds would decide it. Units: ``points`` (accuracy fractions shown as signed percentage points), ``share``
(a ratio, two decimals), ``mass`` (a proximity mass, three decimals), ``ndcg`` (nDCG@10, three decimals), ``nats`` (a loss in nats, two decimals).
An interval end gets more decimals where the default would put it on (or across) a decision point of its rule or
0 (:func:`number`), so the printed interval always shows the decision the rule made.
"""

from __future__ import annotations

import math
from typing import Sequence

from initlab.evidence.rules import INCONCLUSIVE, NOT_RUN, Verdict

__all__ = ["number", "marks_of", "MAX_DECIMALS", "interval", "interval_kind", "decide_text", "describe", "bold", "holm_text",
           "degenerate", "shown_word", "decimals", "interval_decimals", "estimate"]

#: unit -> (scale to the printed number, default decimals, signed)
_UNITS = {"points": (100.0, 1, True), "share": (1.0, 2, False), "mass": (1.0, 3, True), "ndcg": (1.0, 3, True),
          "nats": (1.0, 2, True)}
#: the most decimals an interval end is printed with to keep it off a decision point
MAX_DECIMALS = 8


def bold(word: str) -> str:
    return f"**{word}**"


def _fmt(y: float, decimals: int, signed: bool) -> str:
    out = f"{y:+.{decimals}f}" if signed else f"{y:.{decimals}f}"
    if out.startswith("-") and float(out) == 0:  # a rounded zero carries no sign
        out = ("+" if signed else "") + out[1:]
    return out


def decimals(x: float, unit: str, marks: Sequence[float] = ()) -> int:
    """The decimals :func:`number` prints ``x`` with (the unit's default, or more to stay off a mark)."""
    out = number(x, unit, marks)
    return len(out.split(".")[1]) if "." in out else 0


def number(x: float, unit: str, marks: Sequence[float] = (), at_least: int = 0) -> str:
    """``x`` in ``unit`` (module docstring), with the unit's default decimals, or more where needed to keep the printed
    number strictly on the same side of every decision point of ``marks`` (in the claim's units, e.g. a threshold,
    the threshold minus its tolerance, and 0) as ``x`` itself: an interval end of -0.0003 (points) prints ``-0.03``,
    not ``+0.0``; 0.04774 against 0.048 prints ``+0.0477``, not ``+0.048``. At most :data:`MAX_DECIMALS` decimals (a
    number within 10^-8 of a mark prints as that mark).

    Raises:
        ValueError: unknown ``unit``.
    """
    if unit not in _UNITS:
        raise ValueError(f"unit: expected one of {list(_UNITS)}, got {unit!r}")
    if not math.isfinite(x):
        return "n/a"
    scale, default, signed = _UNITS[unit]
    y, pts = scale * x, [scale * m for m in marks if math.isfinite(m)] + ([0.0] if marks else [])

    def side(a: float, m: float) -> int:
        return (a > m) - (a < m)

    for d in range(max(default, at_least), MAX_DECIMALS + 1):
        out = _fmt(y, d, signed)
        shown = float(out)
        if all(side(shown, m) == side(y, m) for m in pts):
            return out
    return out


def marks_of(v: Verdict) -> tuple[float, ...]:
    """The decision points of a verdict's rule, in its units: each threshold, and each threshold ± the tolerance
    (0 is always added by :func:`number`)."""
    return tuple(sorted({t + e for t in v.thresholds for e in (-v.tol, 0.0, v.tol)}))


def interval(v: Verdict, unit: str) -> str:
    """``[lo, hi]`` in ``unit``, each end printed on the right side of the rule's decision points and of 0
    (:func:`number`), or ``[unbounded]`` when nothing bounds it (one seed, an unbounded Fieller set)."""
    if not (math.isfinite(v.lo) and math.isfinite(v.hi)):
        return "[unbounded]"
    marks = marks_of(v)
    d = interval_decimals(v, unit)
    return f"[{number(v.lo, unit, marks, d)}, {number(v.hi, unit, marks, d)}]"


def interval_decimals(v: Verdict, unit: str) -> int:
    """The decimals a verdict's numbers share: the most either interval end needs to stay on its side of the rule's
    decision points (:func:`number`), so that the estimate and both ends read with the same precision."""
    if not (math.isfinite(v.lo) and math.isfinite(v.hi)):
        return 0
    marks = marks_of(v)
    return max(decimals(v.lo, unit, marks), decimals(v.hi, unit, marks))


def estimate(v: Verdict, unit: str) -> str:
    """``v.estimate`` in ``unit`` with as many decimals as its interval's ends (:func:`interval_decimals`)."""
    return number(v.estimate, unit, at_least=interval_decimals(v, unit))


def interval_kind(v: Verdict) -> str:
    """What the interval is: ``95 % t``, ``90 % TOST``, ``95 % Fieller``."""
    kind = {"gain": "t", "equivalence": "TOST", "share": "Fieller"}.get(v.rule, v.rule)
    return f"{100 * v.level:.0f} % {kind}"


def decide_text(v: Verdict) -> str:
    """For an inconclusive verdict: the seed count that would decide it, or why none would."""
    if v.word != INCONCLUSIVE:
        return ""
    if v.seeds_to_decide is not None:
        where = " at Holm's step level" if v.uncorrected and v.uncorrected != v.word else ""
        return f"about {v.seeds_to_decide} seeds would decide it{where} (80 % power at the observed mean and sd)"
    if v.n < 2:
        return "one seed gives no interval: at least 2 seeds needed, more to decide"
    return "no seed count up to 200 would decide it at the observed mean and sd"


def _p(x: float) -> str:
    return "< 0.0001" if x < 1e-4 else f"{x:.2g}" if x < 0.01 else f"{x:.3f}".rstrip("0").rstrip(".")


def holm_text(v: Verdict) -> str:
    """How the family-wise correction read a decided verdict (empty when none was applied, or for an
    inconclusive or not-run one): ``Holm-adjusted p = ... (primary family)`` or, for a word the correction
    took back, ``uncorrected: partly, Holm-adjusted p = ... > 0.05 (secondary family)``."""
    if not v.uncorrected or v.uncorrected in (INCONCLUSIVE, NOT_RUN) or v.rule in ("all_of", "check"):
        return ""
    p = _p(v.p_adjusted)
    p = p if p.startswith("<") else f"= {p}"
    if v.word != v.uncorrected:
        return f"uncorrected: {v.uncorrected}, Holm-adjusted p {p} > 0.05 ({v.family} family)"
    return f"Holm-adjusted p {p} ({v.family} family)"


def degenerate(v: Verdict) -> bool:
    """Whether ``v`` is an equivalence decided on a zero-width interval (every per-seed value identical): such an
    interval says nothing about the spread, so the word it gave is not shown as a decision."""
    return v.rule == "equivalence" and math.isfinite(v.lo) and v.lo == v.hi


def shown_word(v: Verdict) -> str:
    """The word a verdict is shown with: ``degenerate`` for a zero-width equivalence (:func:`degenerate`) or an
    all-of whose decided parts all are, else its own word."""
    if degenerate(v):
        return "degenerate"
    decided = [p for p in v.parts if p.word != NOT_RUN]
    if v.rule == "all_of" and decided and all(degenerate(p) for p in decided):
        return "degenerate"
    return v.word


def describe(v: Verdict, unit: str, *, with_word: bool = True, counted: str = "seed") -> str:
    """``**word**: estimate [lo, hi] (kind, n seeds)[; decide text][; Holm text][; reason]``; ``counted`` names
    what ``n`` counts (``"(family, seed) backbone"`` for a regret over backbones). For a Holm-corrected verdict
    (:mod:`initlab.evidence.families`) the word is the corrected one and the interval the uncorrected one, said
    as such (:func:`holm_text`)."""
    head = f"{bold(shown_word(v))}: " if with_word else ""
    if v.word == NOT_RUN:
        reason = v.reason or "; ".join(p.reason for p in v.parts if p.word == NOT_RUN)
        return f"{head}{reason}" if with_word else reason
    if v.rule == "all_of" or v.rule == "check":
        return f"{head}{v.reason}".rstrip(": ") if v.reason else bold(v.word) if with_word else ""
    seeds = f"{v.n} {counted}{'s' if v.n != 1 else ''}"
    kind = interval_kind(v) + (", uncorrected" if v.uncorrected else "")
    body = f"{estimate(v, unit)} {interval(v, unit)} ({kind}, {seeds})"
    extra = [t for t in (decide_text(v), holm_text(v), v.reason) if t]
    if degenerate(v):
        head = f"{bold('degenerate')}: " if with_word else ""
        extra.insert(0, f"a zero-width interval (every value identical) decides no equivalence; the rule read "
                        f"{v.word}")
    return head + body + ("; " + "; ".join(extra) if extra else "")
