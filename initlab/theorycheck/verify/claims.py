"""The theorem claim, recomputed from the raw errors of ``initlab theory verify`` (one verdict function).

Imported as ``initlab.theorycheck.verify.claims``. A numeric check passes when its largest relative error over
the random cases is within its own tolerance (``max_rel_error <= tolerance_rel``); a yes/no check passes
with no failed case; a statement passes when it ran at least one case and every check passes. The claim
(the label-loss score gradient under mean pooling is query-blind at uniform attention, masked
reconstruction's is not) is *reproduced* when every statement passes, *partly* when some fail but T1 (the
blind label gradient) and T4 (masked reconstruction is not blind), its two halves, pass, else *not
reproduced*. :func:`theorem` also checks each saved PASS/FAIL word against the recomputation.
"""

from __future__ import annotations

from typing import Any, Mapping

from initlab.evidence.rules import NOT, PARTLY, REPRODUCED, Verdict

__all__ = ["statement_passes", "theorem", "TheoryRecordError"]


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
