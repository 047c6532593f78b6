"""The README's theory row, from ``theory_verify.json``: :func:`initlab.theorycheck.verify.claims.theorem` on the
checks' recorded errors and tolerances (``initlab theory verify``)."""

from __future__ import annotations

import statistics
from typing import Any

from initlab.evidence.rows import Claim, Headline, Results, b
from initlab.theorycheck.verify import claims as theory_claims

__all__ = ["THEORY", "CLAIMS", "theory_row", "theory_headline"]

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
    verdict, cfg = theory_claims.theorem(v), v["config"]
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
    st, verdict = v["statements"], theory_claims.theorem(v)
    passed = sum(s["verdict"] == "PASS" for s in st)
    closest = f"; closest check {verdict.margin:.0f}x inside its tolerance" if not verdict.reason else ""
    return Headline(b(verdict.word), f"{passed} of {len(st)} statements pass, {v['config']['cases']} random cases each"
                                     f"{closest}")


CLAIMS: list[Claim] = [
    Claim("At uniform attention the label-loss score gradient under mean pooling is query-blind (`1 g^T`); masked "
          "reconstruction's is not", "theorem", "[theory](docs/theory.md)", (THEORY,), theory_row,
          headline=theory_headline),
]
