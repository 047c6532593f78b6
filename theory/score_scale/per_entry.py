"""Pooled SPLADE activity under a per-entry Gaussian logit model with position classes (refines the i.i.d. model).

The i.i.d. model of :mod:`.closed_form` draws every logit of every token and vocabulary entry from one
``N(mu, sigma^2)``. Measured logits of a masked-LM head are not like that (``initlab mlmhead inspect`` and the
synthetic SPLADE backbones, docs/mlmhead.md): each vocabulary entry j has its own mean through its bias
``b_j`` and its row of ``W_head``, so across entries the logits spread much more than across the tokens of one
entry; and the special tokens ([CLS], [SEP], ``<s>``, ``</s>``) have logits of their own (no masked-LM loss is
ever applied there), shared by every text. Treating the spread between entries as if it were drawn afresh at
every token makes max pooling activate nearly every entry; using the bias mean alone, while the bias is the
part that k does not divide, misses the entries that stay active at large k.

**Model.** For a text i with tokens t, each of a position class ``c(t)`` (a special token's id, or "text
token"), vocabulary entry j and rescaling factor k > 0,

    z_tj(k) = b_j + y_tj / k,        y_tj ~ N(mu_{c(t) j}, tau_{c(t) j}^2), independent over t,

with ``b`` the head's bias (not rescaled) and ``y = H W_head^T`` the head part of the logits at k = 1 (the
hidden states H are held fixed: exact for an untied head; for a tied head dividing W_head also divides the
input embeddings and changes H). The SPLADE term weight ``a_ij = max_t log(1 + ReLU(z_tj))`` (SPLADE v2,
Formal et al., arXiv:2109.10086, eq. 1, max pooling) is positive iff ``max_t z_tj > 0``, so with
``n_ic`` tokens of class c in text i

    P(a_ij = 0) = prod_t P(z_tj <= 0) = prod_c Phi(-(k b_j + mu_cj) / tau_cj)^{n_ic},

(``k b + y <= 0`` iff ``z <= 0``; ``tau_cj = 0`` gives the step ``1[k b_j + mu_cj <= 0]``), the expected
active dimensions of text i are ``sum_j P(a_ij > 0)``, and the expected FLOPS of a query-document pair
(Paria et al., ICLR 2020, eq. 3: ``sum_j p_j^q p_j^d``, with p the fraction of queries / documents whose
entry j is active) is ``sum_j pbar_j(q) pbar_j(d)``, ``pbar_j`` the mean over the texts of ``P(a_ij > 0)``.
With one class and the same ``mu, tau`` and ``b`` for every entry it is the i.i.d. model's
``1 - (1 - Phi(mu / sigma))^L`` (:func:`.closed_form.pooled_active_fraction`).

What it assumes, and so where it can fail: Gaussian logits per entry and class (the upper tail sets the
activity of entries whose mean is below 0) and independent tokens (tokens of one text share context; a
shared component makes the maximum smaller than for independent draws). Checked against a Monte Carlo of the
model itself in ``tests/theory/score_scale/test_per_entry.py``; against measured checkpoints by ``initlab
mlmhead inspect`` (which shows the prediction only where it reproduces the measured k = 1 activity and the
hidden states do not change) and by the synthetic SPLADE phase diagram's ``theory.json``.

Role of this module: the moments (:class:`EntryMoments`, accumulated over batches of logits) and the closed
forms; mathematics only (torch float64).
"""

from __future__ import annotations

import math
from typing import Iterable

import torch

__all__ = ["TEXT_CLASS", "token_classes", "EntryMoments", "pooled_active_probability", "expected_active_dims",
           "expected_flops"]

#: the position class of every token that is not a special token.
TEXT_CLASS = -1


def token_classes(input_ids: torch.Tensor, special_ids: Iterable[int]) -> torch.Tensor:
    """Position class of each token ``(B, T)``: the token id for special tokens, :data:`TEXT_CLASS` otherwise."""
    special = torch.tensor(sorted(set(int(i) for i in special_ids)), dtype=input_ids.dtype)
    is_special = torch.isin(input_ids, special) if special.numel() else torch.zeros_like(input_ids, dtype=torch.bool)
    return torch.where(is_special, input_ids, torch.full_like(input_ids, TEXT_CLASS))


