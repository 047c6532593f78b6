"""Run guards of the LRA loops: non-finite stop (CLI, pretrain, fine-tune, sweep cell), config-mismatch
refusal on resume (run folder and sweep cell), and the plateau (patience) rule."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from initlab import runs
from initlab.realdata.lra import train as T
from initlab.realdata.lra.config import TOY
from initlab.realdata.lra.sweep import _run_cells, expand_conditions, run_sweep


def test_lra_pretrain_cli_stops_on_nan_without_done(tmp_path):
    out = tmp_path / "pt"
    cmd = [sys.executable, "-m", "initlab.cli", "lra", "pretrain", "--preset", "toy", "--set", "lr=1e3",
           "--spt-epochs", "2", "--out", str(out), "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "non-finite" in proc.stderr and "at step" in proc.stderr and "Last finite checkpoint" in proc.stderr
    assert not (out / "DONE").exists() and not (out / "spt_best.safetensors").exists()
    res = json.loads((out / "results.json").read_text())
    assert res["failed"] is True and res["what"] in ("loss", "gradient") and res["step"] >= 0


def test_lra_finetune_nan_names_last_checkpoint(tmp_path, monkeypatch):
    # a NaN loss injected at step 7 (epoch 2; 6 steps per epoch) names ckpt/last.pt written after epoch 1
    real, calls = T.F.cross_entropy, {"n": 0}

    def nan_at_step_7(*a, **k):
        calls["n"] += 1
        out = real(*a, **k)
        return out * float("nan") if calls["n"] == 8 else out

    monkeypatch.setattr(T.F, "cross_entropy", nan_at_step_7)
    cfg = replace(TOY, init="scratch", epochs=3, metrics_examples=0)
    with pytest.raises(runs.NonFiniteError, match=r"non-finite loss \(nan\) at step 7.*ckpt/last.pt") as info:
        T.finetune(cfg, tmp_path / "ft", progress=False)
    assert info.value.step == 7 and info.value.last_checkpoint.endswith("last.pt")
    assert not (tmp_path / "ft" / "DONE").exists()
    res = json.loads((tmp_path / "ft" / "results.json").read_text())
    assert res["failed"] is True and len(res["history"]) == 1  # the finite epoch is kept
    monkeypatch.setattr(T.F, "cross_entropy", real)
    with pytest.raises(runs.ConfigMismatchError):  # another config in the same unfinished folder is refused
        T.finetune(replace(cfg, lr=2e-3), tmp_path / "ft", progress=False)
    assert T.finetune(cfg, tmp_path / "ft", progress=False)["epochs_run"] == 3  # resumes from the finite epoch


def test_lra_changed_config_resume_raises(tmp_path):
    cfg = replace(TOY, spt_epochs=1)
    T.pretrain(cfg, tmp_path / "pt", progress=False)
    (tmp_path / "pt" / "DONE").unlink()  # as if interrupted
    with pytest.raises(T.ConfigMismatchError, match="differs in: config"):
        T.pretrain(replace(cfg, lr=2e-3), tmp_path / "pt", progress=False)
    assert T.ConfigMismatchError is runs.ConfigMismatchError and issubclass(T.ConfigMismatchError, ValueError)
    T.pretrain(cfg, tmp_path / "pt", progress=False)  # same config resumes and finishes
    assert (tmp_path / "pt" / "DONE").exists()


def test_lra_sweep_records_failed_cell_and_goes_on(tmp_path):
    rows = run_sweep("spt-vs-scratch", replace(TOY, lr=1e3), tmp_path / "sw", (0,), progress=False, figure=False)
    assert [r["condition"] for r in rows] == ["scratch", "spt"]
    assert all(r["failed"] for r in rows) and all(r["test_acc"] != r["test_acc"] for r in rows)  # NaN
    assert "non-finite" in rows[0]["error"] and (tmp_path / "sw" / "DONE").exists()


def test_lra_sweep_cell_keyed_by_its_config(tmp_path):
    run = runs.RunDir(tmp_path / "sw")
    conds = [(0, *c) for c in expand_conditions("spt-vs-scratch", TOY, 0)][:1]  # scratch only
    _run_cells(run, "spt-vs-scratch", conds, progress=False)
    other = [(0, conds[0][1], replace(conds[0][2], lr=2e-3), None)]
    with pytest.raises(runs.ConfigMismatchError, match="cell 'scratch-seed0'"):
        _run_cells(run, "spt-vs-scratch", other, progress=False)


@pytest.mark.parametrize("values, higher, rel, since", [
    ([], True, 0.0, 0), ([0.1, 0.2, 0.3], True, 0.0, 0), ([0.3, 0.2, 0.3], True, 0.0, 2),
    ([2.0, 1.99, 1.98], False, 0.0, 0), ([2.0, 1.99, 1.98], False, 0.05, 2), ([2.0, 1.0, 0.99, 1.2], False, 0.02, 2)])
def test_epochs_since_gain(values, higher, rel, since):
    assert T.epochs_since_gain(values, higher_is_better=higher, min_rel_gain=rel) == since


def test_lra_plateau_rule_stops_spt_and_finetune(tmp_path):
    # a 99 % relative gain is never reached after epoch 1, so patience 1 stops SPT after epoch 2
    cfg = replace(TOY, spt_epochs=6, spt_patience=1, spt_min_rel_gain=0.99)
    res = T.pretrain(cfg, tmp_path / "pt", milestones=[4], progress=False)
    assert res["epochs_run"] == 2 and res["stopped_on_plateau"] and len(res["history"]) == 2
    assert (tmp_path / "pt" / "spt_best_e4.safetensors").is_file()  # milestone past the stop: best so far
    # a learning rate too small to change any prediction: validation accuracy never improves after epoch 1
    ft = T.finetune(replace(TOY, init="scratch", lr=1e-12, epochs=6, patience=2, metrics_examples=4), tmp_path / "ft", progress=False)
    assert ft["epochs_run"] == 3 and ft["best_epoch"] == 1 and ft["stopped_on_plateau"]
    assert ft["attention_metrics_init"]["n_sequences"] == 4 and "attention_metrics" in ft
