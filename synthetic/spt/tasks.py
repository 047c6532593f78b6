"""Synthetic length-100 sequence tasks for the self-pretraining (SPT) experiments, deterministic by seed.

Vocabulary (shared by all tasks, so a model pretrained on one can be fine-tuned on another):
``PAD_ID = 0``, ``MASK_ID = 1``, content tokens ``2 .. 2 + n_content - 1``. Write ``c(a) = 2 + a`` for the
content token with index ``a`` in ``0..n_content-1`` and ``succ(a) = (a + 1) mod n_content``.

Generation rules (every sequence has length exactly T; T must be even for ``pairs``). Write also
``pred(a) = (a - 1) mod n_content``.

* ``local`` ("run walk"). Runs of identical tokens, run lengths geometric on {1, 2, ...} with mean
  ``mean_run`` (the last run is cut at T). The first run's token is uniform; each next run's token is, with
  probability ``signal_frac``, a *signal step* ``succ(a)`` (class 1) or ``pred(a)`` (class 0) of the
  previous run's token ``a``, and otherwise uniform over the other ``n_content - 1`` tokens. The label is
  the class (balanced). Reversing a class-1 sequence gives a sequence distributed exactly as class 0
  (run lengths are i.i.d., uniform jumps are symmetric), and reversal keeps the multiset of tokens, so the
  bag-of-tokens distribution (and every function of the token counts) is *identically distributed* in
  both classes: a model that ignores order, or attends uniformly, is at chance. The label is decided by
  the direction of the steps between adjacent runs (a local interaction between neighbouring positions),
  and a masked token usually equals a neighbour (runs), so the inputs are locally correlated.
* ``pairs`` ("pair order"; kept as a documented negative design, not used by the presets). T/2 blocks
  (2m, 2m+1); with probability ``signal_frac`` a block is ``(c(a), c(succ(a)))`` (class 1) or
  ``(c(succ(a)), c(a))`` (class 0), otherwise two independent uniform tokens. Same bag-of-tokens
  symmetry, but a sequence's bag carries no information about a masked token, and in our runs neither
  masked reconstruction nor label training left the trivial solution (see docs/synthetic_spt.md).
* ``count`` (control). Runs of identical tokens, run lengths geometric on {1, 2, ...} with mean ``mean_run``
  (the last run is cut at T). Each run's token is drawn from the first half of the content tokens with probability
  ``0.5 + count_bias`` (class 1) or ``0.5 - count_bias`` (class 0), uniformly within the half. The label is
  decidable from token counts alone (uniform attention suffices); the runs make the inputs locally
  correlated too (used as cross-data SPT inputs).
* ``iid``: i.i.d. uniform content tokens (no structure); labels are fair coin flips carrying no signal.
  Used only as cross-data SPT inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from initlab.config import check_ranges, ranged

__all__ = ["PAD_ID", "MASK_ID", "N_SPECIAL", "TaskConfig", "make_task", "vocab_size", "TASKS"]

PAD_ID = 0
MASK_ID = 1
N_SPECIAL = 2
TASKS = ("local", "count", "iid", "pairs")


@dataclass(frozen=True)
class TaskConfig:
    """Parameters of the generators (see the module docstring for the rules)."""

    T: int = ranged(100, "[2, inf)")
    n_content: int = ranged(16, "[3, inf)")
    signal_frac: float = ranged(0.5, "[0, 1]")  # local: probability of a signal step between runs (pairs: of a signal block)
    count_bias: float = ranged(0.2, "[0, 0.5]")  # count: class shift of the first-half probability
    mean_run: float = ranged(3.0, "[1, inf)")  # local and count: mean run length

    def __post_init__(self) -> None:
        check_ranges(self)


def vocab_size(cfg: TaskConfig) -> int:
    """Number of token ids: the special tokens plus ``cfg.n_content``."""
    return N_SPECIAL + cfg.n_content


def _local(n: int, cfg: TaskConfig, rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    K, T = cfg.n_content, cfg.T
    out = np.empty((n, T), dtype=np.int64)
    p_geo = 1.0 / cfg.mean_run  # numpy's geometric has support {1, 2, ...} and mean 1/p
    for b in range(n):
        step = 1 if labels[b] == 1 else -1
        tok = int(rng.integers(0, K))
        t = 0
        while t < T:
            length = int(rng.geometric(p_geo))
            out[b, t : t + length] = tok
            t += length
            if rng.random() < cfg.signal_frac:
                tok = (tok + step) % K
            else:
                tok = (tok + 1 + int(rng.integers(0, K - 1))) % K  # uniform over the other K - 1 tokens
    return out


def _pairs(n: int, cfg: TaskConfig, rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    if cfg.T % 2:
        raise ValueError(f"TaskConfig.T: the pairs task needs an even T, got {cfg.T}")
    K, M = cfg.n_content, cfg.T // 2
    a = rng.integers(0, K, size=(n, M))
    signal = rng.random((n, M)) < cfg.signal_frac
    noise = rng.integers(0, K, size=(n, M, 2))
    first = np.where(labels[:, None] == 1, a, (a + 1) % K)
    second = np.where(labels[:, None] == 1, (a + 1) % K, a)
    pairs = np.stack([first, second], axis=-1)  # (n, M, 2)
    pairs = np.where(signal[..., None], pairs, noise)
    return pairs.reshape(n, cfg.T)


def _count(n: int, cfg: TaskConfig, rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    K, T, half = cfg.n_content, cfg.T, cfg.n_content // 2
    out = np.empty((n, T), dtype=np.int64)
    p_first = np.where(labels == 1, 0.5 + cfg.count_bias, 0.5 - cfg.count_bias)
    p_geo = 1.0 / cfg.mean_run  # numpy's geometric has support {1, 2, ...} and mean 1/p
    for b in range(n):
        t = 0
        while t < T:
            length = int(rng.geometric(p_geo))
            if rng.random() < p_first[b]:
                tok = rng.integers(0, half)
            else:
                tok = rng.integers(half, K)
            out[b, t : t + length] = tok
            t += length
    return out


def make_task(name: str, n: int, seed: int, cfg: TaskConfig = TaskConfig()) -> tuple[torch.Tensor, torch.Tensor]:
    """Generate ``n`` sequences of task ``name``.

    Args:
        name: ``"local"``, ``"count"``, ``"iid"`` or ``"pairs"``.
        n: number of sequences (>= 1).
        seed: integer seed; the same (name, n, seed, cfg) always gives the same tensors.
        cfg: :class:`TaskConfig`.
    Returns:
        ``tokens (n, T)`` long in ``[N_SPECIAL, vocab_size(cfg))`` and ``labels (n,)`` long in {0, 1}
        (exactly balanced: the first ``n // 2`` of a random permutation are class 1).
    Raises:
        ValueError: unknown ``name``, ``n < 1``, or an odd T for ``local``.
    """
    if name not in TASKS:
        raise ValueError(f"name: expected one of {TASKS}, got {name!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n: expected a positive int, got {n!r}")
    rng = np.random.default_rng([int(seed), TASKS.index(name)])
    labels = np.zeros(n, dtype=np.int64)
    labels[rng.permutation(n)[: n // 2]] = 1
    if name == "local":
        idx = _local(n, cfg, rng, labels)
    elif name == "pairs":
        idx = _pairs(n, cfg, rng, labels)
    elif name == "count":
        idx = _count(n, cfg, rng, labels)
    else:
        idx = rng.integers(0, cfg.n_content, size=(n, cfg.T))
    return torch.from_numpy(idx + N_SPECIAL).long(), torch.from_numpy(labels).long()
