"""Tests of initlab.synthetic.spt: a tiny end-to-end run, determinism, resume, CLI and reproduce stage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from initlab import stages
from initlab.paper_figs import spt_figures
from initlab.commands import synthetic as synthetic_cmd
from initlab.config import derive
from initlab.runs import RunExistsError
from initlab.synthetic import spt
from initlab.synthetic.tasks import TaskConfig

TINY = derive(
    spt.BASE, seeds=(0,), task=TaskConfig(T=20), n_train=32, n_test=32, d_model=8, d_ff=8, batch_size=16,
    finetune_epochs=1, spt_epochs=1, spt_sweep_epochs=(0, 1, 2), depths=(1, 2), probe_size=4,
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
    assert {"scratch", "spt", "frozen_attn", "hybrid_qk", "hybrid_qkvo", "hybrid_ffn", "spt_e2", "depth2_scratch",
            "depth2_spt", "cross_count", "cross_iid"} == set(names)
    for n in names:
        assert f"| {n} |" in md
    assert (out / "DONE").exists() and (out / "config.json").exists() and (out / "summary.md").read_text() == md
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["config_class"] == "SPTConfig" and cfg["config"]["n_train"] == 32
    m = json.loads((out / "metrics.json").read_text())
    assert len(m["summary"]["conditions"]) == len(names)
    for f in ("metrics.csv", "summary.csv", "history.csv"):
        assert (out / f).stat().st_size > 0
    for fig in ("spt_attention_maps", "spt_accuracy", "spt_proximity", "spt_kernel"):
        assert (out / f"{fig}.png").stat().st_size > 0 and (out / f"{fig}.pdf").stat().st_size > 0
    cells = _cells(out)
    # frozen attention really stayed at its init; hybrids loaded only their group
    assert all("attn.W_" in n for n in cells["frozen_attn__seed0"]["frozen"])
    assert cells["hybrid_qk__seed0"]["loaded"] == ["blocks.0.attn.W_Q.weight", "blocks.0.attn.W_Q.bias",
                                                   "blocks.0.attn.W_K.weight", "blocks.0.attn.W_K.bias"]
    assert all(".ffn." in n for n in cells["hybrid_ffn__seed0"]["loaded"])
    assert not any(n.startswith(("cls_head", "mlm_head")) for n in cells["spt__seed0"]["loaded"])
    g = cells["init_grad__seed0"]
    assert g["theorem"]["label_blind_frac"] < 1e-8 < g["theorem"]["mlm_blind_frac"]
    with pytest.raises(RunExistsError):
        spt.run(TINY, out, progress=False)


def test_same_seed_identical_metrics(tiny_run, tmp_path):
    out, _ = tiny_run
    cfg = derive(TINY, conditions=("scratch", "spt", "hybrid_qk"))
    spt.run(cfg, tmp_path / "again", progress=False)
    first, again = _cells(out), _cells(tmp_path / "again")
    for name in ("init_grad__seed0", "spt_local_d1__seed0", "scratch__seed0", "spt__seed0", "hybrid_qk__seed0"):
        a, b = dict(first[name]), dict(again[name])
        if name.startswith("spt_local"):  # the first run also kept the epoch-2 snapshot (same history prefix)
            a["history"] = a["history"][:2]
            b["history"] = b["history"][:2]
        assert a == b, name


def test_interrupted_run_resumes_without_redoing_cells(tmp_path):
    cfg = derive(TINY, conditions=("scratch", "frozen_attn"))
    out = tmp_path / "run"
    spt.run(cfg, out, progress=False)
    # simulate an interruption: no DONE, one finished cell kept (marked), one cell lost
    (out / "DONE").unlink()
    kept = out / "cells" / "scratch__seed0.json"
    data = json.loads(kept.read_text())
    data["test_acc"] = 0.123456  # a value a recomputation would not produce
    kept.write_text(json.dumps(data))
    (out / "cells" / "frozen_attn__seed0.json").unlink()
    md = spt.run(cfg, out, progress=False)
    assert json.loads(kept.read_text())["test_acc"] == 0.123456
    assert (out / "cells" / "frozen_attn__seed0.json").exists() and (out / "DONE").exists()
    assert "12.3 ± 0.0" in md


def test_workers_give_the_same_cells(tmp_path):
    cfg = derive(TINY, seeds=(0, 1), conditions=("scratch",))
    spt.run(cfg, tmp_path / "one", progress=False, workers=1)
    spt.run(cfg, tmp_path / "two", progress=False, workers=2)
    assert _cells(tmp_path / "one") == _cells(tmp_path / "two")


def test_cli_and_reproduce_stage(tmp_path, monkeypatch, capsys):
    tiny = derive(TINY, conditions=("scratch", "hybrid_qk"))
    monkeypatch.setitem(spt.PRESETS, "quick", tiny)
    assert synthetic_cmd.spt_main(["--preset", "quick", "--out", str(tmp_path / "cli"), "--workers", "1", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "| hybrid_qk |" in printed and "results:" in printed
    with pytest.raises(SystemExit):  # finished run, no --overwrite
        synthetic_cmd.spt_main(["--preset", "quick", "--out", str(tmp_path / "cli"), "--workers", "1", "--no-progress"])
    md = stages.spt(tmp_path / "stage", "quick", False)
    assert "| scratch |" in md
    before = (tmp_path / "stage" / "summary.md").stat().st_mtime_ns
    assert stages.spt(tmp_path / "stage", "quick", False) == md  # finished: the saved summary
    assert (tmp_path / "stage" / "summary.md").stat().st_mtime_ns == before
    with pytest.raises(ValueError, match="preset"):
        stages.spt(tmp_path / "x", "huge", False)


def test_config_errors():
    with pytest.raises(ValueError, match="conditions"):
        derive(TINY, conditions=("nope",))
    with pytest.raises(ValueError, match="depths"):
        derive(TINY, depths=(2,))
    with pytest.raises(ValueError, match="unknown config key"):
        derive(TINY, epochs=3)
    with pytest.raises(ValueError, match="workers"):
        spt.run(TINY, "/tmp/never-written-spt", workers=0)


def test_figure_script_reads_a_saved_run(tiny_run, tmp_path, capsys):
    from initlab.paper_figs import spt_figures

    out, _ = tiny_run
    (out / "spt_kernel.png").unlink()
    assert spt_figures.main([str(out)]) == 0
    assert (out / "spt_kernel.png").exists() and "spt_accuracy.pdf" in capsys.readouterr().out
    with pytest.raises(FileNotFoundError, match="metrics.json"):
        spt_figures.make_figures(tmp_path)
