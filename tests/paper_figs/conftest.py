"""Fixtures of the figure tests: a fixture that keeps every saved figure open for inspection; the helper
modules of this folder (``figs_saved_results``: hand-written result folders, ``figs_checks``: the
readability checks) importable by name."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture()
def kept_figures(monkeypatch):
    """The figures saved while the test runs, kept open (``plt.close`` is a no-op) and closed at the end."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    real_close, kept = plt.close, []
    monkeypatch.setattr(plt, "close", lambda fig=None: kept.append(fig) if fig is not None and fig not in kept else None)
    yield kept
    for fig in kept:
        real_close(fig)

