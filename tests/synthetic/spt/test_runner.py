"""Tests of initlab.synthetic.spt: a tiny end-to-end run, resume guards, NaN stop, CLI and reproduce stage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from initlab import stages
from initlab.commands import synthetic as synthetic_cmd
from initlab.config import derive
from initlab.paper_figs import spt_figures
from initlab.runs import ConfigMismatchError, RunExistsError
from initlab.synthetic import spt
from initlab.synthetic.spt.tasks import TaskConfig

TINY = derive(
    spt.BASE, seeds=(0, 1), task=TaskConfig(T=20), n_train=32, n_val=16, n_test=32, d_model=8, d_ff=8, batch_size=16,
    finetune_epochs=2, spt_max_epochs=3, spt_patience=1, spt_sweep_epochs=(0, 1, 2), depths=(1, 2), probe_size=4,
)


def _cells(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((out / "cells").glob("*.json"))}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("spt") / "run"
    md = spt.run(TINY, out, progress=False, draw=spt_figures.make_figures)
    return out, md


def test_tiny_run_writes_everything(tiny_run):
    out, md = tiny_run
    names = spt.condition_names(TINY)
    assert {"scratch", "spt", "frozen_attn", "hybrid_qk", "hybrid_qkvo", "hybrid_ffn", "hybrid_qk_emb", "hybrid_qk_ln",
            "hybrid_qk_emb_ln", "spt_e1", "spt_e2", "depth2_scratch", "depth2_spt", "cross_count", "cross_iid",
            "attn_scratch", "attn_spt", "attn_qk"} == set(names)
    for n in names:
        assert f"| {n} |" in md
    assert md.index("| claim |") < md.index("| condition |")  # the verdict table comes first
    assert (out / "DONE").exists() and (out / "report.md").read_text() == md
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["config_class"] == "SPTConfig" and cfg["config"]["thresholds"]["min_share"] == 0.5
    verdicts = json.loads((out / "verdicts.json").read_text())
    assert {v["id"] for v in verdicts} >= {"spt_gain", "few_epochs", "frozen_attn", "qkvo", "qk", "ffn", "depth", "cross_data"}
    assert all(v["verdict"] in ("reproduced", "partly", "not reproduced") for v in verdicts)  # nothing "not run" here
    for f in ("metrics.csv", "summary.csv", "history.csv", "metrics.json"):
        assert (out / f).stat().st_size > 0
    for fig in ("spt_accuracy", "spt_proximity_vs_accuracy", "spt_training_curves", "spt_attention_maps"):
        assert (out / f"{fig}.png").stat().st_size > 0 and (out / f"{fig}.pdf").stat().st_size > 0
    cells = _cells(out)
    seed0 = {c: {s["seed"]: s for s in cells[f"ft_{c}"]["seeds"]}[0] for c in ("frozen_attn", "hybrid_qk", "hybrid_qk_emb_ln", "spt", "attn_qk")}
    assert all("attn.W_" in n for n in seed0["frozen_attn"]["frozen"])
    assert seed0["hybrid_qk"]["loaded"] == ["blocks.0.attn.W_Q.weight", "blocks.0.attn.W_Q.bias",
                                            "blocks.0.attn.W_K.weight", "blocks.0.attn.W_K.bias"]
    assert any(n.startswith("tok_emb") for n in seed0["hybrid_qk_emb_ln"]["loaded"])
    assert any(".ln1." in n for n in seed0["hybrid_qk_emb_ln"]["loaded"]) and not any(".ffn." in n for n in seed0["hybrid_qk_emb_ln"]["loaded"])
    assert not any(n.startswith(("cls_head", "mlm_head")) for n in seed0["spt"]["loaded"])
    assert len(seed0["attn_qk"]["loaded"]) == 4
    for s in cells["ft_scratch"]["seeds"]:  # reported test accuracy is the best-validation epoch's
        h = s["history"]
        assert s["best_epoch"] == max(range(len(h)), key=lambda e: (h[e]["val_acc"], -e)) and "prox_start" in s
    rule = cells["spt_local_full_d1"]["seeds"][0]
    assert rule["rule_epoch"] == min(range(len(rule["val_loss"])), key=lambda e: (rule["val_loss"][e], e))
    g = cells["init_grad__seed0"]
    assert g["theorem"]["label_blind_frac"] < 1e-8 < g["theorem"]["mlm_blind_frac"]
    with pytest.raises(RunExistsError):
        spt.run(TINY, out, progress=False)


def test_same_seed_identical_cells(tiny_run, tmp_path):
    out, _ = tiny_run
    cfg = derive(TINY, conditions=("scratch", "hybrid_qk"))
    spt.run(cfg, tmp_path / "again", progress=False)
    first, again = _cells(out), _cells(tmp_path / "again")
    for name in ("init_grad__seed0", "ft_scratch", "ft_hybrid_qk"):
        assert first[name] == again[name], name


def test_resume_under_changed_config_is_refused(tmp_path):
    """An interrupted run (no DONE) resumed with another fine-tuning budget must not reuse its cells."""
    cfg = derive(TINY, seeds=(0,), conditions=("scratch",))
    out = tmp_path / "run"
    spt.run(cfg, out, progress=False)
    (out / "DONE").unlink()
    with pytest.raises(ConfigMismatchError, match="finetune_epochs"):
        spt.run(derive(cfg, finetune_epochs=6), out, progress=False)
    assert json.loads((out / "config.json").read_text())["config"]["finetune_epochs"] == 2
    # a cell whose saved key differs (e.g. copied in from another run) is refused too
    (out / "config.json").unlink()
    with pytest.raises(ConfigMismatchError, match="cell"):
        spt.run(derive(cfg, finetune_epochs=6), out, progress=False)


def test_interrupted_run_resumes_without_redoing_cells(tmp_path):
    cfg = derive(TINY, seeds=(0,), conditions=("scratch", "frozen_attn"))
    out = tmp_path / "run"
    spt.run(cfg, out, progress=False)
    (out / "DONE").unlink()
    kept = out / "cells" / "ft_scratch.json"
    data = json.loads(kept.read_text())
    data["seeds"][0]["test_acc"] = 0.123456  # a value a recomputation would not produce
    kept.write_text(json.dumps(data))
    (out / "cells" / "ft_frozen_attn.json").unlink()
    partial = spt.partial_report(cfg, out)
    assert "missing: ft_frozen_attn" in partial and "| scratch |" in partial and "| frozen_attn |" not in partial
    assert (out / "partial" / "metrics.json").exists() and not (out / "DONE").exists()
    md = spt.run(cfg, out, progress=False)
    assert json.loads(kept.read_text())["seeds"][0]["test_acc"] == 0.123456
    assert (out / "cells" / "ft_frozen_attn.json").exists() and (out / "DONE").exists()
    assert "| 12.3 |" in md


def test_workers_give_the_same_cells(tmp_path):
    cfg = derive(TINY, seeds=(0,), conditions=("scratch", "spt"))
    spt.run(cfg, tmp_path / "one", progress=False, workers=1)
    spt.run(cfg, tmp_path / "two", progress=False, workers=2)
    assert _cells(tmp_path / "one") == _cells(tmp_path / "two")


def test_cli_nan_loss_exits_nonzero_without_done(tmp_path, monkeypatch, capsys):
    from initlab.synthetic.spt import ensemble

    real = ensemble._Engine.step  # a NaN loss at step 2 of every loop, injected (not left to a CPU's rounding)
    monkeypatch.setattr(ensemble._Engine, "step", lambda self, losses, where, step: real(
        self, losses * float("nan") if step == 2 else losses, where, step))
    monkeypatch.setitem(spt.PRESETS, "quick", derive(TINY, seeds=(0,), conditions=("scratch", "spt")))
    out = tmp_path / "nan"
    assert synthetic_cmd.spt_main(["--preset", "quick", "--out", str(out), "--workers", "1", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "non-finite loss (nan) at step 2" in err and "Traceback" not in err
    assert not (out / "DONE").exists() and not list((out / "cells").glob("ft_*.json"))


def test_cli_and_reproduce_stage(tmp_path, monkeypatch, capsys):
    tiny = derive(TINY, seeds=(0,), conditions=("scratch", "hybrid_qk"))
    monkeypatch.setitem(spt.PRESETS, "quick", tiny)
    assert synthetic_cmd.spt_main(["--preset", "quick", "--out", str(tmp_path / "cli"), "--workers", "1", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "| hybrid_qk |" in printed and "results:" in printed
    with pytest.raises(SystemExit):  # finished run, no --overwrite
        synthetic_cmd.spt_main(["--preset", "quick", "--out", str(tmp_path / "cli"), "--workers", "1", "--no-progress"])
    md = stages.spt(tmp_path / "stage", "quick", False)
    assert "| scratch |" in md
    assert stages.spt(tmp_path / "stage", "quick", False) == md  # finished: the saved summary
    with pytest.raises(ValueError, match="preset"):
        stages.spt(tmp_path / "x", "huge", False)


def test_config_errors():
    with pytest.raises(ValueError, match="conditions"):
        derive(TINY, conditions=("nope",))
    with pytest.raises(ValueError, match="depths"):
        derive(TINY, depths=(2,))
    with pytest.raises(ValueError, match="unknown config key"):
        derive(TINY, epochs=3)
    with pytest.raises(ValueError, match="seeds"):
        derive(TINY, seeds=(1, 1))
    with pytest.raises(ValueError, match="workers"):
        spt.run(TINY, "/tmp/never-written-spt", workers=0)


def test_figure_script_reads_a_saved_run(tiny_run, tmp_path, capsys):
    out, _ = tiny_run
    (out / "spt_accuracy.png").unlink()
    assert spt_figures.main([str(out)]) == 0
    assert (out / "spt_accuracy.png").exists() and "spt_accuracy.pdf" in capsys.readouterr().out
    with pytest.raises(FileNotFoundError, match="metrics.json"):
        spt_figures.make_figures(tmp_path)
