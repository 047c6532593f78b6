"""Random cases and gradient comparisons for the checks of ``initlab theory verify``: drawing a case, the round-off
floor, central differences against a gradient, and Monte Carlo through the test hook
(:mod:`initlab.theory.attention.checks` runs them per statement)."""

import math
from typing import Any, Sequence

import torch

from initlab.theory.attention import case as ac
from initlab.theory.attention import masked_reconstruction as am
from initlab.theory.verify.base import TOL_FD, StatementResult, hook

__all__ = ["draw_T", "pick", "draw_case", "round_off_floor", "fd_scale", "fd_check", "mc_projection"]


def draw_T(gen: torch.Generator, t_max: int) -> int:
    """Half the cases small (2..min(8, t_max), where entry-wise differences are affordable), half up to t_max."""
    hi = min(8, t_max) if float(torch.rand(1, generator=gen)) < 0.5 else t_max
    return int(torch.randint(2, max(hi, 2) + 1, (1,), generator=gen))


def pick(gen: torch.Generator, options: Sequence[Any]) -> Any:
    return options[int(torch.randint(len(options), (1,), generator=gen))]


def draw_case(gen: torch.Generator, T: int, **overrides: Any) -> ac.AttentionCase:
    kw = dict(
        d=int(torch.randint(1, 7, (1,), generator=gen)),
        heads=int(torch.randint(1, 4, (1,), generator=gen)),
        e=int(torch.randint(1, 5, (1,), generator=gen)),
        use_W_O=bool(torch.rand(1, generator=gen) < 0.5),
        f=pick(gen, ac.POSITIONWISE_MAPS),
        loss=pick(gen, ac.LOSSES),
    )
    kw.update(overrides)
    return ac.random_case(gen, T, **kw)


def round_off_floor(case: ac.AttentionCase) -> float:
    """A magnitude below which a score gradient is round-off: 1e-4 max|dL/dO| max|V| (T1-T5)."""
    R, V = ac.output_gradient(case)
    return 1e-4 * float(R.abs().max()) * float(V.abs().max()) + 1e-300


def fd_scale(G: torch.Tensor, E: torch.Tensor, L: float) -> float:
    """Scale for a directional central difference: ||G|| ||E||, floored at the round-off of
    (L(S + hE) - L(S - hE)) / 2h, about 1e-16 |L| / h, i.e. 1e-3 (1 + |L|) at tolerance 1e-6."""
    return float(G.norm() * E.norm()) + 1e-3 * (1.0 + abs(L))


def fd_check(res: StatementResult, name: str, case: ac.AttentionCase, G: torch.Tensor, gen: torch.Generator, extra: Sequence[torch.Tensor] = ()) -> None:
    """Autograd ``G`` against central differences: entry-wise for T <= 6, else along directions."""
    L = float(ac.case_loss(case))
    if case.T <= 6:
        res.record(name, G, ac.score_gradient_central_difference(case), TOL_FD, scale=float(G.abs().max()) + 1e-3 * (1.0 + abs(L)))
        return
    dirs = [torch.randn(G.shape, generator=gen, dtype=torch.float64) for _ in range(2)] + [
        P.expand(G.shape) if P.dim() == 2 else P for P in extra
    ]
    for E in dirs:
        fd = ac.directional_central_difference(case, E)
        res.record(name, float((G * E).sum()), fd, TOL_FD, scale=fd_scale(G, E, L))


# ----------------------------------------------------------------------------------------------
# Monte Carlo through the test hook
# ----------------------------------------------------------------------------------------------
def mc_projection(P: torch.Tensor, p: float, q: float, C: torch.Tensor, n: int, gen: torch.Generator, chunk: int = 4096) -> tuple[float, float]:
    """Monte Carlo ``E<-grad_S L, P>`` (linearised loss) like :func:`initlab.theory.attention.masked_reconstruction.monte_carlo_projection`,
    with every per-sequence gradient passed through the test hook (statement "T4"). Returns (mean, SE)."""
    vals, done = [], 0
    T, K = P.shape[0], C.shape[0]
    while done < n:
        b = min(chunk, n - done)
        x = am.markov_tokens(b, T, K, p, gen)
        m = torch.rand(b, T, generator=gen) < q
        G = hook("T4", am.masked_score_gradient(x, m, C.to(torch.float64), "linear"))
        vals.append(-(G * P.to(torch.float64)).sum((-1, -2)))
        done += b
    v = torch.cat(vals)
    return float(v.mean()), float(v.std() / math.sqrt(n))
