"""Generated pixel-task data in the CIFAR-10 python layout, for tests, benchmarks and dry runs (no download).

``write_cifar_like(root, n_per_batch, n_test, seed)`` writes ``data_batch_1..5`` and ``test_batch``
(dicts with ``b'data'`` uint8 ``(N, 3072)`` channel-major rows and ``b'labels'``), which
:func:`initlab.realdata.lra.data.load_image` reads like the real set. Images are seeded noise whose
mean brightness depends on the label, so a model can learn something; they are not CIFAR-10.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from initlab.runs import atomic_write_bytes

__all__ = ["write_cifar_like"]


def write_cifar_like(root: str | Path, n_per_batch: int = 8, n_test: int = 8, seed: int = 0) -> Path:
    """Write the six batch files into ``root`` (created); returns ``root``. Raises ``ValueError`` for sizes < 1."""
    if n_per_batch < 1 or n_test < 1:
        raise ValueError(f"n_per_batch/n_test: expected >= 1, got {n_per_batch}/{n_test}")
    rng = np.random.default_rng(seed)
    root = Path(root)
    for name, n in [(f"data_batch_{i}", n_per_batch) for i in range(1, 6)] + [("test_batch", n_test)]:
        labels = rng.integers(0, 10, size=n)
        base = (labels[:, None] * 20 + 30).astype(np.int64)
        data = np.clip(base + rng.integers(-30, 31, size=(n, 3072)), 0, 255).astype(np.uint8)
        atomic_write_bytes(root / name, pickle.dumps({b"data": data, b"labels": labels.tolist()}))
    return root
