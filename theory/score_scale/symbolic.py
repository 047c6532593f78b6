"""The sympy derivation of the score-scale closed forms of :mod:`initlab.theory.score_scale.closed_form`.

Role: the symbolic side of the three-way check. Every closed form of the Gaussian logit model
(active fractions, the density of the maximum, FLOPS regulariser and cost, score mean and spread,
the two gradient norms, the sum-pooling moments) is written once here as a sympy expression and
lambdified; ``tests/theory/score_scale/test_closed_form.py`` compares the float functions of
:mod:`initlab.theory.score_scale.closed_form` with these. Sources as in that module (SPLADE v2, arXiv:2109.10086,
eq. 1 and 4; Paria et al., ICLR 2020, eq. 6).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import sympy as sp

__all__ = ["symbolic_formulas"]


@lru_cache(maxsize=1)
def symbolic_formulas() -> dict[str, Any]:
    """The closed forms of the model, as sympy expressions (and lambdified float64 functions).

    Keys (expression ``expr_*`` and function ``f_*``): ``active`` (mu, s) -> Phi(mu/s);
    ``pooled_active`` (mu, s, L); ``max_density`` (x, mu, s, L) = d/dx F(x)^L; ``flops_reg``
    (m1, m2, V, N); ``flops_cost`` (Pq, Pd, V); ``score`` (m1q, m1d, V); ``spread`` (m2q, m1d, m2d, V);
    ``grad_rank_sq`` (varq, Eg, V, B); ``grad_flops_sq`` (E_a2g, E_ag, Eg, m1, m2, lam, V, B);
    ``sum_m1`` / ``sum_m2`` (e1, e2, L); ``dlog1p`` = d/dz log(1 + z).
    """
    x, mu, L, V, N, B, lam = sp.symbols("x mu L V N B lambda", real=True)
    s = sp.symbols("s", positive=True)
    m1, m2, m1q, m1d, m2q, m2d, Pq, Pd, e1, e2 = sp.symbols("m1 m2 m1q m1d m2q m2d P_q P_d e1 e2", real=True)
    varq, Eg, Eag, Ea2g = sp.symbols("varq Eg Eag Ea2g", real=True)
    z = sp.symbols("z", real=True)
    Phi = lambda t: (1 + sp.erf(t / sp.sqrt(2))) / 2  # noqa: E731
    F = Phi((x - mu) / s)
    exprs = {
        "active": Phi(mu / s),
        "pooled_active": 1 - (1 - Phi(mu / s)) ** L,
        "max_density": sp.simplify(sp.diff(F ** L, x)),
        # E[(mean of N iid a)^2] summed over V dims
        "flops_reg": V * (m1 ** 2 + (m2 - m1 ** 2) / N),
        "flops_cost": V * Pq * Pd,
        "score": V * m1q * m1d,
        "spread": sp.sqrt(2 * V * m2q * (m2d - m1d ** 2)),
        # sum_q w_q^2 with w = 1/B - y (uniform softmax), times 1/B^2 from the batch mean
        "grad_rank_sq": V * (B - 1) / B ** 3 * varq * Eg,
        # (2 lam / N)^2 ... with abar = (a_i + S)/B, E[(a_i+S)^2 g] = Ea2g + 2(B-1) m1 Eag + ((B-1) m2 + (B-1)(B-2) m1^2) Eg
        "grad_flops_sq": lam ** 2 * V * 4 / B ** 4
        * (Ea2g + 2 * (B - 1) * m1 * Eag + ((B - 1) * m2 + (B - 1) * (B - 2) * m1 ** 2) * Eg),
        "sum_m1": L * e1,
        "sum_m2": L * e2 + L * (L - 1) * e1 ** 2,
        "dlog1p": sp.diff(sp.log(1 + z), z),
    }
    args = {
        "active": (mu, s),
        "pooled_active": (mu, s, L),
        "max_density": (x, mu, s, L),
        "flops_reg": (m1, m2, V, N),
        "flops_cost": (Pq, Pd, V),
        "score": (m1q, m1d, V),
        "spread": (m2q, m1d, m2d, V),
        "grad_rank_sq": (varq, Eg, V, B),
        "grad_flops_sq": (Ea2g, Eag, Eg, m1, m2, lam, V, B),
        "sum_m1": (e1, L),
        "sum_m2": (e1, e2, L),
        "dlog1p": (z,),
    }
    out: dict[str, Any] = {}
    for name, e in exprs.items():
        out[f"expr_{name}"] = e
        out[f"f_{name}"] = sp.lambdify(args[name], e, modules="math")
    return out
