"""The score-scale table of ``initlab theory score-scale``: closed forms beside Monte Carlo, per (sigma, k).

Role: assembling and printing rows. The closed forms are :func:`initlab.theory.score_scale.closed_form.theory_row`,
the simulation :func:`initlab.theory.score_scale.monte_carlo.monte_carlo`; this module only puts them side by
side (``th_*`` and ``mc_*`` columns) and formats the text table.
"""

from __future__ import annotations

from typing import Any, Sequence

from initlab.theory.score_scale.closed_form import ScoreScaleConfig, theory_row
from initlab.theory.score_scale.monte_carlo import monte_carlo

__all__ = ["TABLE_COLUMNS", "score_scale_table", "format_table", "table_row", "table_cell"]


TABLE_COLUMNS = ("sigma", "k", "sigma_k", "active_q", "active_dims_d", "Ea_d", "flops_reg_d", "flops_cost",
                 "score_mean", "score_spread", "grad_rank", "grad_flops", "grad_ratio")


def table_row(cfg: ScoreScaleConfig, sigma: float, k: float, with_mc: bool = True) -> dict[str, Any]:
    """One row: theory (``th_*``) and, with ``with_mc``, Monte Carlo (``mc_*``) at ``(sigma, k)``."""
    th = theory_row(cfg, sigma, k)
    row = {"sigma": sigma, "k": k, **{f"th_{n}": v for n, v in th.items() if n not in ("sigma", "k")}}
    if with_mc:
        mc = monte_carlo(cfg, sigma, k)
        row.update({f"mc_{n}": v for n, v in mc.items()})
    return row


def table_cell(root: str, name: str, args: dict[str, Any], progress: Any) -> dict[str, Any]:
    """Cell of :func:`initlab.executor.run_cells` (the ``score_scale`` stage of ``initlab reproduce``): one
    :func:`table_row` with Monte Carlo; ``args``: ``config`` (a :class:`ScoreScaleConfig` as a dict), ``sigma``, ``k``."""
    from initlab.config import from_dict

    return table_row(from_dict(ScoreScaleConfig, args["config"]), args["sigma"], args["k"])


def score_scale_table(cfg: ScoreScaleConfig, *, with_mc: bool = False, progress: bool = False) -> list[dict[str, Any]]:
    """Rows for every (sigma, k) of ``cfg``: theory (``th_*``) and, with ``with_mc``, Monte Carlo (``mc_*``)."""
    from initlab.executor import progress_bar

    cells = [(s, k) for s in cfg.sigmas for k in cfg.ks]
    return [table_row(cfg, sigma, k, with_mc) for sigma, k in progress_bar(cells, desc="score-scale", disable=not progress)]


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A fixed-width text table of the theory columns (and MC columns where present)."""
    cols = [c for c in TABLE_COLUMNS if c in ("sigma", "k") or f"th_{c}" in rows[0]]
    head = " ".join(f"{c:>12}" for c in cols)
    lines = [head]
    for r in rows:
        vals = [r[c] if c in ("sigma", "k") else r[f"th_{c}"] for c in cols]
        lines.append(" ".join(f"{v:>12.4g}" for v in vals))
    return "\n".join(lines)
