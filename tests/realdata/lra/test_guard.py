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
from initlab.realdata.lra.config import PRESETS
TOY = PRESETS["toy"]
from initlab.realdata.lra.sweep import run_sweep_cells, expand_conditions, run_sweep


def _spt_loss_times(monkeypatch, factor: float, at_step: int):
    """Make the SPT loss ``factor`` times its value at optimisation step ``at_step`` (every later step too),
    deterministically: a guard test must not depend on whether a CPU rounds a diverging run to NaN."""
    real, calls = T.spt_loss, {"n": 0}

    def spt_loss(*a, **k):
        loss, n = real(*a, **k)
        step, calls["n"] = calls["n"], calls["n"] + 1
        return (loss * factor if step >= at_step else loss), n

    monkeypatch.setattr(T, "spt_loss", spt_loss)


@pytest.mark.parametrize("factor, words", [(float("nan"), "non-finite loss (nan) at step 3"),
                                           (1e6, "loss diverged")])
def test_lra_pretrain_cli_stops_on_nan_or_divergence_without_done(tmp_path, monkeypatch, capsys, factor, words):
    from initlab.app import cli

    _spt_loss_times(monkeypatch, factor, at_step=3)
    out = tmp_path / "pt"
    rc = cli.main(["lra", "pretrain", "--preset", "toy", "--spt-epochs", "2", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1 and words in err and "at step 3" in err and "Last finite checkpoint" in err and "Traceback" not in err
    assert not (out / "DONE").exists() and not (out / "spt_best.safetensors").exists()  # step 3 is in the first epoch
    res = json.loads((out / "results.json").read_text())
    assert res["failed"] is True and res["what"] == "loss" and res["step"] == 3


def test_lra_finetune_divergence_names_step_and_factor(tmp_path, monkeypatch):
    # a finite loss 10^6 times its first value at step 7: the divergence rule stops it (DivergenceError)
    real, calls = T.F.cross_entropy, {"n": 0}

    def grows_at_step_7(*a, **k):
        calls["n"] += 1
        out = real(*a, **k)
        return out * 1e6 if calls["n"] == 8 else out

    monkeypatch.setattr(T.F, "cross_entropy", grows_at_step_7)
    with pytest.raises(runs.DivergenceError, match=r"loss diverged \(.* at step 7, more than 10000 times its early value") as info:
        T.finetune(replace(TOY, init="scratch", epochs=3, metrics_examples=0), tmp_path / "ft", progress=False)
    assert isinstance(info.value, runs.NonFiniteError) and info.value.factor == runs.DIVERGENCE_FACTOR
    assert not (tmp_path / "ft" / "DONE").exists() and json.loads((tmp_path / "ft" / "results.json").read_text())["failed"]


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


def test_lra_sweep_records_failed_cell_and_goes_on(tmp_path, monkeypatch):
    # NaN injected into every loss (SPT and label) from step 2 on: both cells fail, the sweep goes on
    _spt_loss_times(monkeypatch, float("nan"), at_step=2)
    real = T.F.cross_entropy
    monkeypatch.setattr(T.F, "cross_entropy", lambda *a, **k: real(*a, **k) * float("nan"))
    rows = run_sweep("spt-vs-scratch", TOY, tmp_path / "sw", (0,), progress=False, figure=False)
    assert [r["condition"] for r in rows] == ["scratch", "spt"]
    assert all(r["failed"] for r in rows) and all(r["test_acc"] != r["test_acc"] for r in rows)  # NaN
    assert "non-finite" in rows[0]["error"] and (tmp_path / "sw" / "DONE").exists()


def test_lra_sweep_cell_keyed_by_its_config(tmp_path):
    run = runs.RunDir(tmp_path / "sw")
    conds = [(0, *c) for c in expand_conditions("spt-vs-scratch", TOY, 0)][:1]  # scratch only
    run_sweep_cells(run, "spt-vs-scratch", conds, progress=False)
    other = [(0, conds[0][1], replace(conds[0][2], lr=2e-3), None)]
    with pytest.raises(runs.ConfigMismatchError, match="cell 'scratch-seed0'"):
        run_sweep_cells(run, "spt-vs-scratch", other, progress=False)


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
