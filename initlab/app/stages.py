"""The stages of ``initlab reproduce``: each runs a library experiment, then draws its figures from what it saved.

Every stage is ``stage(out_dir, preset="default", overwrite=False, *, workers=None, scheduler=None) -> markdown``
and writes into ``out_dir``; ``workers`` (default: one per core) and ``scheduler`` (a Dask address, where the
stage's cells can run on Dask) go to :func:`initlab.executor.run_cells`. Each stage is one :class:`Stage` record
holding that function and its ``estimate(out_dir, preset, workers) -> (expected, at most)`` seconds of its
remaining work on the reference machine (the experiment's own cost model; ``initlab reproduce`` scales it by this
machine's measured speed and prints it before anything runs). A finished stage (``out_dir/DONE`` beside its ``summary.md``) is not redone unless
``overwrite`` (then the old folder is moved aside), and its saved summary is returned. Presets, the one
vocabulary of every CLI: ``quick`` (a smoke test: minutes on a laptop CPU), ``default`` (the CPU
reproduction), ``full`` (larger grids and more seeds, still CPU).

* ``theory``      -- attention-gradient theorems checked on fresh random cases (:mod:`initlab.theorycheck.verify.runner`);
* ``spt``         -- synthetic length-100 self-pretraining experiments (:mod:`initlab.synthetic.spt`);
* ``score_scale`` -- SPLADE score-scale analysis against k, theory vs Monte Carlo (:mod:`initlab.theory.score_scale.closed_form`);
* ``splade``      -- synthetic SPLADE phase diagram: four families, head scale s x rescale k (:mod:`initlab.synthetic.splade.phase.runner`);
* ``lra_listops`` -- optional: generated ListOps on CPU, self-pretraining vs from scratch (:mod:`initlab.realdata.lra.sweep`).
"""

from __future__ import annotations

import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Sequence

from initlab.paper_figs import score_scale_figures, spt_figures, synthetic_splade_phase_figures, theory_figures
from initlab.realdata.lra import experiment as lra_experiment
from initlab.config import from_dict, to_dict
from initlab.evidence import text as verdict_text
from initlab.evidence.rules import NOT_RUN, Verdict
from initlab.experiment.stage import PRESETS, Stage, StageClaim, check_preset, finished_summary, run_unless_finished
from initlab.executor import (check_scheduler, default_workers, format_seconds, machine_speed, measure_speed,
                              probe_scheduler, run_cells, track_reports)
from initlab.runs import (ConfigMismatchError, RunDir, RunExistsError, atomic_write_json, atomic_write_text,
                          holds_run_folder, revive_nonfinite, torch_threads)
from initlab.synthetic import spt as synthetic_spt
from initlab.synthetic.splade import claims as splade_claims
from initlab.synthetic.splade.phase import runner as splade_phase
from initlab.synthetic.spt import claims as spt_claims
from initlab.textio import read_json, read_text
from initlab.theory.attention import curves
from initlab.theory.score_scale import closed_form as score_scale
from initlab.theorycheck.score_scale import experiment as score_scale_stage_
from initlab.theorycheck.verify import claims as theory_claims
from initlab.theorycheck.verify import runner as verify
from initlab.theorycheck.verify import experiment as theory_stage

__all__ = ["PRESETS", "REGISTRY", "STAGES", "OPTIONAL_STAGES", "run_reproduce", "theory", "spt",
           "score_scale_stage", "splade", "lra_listops", "expected_durations", "stage_figures", "verdict_summary"]


# ------------------------------------------------------------------------------------------------
# theory
# ------------------------------------------------------------------------------------------------
def theory(out_dir: Path, preset: str = "default", overwrite: bool = False, *, workers: int | None = None,
           scheduler: str | None = None) -> str:
    """The ``theory`` stage: verify every statement, the T2 and T4 curves, two figures; markdown summary.

    Each statement (its sympy derivation and checks) is a cell of :func:`initlab.executor.run_cells`, so the
    statements run in parallel on ``workers`` processes (or on Dask at ``scheduler``) with one bar over them.
    Writes ``config.json``, ``verify.json``, ``t2_curve.json``, ``t4_curve.json``, ``t6_dropout.json``,
    ``t7_table.json``, ``t2_band_ratio.png``, ``t6_dropout_rate.png``, ``t7_depth.png``,
    ``t4_projection_vs_p.png``, ``summary.md``, then ``DONE``; finished pieces are kept as cells.

    Raises:
        ValueError: unknown ``preset``.
    """
    with torch_threads(1):
        return run_unless_finished(out_dir, preset, overwrite, _theory, workers=workers, scheduler=scheduler)


