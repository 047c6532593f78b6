"""``initlab reproduce`` orchestration: stage resolution, report assembly, bad input."""

from __future__ import annotations

import inspect

import pytest

from initlab import stages
from initlab.commands import reproduce


@pytest.mark.parametrize("name", sorted({**stages.STAGES, **stages.OPTIONAL_STAGES}))
def test_every_stage_has_the_stage_signature(name):
    func = {**stages.STAGES, **stages.OPTIONAL_STAGES}[name]
    params = list(inspect.signature(func).parameters)
    assert params[:3] == ["out_dir", "preset", "overwrite"]


def test_report_collects_stage_summaries_in_order(tmp_path, monkeypatch):
    calls = []

    def stage_a(out_dir, preset, overwrite):
        calls.append(("a", out_dir.name, preset, overwrite))
        return "## stage A\nresult 1"

    def stage_b(out_dir, preset, overwrite):
        calls.append(("b", out_dir.name, preset, overwrite))
        return "## stage B\nresult 2"

    monkeypatch.setattr(stages, "STAGES", {"a": stage_a, "b": stage_b})
    report = stages.run_reproduce(tmp_path / "out", preset="quick")
    assert calls == [("a", "a", "quick", False), ("b", "b", "quick", False)]
    text = report.read_text()
    assert text.index("## stage A") < text.index("## stage B")
    assert "preset `quick`" in text


def test_bad_preset_and_stage_are_named(tmp_path):
    with pytest.raises(ValueError, match="preset"):
        stages.run_reproduce(tmp_path, preset="huge")
    with pytest.raises(ValueError, match="nope"):
        stages.run_reproduce(tmp_path, stages=["nope"])
    with pytest.raises(SystemExit):
        reproduce.main(["--only", "nope", "--out", str(tmp_path / "x")])
