"""initlab.synthetic.spt.training: the stopping and selection rules on hand-made curves, per-epoch resume
(bit-identical to an uninterrupted run), and the non-finite stop injected deterministically."""

from __future__ import annotations

import json
import math

import pytest
import torch

from initlab.config import derive
from initlab.runs import NonFiniteError
from initlab.synthetic import spt
from initlab.synthetic.spt import training
from initlab.synthetic.spt.cells import fresh_model, seed_data, spt_inputs
from initlab.synthetic.spt.tasks import MASK_ID, TaskConfig

TINY = derive(spt.BASE, seeds=(0,), task=TaskConfig(T=20), n_train=64, n_val=32, n_test=64, d_model=8, d_ff=8,
              batch_size=16, probe_size=4)


def test_spt_stop_rule_on_hand_made_curves():
    # still improving by >= 1 % over the window: go on; then a plateau: stop; the cap always stops
    curve = [3.0, 2.0, 1.5, 1.2, 1.1]
    assert training.spt_stop_epoch(curve, window=2, min_rel=0.01, max_epochs=10) is None
    assert training.spt_stop_epoch(curve + [1.099, 1.0985], window=2, min_rel=0.01, max_epochs=10) == 6
    assert training.spt_stop_epoch([3.0, 2.9], window=5, min_rel=0.01, max_epochs=1) == 1
    # a worse epoch does not count as progress: the best so far decides
    assert training.spt_stop_epoch([3.0, 1.0, 1.5, 1.4], window=2, min_rel=0.01, max_epochs=10) == 3
    with pytest.raises(ValueError, match="window"):
        training.spt_stop_epoch([1.0], window=0, min_rel=0.01, max_epochs=3)


def test_finetune_stop_and_selection():
    assert training.select_on_validation([0.5, 0.7, 0.7, 0.6]) == 1  # earliest on ties
    assert not training.finetune_stop([0.5, 0.7, 0.6], patience=2, max_epochs=10)
    assert training.finetune_stop([0.5, 0.7, 0.6, 0.6], patience=2, max_epochs=10)
    assert training.finetune_stop([0.5, 0.6], patience=0, max_epochs=1)
    assert not training.finetune_stop([0.5] * 5, patience=0, max_epochs=10)  # patience 0: only the cap stops


class Stop(Exception):
    """Raised by the progress hook to simulate an interrupt after a given number of epochs."""


class InterruptAfter:
    def __init__(self, n: int | None):
        self.n, self.done, self.resumed = n, 0, None

    def start(self, done, total=None):
        self.resumed = done

    def advance(self, k=1.0):
        self.done += 1
        if self.n is not None and self.done == self.n:
            raise Stop


def _finetune(ck, progress):
    d = seed_data(TINY, 0)
    return training.finetune(fresh_model(TINY, 1, "full", 0), d, torch.Generator().manual_seed(3), lr=3e-3, weight_decay=0.01,
                             batch_size=16, max_epochs=7, patience=0, checkpoint=ck, progress=progress)


def test_finetune_resumes_bit_identically(tmp_path):
    ref, ref_model = _finetune(None, None)
    ck = training.Checkpoint(tmp_path / "ft.pt")
    with pytest.raises(Stop):
        _finetune(ck, InterruptAfter(3))
    assert ck.path.exists()
    p = InterruptAfter(None)
    out, model = _finetune(ck, p)
    assert p.resumed == 3 and p.done == 4 and out.pop("resumed_epochs") == 3 and ref.pop("resumed_epochs") == 0
    assert json.dumps(out) == json.dumps(ref)  # every number, the history included, is the same float
    for a, b in zip(model.state_dict().values(), ref_model.state_dict().values()):
        assert torch.equal(a, b)
    assert not ck.path.exists()  # removed once the loop finished


def _pretrain(ck, progress):
    x, xv = spt_inputs(TINY, "local", 0)
    return training.pretrain(fresh_model(TINY, 1, "full", 0), x, xv, torch.Generator().manual_seed(17), 5, lr=3e-3,
                             weight_decay=0.01, batch_size=16, mask_rate=0.15, mask_id=MASK_ID, window=3, min_rel=0.01,
                             max_epochs=6, snapshots=(2, 8), checkpoint=ck, progress=progress)


def test_pretrain_resumes_bit_identically(tmp_path):
    ref = _pretrain(None, None)
    ck = training.Checkpoint(tmp_path / "spt.pt")
    with pytest.raises(Stop):
        _pretrain(ck, InterruptAfter(4))
    out = _pretrain(ck, InterruptAfter(None))
    assert out["resumed_epochs"] == 4
    assert out["val_loss"] == ref["val_loss"] and out["best_epoch"] == ref["best_epoch"] and out["stop_epoch"] == ref["stop_epoch"]
    assert out["epochs_run"] == ref["epochs_run"] == max(ref["stop_epoch"], 8)  # runs on to the last snapshot
    assert set(out["states"]) == set(ref["states"]) == {"rule", 2, 8}
    for k in ref["states"]:
        for n in ref["states"][k]:
            assert torch.equal(out["states"][k][n], ref["states"][k][n])


def test_nonfinite_loss_stops_with_its_step(monkeypatch):
    """A NaN is injected into the loss at step 5 (no reliance on a diverging learning rate)."""
    calls = {"n": 0}
    real = training.F.cross_entropy

    def poisoned(*a, **k):
        out = real(*a, **k)
        calls["n"] += 1
        return out * math.nan if calls["n"] == 6 else out  # the 6th training loss is step 5

    monkeypatch.setattr(training.F, "cross_entropy", poisoned)
    d = seed_data(TINY, 0)
    with pytest.raises(NonFiniteError) as err:
        training.finetune(fresh_model(TINY, 1, "full", 0), d, torch.Generator().manual_seed(3), lr=1e-3, weight_decay=0.0,
                          batch_size=16, max_epochs=3, patience=0)
    assert err.value.step == 5 and err.value.what == "loss"


def test_a_broken_resume_file_names_itself(tmp_path):
    bad = tmp_path / "ft.pt"
    bad.write_text("not a checkpoint")
    with pytest.raises(RuntimeError, match="ft.pt: resume checkpoint does not load"):
        training.Checkpoint(bad).load()