def _theory(out_dir: Path, preset: str, overwrite: bool, workers: int | None = None, scheduler: str | None = None) -> str:
    cfg = verify.PRESETS[preset]
    run = RunDir(out_dir, overwrite=overwrite, config=cfg)  # a resumed folder of another config is refused
    big = preset == "full"
    Ts = [4, 8, 16, 32, 64, 128, 256] + ([512] if big else [])
    t2_args = {"seed": cfg.seed, "Ts": Ts, "widths": [1, 2, 4], "reps": 8 if big else 3}
    t4_args = {"seed": cfg.seed + 1, "ps": [0.0, 0.2, 0.4, 0.6, 0.8, 0.95], "T": 16, "K": 4, "q": 0.15, "w": 2,
               "n": max(2000, cfg.mc_samples)}
    # every cell records the arguments it was computed with: a resume under others raises ConfigMismatchError
    if run.has_cell("verify", key=cfg):  # a folder of an earlier initlab, verified as one cell
        report = run.load_cell("verify", key=cfg)
    else:
        cells = theory_stage.cells(cfg)
        run_cells(run, cells, workers=workers, scheduler=scheduler, desc="theory (statements)",
                  startup=theory_stage.WORKER_START_SECONDS)
        report = verify.merge_reports(cfg, [run.load_cell(c.name, key=c.key) for c in cells])
    run.write_json("verify.json", report)
    if not run.has_cell("t2_curve", key=t2_args):
        run.save_cell("t2_curve", curves.t2_band_curve(**t2_args), key=t2_args)
    if not run.has_cell("t4_curve", key=t4_args):
        run.save_cell("t4_curve", curves.t4_projection_curve(**t4_args), key=t4_args)
    t2, t4 = run.load_cell("t2_curve", key=t2_args), run.load_cell("t4_curve", key=t4_args)
    measured = {r["statement"]: r.get("measured", {}) for r in report["statements"]}
    if measured.get("T6", {}).get("dropout_mc"):
        run.write_json("t6_dropout.json", measured["T6"]["dropout_mc"]["rows"])
    if measured.get("T7", {}).get("table"):
        run.write_json("t7_table.json", measured["T7"]["table"])
    run.write_json("t2_curve.json", t2)
    run.write_json("t4_curve.json", t4)
    theory_figures.draw_all(out_dir)
    md = theory_stage.summary_markdown(report, preset, t2, t4)
    atomic_write_text(out_dir / "summary.md", md)
    run.mark_done()
    return md


# ------------------------------------------------------------------------------------------------
# synthetic SPT
# ------------------------------------------------------------------------------------------------
def spt(out_dir: Path, preset: str = "default", overwrite: bool = False, *, workers: int | None = None,
        scheduler: str | None = None) -> str:
    """The ``spt`` stage: the synthetic self-pretraining experiments of ``preset``, figures, summary.

    ``workers``: processes running its cells (default: one per core), one torch thread each.

    Raises:
        ValueError: unknown ``preset``.
    """
    return run_unless_finished(out_dir, preset, overwrite, _spt, workers=workers, scheduler=scheduler)


def _spt(out_dir: Path, preset: str, overwrite: bool, workers: int | None = None, scheduler: str | None = None) -> str:
    return synthetic_spt.run(synthetic_spt.PRESETS[preset], out_dir, overwrite=overwrite, workers=workers,
                             scheduler=scheduler, draw=spt_figures.make_figures)


# ------------------------------------------------------------------------------------------------
# score scale
# ------------------------------------------------------------------------------------------------
def score_scale_stage(out_dir: Path, preset: str = "default", overwrite: bool = False, *, workers: int | None = None,
                      scheduler: str | None = None) -> str:
    """The ``score_scale`` stage: theory + Monte Carlo table for k in {1, ..., 32} at a few sigma.

    Writes JSON/CSV/config, a figure and ``summary.md``; each (sigma, k) is a cell of
    :func:`initlab.executor.run_cells` (``workers`` processes or Dask at ``scheduler``), saved as it finishes.

    Raises:
        ValueError: unknown ``preset``.
    """
    return run_unless_finished(out_dir, preset, overwrite, _score_scale, workers=workers, scheduler=scheduler)


