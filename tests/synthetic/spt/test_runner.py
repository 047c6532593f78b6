"""Tests of initlab.synthetic.spt: a tiny end-to-end run, resume (a real SIGINT), guards, the compute-matched
arm, the learning-rate selection, verdicts recomputed from raw numbers, CLI and reproduce stage."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from initlab.synthetic.spt import command as synthetic_cmd
from initlab.synthetic.spt import stage
from initlab.config import derive
from initlab.synthetic.spt import claims as spt_claims
from initlab.paper_figs import spt_figures
from initlab.runs import ConfigMismatchError, RunExistsError
from initlab.synthetic import spt
from initlab.evidence.rules import VerdictRecordError, check_record
from initlab.synthetic.spt.tasks import TaskConfig

TINY = derive(
    spt.BASE, seeds=(0, 1), task=TaskConfig(T=20), n_train=32, n_val=16, n_test=32, d_model=8, d_ff=8, batch_size=16,
    finetune_max_epochs=3, finetune_patience=2, spt_max_epochs=4, spt_window=2, spt_sweep_epochs=(1, 2), depths=(1, 2),
    probe_size=4,
)


def _cells(out: Path) -> dict[str, str]:
    """cell name -> the exact bytes of its JSON."""
    return {p.stem: p.read_text() for p in sorted((out / "cells").glob("*.json"))}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("spt") / "run"
    md = spt.run(TINY, out, progress=False, draw=spt_figures.make_figures, workers=1)
    return out, md


def test_tiny_run_writes_everything(tiny_run):
    out, md = tiny_run
    names = spt.condition_names(TINY)
    assert {"scratch", "scratch_matched", "spt", "frozen_attn", "hybrid_qk", "hybrid_qkvo", "hybrid_ffn", "hybrid_qk_emb",
            "hybrid_qk_ln", "hybrid_qk_emb_ln", "spt_e1", "spt_e2", "depth2_scratch", "depth2_spt", "cross_count",
            "cross_iid", "attn_scratch", "attn_spt", "attn_qk", "alibi_scratch", "qkscale_scratch", "lastpool_scratch",
            "spt_nopos"} == set(names)
    for n in names:
        assert f"| {n} |" in md
    assert md.index("| claim |") < md.index("| condition |")  # the verdict table comes first
    assert (out / "DONE").exists() and (out / "report.md").read_text() == md
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["config_class"] == "SPTConfig" and cfg["config"]["thresholds"]["min_share"] == 0.5
    saved = json.loads((out / "verdicts.json").read_text())
    assert set(saved) == {c.id for c in spt_claims.CLAIMS}
    for f in ("metrics.csv", "history.csv", "metrics.json"):
        assert (out / f).stat().st_size > 0
    for fig in ("spt_accuracy", "spt_epoch_curve", "spt_proximity_vs_accuracy", "spt_training_curves", "spt_attention_maps"):
        assert (out / f"{fig}.png").stat().st_size > 0 and (out / f"{fig}.pdf").stat().st_size > 0
        assert f"![{fig}]({fig}.png)" in md  # the report embeds every figure it draws
    cells = {k: json.loads(v) for k, v in _cells(out).items()}
    s0 = {c: cells[f"ft_{c}__seed0"] for c in ("frozen_attn", "hybrid_qk", "hybrid_qk_emb_ln", "spt", "attn_qk")}
    assert all("attn.W_" in n for n in s0["frozen_attn"]["frozen"])
    assert s0["hybrid_qk"]["loaded"] == ["blocks.0.attn.W_Q.weight", "blocks.0.attn.W_Q.bias",
                                         "blocks.0.attn.W_K.weight", "blocks.0.attn.W_K.bias"]
    assert any(n.startswith("tok_emb") for n in s0["hybrid_qk_emb_ln"]["loaded"])
    assert not any(".ffn." in n for n in s0["hybrid_qk_emb_ln"]["loaded"])
    assert not any(n.startswith(("cls_head", "mlm_head")) for n in s0["spt"]["loaded"])
    for s in (0, 1):  # the reported test accuracy is the best-validation epoch's (earliest on ties)
        c = cells[f"ft_scratch__seed{s}"]
        h = c["history"]
        assert c["best_epoch"] == max(range(len(h)), key=lambda e: (h[e]["val_acc"], -e))
        rule = cells[f"spt_local_full_d1__seed{s}"]
        assert rule["rule_epoch"] == min(range(len(rule["val_loss"])), key=lambda e: (rule["val_loss"][e], e))
    g = cells["init_grad__seed0"]
    assert g["theorem"]["label_blind_frac"] < 1e-8 < g["theorem"]["mlm_blind_frac"]
    with pytest.raises(RunExistsError):
        spt.run(TINY, out, progress=False)


def test_compute_matched_arm_runs_spt_plus_finetuning_steps(tiny_run):
    out, _ = tiny_run
    cells = {k: json.loads(v) for k, v in _cells(out).items()}
    for s in (0, 1):
        m, pre, ft = cells[f"ft_scratch_matched__seed{s}"], cells[f"spt_local_full_d1__seed{s}"], cells[f"ft_spt__seed{s}"]
        assert m["epochs_run"] == pre["stop_epoch"] + ft["epochs_run"] and m["patience"] == 0
        assert m["steps"] == pre["stop_epoch"] * (TINY.n_train // TINY.batch_size) + ft["steps"]
        assert m["lr"] == cells[f"ft_scratch__seed{s}"]["lr"]


def test_same_seed_identical_cells(tiny_run, tmp_path):
    out, _ = tiny_run
    spt.run(derive(TINY, conditions=("scratch", "hybrid_qk")), tmp_path / "again", progress=False, workers=1)
    first, again = _cells(out), _cells(tmp_path / "again")
    for name in ("init_grad__seed0", "ft_scratch__seed1", "ft_hybrid_qk__seed0"):
        assert first[name] == again[name], name


def test_workers_give_the_same_cells(tiny_run, tmp_path):
    out, _ = tiny_run
    spt.run(derive(TINY, conditions=("scratch", "spt")), tmp_path / "two", progress=False, workers=2)
    two = {n: t for n, t in _cells(tmp_path / "two").items() if not n.startswith("spt_")}  # (its snapshots differ)
    assert "ft_spt__seed1" in two and all(two[n] == _cells(out)[n] for n in two)


def test_resume_under_changed_config_is_refused(tmp_path):
    """An interrupted run (no DONE) resumed with another fine-tuning budget must not reuse its cells."""
    cfg = derive(TINY, seeds=(0,), conditions=("scratch",))
    out = tmp_path / "run"
    spt.run(cfg, out, progress=False, workers=1)
    (out / "DONE").unlink()
    with pytest.raises(ConfigMismatchError, match="finetune_max_epochs"):
        spt.run(derive(cfg, finetune_max_epochs=6), out, progress=False, workers=1)
    assert json.loads((out / "config.json").read_text())["config"]["finetune_max_epochs"] == 3
    (out / "config.json").unlink()  # a cell whose saved key differs (e.g. copied from another run) is refused too
    with pytest.raises(ConfigMismatchError, match="cell"):
        spt.run(derive(cfg, finetune_max_epochs=6), out, progress=False, workers=1)


SLOW = derive(TINY, seeds=(0,), n_train=256, finetune_max_epochs=12, finetune_patience=0, conditions=("scratch",))

_CHILD = """
import json, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a parent that ignores SIGINT (a background job) passes that on
from initlab.config import from_dict
from initlab.synthetic import spt
from initlab.synthetic.spt import training
_save = training.Checkpoint.save
def _save_then_wait(self, state):  # after epoch 3's checkpoint: say so, then wait, so the SIGINT lands mid-run
    _save(self, state)
    if self.path.name.startswith("ft_") and state["state"]["epoch"] == 3:
        print("saved epoch 3", flush=True)
        sys.stdin.readline()  # the parent's SIGINT interrupts this wait (no timing: a handshake)
