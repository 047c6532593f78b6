"""What every check of ``initlab theory verify`` reports in: the run configuration and its presets, the
per-statement result record, the tolerances, and the test hook.

Role: the protocol shared by the checkers (:mod:`initlab.theory.attention.checks`, which also holds the helpers
that draw random cases and compare gradients) and the runner (:mod:`initlab.theorycheck.verify.runner`). It imports
no topic, so the topics' checks can use it and the runner can sit above them. Central differences have
truncation error O(h^2) at h = 1e-5 (float64), hence the tolerances below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from initlab.config import check_ranges, derive, ranged
from initlab.theory.statements import REGISTRY

__all__ = ["TOL_EXACT", "TOL_FD", "MC_SIGMAS", "STATEMENTS", "VerifyConfig", "BASE", "StatementResult", "hook"]

# Test-only hook: a callable ``(statement, gradient) -> gradient`` applied to every autograd gradient
# before it is compared. Tests set it to inject a wrong gradient and check that verify reports FAIL.
_TEST_HOOK: Callable[[str, torch.Tensor], torch.Tensor] | None = None

# Relative tolerances (float64): exact identities vs autograd, central differences (h = 1e-5).
TOL_EXACT = 1e-9
TOL_FD = 1e-6
MC_SIGMAS = 5.0


def _statement_summaries() -> dict[str, str]:
    return {st.id: st.summary for st in REGISTRY}


#: statement id -> one-line summary (the description column of ``initlab theory verify``)
STATEMENTS = _statement_summaries()


@dataclass(frozen=True)
class VerifyConfig:
    """Configuration of one verification run.

    Attributes:
        seed: base seed (each statement derives its own generator from it).
        cases: random cases per statement (T4's Monte Carlo runs use ``max(2, cases // 4)``).
        t_max: largest sequence length drawn (lengths are drawn in [2, t_max]) for the random cases of
            T1-T7; T4's Monte Carlo runs use their own lengths (4..24, 12 and 8), T6's dropout checks
            theirs (T <= 3 for the exact enumeration, 8 for the Monte Carlo rate), T7 at most 24.
        mc_samples: Monte Carlo sequences per T4 run.
        symbolic: also run the sympy derivations (:mod:`initlab.theory.attention.symbolic`).
    """

    seed: int = ranged(0, "[0, 1099511627776)")  # [0, 2^40)
    cases: int = ranged(20, "[1, inf)")
    t_max: int = ranged(128, "[2, inf)")
    mc_samples: int = ranged(20000, "[2, inf)")
    symbolic: bool = False

    def __post_init__(self) -> None:
        check_ranges(self)


BASE = VerifyConfig()


@dataclass
class StatementResult:
    """Outcome for one statement: per-check worst errors, failed claims and measured quantities."""

    statement: str
    description: str
    cases: int = 0
    checks: dict[str, dict[str, float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    measured: dict[str, Any] = field(default_factory=dict)

    def record(self, name: str, got: torch.Tensor | float, ref: torch.Tensor | float, tol: float, scale: float | None = None) -> None:
        """Record |got - ref| (max entry) and its ratio to ``scale`` (default max|ref|); fail above ``tol``."""
        got_t, ref_t = torch.as_tensor(got, dtype=torch.float64), torch.as_tensor(ref, dtype=torch.float64)
        err = float((got_t - ref_t).abs().max())
        scale = float(ref_t.abs().max()) if scale is None else float(scale)
        rel = err / scale if scale > 0 else (0.0 if err == 0 else math.inf)
        c = self.checks.setdefault(name, {"max_abs_error": 0.0, "max_rel_error": 0.0, "tolerance_rel": tol, "n": 0})
        c["max_abs_error"] = max(c["max_abs_error"], err)
        c["max_rel_error"] = max(c["max_rel_error"], rel)
        c["n"] += 1
        if not (rel <= tol):
            self.failures.append(f"{name}: rel error {rel:.3g} > {tol:.1g}")

    def claim(self, name: str, ok: bool, detail: str = "") -> None:
        """Record a yes/no claim (e.g. "blind component is non-zero")."""
        c = self.checks.setdefault(name, {"claim_failures": 0, "n": 0})
        c["n"] += 1
        if not ok:
            c["claim_failures"] += 1
            self.failures.append(f"{name}: claim failed {detail}".rstrip())

    @property
    def max_abs_error(self) -> float:
        return max((c.get("max_abs_error", 0.0) for c in self.checks.values()), default=0.0)

    @property
    def max_rel_error(self) -> float:
        return max((c.get("max_rel_error", 0.0) for c in self.checks.values()), default=0.0)

    @property
    def passed(self) -> bool:
        return not self.failures and self.cases > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "statement": self.statement,
            "description": self.description,
            "cases": self.cases,
            "max_abs_error": self.max_abs_error,
            "max_rel_error": self.max_rel_error,
            "verdict": "PASS" if self.passed else "FAIL",
            "failures": self.failures[:20],
            "checks": self.checks,
            "measured": self.measured,
        }


def hook(statement: str, G: torch.Tensor) -> torch.Tensor:
    """``G`` as the checks see it: unchanged unless a test set ``_TEST_HOOK`` to inject a wrong gradient."""
    return G if _TEST_HOOK is None else _TEST_HOOK(statement, G)