def _score_scale(out_dir: Path, preset: str, overwrite: bool, workers: int | None = None, scheduler: str | None = None) -> str:
    cfg = score_scale.PRESETS[preset]
    run = RunDir(out_dir, overwrite=overwrite, config=cfg)  # a resumed folder of another config is refused
    cells = score_scale_stage_.cells(cfg, preset)  # a cell of another config is never reused (its key holds the config)
    run_cells(run, cells, workers=workers, scheduler=scheduler, desc="score scale (sigma, k)",
              startup=score_scale_stage_.WORKER_START_SECONDS)
    rows = [revive_nonfinite(run.load_cell(c.name, key=c.key)) for c in cells]  # saved "inf" strings back to floats
    mech = score_scale.mechanism(cfg)
    run.write_json("score_scale.json", {"config": to_dict(cfg), "rows": rows, "mechanism": mech})
    run.write_csv("score_scale.csv", rows)
    fig = score_scale_figures.plot_theory_vs_mc(rows, out_dir / "score_scale_theory_vs_mc.png").name
    md = score_scale_stage_.summary_markdown(cfg, rows, mech, fig)
    atomic_write_text(out_dir / "summary.md", md)
    run.mark_done()
    return md


# ------------------------------------------------------------------------------------------------
# synthetic SPLADE
# ------------------------------------------------------------------------------------------------
def splade(out_dir: Path, preset: str = "default", overwrite: bool = False, *, workers: int | None = None,
           scheduler: str | None = None) -> str:
    """The ``splade`` stage: the synthetic SPLADE phase diagram of ``preset`` (four families, head scale s x
    rescaling k) and its figures; markdown summary, with the collapsed cells said once, expected or not
    (:func:`initlab.synthetic.splade.phase.runner.collapse_note`).

    Raises:
        ValueError: unknown ``preset``.
    """
    out_dir = Path(out_dir)
    check_preset(preset)
    cfg = splade_phase.PRESETS[preset]
    if finished_summary(out_dir, preset, overwrite) is None:
        splade_phase.run_phase(out_dir, cfg, overwrite=overwrite, progress=True, workers=workers, scheduler=scheduler,
                               draw=synthetic_splade_phase_figures.draw_phase)
    figs = sorted(p.name for p in out_dir.glob("splade_*.png"))
    md = read_text(out_dir / "summary.md") + "\n" + "\n".join(f"![{f}]({f})" for f in figs) + "\n"
    note = splade_phase.collapse_note(out_dir, cfg)
    if note:
        md += "\n**Collapsed cells** (printed once on the console):\n\n```\n" + note + "\n```\n"
    return md


# ------------------------------------------------------------------------------------------------
# LRA ListOps on CPU (optional)
# ------------------------------------------------------------------------------------------------
def lra_listops(out_dir: Path, preset: str = "default", overwrite: bool = False, *, workers: int | None = None,
                scheduler: str | None = None) -> str:
    """The preregistered CPU ListOps SPT-vs-scratch experiment (:mod:`initlab.realdata.lra.experiment`).

    ``quick``: the toy preset, seed 0, the same budget rule (seconds); ``default`` and ``full``: the
    preregistered preset and seeds (about 8 CPU-minutes). Not part of the default run.

    Raises:
        ValueError: unknown ``preset``.
    """
    check_preset(preset)
    if preset == "quick":
        summary = lra_experiment.run_listops_plateau(out_dir, (0,), overwrite=overwrite, preset="toy")
    else:
        summary = lra_experiment.run_listops_plateau(out_dir, overwrite=overwrite)
    return lra_experiment.summary_markdown(summary, summary.get("seconds_this_call"))


# ------------------------------------------------------------------------------------------------
# the claims each stage's saved files decide (the console's verdict summary)
# ------------------------------------------------------------------------------------------------
def _theory_claims(out_dir: Path) -> list[StageClaim]:
    """The theorem claim from ``verify.json`` (:func:`initlab.theorycheck.verify.claims.theorem`)."""
    v = theory_claims.theorem(read_json(Path(out_dir) / "verify.json"))
    return [StageClaim("the attention-gradient theorems hold on fresh random cases", v, counted="statement")]


