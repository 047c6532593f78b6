"""``initlab reproduce`` orchestration: stage resolution, report assembly, bad input."""

from __future__ import annotations

import inspect

import pytest

from initlab.app import stages
from initlab.app.commands import reproduce
from initlab.experiment.stage import Stage, StageClaim
from initlab.synthetic.splade.phase import stage as splade_stage
from initlab.synthetic.spt import stage as spt_stage
from initlab.theorycheck.score_scale import stage as score_scale_stage
from initlab.theorycheck.verify import stage as verify_stage


@pytest.mark.parametrize("name", [s.name for s in stages.REGISTRY])
def test_every_stage_has_the_stage_signature(name):
    stage = {**stages.STAGES, **stages.OPTIONAL_STAGES}[name]
    params = inspect.signature(stage.run).parameters
    assert list(params)[:3] == ["out_dir", "preset", "overwrite"]
    assert params["workers"].kind == params["scheduler"].kind == inspect.Parameter.KEYWORD_ONLY
    assert stage.estimate is not None


@pytest.mark.parametrize("preset", stages.PRESETS)
def test_every_estimate_of_an_empty_folder_is_positive_and_creates_nothing(tmp_path, preset):
    for stage in stages.REGISTRY:
        expected, most = stage.estimate(tmp_path / stage.name, preset, 2)
        assert 0 < expected <= most, stage.name
    assert list(tmp_path.iterdir()) == []


def test_the_registry_lists_the_default_run_in_order():
    assert list(stages.STAGES) == ["theory", "spt", "score_scale", "splade", "splade_in_domain"]
    assert list(stages.OPTIONAL_STAGES) == ["lra_listops"]


def _stages(**funcs):
    return {name: Stage(name, f) for name, f in funcs.items()}


def test_report_collects_stage_summaries_in_order(tmp_path, monkeypatch):
    calls = []

    def stage_a(out_dir, preset, overwrite, **kw):
        calls.append(("a", out_dir.name, preset, overwrite))
        return "## stage A\nresult 1"

    def stage_b(out_dir, preset, overwrite, **kw):
        calls.append(("b", out_dir.name, preset, overwrite))
        return "## stage B\nresult 2"

    monkeypatch.setattr(stages, "STAGES", _stages(a=stage_a, b=stage_b))
    report = stages.run_reproduce(tmp_path / "out", preset="quick", speed=1.0)
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


def test_resumed_report_keeps_the_real_stage_times(tmp_path, monkeypatch):
    import time

    def slow(out_dir, preset, overwrite, **kw):
        if (out_dir / "DONE").exists() and not overwrite:
            return "## slow\nsaved"
        time.sleep(0.3)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "DONE").write_text("x")
        return "## slow\nsaved"

    def later(out_dir, preset, overwrite, **kw):
        return "## later\nran"

    monkeypatch.setattr(stages, "STAGES", _stages(slow=slow, later=later))
    first = stages.run_reproduce(tmp_path / "out", preset="quick", stages=["slow"], speed=1.0).read_text()
    # an unfinished stage added: the call resumes, reusing the finished one with the time it took then
    second = stages.run_reproduce(tmp_path / "out", preset="quick", speed=1.0).read_text()

    def seconds(text):
        line = next(ln for ln in text.splitlines() if ln.startswith("_stage `slow` took"))
        return float(line.split("took ")[1].split(" s")[0])

    assert seconds(first) >= 0.3
    assert seconds(second) == seconds(first) and "resumed run: not redone" in second


