"""``initlab reproduce`` orchestration: stage resolution, report assembly, bad input."""

from __future__ import annotations

import importlib
import inspect
import sys
import types

import pytest

from initlab import reproduce


@pytest.mark.parametrize("name", sorted({**reproduce.STAGES, **reproduce.OPTIONAL_STAGES}))
def test_every_stage_resolves_to_the_stage_signature(name):
    target = {**reproduce.STAGES, **reproduce.OPTIONAL_STAGES}[name]
    module_name, func_name = target.split(":")
    func = getattr(importlib.import_module(module_name), func_name)
    params = list(inspect.signature(func).parameters)
    assert params[:3] == ["out_dir", "preset", "overwrite"]


def test_report_collects_stage_summaries_in_order(tmp_path, monkeypatch):
    calls = []
    fake = types.ModuleType("initlab_fake_stages")

    def stage_a(out_dir, preset, overwrite):
        calls.append(("a", out_dir.name, preset, overwrite))
        return "## stage A\nresult 1"

    def stage_b(out_dir, preset, overwrite):
        calls.append(("b", out_dir.name, preset, overwrite))
        return "## stage B\nresult 2"

    fake.stage_a, fake.stage_b = stage_a, stage_b
    monkeypatch.setitem(sys.modules, "initlab_fake_stages", fake)
    monkeypatch.setattr(reproduce, "STAGES", {"a": "initlab_fake_stages:stage_a", "b": "initlab_fake_stages:stage_b"})
    report = reproduce.run_reproduce(tmp_path / "out", preset="quick")
    assert calls == [("a", "a", "quick", False), ("b", "b", "quick", False)]
    text = report.read_text()
    assert text.index("## stage A") < text.index("## stage B")
    assert "preset `quick`" in text


def test_bad_preset_and_stage_are_named(tmp_path):
    with pytest.raises(ValueError, match="preset"):
        reproduce.run_reproduce(tmp_path, preset="huge")
    with pytest.raises(ValueError, match="nope"):
        reproduce.run_reproduce(tmp_path, stages=["nope"])
    with pytest.raises(SystemExit):
        reproduce.main(["--only", "nope", "--out", str(tmp_path / "x")])