def _spt_claims(out_dir: Path) -> list[StageClaim]:
    """Every SPT claim from ``metrics.json``'s per-seed numbers, Holm-corrected as the stage's report shows them
    (:func:`initlab.synthetic.spt.claims.evaluate_corrected`)."""
    m = read_json(Path(out_dir) / "metrics.json")
    th = from_dict(spt_claims.SPTThresholds, m["config"]["thresholds"])
    vs = spt_claims.evaluate_corrected(spt_claims.as_raw(m["summary"]["per_seed"]), th)
    unit = {"proximity": "mass"}
    return [StageClaim(c.title, vs[c.id], unit.get(c.id, "share" if vs[c.id].rule == "share" else "points"))
            for c in spt_claims.CLAIMS]


def _splade_claims(out_dir: Path) -> list[StageClaim]:
    """Every synthetic SPLADE claim from ``phase.json``'s raw rows, uncorrected as the stage's summary shows them
    (:func:`initlab.synthetic.splade.claims.evaluate_all`); regrets count (family, seed) backbones."""
    phase = read_json(Path(out_dir) / "phase.json")
    th = from_dict(splade_claims.SPLADEThresholds, phase["config"]["claims"])
    vs = splade_claims.evaluate_all(splade_claims.as_raw(phase), th)
    per_seed = ("interaction", "high_norm_degrades", "rescaling_fixes", "over_rescaling", "input_side")

    def units(v: Verdict, unit: str) -> tuple[str, ...]:  # the InfoNCE parts are in nats
        return tuple("nats" if "InfoNCE" in p.reason else unit for p in v.parts)

    return [StageClaim(c.title, vs[c.id], c.unit, "seed" if c.id in per_seed else "(family, seed) backbone",
                       units(vs[c.id], c.unit)) for c in splade_claims.CLAIMS]


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def claim_line(c: StageClaim) -> str:
    """``title: word; estimate [interval]; n seeds``: one claim of a finished stage on one console line. An all-of
    claim lists its parts' estimates; a check (the theorems) says how many statements it checked. The word is the one
    the reports show (:func:`initlab.evidence.text.shown_word`): an equivalence decided on a zero-width interval
    (every value identical) reads "degenerate", not as a decision."""
    v = c.verdict
    if v.rule == "check":
        return f"{c.title}: {v.word}; {_count(v.n, c.counted)} checked" + (f" ({v.reason})" if v.reason else "")
    if v.rule == "all_of" and v.parts:
        units = c.part_units or (c.unit,) * len(v.parts)
        parts = [(p, u) for p, u in zip(v.parts, units) if p.word != NOT_RUN]
        est = ", ".join(f"{verdict_text.number(p.estimate, u)} {verdict_text.interval(p, u)}" for p, u in parts)
        n = max((p.n for p, _ in parts), default=0)
        return f"{c.title}: {verdict_text.shown_word(v)}; parts {est}; {_count(n, c.counted)}"
    est = f"{verdict_text.number(v.estimate, c.unit)} {verdict_text.interval(v, c.unit)}"
    return f"{c.title}: {verdict_text.shown_word(v)}; {est}; {_count(v.n, c.counted)}"


def verdict_summary(out: Path, stages: Sequence[str]) -> list[str]:
    """The console's closing lines: per finished stage that decides claims, one line per claim it ran
    (:func:`claim_line`), then how many of its claims this preset does not run. A stage without claims, or not
    finished, says so in one line."""
    known = {**STAGES, **OPTIONAL_STAGES}
    lines = []
    for name in stages:
        st = known.get(name)
        if st is None:
            continue
        if st.claims is None:
            lines.append(f"{name}: no claims (tables and figures only: see the report)")
            continue
        if not (Path(out) / name / "DONE").exists():
            lines.append(f"{name}: not finished, no verdicts")
            continue
        got = st.claims(Path(out) / name)
        ran = [c for c in got if c.verdict.word != NOT_RUN]
        lines += [f"{name}: {claim_line(c)}" for c in ran]
        if len(ran) < len(got):
            lines.append(f"{name}: {_count(len(got) - len(ran), 'more claim')} not run by this preset (see the report)")
    return lines


