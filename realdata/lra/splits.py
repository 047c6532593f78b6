"""Long Range Arena splits: padded token tensors with lengths and labels, hold-outs, and batching.

Role: id lists -> the tensors a model reads. :class:`Split` holds one split (``int16`` token ids
right-padded with ``PAD_ID``, true lengths, labels), :class:`TaskData` a loaded task;
:func:`split_from_sequences` pads id lists, :func:`holdout` draws a seeded validation share,
:func:`iter_batches` yields seeded index batches (disjoint per rank under DDP), :func:`split_fingerprint`
names which examples went into which split. Reading the standard
layouts is :mod:`initlab.realdata.lra.data`, tokenising :mod:`initlab.realdata.lra.tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import torch

from initlab.realdata.lra.tokens import PAD_ID

__all__ = ["Split", "TaskData", "split_from_sequences", "pair_split", "holdout", "iter_batches", "split_fingerprint"]


@dataclass
class Split:
    """One split: ``tokens`` (N, T) or (N, 2, T) for Retrieval pairs, int16; ``lengths`` (N,) or
    (N, 2), int64, number of real tokens; ``labels`` (N,), int64."""

    tokens: torch.Tensor
    lengths: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def subset(self, idx: Sequence[int] | torch.Tensor) -> "Split":
        idx = torch.as_tensor(idx, dtype=torch.long)
        return Split(self.tokens[idx], self.lengths[idx], self.labels[idx])


@dataclass
class TaskData:
    """A loaded task: name, ``vocab_size`` (specials included), ``max_len`` (per document),
    ``n_classes``, ``pair`` (two documents per example) and the three splits."""

    name: str
    vocab_size: int
    max_len: int
    n_classes: int
    train: Split
    val: Split
    test: Split
    pair: bool = False
    meta: dict = field(default_factory=dict)


def split_from_sequences(seqs: Sequence[Sequence[int]], labels: Sequence[int], max_len: int) -> Split:
    """Pad id lists (truncated to ``max_len``) into a :class:`Split`; T = longest kept sequence."""
    if len(seqs) != len(labels):
        raise ValueError(f"seqs/labels: lengths differ ({len(seqs)} vs {len(labels)})")
    T = max([min(len(s), max_len) for s in seqs] + [1])
    tokens = torch.full((len(seqs), T), PAD_ID, dtype=torch.int16)
    lengths = torch.zeros(len(seqs), dtype=torch.long)
    for i, s in enumerate(seqs):
        s = list(s)[:max_len]
        if s:
            tokens[i, : len(s)] = torch.tensor(s, dtype=torch.int16)
        lengths[i] = len(s)
    return Split(tokens, lengths, torch.as_tensor(list(labels), dtype=torch.long))


def pair_split(seqs1, seqs2, labels, max_len: int) -> Split:
    """Two documents per example: tokens ``(N, 2, T)``, lengths ``(N, 2)`` (Retrieval)."""
    a = split_from_sequences(seqs1, labels, max_len)
    b = split_from_sequences(seqs2, labels, max_len)
    T = max(a.tokens.shape[1], b.tokens.shape[1])
    tok = torch.full((len(labels), 2, T), PAD_ID, dtype=torch.int16)
    tok[:, 0, : a.tokens.shape[1]] = a.tokens
    tok[:, 1, : b.tokens.shape[1]] = b.tokens
    return Split(tok, torch.stack([a.lengths, b.lengths], 1), a.labels)


def holdout(split: Split, frac: float, seed: int) -> tuple[Split, Split]:
    """A seeded random ``frac`` of ``split`` (at least one example) as validation: ``(rest, held_out)``."""
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(split), generator=g)
    n_val = max(1, int(round(frac * len(split)))) if len(split) > 1 else 0
    return split.subset(perm[n_val:]), split.subset(perm[:n_val])


def iter_batches(split: Split, batch_size: int, *, shuffle: bool, seed: int = 0, epoch: int = 0,
                 rank: int = 0, world: int = 1) -> Iterable[torch.Tensor]:
    """Index batches over ``split`` (seeded per epoch); with ``world > 1`` each rank takes a disjoint
    strided share of equal size (the tail is dropped so every rank runs the same number of steps)."""
    n = len(split)
    if shuffle:
        g = torch.Generator().manual_seed(seed * 100_003 + epoch)
        order = torch.randperm(n, generator=g)
    else:
        order = torch.arange(n)
    if world > 1:
        per = n // world
        order = order[rank : per * world : world]
    for i in range(0, len(order), batch_size):
        yield order[i : i + batch_size]


def split_fingerprint(data: TaskData) -> str:
    """A short SHA-256 of which examples sit in which split: ``"sha256:" + 16 hex digits``.

    Hashes the task name and, for train, val and test in turn, the shapes and bytes of the token ids, true
    lengths and labels. Two loads share it exactly when they put the same examples, tokenised to the same
    length, into the same splits in the same order, so a different data folder, ``limit``, ``max_len`` or
    ``split_seed`` gives another fingerprint. An SPT checkpoint records the fingerprint of the data it was
    pretrained on; fine-tuning compares it with its own (:func:`initlab.realdata.lra.runtime.check_spt_split`).
    """
    import hashlib

    h = hashlib.sha256(data.name.encode("utf-8"))
    for name in ("train", "val", "test"):
        split = getattr(data, name)
        for t in (split.tokens, split.lengths, split.labels):
            t = t.detach().cpu().contiguous()
            h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode("ascii"))
            h.update(t.numpy().tobytes())
    return "sha256:" + h.hexdigest()[:16]
