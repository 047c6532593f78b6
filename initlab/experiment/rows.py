"""The record of a README claims row and the wording its cells share; the rows themselves live in each
experiment's ``claims`` module, beside their verdict functions (:mod:`initlab.synthetic.spt.claims`,
:mod:`initlab.synthetic.splade.claims`, :mod:`initlab.synthetic.splade.ood.claims`, :mod:`initlab.synthetic.diagnose.claims`,
:mod:`initlab.realdata.lra.claims`, :mod:`initlab.realdata.splade.claims`, :mod:`initlab.theorycheck.verify.claims`).

Each claims module holds its rows as :class:`Claim` records in a list ``CLAIM_ROWS`` and the functions that turn the
loaded result files (``{file name under docs/results: parsed JSON}``) into one markdown verdict cell. No saved
verdict word is used: every verdict is recomputed by the one verdict function of its claim (in the same module)
from the saved raw per-seed numbers, and a saved verdict record, where a file keeps one, must agree with that
recomputation (else :class:`initlab.evidence.rules.VerdictRecordError`). A new claim is its verdict function and one
``Claim`` entry in its module's ``CLAIM_ROWS``; :mod:`initlab.app.docgen.claims` loops over the experiments' records.

Every cell names the preset and seeds of the run it comes from. Brackets are intervals of the claim's rule
(95 % t for a gain, 90 % TOST for an equivalence, 95 % Fieller for a share; :mod:`initlab.evidence.rules`).

Errors: a missing key or a wrong type in a file surfaces as ``KeyError`` / ``TypeError`` / ``ValueError``;
:mod:`initlab.app.docgen.claims` turns it into an error naming the file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from initlab.evidence.rules import NOT_RUN, Verdict
from initlab.experiment import text

__all__ = ["Claim", "Headline", "Results", "b", "seeds_text", "one", "short", "headline"]

Results = Mapping[str, Any]


@dataclass(frozen=True)
class Headline:
    """The README's two short cells of a claim: ``word`` (our verdict, one word per part where parts differ) and
    ``estimate`` (the headline estimate with its interval and seed count)."""

    word: str
    estimate: str


@dataclass(frozen=True)
class Claim:
    """One claim: ``claim`` and ``seed_number`` are the seed's words; ``evidence`` a markdown link cell (relative
    to the repository root); ``files`` the result files (relative to the results folder) that ``verdict`` needs,
    ``optional`` those it uses when present (the runs of the presets behind a row); ``verdict`` gives the full
    cell of docs/claims.md, ``headline`` the README's one-line cells (:class:`Headline`). A claim that was not
    run has no files, its fixed ``verdict_text`` and ``headline_text`` (a :class:`Headline`)."""

    claim: str
    seed_number: str
    evidence: str
    files: tuple[str, ...] = ()
    verdict: Callable[[dict[str, Any]], str] | None = None
    verdict_text: str = ""
    optional: tuple[str, ...] = ()
    headline: Callable[[dict[str, Any]], Headline] | None = None
    headline_text: Headline = Headline("**not run**", "—")


def b(word: str) -> str:
    return f"**{word}**"


def seeds_text(seeds: Sequence[int]) -> str:
    """``[7301, ..., 7305] -> 'seeds 7301-7305'`` for a consecutive run, else the list."""
    s = sorted(seeds)
    if len(s) > 2 and s == list(range(s[0], s[-1] + 1)):
        return f"seeds {s[0]}-{s[-1]}"
    return ("seed " if len(s) == 1 else "seeds ") + ", ".join(map(str, s))


_UNIT = {"gain": "points", "equivalence": "points", "share": "share"}


def one(v: Verdict, unit: str | None = None) -> str:
    """One verdict in words (:func:`initlab.experiment.text.describe`), in ``unit`` or its rule's unit."""
    return text.describe(v, unit or _UNIT.get(v.rule, "points"))


def short(label: str, v: Verdict, unit: str, counted: str = "seed") -> str:
    """``label estimate [lo, hi] (n seeds)``: one verdict's estimate for the README (no interval kind, no
    seed-count advice: docs/claims.md has them)."""
    if v.word == NOT_RUN:
        return f"{label}: not run".strip(": ")
    seeds = f"{v.n} {counted}{'s' if v.n != 1 else ''}"
    return f"{label} {text.estimate(v, unit)} {text.interval(v, unit)} ({seeds})".strip()


def headline(parts: Sequence[tuple[str, Verdict, str]], word: str | None = None) -> Headline:
    """The README cells of a claim from its ``(label, verdict, unit)`` parts: the word is ``word`` or, when every
    part reads the same, that word, else ``label: word`` per part; the estimate each part's :func:`short`."""
    if word is None:
        words = {v.word for _, v, _ in parts}
        word = b(words.pop()) if len(words) == 1 else "; ".join(f"{label}: {b(v.word)}" for label, v, _ in parts)
    return Headline(word, "; ".join(short(label, v, unit) for label, v, unit in parts))