# ------------------------------------------------------------------------------------------------
# the stages, one record each
# ------------------------------------------------------------------------------------------------
#: every stage, the default run first and in order
REGISTRY: tuple[Stage, ...] = (
    Stage("theory", theory, lambda out, preset, workers: theory_stage.expected_seconds(out, verify.PRESETS[preset], workers),
          claims=_theory_claims),
    Stage("spt", spt, lambda out, preset, workers: synthetic_spt.expected_seconds(synthetic_spt.PRESETS[preset], out, workers),
          claims=_spt_claims),
    Stage("score_scale", score_scale_stage,
          lambda out, preset, workers: score_scale_stage_.expected_seconds(out, score_scale.PRESETS[preset], preset, workers)),
    Stage("splade", splade, lambda out, preset, workers: splade_phase.expected_seconds(out, splade_phase.PRESETS[preset], workers),
          claims=_splade_claims),
    Stage("lra_listops", lra_listops, lambda out, preset, workers: lra_experiment.expected_seconds(out, toy=preset == "quick"),
          optional=True),
)
#: stage name -> record; the default run, in order.
STAGES: dict[str, Stage] = {s.name: s for s in REGISTRY if not s.optional}
#: stages run only when named in ``--only``.
OPTIONAL_STAGES: dict[str, Stage] = {s.name: s for s in REGISTRY if s.optional}


def expected_durations(out: Path, preset: str, stages: Sequence[str], workers: int, speed: float = 1.0) -> dict[str, tuple[float, float]]:
    """Stage -> (expected, at most) seconds of its remaining work on this machine: each :class:`Stage`'s
    ``estimate`` times ``speed`` (:func:`initlab.executor.measure_speed`); an unknown name is left out."""
    out = Path(out)
    known = {**STAGES, **OPTIONAL_STAGES}
    got = {}
    for name in stages:
        if name in known and known[name].estimate is not None:
            e, m = known[name].estimate(out / name, preset, workers)
            got[name] = (e * speed, m * speed)
    return got


# ------------------------------------------------------------------------------------------------
# figures, warnings, CPU use
# ------------------------------------------------------------------------------------------------
_SKIP_DIRS = {"cells", "ckpt", "trainer_tmp", "backbone", "partial"}


def stage_figures(stage_dir: Path) -> list[Path]:
    """Every figure (``*.png``) a stage drew into its folder (sub-folders included, working folders skipped),
    relative to the stage folder, in name order."""
    stage_dir = Path(stage_dir)
    if not stage_dir.is_dir():
        return []
    return sorted(p.relative_to(stage_dir) for p in stage_dir.rglob("*.png")
                  if not _SKIP_DIRS & set(p.relative_to(stage_dir).parts[:-1]))


def embed_figures(md: str, stage: str, figures: Sequence[Path]) -> str:
    """``md`` (already relinked to ``stage/``) with every figure of ``figures`` embedded once: those the summary
    does not embed yet are appended as ``![name](stage/name)``, links relative to the report folder."""
    missing = [f for f in figures if f"]({stage}/{f.as_posix()})" not in md]
    if not missing:
        return md
    return md.rstrip() + "\n\n" + "\n\n".join(f"![{f.stem}]({stage}/{f.as_posix()})" for f in missing) + "\n"


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its finished (waited-for) child processes, user + system."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _one_line(w: warnings.WarningMessage) -> str:
    return f"{w.category.__name__}: {w.message}"


def _cpu_text(rec: dict[str, Any]) -> str:
    if "cpu_seconds" not in rec:
        return ""
    return f", {rec['cpu_seconds']:.0f} s of CPU: {rec['cores_used']:.1f} of {rec['cores']} cores"


def _stage_time_line(name: str, rec: dict[str, Any] | None, was_done: bool) -> str:
    if rec is None:  # finished by a version of initlab that did not record stage times
        return f"_stage `{name}` was finished by an earlier run whose time was not recorded_"
    when = f", finished {rec['finished']} (resumed run: not redone)" if was_done else ""
    return f"_stage `{name}` took {rec['seconds']:.1f} s{_cpu_text(rec)}{when}_"


