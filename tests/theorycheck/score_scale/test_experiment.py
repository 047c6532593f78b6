"""The score-scale CLI, reproduce stage (resumable, guarded) and figure script."""

from __future__ import annotations

import json

import pytest

from initlab.theorycheck.score_scale import command as theory_cmd
from initlab.theorycheck.score_scale import stage
from initlab.config import derive
from initlab.paper_figs import score_scale_figures as figs
from initlab.theory.score_scale import closed_form as ss
from initlab.theory.score_scale import monte_carlo as ssmc
def test_score_scale_cli_table_and_json(tmp_path, capsys):
    out = tmp_path / "t.json"
    assert theory_cmd.score_scale_main(["--sigma", "2", "8", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "sigma/k" in printed and "grad_ratio" in printed
    data = json.loads(out.read_text())
    assert len(data["rows"]) == 12 and data["config"]["sigmas"] == [2.0, 8.0]
    assert {r["k"] for r in data["rows"]} == {1.0, 2.0, 4.0, 8.0, 16.0, 32.0}
    with pytest.raises(SystemExit):
        theory_cmd.score_scale_main(["--sigma", "-1"])


def test_score_scale_reproduce_stage_resumes_and_guards(tmp_path, monkeypatch):
    tiny = derive(stage.score_scale_stage_.PRESETS["quick"], sigmas=(4.0,), ks=(1.0, 8.0), vocab=64, batch=8, L_d=16)
    monkeypatch.setitem(stage.score_scale_stage_.PRESETS, "quick", tiny)
    out = tmp_path / "stage"
    md = stage.score_scale_stage(out, "quick")
    for name in ("config.json", "score_scale.json", "score_scale.csv", "summary.md", "DONE", "score_scale_theory_vs_mc.png"):
        assert (out / name).is_file(), name
    assert "| 4 | 8 |" in md and "Mechanism" in md
    data = json.loads((out / "score_scale.json").read_text())
    assert data["config"]["vocab"] == 64 and len(data["rows"]) == 2
    # finished: returns the saved summary without recomputing
    calls = []
    monkeypatch.setattr(ssmc, "monte_carlo", lambda *a, **k: calls.append(1))
    assert stage.score_scale_stage(out, "quick") == md and not calls
    # interrupted run: finished cells are reused (monte_carlo not called for them)
    (out / "DONE").unlink()
    (out / "summary.md").unlink()
    assert "| 4 | 1 |" in stage.score_scale_stage(out, "quick") and not calls
    with pytest.raises(ValueError, match="preset"):
        stage.score_scale_stage(tmp_path / "x", "huge")


def test_score_scale_figure_script(tmp_path, capsys):
    with pytest.raises(ValueError, match="rows"):
        figs.plot_theory_vs_mc([], tmp_path / "f.png")
    assert figs.main([str(tmp_path)]) == 2
    cfg = derive(ss.BASE, vocab=32, batch=4, L_d=8, mc_batches=2)
    rows = [{"sigma": 2.0, "k": k, **{f"th_{n}": v for n, v in ss.theory_row(cfg, 2.0, k).items()},
             **{f"mc_{n}": v for n, v in ssmc.monte_carlo(cfg, 2.0, k).items()}} for k in (1.0, 4.0)]
    (tmp_path / "score_scale.json").write_text(json.dumps({"rows": rows}))
    assert figs.main([str(tmp_path)]) == 0
    assert (tmp_path / "score_scale_theory_vs_mc.png").stat().st_size > 1000


def test_score_scale_cli_rejects_batch_below_two(capsys):
    import pytest as _pytest

    from initlab.theorycheck.score_scale.command import score_scale_main as _main

    with _pytest.raises(SystemExit) as exc:
        _main(["--batch", "1"])
    assert exc.value.code == 2 and "--batch" in capsys.readouterr().err