training.Checkpoint.save = _save_then_wait
cfg = from_dict(spt.SPTConfig, json.loads(sys.argv[2]))
try:
    spt.run(cfg, sys.argv[1], progress=False, workers=1)
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_a_real_sigint_loses_at_most_one_epoch_and_resumes_bit_identically(tmp_path):
    from initlab.config import to_dict

    ref = tmp_path / "ref"
    spt.run(SLOW, ref, progress=False, workers=1)
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(out), json.dumps(to_dict(SLOW))],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    resume = out / "resume" / "ft_scratch__seed0.pt"
    import torch

    line = proc.stdout.readline()  # blocks until the child has saved epoch 3 (or ended)
    if line.strip() != "saved epoch 3":
        proc.kill()
        pytest.fail(f"the child ended before saving epoch 3: {proc.stderr.read()[-2000:]}")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(600) == 130, proc.stderr.read()[-2000:]
    assert not (out / "DONE").exists() and not (out / "cells" / "ft_scratch__seed0.json").exists()
    at_interrupt = torch.load(resume, weights_only=True)["state"]["epoch"]
    assert at_interrupt == 3
    spt.run(SLOW, out, progress=False, workers=1)
    resumed = json.loads((out / "cells" / "ft_scratch__seed0.json").read_text())
    assert resumed["epochs_run"] == 12
    assert _cells(out) == _cells(ref)  # byte-identical to the uninterrupted run
    assert not resume.exists()


def test_learning_rate_selection_picks_the_best_mean_validation_accuracy(tmp_path):
    cfg = derive(TINY, lr_sweep=(1e-3, 1e-2), conditions=("scratch", "attn_scratch"))
    out = tmp_path / "lr"
    md = spt.run(cfg, out, progress=False, workers=1)
    m = json.loads((out / "metrics.json").read_text())["summary"]
    for cond in ("scratch", "attn_scratch"):
        rows = m["lr_selection"][cond]["rows"]
        best = max(rows, key=lambda lr: (rows[lr]["val_acc_mean"], -float(lr)))
        assert float(best) == m["lr_selection"][cond]["chosen"]
        assert {r["lr"] for r in m["per_seed"][cond]} == {float(best)}
    assert "Learning-rate selection" in md and "chosen" in md
    with pytest.raises(ValueError, match="scratch_matched"):
        derive(TINY, lr_sweep=(1e-3,), conditions=("scratch_matched",))


