"""``initlab theory verify``: check theorems T1, T1', T2, T3, T3', T4, T5, T6, T7 on fresh random cases.

Statement texts live once in :mod:`initlab.theory.statements` (the description column renders from it);
every check compares the
gradient under test with an independent route (closed form, identity (G) from R, central differences,
exact enumeration, Monte Carlo), so an injected wrong gradient, including a query-independent one
``G + 1 v^T``, turns its row FAIL (see the mutation tests).

Every statement is checked three ways in float64 on random cases (T drawn from 2..128, width, heads,
W_O on/off, position-wise f and loss drawn from the registries of
:mod:`initlab.theory.attention.case`): the closed form against autograd, autograd against central
differences (entry-wise for T <= 6, along random and pattern directions otherwise), and the structural
claims (equal rows, blind component zero / non-zero, bounds, Monte Carlo agreement within 5 standard
errors for T4). The table reports, per statement, the cases tried and the largest absolute and relative
error over all its checks; a statement passes only if every check is inside its tolerance and every
"non-zero" claim holds. Exit status 1 if any statement fails.

Role of this module: the runner (:func:`run_verify`, the sympy derivations of :func:`run_symbolic`) and
its text table. The checks of all nine statements are in :mod:`initlab.theory.attention.checks`, their sympy
derivations in :mod:`initlab.theory.attention.symbolic`, the configuration, result record, tolerances and
test hook in :mod:`initlab.theory.verify.base`. The ``theory`` stage of ``initlab reproduce`` is
:func:`initlab.theorycheck.verify.stage.theory`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from initlab.config import to_dict
from initlab.runs import torch_threads
from initlab.theory.attention.checks import CHECKERS
from initlab.theory.statements import REGISTRY
from initlab.runfile import RunFiles
from initlab.theory.verify.base import BASE, StatementResult, VerifyConfig

__all__ = ["VerifyConfig", "StatementResult", "run_verify", "format_table", "PRESETS", "BASE", "checkers", "run_symbolic",
           "statement_cell", "merge_reports"]


#: the theory stage's runs of ``initlab reproduce`` (``quick``, ``default``, ``full``), one file each in ``runs/``
#: (:class:`initlab.runfile.RunFiles`; docs/runs.md lists them)
PRESETS: RunFiles[VerifyConfig] = RunFiles(VerifyConfig, Path(__file__).with_name("runs"))


def checkers() -> dict[str, Callable[[VerifyConfig, torch.Generator], StatementResult]]:
    """Every statement's check in registry order (T1, T1', T2, T3, T3', T4, T5, T6, T7)."""
    return {st.id: CHECKERS[st.id] for st in REGISTRY}


def run_symbolic(statements: Sequence[str] | None = None, bar: Any = None) -> dict[str, Any]:
    """Run the sympy derivations of ``statements`` (default: every one); returns statement -> {holds, T,
    residuals (as strings), seconds}. ``bar``: a tqdm bar (or anything with ``update``) advanced per derivation."""
    from initlab.theory.attention.symbolic import DERIVATIONS

    out = {}
    for name, fn in DERIVATIONS.items():
        if statements is not None and name not in statements:
            continue
        if bar is not None and hasattr(bar, "set_postfix_str"):
            bar.set_postfix_str(f"sympy {name}")
        t0 = time.perf_counter()
        d = fn()
        out[name] = {
            "holds": d.holds,
            "T": d.T,
            "identities": len(d.zero_residuals),
            "nonzero_residuals": {k: str(v) for k, v in d.zero_residuals.items() if v != 0},
            "witnesses": {k: str(v) for k, v in d.nonzero_witnesses.items()},
            "seconds": time.perf_counter() - t0,
        }
        if bar is not None:
            bar.update(1)
    return out


