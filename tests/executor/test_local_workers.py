"""A user-set worker count is honoured or refused in one line, never cut to what the machine can take."""

from __future__ import annotations

import pytest


def test_more_local_workers_than_gpus_is_refused_not_cut(tmp_path, monkeypatch):
    """A user-set count is honoured or refused: --workers 4 on a 2-GPU machine was silently cut to 2."""
    import initlab.executor as ex
    from initlab.executor import Cell, run_cells
    from initlab.runs import RunDir

    monkeypatch.setattr(ex, "gpu_count", lambda: 2)
    cells = [Cell("a", "m:f", {}, 1)]
    with pytest.raises(ValueError, match=r"--workers\) 4: this machine has 2 GPU\(s\)"):
        run_cells(RunDir(tmp_path / "r"), cells, workers=4, gpus=True, progress=False)
