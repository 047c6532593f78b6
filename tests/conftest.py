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

@pytest.fixture
def one_thread():
    """Tiny tensors (the theory and its checks): intra-op threads only add synchronisation cost on the shared CI
    cores."""
    from initlab.runs import torch_threads

    with torch_threads(1):
        yield


def _seeds_in(obj: object, found: set[int]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("seed", "seeds", "complete_seeds") or k.endswith("_seed"):
                for s in v if isinstance(v, list) else [v]:
                    if isinstance(s, int) and not isinstance(s, bool):
                        found.add(s)
            _seeds_in(v, found)
    elif isinstance(obj, list):
        for v in obj:
            _seeds_in(v, found)


@pytest.fixture(scope="session")
def saved_run_seeds() -> set[int]:
    """Every seed any saved run in docs/results names: each int under a ``seed``, ``seeds``, ``complete_seeds`` or
    ``*_seed`` key, at any depth, of every JSON file there (configs, per-seed records, cells). A preset's fresh seeds
    must be none of these."""
    import json
    from pathlib import Path

    found: set[int] = set()
    root = Path(__file__).resolve().parents[1] / "docs" / "results"
    for path in sorted(root.rglob("*.json")):
        _seeds_in(json.loads(path.read_text(encoding="utf-8")), found)
    return found


if os.environ.get("PYTEST_XDIST_WORKER"):  # `pytest -n N` (pytest-xdist): N worker processes share the cores, so
    import torch  # each keeps torch's CPU kernels to one thread (as the executor's workers do) rather than N x cores

    torch.set_num_threads(1)


#: the modules that hold the suite's longest tests (their durations, from ``--durations``, in the comments), which
#: pytest-xdist starts first: a long test started last leaves one worker running it alone at the end
LONGEST_FIRST = (
    "tests/app/docgen/test_tables.py",  # a fresh `initlab reproduce --preset quick`: about half the suite's longest path
    "tests/synthetic/splade/phase/test_phase.py",  # the Dask local cluster
    "tests/realdata/splade/test_pipeline.py",  # two-process DDP
    "tests/executor/test_executor.py",  # local process pools
    "tests/paper_figs/test_figures_readable.py",
    "tests/synthetic/spt/test_runner.py",
    "tests/app/docgen/test_claims.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, hand the modules to the workers in collection order (no reordering by test count), so
    that :data:`LONGEST_FIRST` starts first."""
    if getattr(config.option, "numprocesses", None) and hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, move the modules of :data:`LONGEST_FIRST` to the front (each module's own order kept);
    skip ``gpu`` tests cleanly when they were selected on a machine without CUDA."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order
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