def run_verify(cfg: VerifyConfig = BASE, statements: Sequence[str] | None = None, progress: bool = False,
               report: Any = None) -> dict[str, Any]:
    """Run the checks of ``statements`` (default: every statement of the registry) and return the JSON-ready report.

    ``progress``: one bar (stderr) over the sympy derivations (``cfg.symbolic``) and the statements' checks;
    ``report``: an object with ``advance(n)`` (an :class:`initlab.executor.Progress`) told the same steps.
    Each statement's entry records ``seconds_symbolic`` and ``seconds_checks``.

    Raises:
        ValueError: unknown statement name, cases < 1, t_max < 2 or mc_samples < 2.
    """
    if cfg.cases < 1 or cfg.t_max < 2 or cfg.mc_samples < 2:
        raise ValueError(f"config: expected cases >= 1, t_max >= 2, mc_samples >= 2, got {cfg}")
    table = checkers()
    names = list(table) if statements is None else list(statements)
    bad = [n for n in names if n not in table]
    if bad:
        raise ValueError(f"statements: unknown {bad}; expected names from {list(table)}")
    t0 = time.perf_counter()
    with torch_threads(1):
        return _run(cfg, names, progress, t0, [], report)


class _Steps:
    """A tqdm bar and/or an executor Progress, advanced together."""

    def __init__(self, bar: Any, report: Any):
        self.bar, self.report = bar, report

    def set_postfix_str(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(text)

    def update(self, n: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(n)
        if self.report is not None:
            self.report.advance(n)


def _run(cfg: VerifyConfig, names: list[str], progress: bool, t0: float, results: list, report: Any = None) -> dict[str, Any]:
    from initlab.theory.attention.symbolic import DERIVATIONS

    derivs = [n for n in DERIVATIONS if n in names] if cfg.symbolic else []
    bar = None
    if progress:
        from initlab.executor import progress_bar

        bar = progress_bar(total=len(derivs) + len(names), desc="verify (sympy derivations, then checks)", unit="step",
                   file=sys.stderr)
    steps = _Steps(bar, report)
    try:
        symbolic = run_symbolic(names, bar=steps) if cfg.symbolic else {}
        table = checkers()
        order = list(table)
        for name in names:
            steps.set_postfix_str(f"checks {name}")
            c0 = time.perf_counter()
            gen = torch.Generator().manual_seed(cfg.seed * 1000 + order.index(name))
            r = table[name](cfg, gen)
            if name in symbolic:
                r.claim("sympy derivation holds", symbolic[name]["holds"], str(symbolic[name]["nonzero_residuals"]))
                r.measured["symbolic"] = symbolic[name]
            results.append({**r.to_dict(), "seconds_symbolic": symbolic.get(name, {}).get("seconds", 0.0),
                            "seconds_checks": time.perf_counter() - c0})
            steps.update(1)
    finally:
        if bar is not None:
            bar.close()
    return {
        "config": to_dict(cfg),
        "statements": results,
        "passed": all(r["verdict"] == "PASS" for r in results),
        "seconds": time.perf_counter() - t0,
        "torch": torch.__version__,
    }


def statement_cell(root: str, name: str, args: dict[str, Any], progress: Any) -> dict[str, Any]:
    """Cell of :func:`initlab.executor.run_cells` (the ``theory`` stage of ``initlab reproduce``): one statement's
    sympy derivation and checks; returns its entry of the report (see :func:`merge_reports`)."""
    from initlab.config import from_dict

    cfg = from_dict(VerifyConfig, args["config"])
    return run_verify(cfg, [args["statement"]], report=progress)["statements"][0]


def merge_reports(cfg: VerifyConfig, entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The report of :func:`run_verify` from per-statement entries (:func:`statement_cell`), in registry order;
    ``seconds`` is the sum of the statements' derivation and check seconds (CPU work, not wall time)."""
    order = list(checkers())
    entries = sorted(entries, key=lambda r: order.index(r["statement"]))
    return {"config": to_dict(cfg), "statements": list(entries), "passed": all(r["verdict"] == "PASS" for r in entries),
            "seconds": sum(r.get("seconds_symbolic", 0.0) + r.get("seconds_checks", 0.0) for r in entries),
            "torch": torch.__version__}


def format_table(report: dict[str, Any]) -> str:
    """The report as a fixed-width text table (one row per statement)."""
    head = f"{'statement':<10} {'cases':>6} {'max abs err':>12} {'max rel err':>12}  verdict  description"
    lines = [head, "-" * len(head)]
    for r in report["statements"]:
        lines.append(
            f"{r['statement']:<10} {r['cases']:>6} {r['max_abs_error']:>12.2e} {r['max_rel_error']:>12.2e}  "
            f"{r['verdict']:<7}  {r['description']}"
        )
        for f in r["failures"][:5]:
            lines.append(f"{'':<10}   ! {f}")
    return "\n".join(lines)
