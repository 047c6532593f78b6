"""Fixtures shared by the theory tests."""

from __future__ import annotations

import pytest

from initlab.runs import torch_threads


@pytest.fixture
def one_thread():
    """Tiny tensors: intra-op threads only add synchronisation cost on the shared CI cores."""
    with torch_threads(1):
        yield