def test_theory_and_score_scale_stages_refuse_a_changed_config(tmp_path):
    from initlab.config import derive
    from initlab.runs import ConfigMismatchError, RunDir
    from initlab.theorycheck.score_scale import experiment as score_scale
    from initlab.theorycheck.verify import runner as verify

    # an interrupted stage folder (no DONE) written under another config is not resumed
    RunDir(tmp_path / "theory", config=derive(verify.PRESETS["quick"], cases=verify.PRESETS["quick"].cases + 1))
    with pytest.raises(ConfigMismatchError, match="differs in: cases"):
        verify_stage.theory(tmp_path / "theory", preset="quick")
    other = derive(score_scale.PRESETS["quick"], mc_batches=score_scale.PRESETS["quick"].mc_batches + 1)
    RunDir(tmp_path / "ss", config=other)
    with pytest.raises(ConfigMismatchError, match="differs in: mc_batches"):
        score_scale_stage.score_scale_stage(tmp_path / "ss", preset="quick")
    # a cell computed under another config (same config.json) is not reused either
    cfg = score_scale.PRESETS["quick"]
    run = RunDir(tmp_path / "ss2", config=cfg)
    sigma, k = cfg.sigmas[0], cfg.ks[0]
    run.save_cell(f"sigma={sigma:g}_k={k:g}", {"sigma": sigma, "k": k}, key={"config": {"old": 1}, "sigma": sigma, "k": k})
    with pytest.raises(ConfigMismatchError, match="cell 'sigma="):
        score_scale_stage.score_scale_stage(tmp_path / "ss2", preset="quick")


def test_empty_stage_list_is_an_error_not_an_empty_report(tmp_path):
    with pytest.raises(ValueError, match="--only: no stage names"):
        stages.run_reproduce(tmp_path / "out", stages=[])
    assert not (tmp_path / "out").exists()


def test_a_folder_of_one_preset_refuses_another(tmp_path, monkeypatch):
    from initlab.runs import ConfigMismatchError

    def stage(out_dir, preset, overwrite, **kw):
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "DONE").write_text("x")
        return f"## stage\nmade by {preset}"

    monkeypatch.setattr(stages, "STAGES", _stages(s=stage))
    stages.run_reproduce(tmp_path / "out", preset="quick", speed=1.0)
    with pytest.raises(ConfigMismatchError, match="preset 'quick', not 'default'"):
        stages.run_reproduce(tmp_path / "out", preset="default", speed=1.0)
    assert "made by quick" in (tmp_path / "out" / "report.md").read_text()  # untouched
    assert "made by default" in stages.run_reproduce(tmp_path / "out", preset="default", overwrite=True, speed=1.0).read_text()


#: what each named preset chose when the presets were names in code (each stage's former ``presets``): the size every
#: stage runs at and the default stages, in order
FORMER_CHOICES = {
    "quick": ("quick", ["theory", "spt", "score_scale", "splade"]),
    "default": ("default", ["theory", "spt", "score_scale", "splade_in_domain"]),
    "full": ("full", ["theory", "spt", "score_scale", "splade", "splade_in_domain"]),
}


def test_the_named_run_files_choose_what_the_presets_chose():
    assert stages.RUNS.named() == ("quick", "default", "full")
    assert {n: (stages.RUNS[n].size, stages.RUNS[n].stages()) for n in stages.RUNS.named()} == FORMER_CHOICES
    for name, f in stages.RUNS.files().items():  # every value with its reason
        assert f.purpose and all(why.strip() for _, _, why in f.changes), name


def test_a_run_file_given_by_path_runs_its_stages_at_its_size(tmp_path, monkeypatch):
    """``--preset PATH``: a file from anywhere, based on a named run; its stages run at its size, its name in the report."""
    calls = []

    def stage(name):
        def run(out_dir, preset, overwrite, **kw):
            calls.append((name, preset))
            return f"## {name}"
        return run

    monkeypatch.setattr(stages, "STAGES", _stages(theory=stage("theory"), splade=stage("splade")))
    (tmp_path / "mine.toml").write_text('purpose = "p"\nbase = "default"\n[size]\nwhy = "w"\nvalue = "quick"\n')
    report = stages.run_reproduce(tmp_path / "out", preset=str(tmp_path / "mine.toml"), speed=1.0).read_text()
    assert calls == [("theory", "quick")]  # default's skip (splade) kept, at the file's size
    assert "preset `mine` (stages at size `quick`), stages theory;" in report