def test_verdicts_follow_the_raw_numbers_not_saved_words(tiny_run):
    out, _ = tiny_run
    metrics = json.loads((out / "metrics.json").read_text())
    cfg = TINY
    raw = metrics["summary"]["per_seed"]
    before = spt.verdicts(cfg, metrics["summary"])
    for r, c in zip(raw["spt"], raw["scratch"]):  # a large SPT gain on both seeds, written into the raw numbers
        r["test_acc"], c["test_acc"] = c["test_acc"] + 0.40 + 0.01 * r["seed"], c["test_acc"]
    after = spt.verdicts(cfg, metrics["summary"])
    assert after["spt_gain"].word == "reproduced" and after["spt_gain"].estimate > 0.39
    for r, c in zip(raw["spt"], raw["scratch"]):
        r["test_acc"] = c["test_acc"]  # SPT equal to scratch: the gain claim fails
    assert spt.verdicts(cfg, metrics["summary"])["spt_gain"].word == "not reproduced"
    saved = json.loads((out / "verdicts.json").read_text())
    check_record(saved, before, "verdicts.json")  # the record agrees with its own numbers
    with pytest.raises(VerdictRecordError, match="spt_gain"):
        check_record(saved, after, "verdicts.json")


@pytest.mark.parametrize("factor, message", [(float("nan"), "non-finite loss (nan) at step 2"),
                                             (1e6, "diverged")])
def test_cli_stops_on_an_injected_nan_or_diverged_loss_without_done(tmp_path, monkeypatch, capsys, factor, message):
    """The loss is multiplied by NaN or by 10^6 at step 2 of every loop (injected: never left to a CPU's
    rounding); the command exits 1 with one message, no traceback, no DONE and no finished fine-tuning cell."""
    from initlab.synthetic.spt import training

    real = training.guarded_step
    monkeypatch.setattr(training, "guarded_step", lambda model, opt, loss, where, step, guard: real(
        model, opt, loss * factor if step == 2 else loss, where, step, guard))
    monkeypatch.setitem(spt.PRESETS, "quick", derive(TINY, seeds=(0,), conditions=("scratch", "spt")))
    out = tmp_path / "bad"
    assert synthetic_cmd.spt_main(["--preset", "quick", "--out", str(out), "--workers", "1", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert message in err and "at step 2" in err and "Traceback" not in err
    assert not (out / "DONE").exists() and not list((out / "cells").glob("ft_*.json"))


def test_cli_and_reproduce_stage(tmp_path, monkeypatch, capsys):
    tiny = derive(TINY, seeds=(0,), conditions=("scratch", "hybrid_qk"))
    monkeypatch.setitem(spt.PRESETS, "quick", tiny)
    assert synthetic_cmd.spt_main(["--preset", "quick", "--out", str(tmp_path / "cli"), "--workers", "1", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "| hybrid_qk |" in printed and "results:" in printed
    with pytest.raises(SystemExit):  # finished run, no --overwrite
        synthetic_cmd.spt_main(["--preset", "quick", "--out", str(tmp_path / "cli"), "--workers", "1", "--no-progress"])
    md = stage.spt(tmp_path / "stage", "quick", False)
    assert "| scratch |" in md
    assert stage.spt(tmp_path / "stage", "quick", False) == md  # finished: the saved summary
    with pytest.raises(ValueError, match="preset"):
        stage.spt(tmp_path / "x", "huge", False)


def test_config_errors():
    with pytest.raises(ValueError, match="conditions"):
        derive(TINY, conditions=("nope",))
    with pytest.raises(ValueError, match="depths"):
        derive(TINY, depths=(2,))
    with pytest.raises(ValueError, match="unknown config key"):
        derive(TINY, epochs=3)
    with pytest.raises(ValueError, match="seeds"):
        derive(TINY, seeds=(1, 1))
    with pytest.raises(ValueError, match="label_lr"):
        derive(TINY, label_lr=(("nope", 1e-3),))
    with pytest.raises(ValueError, match="seed_counts"):
        derive(TINY, seed_counts=(("scratch", 5),))
    with pytest.raises(ValueError, match="workers"):
        spt.run(TINY, "/tmp/never-written-spt", workers=0)


def test_figure_script_reads_a_saved_run(tiny_run, tmp_path, capsys):
    out, _ = tiny_run
    (out / "spt_accuracy.png").unlink()
    assert spt_figures.main([str(out)]) == 0
    assert (out / "spt_accuracy.png").exists() and "spt_accuracy.pdf" in capsys.readouterr().out
    with pytest.raises(FileNotFoundError, match="metrics.json"):
        spt_figures.make_figures(tmp_path)