class EntryMoments:
    """Running per-class, per-entry moments of the head part ``y = z - b`` of the logits.

    :meth:`add` takes the logits of one batch and the classes of its tokens; :meth:`fit` returns
    ``(classes, mu (C, V), tau (C, V))`` (float64; ``tau`` with ``n - 1`` in the denominator, 0 for a class
    seen once).
    """

    def __init__(self, bias: torch.Tensor | None, vocab: int):
        self.bias = torch.zeros(vocab, dtype=torch.float64) if bias is None else bias.detach().double().reshape(-1)
        if self.bias.numel() != vocab:
            raise ValueError(f"bias: expected {vocab} entries, got {self.bias.numel()}")
        self.vocab = vocab
        self._n: dict[int, int] = {}
        self._s: dict[int, torch.Tensor] = {}
        self._ss: dict[int, torch.Tensor] = {}

    def add(self, z: torch.Tensor, classes: torch.Tensor, mask: torch.Tensor) -> None:
        """Accumulate the logits ``z (B, T, V)`` of the tokens where ``mask (B, T)`` is set, by ``classes (B, T)``.

        Raises:
            ValueError: shapes disagree or the last dimension is not V.
        """
        if z.dim() != 3 or z.shape[-1] != self.vocab or classes.shape != z.shape[:2] or mask.shape != z.shape[:2]:
            raise ValueError(f"z {tuple(z.shape)}, classes {tuple(classes.shape)}, mask {tuple(mask.shape)}: expected "
                             f"(B, T, {self.vocab}), (B, T), (B, T)")
        m = mask.bool()
        for c in torch.unique(classes[m]).tolist():
            y = z[m & (classes == c)].double() - self.bias  # (n, V)
            self._n[c] = self._n.get(c, 0) + y.shape[0]
            self._s[c] = self._s.get(c, 0) + y.sum(0)
            self._ss[c] = self._ss.get(c, 0) + (y * y).sum(0)

    def fit(self) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        """``(classes, mu (C, V), tau (C, V))`` of everything added. Raises ValueError when nothing was added."""
        if not self._n:
            raise ValueError("EntryMoments.fit: no tokens added")
        classes = sorted(self._n)
        mu = torch.stack([self._s[c] / self._n[c] for c in classes])
        var = torch.stack([(self._ss[c] - self._n[c] * (self._s[c] / self._n[c]) ** 2) / max(self._n[c] - 1, 1)
                           for c in classes])
        return classes, mu, var.clamp_min(0.0).sqrt()


def pooled_active_probability(bias: torch.Tensor, mu: torch.Tensor, tau: torch.Tensor, counts: torch.Tensor,
                              k: float = 1.0) -> torch.Tensor:
    """``P(a_ij > 0) = 1 - prod_c Phi(-(k b_j + mu_cj) / tau_cj)^{n_ic}`` (module docstring), float64.

    Args:
        bias: ``b`` ``(V,)``; mu, tau: per class and entry ``(C, V)`` (of the head part at k = 1);
        counts: tokens of each class per text ``(n, C)``; k: the rescaling factor (> 0).
    Returns:
        ``(n, V)`` probabilities.
    Raises:
        ValueError: shapes disagree, negative ``tau`` or counts, or ``k`` not positive and finite.
    """
    if not (isinstance(k, (int, float)) and math.isfinite(k) and k > 0):
        raise ValueError(f"k: expected a positive finite float, got {k!r}")
    b = bias.double().reshape(1, -1)
    mu, tau, counts = mu.double(), tau.double(), counts.double()
    if mu.shape != tau.shape or mu.dim() != 2 or mu.shape[1] != b.shape[1] or counts.dim() != 2 or counts.shape[1] != mu.shape[0]:
        raise ValueError(f"bias {tuple(bias.shape)}, mu {tuple(mu.shape)}, tau {tuple(tau.shape)}, counts "
                         f"{tuple(counts.shape)}: expected (V,), (C, V), (C, V), (n, C)")
    if bool((tau < 0).any()) or bool((counts < 0).any()):
        raise ValueError("tau and counts must be >= 0")
    uniq, inv = torch.unique(counts, dim=0, return_inverse=True)  # texts with the same class counts share a row
    return _p_active(b, mu, tau, uniq, k)[inv]


def _p_active(b: torch.Tensor, mu: torch.Tensor, tau: torch.Tensor, counts: torch.Tensor, k: float) -> torch.Tensor:
    c = k * b + mu  # (C, V): the mean of k z, whose sign decides
    safe = torch.where(tau > 0, tau, torch.ones_like(tau))
    log_p0 = torch.where(tau > 0, torch.special.log_ndtr(-c / safe),
                         torch.where(c <= 0, torch.zeros_like(c), torch.full_like(c, -math.inf)))  # log P(z <= 0)
    # 0 * -inf would be nan: a class absent from a text contributes nothing
    terms = torch.where(counts[:, :, None] > 0, counts[:, :, None] * log_p0[None], torch.zeros(1, dtype=torch.float64))
    return -torch.expm1(terms.sum(1))


def expected_active_dims(bias: torch.Tensor, mu: torch.Tensor, tau: torch.Tensor, counts: torch.Tensor,
                         k: float = 1.0) -> torch.Tensor:
    """Expected active dimensions ``sum_j P(a_ij > 0)`` of each text ``(n,)`` (see :func:`pooled_active_probability`;
    computed once per distinct row of ``counts``, so memory is ``(distinct lengths, V)``)."""
    uniq, inv = torch.unique(counts.double(), dim=0, return_inverse=True)
    sums = torch.stack([pooled_active_probability(bias, mu, tau, row[None], k)[0].sum() for row in uniq])
    return sums[inv]


def expected_flops(p_q: torch.Tensor, p_d: torch.Tensor) -> float:
    """Expected FLOPS ``sum_j pbar_j(q) pbar_j(d)`` from ``P(a_ij > 0)`` of queries ``(n_q, V)`` and documents
    ``(n_d, V)`` (Paria et al. 2020, eq. 3; queries and documents independent).

    Raises:
        ValueError: the widths differ or an input is empty.
    """
    if p_q.dim() != 2 or p_d.dim() != 2 or p_q.shape[1] != p_d.shape[1] or not p_q.shape[0] or not p_d.shape[0]:
        raise ValueError(f"p_q {tuple(p_q.shape)}, p_d {tuple(p_d.shape)}: expected non-empty (n_q, V) and (n_d, V)")
    return float((p_q.double().mean(0) * p_d.double().mean(0)).sum())