def test_reproduce_help_offers_the_named_runs_and_a_path(capsys):
    with pytest.raises(SystemExit):
        reproduce.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--preset NAME|FILE" in text and "one of quick, default, full (default: default), or the path of a run file" in text


def test_report_links_point_into_the_stage_folders():
    md = "![acc](spt_accuracy.png) [cfg](config.json) [web](https://x.org/a.png) Figures: `spt_accuracy.png`"
    assert stages.relink(md, "spt") == ("![acc](spt/spt_accuracy.png) [cfg](spt/config.json) "
                                        "[web](https://x.org/a.png) Figures: `spt/spt_accuracy.png`")


def test_the_report_embeds_every_figure_once_with_links_from_the_report_folder(tmp_path):
    stage = tmp_path / "spt"
    for rel in ("a.png", "maps/b.png", "cells/x.png", "ckpt/y.png"):
        (stage / rel).parent.mkdir(parents=True, exist_ok=True)
        (stage / rel).write_bytes(b"png")
    figs = stages.stage_figures(stage)
    assert [f.as_posix() for f in figs] == ["a.png", "maps/b.png"]  # working folders are not figures
    md = stages.relink("Figures: `a.png`\n\n![a](a.png)", "spt")
    out = stages.embed_figures(md, "spt", figs)
    assert out.count("](spt/a.png)") == 1 and "![b](spt/maps/b.png)" in out
    assert all((tmp_path / link).is_file() for link in ("spt/a.png", "spt/maps/b.png"))


def test_expected_durations_scale_the_cost_models_and_skip_finished_work(tmp_path):
    got = stages.expected_durations(tmp_path, "quick", ["theory", "splade", "score_scale"], workers=2, speed=1.0)
    slow = stages.expected_durations(tmp_path, "quick", ["theory", "splade", "score_scale"], workers=2, speed=3.0)
    assert set(got) == {"theory", "splade", "score_scale"} and all(e > 0 and m >= e for e, m in got.values())
    assert slow["splade"][0] == pytest.approx(3 * got["splade"][0])
    (tmp_path / "splade").mkdir()
    (tmp_path / "splade" / "DONE").write_text("x")
    assert stages.expected_durations(tmp_path, "quick", ["splade"], workers=2)["splade"] == (0.0, 0.0)


def test_reproduce_prints_the_expected_duration_first_and_the_cpu_use(tmp_path, monkeypatch, capsys):
    def stage(out_dir, preset, overwrite, **kw):
        out_dir.mkdir(parents=True, exist_ok=True)
        import warnings

        warnings.warn("something odd", RuntimeWarning)
        return "## stage\nok"

    monkeypatch.setattr(stages, "STAGES", {"s": Stage("s", stage, lambda out, preset, workers: (120.0, 300.0))})
    report = stages.run_reproduce(tmp_path / "out", preset="quick", speed=2.0, workers=2).read_text()
    out = capsys.readouterr()
    first = out.out.strip().splitlines()[0]
    assert first.startswith("initlab reproduce --preset quick: expected duration about 4 min (at most 10 min)")
    assert "of CPU" in out.out and "of 2 cores" in report
    assert "RuntimeWarning: something odd" in out.err and "`RuntimeWarning: something odd`" in report
    import json

    rec = json.loads((tmp_path / "out" / "stage_times.json").read_text())["s"]
    assert rec["cores"] == 2 and rec["cpu_seconds"] >= 0 and rec["expected_seconds"] == 240.0


def _done_stage(out_dir, preset, overwrite, **kw):
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "DONE").write_text("x")
    return f"## stage\nmade at {len(list(out_dir.parent.glob('*')))}"


