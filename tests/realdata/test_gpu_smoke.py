"""``python -m initlab.realdata.gpu_smoke``: the CPU dry run (every stage), the table/JSON, and the
clean no-GPU exit; ``splade.gpu_check`` without a GPU exits cleanly too."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from initlab.realdata import gpu_smoke as G


def test_gpu_smoke_dry_run_runs_every_stage(tmp_path, capsys):
    assert G.main(["--dry-run", "--out", str(tmp_path / "w"), "--json", str(tmp_path / "s.json")]) == 0
    report = json.loads((tmp_path / "s.json").read_text())
    stages = [r["stage"] for r in report["rows"]]
    assert stages == ["listops-data", "lra-check listops classify", "lra-check listops masked", "lra-check image classify",
                      "lra-check image masked", "splade-check", "splade-check fused", "splade-head dense", "splade-head fused",
                      "listops-spt", "listops-finetune"]
    assert all(r["status"] == "ok" for r in report["rows"]) and report["dry_run"] is True
    assert all(r["tokens_per_s"] > 0 for r in report["rows"] if "check" in r["stage"] or "head" in r["stage"])
    fused = next(r for r in report["rows"] if r["stage"] == "splade-head fused")
    assert fused["time_ratio"] > 0 and fused["mem_ratio"] is None  # no CUDA memory counter on the CPU
    assert set(fused["max_rel_diff"]) == {"a", "H", "W", "b"} and max(fused["max_rel_diff"].values()) < 1e-5
    assert "fused/dense time" in fused["note"]
    out = capsys.readouterr().out
    assert "stage" in out and "MFU %" in out and "listops-finetune" in out


def test_gpu_smoke_budget_skips_and_failure_is_reported(tmp_path, monkeypatch):
    rep = G.run_smoke(tmp_path, dry_run=True, budget_s=1e-9)
    assert [r["status"] for r in rep["rows"]] == ["skipped"] * 6 and "budget" in rep["rows"][0]["note"]

    def boom(**kw):
        raise RuntimeError("simulated")

    monkeypatch.setattr(G, "splade_check", boom)
    rep = G.run_smoke(tmp_path / "b", dry_run=True)
    bad = [r for r in rep["rows"] if r["status"] == "failed"]
    assert [r["stage"] for r in bad] == ["splade-check", "splade-check fused"] and "RuntimeError: simulated" in bad[0]["note"]


def test_splade_flops_count():
    from transformers import BertConfig

    cfg = BertConfig(vocab_size=10, hidden_size=4, num_hidden_layers=2, intermediate_size=8)
    per_tok = 2 * (8 * 16 + 4 * 3 * 4 + 4 * 4 * 8) + 2 * 16 + 2 * 4 * 10
    assert G.splade_flops_per_sequence(cfg, 3, training=False) == 3 * per_tok
    assert G.splade_flops_per_sequence(cfg, 3) == 9 * per_tok


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
@pytest.mark.parametrize("module, flag", [("initlab.realdata.gpu_smoke", "--dry-run"),
                                          ("initlab.realdata.splade.gpu_check", "--tiny")])
def test_no_gpu_exits_cleanly(module, flag):
    proc = subprocess.run([sys.executable, "-m", module], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no CUDA device" in proc.stderr and flag in proc.stderr


def test_splade_check_fused_head_gives_the_dense_loss():
    """The whole-step check's fused head computes the same SPLADE loss as the dense one (CPU, float32)."""
    dense = G.splade_check(device="cpu", dry_run=True, steps=1, peak=None)
    fused = G.splade_check(device="cpu", dry_run=True, steps=1, peak=None, head="fused")
    assert fused["last_loss"] == pytest.approx(dense["last_loss"], rel=1e-4)
    with pytest.raises(ValueError, match="head"):
        G.splade_check(device="cpu", dry_run=True, steps=1, peak=None, head="sparse")
