"""The README's diagnosis row: "initlab's diagnosis predicts SPT's gain", from ``diagnose_validation/records.json`` by
:func:`initlab.synthetic.diagnose.claims.predicts_gain` on the per-setting predictions and per-seed accuracies of both
arms (the preregistered analysis of docs/diagnose.md)."""

from __future__ import annotations

import math

from initlab.evidence.rows import Claim, Headline, Results, b, seeds_text
from initlab.evidence import rules
from initlab.synthetic.diagnose import claims as diagnose_claims
from initlab.evidence.rules import NOT_RUN

__all__ = ["DIAGNOSE", "CLAIMS", "diagnose_row", "diagnose_headline"]

DIAGNOSE = "diagnose_validation/records.json"


def diagnose_row(r: Results) -> str:
    """The all-of word, where the rule was right / wrong / undecided, and the correlation with its intervals."""
    rec = r[DIAGNOSE]
    v = diagnose_claims.predicts_gain(rec)
    if v.word == NOT_RUN:
        return f"{b(NOT_RUN)} (no setting has {diagnose_claims.MIN_SEEDS} finished seeds yet)"
    c = diagnose_claims.confusion(rec)
    right = c["table"][("helps", "helps")] + c["table"][("does not help", "does not help")]
    wrong = c["table"][("helps", "does not help")] + c["table"][("does not help", "helps")]
    seeds = sorted({int(s) for x in rec["settings"].values() for s in x["seeds"]})
    out = (f"{b(v.word)} (preregistered rule, {len(rec['settings'])} synthetic settings, {seeds_text(seeds)}): right on "
           f"{len(right)} ({', '.join(right) or 'none'}), wrong on {len(wrong)} ({', '.join(wrong) or 'none'})")
    if c["undecided"]:
        need = [p.seeds_to_decide for p in v.parts if p.word == rules.INCONCLUSIVE]
        out += f", undecided on {len(c['undecided'])} ({', '.join(c['undecided'])}"
        out += f"; {max(need)} seeds would decide)" if need and all(n is not None for n in need) else ")"
    if c["not_run"]:
        out += f", not run on {', '.join(c['not_run'])}"
    k = diagnose_claims.correlation(rec)
    if not math.isnan(k["pearson"]):
        out += (f"; blind share vs SPT gain: Pearson {k['pearson']:.2f} [{k['pearson_lo']:.2f}, {k['pearson_hi']:.2f}], "
                f"Spearman {k['spearman']:.2f} [{k['spearman_lo']:.2f}, {k['spearman_hi']:.2f}] ({k['n']} settings)")
    return out


def diagnose_headline(r: Results) -> Headline:
    """The README's cells: the all-of word, and the rule's hits out of the decided settings with the seeds."""
    rec = r[DIAGNOSE]
    v = diagnose_claims.predicts_gain(rec)
    if v.word == NOT_RUN:
        return Headline(b(NOT_RUN), "—")
    c = diagnose_claims.confusion(rec)
    right = len(c["table"][("helps", "helps")] + c["table"][("does not help", "does not help")])
    decided = sum(len(x) for x in c["table"].values())
    seeds = sorted({int(s) for x in rec["settings"].values() for s in x["seeds"]})
    return Headline(b(v.word), f"rule right on {right} of {decided} decided settings, undecided on "
                                f"{len(c['undecided'])} of {len(rec['settings'])} ({len(seeds)} seeds)")


CLAIMS: list[Claim] = [
    Claim("initlab's diagnosis predicts SPT's gain", "no seed number (initlab's own claim)",
          "[diagnose](docs/diagnose.md)", (DIAGNOSE,), diagnose_row, headline=diagnose_headline),
]