def test_a_finished_reproduce_is_refused_naming_overwrite(tmp_path, monkeypatch, capsys):
    """What README's Policies promise: a finished run is refused unless --overwrite, and nothing is rewritten."""
    from initlab.runs import RunExistsError

    monkeypatch.setattr(stages, "STAGES", _stages(s=_done_stage))
    report = stages.run_reproduce(tmp_path / "out", preset="quick", speed=1.0)
    before = report.read_bytes()
    with pytest.raises(RunExistsError, match="--overwrite") as err:
        stages.run_reproduce(tmp_path / "out", preset="quick", speed=1.0)
    assert "a finished initlab reproduce" in str(err.value) and str(report) in str(err.value)
    assert report.read_bytes() == before
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        reproduce.main(["--preset", "quick", "--only", "s", "--out", str(tmp_path / "out")])
    msg = capsys.readouterr().err
    assert exc.value.code == 2 and "--overwrite" in msg and len(msg.strip().splitlines()) == 1
    assert stages.run_reproduce(tmp_path / "out", preset="quick", overwrite=True, speed=1.0).is_file()


def test_every_stage_runs_inside_the_speed_the_header_used(tmp_path, monkeypatch):
    import initlab.executor as ex

    seen = []

    def stage(out_dir, preset, overwrite, **kw):
        seen.append(ex.current_machine_speed())
        return "## stage\nok"

    monkeypatch.setattr(stages, "STAGES", _stages(a=stage, b=stage))
    stages.run_reproduce(tmp_path / "out", preset="quick", speed=2.5)
    assert seen == [2.5, 2.5] and ex.current_machine_speed() is None


def test_a_real_stage_prints_the_headers_estimate_and_speed(tmp_path, capsys):
    """The theory stage (quick): its plan line states the header's speed, and its wall-time line the header's estimate."""
    import re

    stages.run_reproduce(tmp_path / "out", preset="quick", stages=["theory"], speed=2.0, workers=1)
    cap = capsys.readouterr()
    header = cap.out.splitlines()[0]
    est = re.search(r"by stage: theory (.+)$", header).group(1)
    assert f"(expected {est})" in cap.out
    assert "machine speed 2.00" in cap.err and "machine speed" not in cap.err.replace("machine speed 2.00", "")
    assert re.search(r"theory \(statements\): (\d+) cells \(\1 units\) to run", cap.err), cap.err


def test_the_verdict_summary_leads_with_the_decided_claims_then_counts_the_rest(tmp_path, monkeypatch, capsys):
    from initlab.evidence import rules

    def claims(out_dir):
        g = rules.gain([0.40, 0.45, 0.43], min_gain=0.05, tol=0.002)
        prox = rules.all_of([rules.gain([0.6, 0.62, 0.61], min_gain=0.05, tol=0.002),
                             rules.equivalence([0.01, -0.02, 0.0], margin=0.02, tol=0.002)])
        return [StageClaim("proximity", prox, "mass"), StageClaim("SPT gain", g),
                StageClaim("not in this preset", rules.not_run("gain", ["x"]))]

    monkeypatch.setattr(stages, "STAGES", {"s": Stage("s", _done_stage, claims=claims, decides="`run s --full`"),
                                           "t": Stage("t", lambda o, **k: "## t\nok")})
    stages.run_reproduce(tmp_path / "out", preset="quick", speed=1.0)
    out = capsys.readouterr().out
    tail = out[out.index("verdicts of this run"):].splitlines()
    assert tail[1] == "  SPT gain: reproduced; +42.7 [+36.4, +48.9]; 3 seeds"  # decided first, whatever the order
    assert tail[2].startswith("  proximity: inconclusive; parts +0.610 [") and tail[2].endswith("; 3 seeds")
    assert tail[3] == "  not decided by this preset: 1 claim undecided (above), 1 not run; the runs that decide them: " \
                      "`run s --full`"
    assert len(tail) == 4  # a stage without claims adds no line


