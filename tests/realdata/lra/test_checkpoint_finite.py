"""An LRA checkpoint holding a NaN or infinite tensor is refused naming the tensors: the SPT checkpoint of
``lra finetune --spt`` (exit 2, nothing written) and a run's resume file (weights and optimizer state)."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

from initlab.app.cli import main as cli
from initlab.realdata.lra import train as T
from initlab.realdata.lra.config import PRESETS
TOY = PRESETS["toy"]
from initlab.realdata.lra.runtime import restore_last
from initlab.runs import NonFiniteCheckpointError


def test_finetune_refuses_an_spt_checkpoint_with_a_nan_weight(tmp_path, monkeypatch):
    state = T.build_model(TOY).backbone.state_dict()
    name = sorted(k for k in state if k.endswith("W_Q.weight"))[0]
    state[name][0, 0] = float("nan")
    T.save_weights(state, tmp_path / "spt.safetensors")
    monkeypatch.chdir(tmp_path)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exit_:
        cli(["lra", "finetune", "--preset", "toy", "--spt", "spt.safetensors", "--out", "ft", "--no-progress"])
    line = err.getvalue().strip()
    assert exit_.value.code == 2 and "\n" not in line, line
    assert f"SPT checkpoint spt.safetensors: 1 tensor(s) hold NaN or infinite values ({name})" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spt.safetensors"]  # no run folder, no data folder


def test_resume_file_with_a_nan_optimizer_state_is_refused(tmp_path):
    model = T.build_model(TOY)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    saved = {"model": model.state_dict(), "optim": opt.state_dict(), "sched": sched.state_dict(), "epoch": 1}
    saved["optim"]["state"][0]["exp_avg_sq"].view(-1)[0] = float("inf")
    torch.save(saved, tmp_path / "last.pt")
    with pytest.raises(NonFiniteCheckpointError, match=r"resume checkpoint .*last\.pt: 1 tensor\(s\) .*optim\.state\.0\.exp_avg_sq"):
        restore_last(tmp_path / "last.pt", model, opt, sched)
