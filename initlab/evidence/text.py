"""Words for verdicts: one formatter used by every report and table, so the same numbers read the same.

Imported as ``initlab.evidence.text``. :func:`describe` writes a :class:`initlab.evidence.rules.Verdict` as
``**word**: estimate [lo, hi] (what the interval is, n seeds)`` plus, for an inconclusive verdict, how many
seeds would decide it. Units: ``points`` (accuracy fractions shown as signed percentage points), ``share``
(a ratio, two decimals), ``mass`` (a proximity mass, three decimals), ``ndcg`` (nDCG@10, three decimals), ``nats`` (a loss in nats, two decimals).
"""

from __future__ import annotations

import math

from initlab.evidence.rules import INCONCLUSIVE, NOT_RUN, Verdict

__all__ = ["number", "interval", "interval_kind", "decide_text", "describe", "bold", "holm_text"]

_FORMATS = {"points": lambda x: f"{100 * x:+.1f}", "share": lambda x: f"{x:.2f}", "mass": lambda x: f"{x:+.3f}",
            "ndcg": lambda x: f"{x:+.3f}", "nats": lambda x: f"{x:+.2f}"}


def bold(word: str) -> str:
    return f"**{word}**"


def number(x: float, unit: str) -> str:
    """``x`` in ``unit`` (module docstring).

    Raises:
        ValueError: unknown ``unit``.
    """
    if unit not in _FORMATS:
        raise ValueError(f"unit: expected one of {list(_FORMATS)}, got {unit!r}")
    if not math.isfinite(x):
        return "n/a"
    out = _FORMATS[unit](x)
    if out.startswith("-") and float(out) == 0:  # a rounded zero carries no sign
        out = ("+" if unit != "share" else "") + out[1:]
    return out


def interval(v: Verdict, unit: str) -> str:
    """``[lo, hi]`` in ``unit``, or ``[unbounded]`` when nothing bounds it (one seed, an unbounded Fieller set)."""
    if not (math.isfinite(v.lo) and math.isfinite(v.hi)):
        return "[unbounded]"
    return f"[{number(v.lo, unit)}, {number(v.hi, unit)}]"


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


def describe(v: Verdict, unit: str, *, with_word: bool = True, counted: str = "seed") -> str:
    """``**word**: estimate [lo, hi] (kind, n seeds)[; decide text][; Holm text][; reason]``; ``counted`` names
    what ``n`` counts (``"(family, seed) backbone"`` for a regret over backbones). For a Holm-corrected verdict
    (:mod:`initlab.evidence.families`) the word is the corrected one and the interval the uncorrected one, said
    as such (:func:`holm_text`)."""
    head = f"{bold(v.word)}: " if with_word else ""
    if v.word == NOT_RUN:
        reason = v.reason or "; ".join(p.reason for p in v.parts if p.word == NOT_RUN)
        return f"{head}{reason}" if with_word else reason
    if v.rule == "all_of" or v.rule == "check":
        return f"{head}{v.reason}".rstrip(": ") if v.reason else bold(v.word) if with_word else ""
    seeds = f"{v.n} {counted}{'s' if v.n != 1 else ''}"
    kind = interval_kind(v) + (", uncorrected" if v.uncorrected else "")
    body = f"{number(v.estimate, unit)} {interval(v, unit)} ({kind}, {seeds})"
    extra = [t for t in (decide_text(v), holm_text(v), v.reason) if t]
    return head + body + ("; " + "; ".join(extra) if extra else "")
