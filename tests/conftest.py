"""Shared test setup: hypothesis profiles and default markers.

Profiles (select with ``--hypothesis-profile NAME`` or ``HYPOTHESIS_PROFILE=NAME``):

* ``dev``      -- default; few examples, fast feedback;
* ``ci``       -- derandomized, no deadline, prints reproduction blobs (used by ``.ci/run``);
* ``thorough`` -- many examples, for a long local run.

Under pytest-xdist (``pytest -n 2``, the README's test command) every worker runs torch on one thread.

Markers ``slow`` and ``gpu`` are excluded by default (``pyproject.toml`` addopts); run them with
``pytest -m slow`` or ``pytest -m gpu``.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=15, deadline=None)
settings.register_profile(
    "ci",
    max_examples=25,
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

if os.environ.get("PYTEST_XDIST_WORKER"):  # `pytest -n N` (pytest-xdist): N worker processes share the cores, so
    import torch  # each keeps torch's CPU kernels to one thread (as the executor's workers do) rather than N x cores

    torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``gpu`` tests cleanly when they were selected on a machine without CUDA."""
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
