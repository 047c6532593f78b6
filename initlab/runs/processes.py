"""What each process of a run sets: its rank's seed and its torch thread count.
"""

from __future__ import annotations

import contextlib

__all__ = ['RANK_STRIDE', 'rank_seed', 'torch_threads']


#: The rank offset of per-rank seeds: a golden-ratio constant, so that rank offsets (mod 2^32) land far from the
#: small offsets between epochs and seeds.
RANK_STRIDE = 0x9E3779B1


def rank_seed(seed: int, rank: int) -> int:
    """The seed of DDP process ``rank`` for a run seeded with ``seed``: ``(seed + rank * RANK_STRIDE) mod 2**32``.

    Rank 0 keeps ``seed`` (mod 2^32), so single-process runs are unchanged; every other rank gets its own random
    stream (dropout masks differ across GPUs even where their batches have the same shape), deterministic for a
    given ``(seed, rank)``. Mod 2^32 because torch's CPU generator keeps only the low 32 bits of a seed
    (``torch.manual_seed(2**32)`` equals ``torch.manual_seed(0)``), so an offset of ``rank * 2**32`` would change
    nothing.
    """
    return (int(seed) + int(rank) * RANK_STRIDE) % 2**32


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block with ``torch.set_num_threads(n)`` and restore the previous count afterwards.

    The CPU runs use few intra-op threads on purpose: on small tensors extra threads only add
    synchronisation cost (measured on 2 shared cores: a ``(3, 6, 6)`` softmax took 20 ms instead of
    5 us, an SPT training step 13x longer).
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
