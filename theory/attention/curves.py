"""The two curves the ``theory`` stage draws: the T2 band ratio against T and the T4 band projection against the
masking rate p, measured on random cases of :mod:`initlab.theory.attention.case`.

* :func:`t2_band_curve` -- |<grad_S L, P^(w)>| / ||grad_S L||_F at uniform attention (T2; bound ||d|| / sqrt(T),
  :func:`initlab.theory.attention.gradient.band_relative_bound`);
* :func:`t4_projection_curve` -- E<D, band> of masked reconstruction's descent direction, closed form
  (:func:`initlab.theory.attention.masked_reconstruction.expected_projection`) against Monte Carlo (T4).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from initlab.theory.attention import case as ac
from initlab.theory.attention import gradient as ag
from initlab.theory.attention import masked_reconstruction as am

__all__ = ["t2_band_curve", "t4_projection_curve"]


def t2_band_curve(seed: int, Ts: Sequence[int], widths: Sequence[int], reps: int) -> list[dict[str, Any]]:
    """Measured |<grad_S L, P^(w)>| / ||grad_S L||_F (mean and max over ``reps`` random cases) vs T."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for w in widths:
        for T in [T for T in Ts if T > 2 * w + 1]:  # for T <= 2w + 1 the band is (nearly) all-ones
            vals = []
            for _ in range(reps):
                case = ac.random_case(gen, T, d=4, heads=1, e=3, f="tanh", loss="mse")
                G = ac.score_gradient(case)[0]
                vals.append(abs(float((G * ag.band_pattern(T, w)).sum())) / float(G.norm()))
            rows.append({"w": w, "T": T, "mean_ratio": sum(vals) / len(vals), "max_ratio": max(vals), "bound": ag.band_relative_bound(T, w)})
    return rows


def t4_projection_curve(seed: int, ps: Sequence[float], T: int, K: int, q: float, w: int, n: int) -> list[dict[str, Any]]:
    """Closed form vs Monte Carlo (linearised loss, and cross-entropy at beta = 1) of E<D, band> vs p."""
    gen = torch.Generator().manual_seed(seed)
    P = ag.band_pattern(T, w, diagonal=False)
    C = torch.eye(K, dtype=torch.float64)
    rows = []
    for p in ps:
        lin, lin_se = am.monte_carlo_projection(P, p, q, C, n, gen, loss="linear")
        ce, ce_se = am.monte_carlo_projection(P, p, q, C, n, gen, loss="ce")
        rows.append({"p": p, "closed_form": am.expected_projection(P, p, q, C), "mc_linear": lin, "mc_linear_se": lin_se, "mc_ce": ce, "mc_ce_se": ce_se})
    return rows