def test_claim_lines_of_the_real_stage_readers(tmp_path):
    """The theory reader on a saved verify report; a check counts statements."""
    from initlab.evidence.rules import Verdict

    line = stages.claim_line(StageClaim("theorems", Verdict("reproduced", "check", n=7), counted="statement"))
    assert line == "theorems: reproduced; 7 statements checked"
    one = stages.claim_line(StageClaim("x", Verdict("inconclusive", "gain", estimate=0.057, n=1), "ndcg"))
    assert one == "x: inconclusive; +0.057 [unbounded]; 1 seed"
    flat = Verdict("reproduced", "equivalence", estimate=0.0, lo=0.0, hi=0.0, n=2, thresholds=(-0.01, 0.01))
    line = stages.claim_line(StageClaim("regret", flat, "ndcg", "(family, seed) backbone"))
    assert line.startswith("regret: degenerate; ") and "reproduced" not in line


def test_the_stage_readers_on_saved_results(tmp_path):
    """Each claims reader on a saved run of this repository: one line per claim, InfoNCE parts in nats."""
    import shutil
    from pathlib import Path

    results = Path(__file__).resolve().parents[2] / "docs" / "results"
    (tmp_path / "theory").mkdir()
    shutil.copy(results / "theory_verify.json", tmp_path / "theory" / "verify.json")
    (t,) = verify_stage.stage_claims(tmp_path / "theory")
    assert stages.claim_line(t).startswith("the attention-gradient theorems hold on fresh random cases: reproduced; ")
    (tmp_path / "spt").mkdir()
    shutil.copy(results / "synthetic_spt_full" / "summary.json", tmp_path / "spt" / "metrics.json")
    spt = {c.title: stages.claim_line(c) for c in spt_stage.stage_claims(tmp_path / "spt")}
    assert spt["SPT gain at depth 1"] == "SPT gain at depth 1: reproduced; +39.5 [+33.6, +45.4]; 8 seeds"
    splade = splade_stage.stage_claims(results / "synthetic_splade_full")
    high = next(c for c in splade if c.title.startswith("a large head norm degrades SPLADE (high"))
    assert "nats" in high.part_units and len(high.part_units) == len(high.verdict.parts)
    for c, u in zip(high.verdict.parts, high.part_units):
        assert (u == "nats") == ("InfoNCE" in c.reason)


def test_the_report_compares_each_decided_word_with_the_confirmatory_run(tmp_path, monkeypatch, capsys):
    """Agreement, and a difference said with which and why (here: Holm's larger family in the confirmatory run)."""
    import dataclasses

    from initlab.evidence import rules

    g = rules.gain([0.40, 0.45, 0.43], min_gain=0.05, tol=0.002)
    below = rules.gain([0.01, 0.012, 0.011], min_gain=0.05, tol=0.002)

    def claims(out_dir):
        return [StageClaim("gain", g), StageClaim("interaction", g, "ndcg"), StageClaim("small", below)]

    def confirmed(results):
        holm = dataclasses.replace(g, word="inconclusive", uncorrected="reproduced", family="secondary")
        not_rep = rules.gain([-0.01, 0.012, 0.02], min_gain=0.05, tol=0.002)
        return {"gain": g, "interaction": holm, "small": not_rep}

    (tmp_path / "results").mkdir()
    monkeypatch.setattr(stages, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(stages, "STAGES", {"s": Stage("s", _done_stage, claims=claims, confirmed=confirmed)})
    monkeypatch.setattr(stages.confirmatory_comparison, "__defaults__", (tmp_path / "results",))
    report = stages.run_reproduce(tmp_path / "out", preset="quick", speed=1.0).read_text()
    section = report[report.index("## Against the confirmatory runs"):]
    assert "- gain: **reproduced**, as in the confirmatory run" in section
    assert "- interaction: **reproduced** here, **inconclusive** in the confirmatory run: " in section
    assert "Holm's correction in its larger secondary family" in section
    assert "- small: **partly** here, **not reproduced** in the confirmatory run: both exclude the claimed size" in section
    assert "1 of 3 decided words agree; 2 differ" in capsys.readouterr().out
    assert stages.confirmatory_comparison(tmp_path / "out", ["s"], tmp_path / "nowhere") == []
