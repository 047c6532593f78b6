"""The theorem claim, recomputed from the raw errors of ``initlab theory verify`` (one verdict function).

Imported as ``initlab.theorycheck.verify.claims``. A numeric check passes when its largest relative error over
the random cases is within its own tolerance (``max_rel_error <= tolerance_rel``); a yes/no check passes
with no failed case; a statement passes when it ran at least one case and every check passes. The claim
(the label-loss score gradient under mean pooling is query-blind at uniform attention, masked
reconstruction's is not) is *reproduced* when every statement passes, *partly* when some fail but T1 (the
blind label gradient) and T4 (masked reconstruction is not blind), its two halves, pass, else *not
reproduced*. :func:`theorem` also checks each saved PASS/FAIL word against the recomputation.

The README rows of these claims (:data:`CLAIM_ROWS`, one :class:`initlab.experiment.rows.Claim` each, rendered by
:mod:`initlab.app.docgen.claims`) follow the verdict functions.

The README's theory row, from ``theory_verify.json``: :func:`initlab.theorycheck.verify.claims.theorem` on the
checks' recorded errors and tolerances (``initlab theory verify``).
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping

from initlab.evidence.rules import NOT, PARTLY, REPRODUCED, Verdict
from initlab.experiment.rows import Claim, Headline, Results, b

__all__ = ["statement_passes", "theorem", "TheoryRecordError", "THEORY", "CLAIM_ROWS", "theory_row", "theory_headline"]


class TheoryRecordError(ValueError):
    """A saved statement verdict disagrees with its recorded errors."""


def statement_passes(st: Mapping[str, Any]) -> bool:
    """Whether one saved statement record passes, from its raw check errors (module docstring)."""
    checks = st["checks"]
    ok = all((c["max_rel_error"] <= c["tolerance_rel"]) if "tolerance_rel" in c else c["claim_failures"] == 0
             for c in checks.values())
    return bool(checks) and ok and int(st["cases"]) > 0


def theorem(report: Mapping[str, Any]) -> Verdict:
    """The theorem claim from a ``theory verify`` report (``{"statements": [...]}``).

    The returned verdict's ``margin`` is the smallest tolerance-to-error ratio over the numeric checks (how far
    the closest check is from failing); ``n`` the number of statements.

    Raises:
        TheoryRecordError: a statement's saved ``verdict`` (PASS/FAIL) disagrees with its errors.
        ValueError: no statements.
    """
    sts = report["statements"]
    if not sts:
        raise ValueError("statements: expected at least one checked statement")
    passed = {}
    for st in sts:
        p = statement_passes(st)
        if ("PASS" if p else "FAIL") != st["verdict"]:
            raise TheoryRecordError(f"statement {st['statement']}: saved {st['verdict']} but its recorded errors say "
                                    f"{'PASS' if p else 'FAIL'}")
        passed[st["statement"]] = p
    ratios = [c["tolerance_rel"] / c["max_rel_error"] for st in sts for c in st["checks"].values()
              if "tolerance_rel" in c and c["max_rel_error"] > 0]
    margin = min(ratios) if ratios else float("inf")
    failed = [k for k, p in passed.items() if not p]
    if not failed:
        word = REPRODUCED
    elif passed.get("T1") and passed.get("T4"):
        word = PARTLY
    else:
        word = NOT
    return Verdict(word, "check", n=len(sts), margin=margin, reason="failed: " + ", ".join(failed) if failed else "")


# --- the README rows of these claims (initlab.app.docgen.claims renders them) ---
THEORY = "theory_verify.json"
#: a measured blind fraction above this is "not blind" (float64 rounding is ~1e-16)
BLIND_ZERO = 1e-6


def _checks_text(statements: list[dict[str, Any]], cases: int) -> str:
    """The kinds of check every statement ran (read from the saved check names), e.g. ``sympy derivations,
    float64 autograd identities and finite differences (20 random cases each)``."""
    kinds = [label for label, key in (("sympy derivations", "sympy"), ("float64 autograd identities", "autograd"),
                                      ("finite differences", "central difference"))
             if all(any(key in name for name in st["checks"]) for st in statements)] or ["checks"]
    listed = kinds[0] if len(kinds) == 1 else f"{', '.join(kinds[:-1])} and {kinds[-1]}"
    return f"{listed} ({cases} random cases each)"


def theory_row(r: Results) -> str:
    v = r[THEORY]
    st = v["statements"]
    verdict, cfg = theorem(v), v["config"]
    how = _checks_text(st, cfg["cases"])
    if verdict.reason:
        return f"{b(verdict.word)}: {verdict.reason} ({how})"
    measured = {s["statement"]: s["measured"] for s in st}
    per_mask = statistics.median(measured["T6"]["dropout_mc"]["per_mask_median_blind_fraction"])
    stacks = [t for t in measured["T7"]["table"] if t["spec"]["residual"] and t["max"] > BLIND_ZERO]
    parts = [name for name, on in (("FFN", lambda sp: sp["ffn"]), ("LayerNorm", lambda sp: sp["layernorm"]),
                                   ("random later attention", lambda sp: sp["later_attention"] == "random"))
             if any(on(t["spec"]) for t in stacks)]
    with_ = parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} or {parts[-1]}"
    scope = (f"residual stacks with {with_} are not ({min(t['min'] for t in stacks):.2f}-"
             f"{max(t['max'] for t in stacks):.2f})" if stacks else "every measured residual stack is blind")
    return (f"{b(verdict.word)}: all {len(st)} statements ({st[0]['statement']}-{st[-1]['statement']}) pass {how}; the "
            f"closest check is {verdict.margin:.0f}x inside its tolerance. Scope: one dropout mask is not blind (median "
            f"blind fraction {per_mask:.2f} over verify's {cfg['cases']} random T6 cases), its expectation is; {scope}")


def theory_headline(r: Results) -> Headline:
    v = r[THEORY]
    st, verdict = v["statements"], theorem(v)
    passed = sum(s["verdict"] == "PASS" for s in st)
    closest = f"; closest check {verdict.margin:.0f}x inside its tolerance" if not verdict.reason else ""
    return Headline(b(verdict.word), f"{passed} of {len(st)} statements pass, {v['config']['cases']} random cases each"
                                     f"{closest}")


CLAIM_ROWS: list[Claim] = [
    Claim("At uniform attention the label-loss score gradient under mean pooling is query-blind (`1 g^T`); masked "
          "reconstruction's is not", "theorem", "[theory](docs/theory.md)", (THEORY,), theory_row,
          headline=theory_headline),
]
