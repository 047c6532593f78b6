"""Fidelity table: every deviation from the authors' files has a reason, the docs page holds the current
table, and the SPT-stage fields reach the SPT loop."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from initlab.realdata.lra import fidelity as FI
from initlab.realdata.lra.config import PRESETS
from initlab.realdata.lra.runtime import lr_schedule, spt_view

DOCS = Path(__file__).resolve().parents[3] / "docs" / "lra.md"


def test_every_deviation_has_a_reason():
    assert FI.missing_reasons() == []
    # a new, unexplained deviation is caught
    PRESETS["listops"] = replace(PRESETS["listops"], spt_epochs=7)  # in memory only; the run file is not written
    try:
        assert ("listops", "SPT epochs") in FI.missing_reasons()
    finally:
        del PRESETS["listops"]
    assert FI.missing_reasons() == []


def test_docs_page_holds_the_generated_table():
    text = DOCS.read_text()
    assert FI.render() in text, "docs/lra.md is stale: run initlab lra fidelity --write docs/lra.md"


def test_presets_follow_the_mlm_files():
    text, image = PRESETS["text"], PRESETS["image"]
    assert (text.spt_epochs, text.spt_warmup_steps, spt_view(text).schedule, text.epochs) == (32, 5000, "constant", 65)
    v = spt_view(image)
    assert (v.batch_size, v.warmup_steps, image.spt_epochs) == (32, 2500, 50) and image.batch_size == 50
    assert spt_view(PRESETS["listops"]) == PRESETS["listops"]  # no SPT-specific fields: unchanged


def test_cosine_horizon_is_fixed_by_schedule_steps():
    cfg = replace(PRESETS["text"], warmup_steps=10, schedule_steps=110)
    f = lr_schedule(cfg, total_steps=1000)
    assert f(0) == 0.1 and f(10) == 1.0 and abs(f(60) - 0.5) < 1e-12 and f(110) == 0.0 and f(500) == 0.0
    g = lr_schedule(replace(cfg, schedule_steps=None), total_steps=210)
    assert abs(g(110) - 0.5) < 1e-12