def _check_stage_presets(out: Path, stages: Sequence[str], times: dict[str, Any], preset: str, overwrite: bool) -> None:
    """Refuse to reuse a finished stage that ``stage_times.json`` records under another preset (checked for
    every requested stage before anything runs or is written).

    Raises:
        ConfigMismatchError: a finished stage of ``out`` was made by another preset and ``overwrite`` is false.
    """
    if overwrite:
        return
    for name in stages:
        made_by = times.get(name, {}).get("preset")
        if (out / name / "DONE").exists() and made_by not in (None, preset):
            raise ConfigMismatchError(
                f"{out / name}: stage {name} was finished under preset {made_by!r}, not {preset!r}; "
                "use another --out, or --overwrite to redo it under the new preset")


_LINK = re.compile(r"(\]\()(?![a-z]+://|/|#)([^)\s]+\.(?:png|pdf|md|json|csv))\)")
_NAMED_FILE = re.compile(r"`(?![a-z]+://|/)([\w.-]+\.(?:png|pdf|json|csv))`")


def relink(md: str, stage: str) -> str:
    """Rewrite a stage summary's relative file links and quoted figure names (``x.png``, written for the
    stage folder) so they resolve from the report one folder up (``stage/x.png``)."""
    md = _LINK.sub(lambda m: f"{m.group(1)}{stage}/{m.group(2)})", md)
    return _NAMED_FILE.sub(lambda m: f"`{stage}/{m.group(1)}`", md)


@holds_run_folder("out")
def run_reproduce(out: Path, preset: str = "default", stages: Sequence[str] | None = None, overwrite: bool = False,
                  *, workers: int | None = None, scheduler: str | None = None, speed: float | None = None) -> Path:
    """Run the selected stages into ``out`` and write ``out/report.md``; returns the report path.

    Before anything runs, the expected duration is printed: :func:`expected_durations` over every stage's
    remaining cells, scaled by this machine's speed (``speed``; None: :func:`initlab.executor.measure_speed`,
    about 2 s), the one speed every stage's own plan line then uses (:func:`initlab.executor.machine_speed`), so
    the header's per-stage estimates and the stages' lines agree. ``workers`` (default: one per core) and
    ``scheduler`` go to every stage. After each stage its
    wall time, CPU seconds (this process and its worker processes) and cores used are printed and kept in
    ``out/stage_times.json`` (so a resumed call reports a finished stage with the time it took then), and the
    report embeds every figure the stage drew and lists the warnings it raised, the expected ones said so. At the
    end the verdicts of the finished stages are printed, one line per claim (:func:`verdict_summary`).

    A call whose every requested stage is finished and whose report exists is refused unless ``overwrite``
    (a finished run is never silently redone or rewritten); a call with some stages unfinished resumes, reusing
    the finished ones.

    Raises:
        ValueError: unknown ``preset`` or stage name, no stage, or ``workers < 1``.
        ConfigMismatchError: a requested stage was finished under another preset (see ``stage_times.json``).
        RunExistsError: every requested stage of ``out`` is finished, its report exists, and ``overwrite`` is false.
    """
    if preset not in PRESETS:
        raise ValueError(f"preset: expected one of {PRESETS}, got {preset!r}")
    stages = list(STAGES) if stages is None else list(stages)
    known = {**STAGES, **OPTIONAL_STAGES}
    if not stages:
        raise ValueError(f"--only: no stage names given; expected a comma-separated list from {list(known)}")
    unknown = [s for s in stages if s not in known]
    if unknown:
        raise ValueError(f"--only: unknown stage(s) {unknown}; expected names from {list(known)}")
    if workers is not None and workers < 1:
        raise ValueError(f"--workers: expected >= 1, got {workers}")
    if scheduler is not None:
        check_scheduler(scheduler)
        probe_scheduler(scheduler)  # one line, before the report folder is made
    cores = workers or default_workers()
    out = Path(out)
    sections = [
        "# initlab reproduce report",
        "",
        f"preset `{preset}`, stages {', '.join(stages)}; started {time.strftime('%Y-%m-%d %H:%M:%S')}; "
        f"{cores} worker processes" + (f", Dask scheduler {scheduler}" if scheduler else "") + ".",
        "",
    ]
    # Wall-clock time of each stage's real run, kept across resumes: a stage finished by an earlier call
    # is reported with the time it took then, not the second it takes to read its summary.
    times_path = out / "stage_times.json"
    times: dict[str, Any] = read_json(times_path) if times_path.is_file() else {}
    _check_stage_presets(out, stages, times, preset, overwrite)
    if not overwrite and (out / "report.md").is_file() and all((out / n / "DONE").exists() for n in stages):
        raise RunExistsError(
            f"--out {out}: a finished initlab reproduce (stages {', '.join(stages)} all done; its report: "
            f"{out / 'report.md'}); use --overwrite to redo it (the old stage folders are moved aside), or another --out")
    if speed is None:
        speed = measure_speed()
    plan = expected_durations(out if not overwrite else out / ".none", preset, stages, cores, speed)
    exp, most = sum(e for e, _ in plan.values()), sum(m for _, m in plan.values())
    print(f"initlab reproduce --preset {preset}: expected duration about {format_seconds(exp)} (at most "
          f"{format_seconds(most)}) on {cores} worker processes; this machine measured {speed:.2f}x the reference "
          "machine's time (> 1: slower or loaded); by stage: "
          + ", ".join(f"{n} {format_seconds(e)}" for n, (e, _) in plan.items()), flush=True)
    sections[2] += (f" Expected before the run: about {format_seconds(exp)} (at most {format_seconds(most)}; "
                    f"machine speed {speed:.2f}x the reference's time).")
    out.mkdir(parents=True, exist_ok=True)
    with machine_speed(speed):
        _run_stages(out, stages, known, preset, overwrite, workers, scheduler, cores, plan, times, times_path, sections)
    report = out / "report.md"
    print(f"\nreport: {report}")
    print("\nverdicts of this run (its report's words; few seeds: the README's confirmatory words come from "
          "docs/results):")
    for line in verdict_summary(out, stages):
        print(f"  {line}")
    return report


