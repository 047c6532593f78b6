"""The synthetic SPT resume checkpoint (and the diagnose validation's SPT checkpoint) is read with
``torch.load(weights_only=True)``: a file planted in a shared run folder cannot run code; what the loops save
(tensors, numbers, lists, dicts) loads that way, and the resume stays bit-identical (test_training.py)."""

from __future__ import annotations

import io

import pytest
import torch

from initlab.synthetic.spt import training


class _Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):  # unpickling this object calls open(marker, "w"): code run by loading the file
        return (open, (self.marker, "w"))


def test_a_planted_resume_file_runs_no_code(tmp_path):
    marker = tmp_path / "ran"
    planted = tmp_path / "resume" / "ft_scratch__seed0.pt"
    planted.parent.mkdir()
    buf = io.BytesIO()
    torch.save({"state": {"epoch": 3}, "x": _Payload(marker)}, buf)
    planted.write_bytes(buf.getvalue())
    with pytest.raises(RuntimeError, match="ft_scratch__seed0.pt: resume checkpoint does not load"):
        training.Checkpoint(planted).load()
    assert not marker.exists()


class _Stop(Exception):
    pass


class _StopAfter:
    """The progress hook of the loops: raises after ``n`` epochs (an interrupt at an epoch's end)."""

    def __init__(self, n):
        self.n, self.done = n, 0

    def start(self, done, total=None):
        pass

    def advance(self, k=1.0):
        self.done += 1
        if self.done == self.n:
            raise _Stop


def test_what_the_loops_save_loads_with_weights_only(tmp_path):
    from initlab.config import derive
    from initlab.synthetic import spt
    from initlab.synthetic.spt.cells import fresh_model, seed_data, spt_inputs
    from initlab.synthetic.spt.tasks import MASK_ID, TaskConfig

    tiny = derive(spt.BASE, seeds=(0,), task=TaskConfig(T=20), n_train=64, n_val=32, n_test=64, d_model=8, d_ff=8,
                  batch_size=16, probe_size=4)
    ft = training.Checkpoint(tmp_path / "ft.pt")
    with pytest.raises(_Stop):
        training.finetune(fresh_model(tiny, 1, "full", 0), seed_data(tiny, 0), torch.Generator().manual_seed(3), lr=3e-3,
                          weight_decay=0.01, batch_size=16, max_epochs=7, patience=0, checkpoint=ft,
                          progress=_StopAfter(2))
    assert torch.load(ft.path, weights_only=True)["state"]["epoch"] == 2
    pt = training.Checkpoint(tmp_path / "spt.pt")
    x, xv = spt_inputs(tiny, "local", 0)
    with pytest.raises(_Stop):
        training.pretrain(fresh_model(tiny, 1, "full", 0), x, xv, torch.Generator().manual_seed(17), 5, lr=3e-3,
                          weight_decay=0.01, batch_size=16, mask_rate=0.15, mask_id=MASK_ID, window=3, min_rel=0.01,
                          max_epochs=6, snapshots=(2, 8), checkpoint=pt, progress=_StopAfter(3))
    assert torch.load(pt.path, weights_only=True)["state"]["epoch"] == 3