def _run_stages(out: Path, stages: Sequence[str], known: dict[str, Stage], preset: str, overwrite: bool,
                workers: int | None, scheduler: str | None, cores: int, plan: dict[str, tuple[float, float]],
                times: dict[str, Any], times_path: Path, sections: list[str]) -> None:
    """The stage loop of :func:`run_reproduce`: run each stage, record its time, rewrite the report after it."""
    for name in stages:
        print(f"\n=== initlab reproduce: stage {name} ===", flush=True)
        was_done = (out / name / "DONE").exists() and not overwrite
        if was_done:
            print(f"stage {name}: finished by an earlier call; its saved summary is reused (--overwrite redoes it)", flush=True)
        t0, c0 = time.perf_counter(), _cpu_seconds()
        with warnings.catch_warnings(record=True) as caught, track_reports() as reports:
            warnings.simplefilter("default")
            md = known[name].run(out / name, preset=preset, overwrite=overwrite, workers=workers, scheduler=scheduler)
        dt = time.perf_counter() - t0
        cpu = _cpu_seconds() - c0
        if scheduler is not None and not scheduler.startswith("local:"):  # cells on other machines
            cpu += sum(r.cpu_seconds for r in reports)
        stage_warnings = list(dict.fromkeys(_one_line(w) for w in caught))
        for line in stage_warnings:
            print(line, file=sys.stderr, flush=True)
        if not was_done:
            times[name] = {"seconds": dt, "cpu_seconds": cpu, "cores": cores, "cores_used": cpu / dt if dt > 0 else 0.0,
                           "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "preset": preset,
                           "expected_seconds": plan.get(name, (None, None))[0], "warnings": stage_warnings}
            atomic_write_json(times_path, times)
            print(f"stage {name}: {dt:.1f} s wall{_cpu_text(times[name])}"
                  + (f" (expected {format_seconds(plan[name][0])})" if name in plan else ""), flush=True)
        rec = times.get(name)
        body = embed_figures(relink(md.rstrip(), name), name, stage_figures(out / name))
        sections += [body, "", _stage_time_line(name, rec, was_done), ""]
        got = (rec or {}).get("warnings", stage_warnings)
        if got:
            sections += [f"Warnings raised by stage `{name}` (none of them is known to be expected; the collapsed "
                         "cells of the synthetic SPLADE grid, which are, are listed in its summary above):", ""]
            sections += [f"- `{w}`" for w in got] + [""]
        atomic_write_text(out / "report.md", "\n".join(sections) + "\n")
