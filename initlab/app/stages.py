"""The stages of ``initlab reproduce``: each runs a library experiment, then draws its figures from what it saved.

Every stage is ``stage(out_dir, preset="default", overwrite=False, *, workers=None, scheduler=None) -> markdown``
and writes into ``out_dir``; ``workers`` (default: one per core) and ``scheduler`` (a Dask address, where the
stage's cells can run on Dask) go to :func:`initlab.executor.run_cells`. Each stage is one
:class:`initlab.experiment.stage.Stage` record, defined with its experiment, holding that function and its
``estimate(out_dir, preset, workers) -> (expected, at most)`` seconds of its remaining work on the reference
machine (the experiment's own cost model; ``initlab reproduce`` scales it by this machine's measured speed and
prints it before anything runs). :data:`REGISTRY` is built from the experiments' records (each names its
stages), in their reading order (:func:`initlab.app.experiments.reading_order`). A finished stage (``out_dir/DONE`` beside its ``summary.md``) is not redone unless
``overwrite`` (then the old folder is moved aside), and its saved summary is returned. Each run of ``initlab
reproduce`` is a file of ``initlab/app/runs/`` (:data:`RUNS`, :class:`ReproduceConfig`): the size every stage runs at,
one of the presets every CLI shares (``quick``: a smoke test, minutes on a laptop CPU; ``default``: the CPU
reproduction; ``full``: larger grids and more seeds, still CPU), and the default stages it skips.

* ``theory``      -- attention-gradient theorems checked on fresh random cases (:mod:`initlab.theorycheck.verify.stage`);
* ``spt``         -- synthetic length-100 self-pretraining experiments (:mod:`initlab.synthetic.spt.stage`);
* ``score_scale`` -- SPLADE score-scale analysis against k, theory vs Monte Carlo (:mod:`initlab.theorycheck.score_scale.stage`);
* ``splade``      -- synthetic SPLADE phase diagram: four families, head scale s x rescale k (:mod:`initlab.synthetic.splade.phase.stage`;
  skipped by ``runs/default.toml``);
* ``splade_in_domain`` -- synthetic SPLADE's head-norm effect in domain, the OOD confirmation's recipe on fresh seeds
  (:mod:`initlab.synthetic.splade.ood.stage`; skipped by ``runs/quick.toml``);
* ``lra_listops`` -- optional: generated ListOps on CPU, self-pretraining vs from scratch (:mod:`initlab.realdata.lra.stage`).
"""

from __future__ import annotations

import re
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from initlab.app.experiments import EXPERIMENTS, reading_order
from initlab.evidence.rules import INCONCLUSIVE, NOT, NOT_RUN, PARTLY, Verdict
from initlab.experiment import text as verdict_text
from initlab.experiment.options import preset_name
from initlab.experiment.record import Experiment
from initlab.experiment.stage import PRESETS, Stage, StageClaim
from initlab.executor import (check_scheduler, default_workers, format_seconds, machine_speed, measure_speed,
                              probe_scheduler, track_reports)
from initlab.runfile import RunFiles
from initlab.runs import ConfigMismatchError, RunExistsError, atomic_write_json, atomic_write_text, holds_run_folder
from initlab.textio import read_json, read_text

__all__ = ["PRESETS", "ReproduceConfig", "RUNS", "registry", "REGISTRY", "STAGES", "OPTIONAL_STAGES", "run_reproduce", "expected_durations", "stage_figures",
           "verdict_summary", "RESULTS", "confirmatory_comparison"]


# ------------------------------------------------------------------------------------------------
# the claims each stage's saved files decide (the console's verdict summary)
# ------------------------------------------------------------------------------------------------
def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def claim_line(c: StageClaim) -> str:
    """``title: word; estimate [interval]; n seeds``: one claim of a finished stage on one console line. An all-of
    claim lists its parts' estimates; a check (the theorems) says how many statements it checked. The word is the one
    the reports show (:func:`initlab.experiment.text.shown_word`): an equivalence decided on a zero-width interval
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
    """The console's closing lines, readable at a glance: first every claim the finished stages decided, one line
    each (:func:`claim_line`: claim, word, estimate with its interval, seeds); then each claim they ran and left
    undecided, one line each; then one line counting the claims this preset does not decide (undecided or not run)
    and naming the runs that decide them (each stage's :attr:`~initlab.experiment.stage.Stage.decides`). A stage
    that is not finished says so in one line; a stage without claims adds none."""
    known = {**STAGES, **OPTIONAL_STAGES}
    decided: list[str] = []
    undecided: list[str] = []
    unfinished: list[str] = []
    not_run = 0
    runs: list[str] = []
    for name in stages:
        st = known.get(name)
        if st is None or st.claims is None:
            continue
        if not (Path(out) / name / "DONE").exists():
            unfinished.append(f"{name}: not finished, no verdicts")
            continue
        got = st.claims(Path(out) / name)
        ran = [c for c in got if c.verdict.word != NOT_RUN]
        decided += [claim_line(c) for c in ran if c.verdict.word != INCONCLUSIVE]
        undecided += [claim_line(c) for c in ran if c.verdict.word == INCONCLUSIVE]
        not_run += len(got) - len(ran)
        if st.decides and (len(ran) < len(got) or any(c.verdict.word == INCONCLUSIVE for c in ran)):
            runs.append(st.decides)
    lines = decided + undecided + unfinished
    if undecided or not_run:
        where = f"; the runs that decide them: {'; '.join(dict.fromkeys(runs))}" if runs else ""
        lines.append(f"not decided by this preset: {_count(len(undecided), 'claim')} undecided (above), "
                     f"{not_run} not run{where}")
    return lines


#: the saved preregistered runs the default's words are compared with (a source checkout's docs/results)
RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
_BELOW = (PARTLY, NOT)


def _why(ours: Verdict, theirs: Verdict, unit: str) -> str:
    """Why a word of this run differs from the confirmatory run's, from the two verdicts."""
    if theirs.word == INCONCLUSIVE and theirs.uncorrected == ours.word:
        return (f"the confirmatory run's interval gives {ours.word} too; only Holm's correction in its larger "
                f"{theirs.family or ''} family made it inconclusive, and this preset tests the claim in a smaller one")
    span = (f"this run {verdict_text.number(ours.estimate, unit)} {verdict_text.interval(ours, unit)} on "
            f"{_count(ours.n, 'seed')}, the confirmatory run {verdict_text.number(theirs.estimate, unit)} "
            f"{verdict_text.interval(theirs, unit)} on {_count(theirs.n, 'seed')}")
    if ours.word in _BELOW and theirs.word in _BELOW:
        return f"both exclude the claimed size; the intervals' lower ends fall on different sides of 0 ({span})"
    return f"the outcomes differ: {span}"


def confirmatory_comparison(out: Path, stages: Sequence[str], results: Path = RESULTS) -> list[str]:
    """Markdown bullets comparing every claim this run decided with the word of the preregistered run its stage
    repeats (each stage's :attr:`~initlab.experiment.stage.Stage.confirmed`, recomputed from ``results``): agrees,
    or differs, which and why (:func:`_why`). Empty when ``results`` is absent (an installed package without the
    docs) or no finished stage has a confirmatory run."""
    known = {**STAGES, **OPTIONAL_STAGES}
    lines = []
    if not Path(results).is_dir():
        return lines
    for name in stages:
        st = known.get(name)
        if st is None or st.claims is None or st.confirmed is None or not (Path(out) / name / "DONE").exists():
            continue
        theirs = st.confirmed(Path(results))
        for c in st.claims(Path(out) / name):
            t = theirs.get(c.title)
            if t is None or c.verdict.word in (NOT_RUN, INCONCLUSIVE):
                continue
            if t.word == c.verdict.word:
                lines.append(f"- {c.title}: **{c.verdict.word}**, as in the confirmatory run")
            else:
                lines.append(f"- {c.title}: **{c.verdict.word}** here, **{t.word}** in the confirmatory run: "
                             f"{_why(c.verdict, t, c.unit)}")
    return lines


# ------------------------------------------------------------------------------------------------
# the stages, one record each
# ------------------------------------------------------------------------------------------------
def registry(records: Sequence[Experiment] = EXPERIMENTS) -> tuple[Stage, ...]:
    """Every stage the ``records`` name (:attr:`initlab.experiment.record.Experiment.stages`, imported now): the
    default stages, then the optional ones, each in the records' reading order
    (:func:`initlab.app.experiments.reading_order`).

    Raises:
        ValueError: two stages share a name (the message names both records), or a record names something that is
            not a stage.
    """
    found: list[tuple[str, Stage]] = [(exp.name, s) for exp in reading_order(records) for s in exp.stage_records()]
    owner: dict[str, str] = {}
    for exp, s in found:
        if s.name in owner:
            raise ValueError(f"stage {s.name!r}: named by the records {owner[s.name]!r} and {exp!r}; expected one")
        owner[s.name] = exp
    return tuple(s for _, s in found if not s.optional) + tuple(s for _, s in found if s.optional)


#: every stage, the default run first and in order (:func:`registry` over every experiment's record)
REGISTRY: tuple[Stage, ...] = registry()
#: stage name -> record; the default run, in order.
STAGES: dict[str, Stage] = {s.name: s for s in REGISTRY if not s.optional}
#: stages run only when named in ``--only``.
OPTIONAL_STAGES: dict[str, Stage] = {s.name: s for s in REGISTRY if s.optional}


# ------------------------------------------------------------------------------------------------
# the runs: one file each
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReproduceConfig:
    """What one ``initlab reproduce`` run runs: ``size``, the run every stage runs (its experiment's ``quick``,
    ``default`` or ``full``, :data:`initlab.experiment.stage.PRESETS`), and ``skip``, the default stages
    (:data:`STAGES`) it leaves out when ``--only`` does not name the stages (every other default stage runs, in
    registry order, so a new stage runs in every run that does not skip it).

    Raises:
        ValueError: a ``size`` not in PRESETS, or ``skip`` naming a stage that is not a default stage, or one twice.
    """

    size: str = "default"
    skip: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.size not in PRESETS:
            raise ValueError(f"ReproduceConfig.size: expected one of {', '.join(PRESETS)}, got {self.size!r}")
        default = [s.name for s in REGISTRY if not s.optional]
        if any(n not in default for n in self.skip) or len(set(self.skip)) != len(self.skip):
            raise ValueError(f"ReproduceConfig.skip: expected distinct names from {', '.join(default)}, got {list(self.skip)}")

    def stages(self) -> list[str]:
        """The stages this run runs when ``--only`` does not name them: :data:`STAGES` but ``skip``, in order."""
        return [n for n in STAGES if n not in self.skip]


#: every run of ``initlab reproduce``, one file each in ``initlab/app/runs/`` (``--preset`` takes a name or a path;
#: :class:`initlab.runfile.RunFiles`; docs/runs.md lists them)
RUNS: RunFiles[ReproduceConfig] = RunFiles(ReproduceConfig, Path(__file__).with_name("runs"))


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
    """Run the selected stages into ``out`` and write ``out/report.md``; returns the report path. ``preset``: a run's
    name or the path of a run file (:data:`RUNS`); every stage runs at its ``size``. ``stages`` None: the run's
    stages (:meth:`ReproduceConfig.stages`), in registry order.

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
        ValueError: unknown stage name, no stage, or ``workers < 1``; :class:`initlab.runfile.RunFileError` (a
            ValueError): an unknown ``preset``, a missing or bad run file (naming the file and the field).
        ConfigMismatchError: a requested stage was finished at another size (see ``stage_times.json``).
        RunExistsError: every requested stage of ``out`` is finished, its report exists, and ``overwrite`` is false.
    """
    run = RUNS.resolve(preset)
    name, size = preset_name(str(preset)), run.size
    stages = run.stages() if stages is None else list(stages)
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
        f"preset `{name}`" + (f" (stages at size `{size}`)" if size != name else "")
        + f", stages {', '.join(stages)}; started {time.strftime('%Y-%m-%d %H:%M:%S')}; "
        f"{cores} worker processes" + (f", Dask scheduler {scheduler}" if scheduler else "") + ".",
        "",
    ]
    # Wall-clock time of each stage's real run, kept across resumes: a stage finished by an earlier call
    # is reported with the time it took then, not the second it takes to read its summary.
    times_path = out / "stage_times.json"
    times: dict[str, Any] = read_json(times_path) if times_path.is_file() else {}
    _check_stage_presets(out, stages, times, size, overwrite)
    if not overwrite and (out / "report.md").is_file() and all((out / n / "DONE").exists() for n in stages):
        raise RunExistsError(
            f"--out {out}: a finished initlab reproduce (stages {', '.join(stages)} all done; its report: "
            f"{out / 'report.md'}); use --overwrite to redo it (the old stage folders are moved aside), or another --out")
    if speed is None:
        speed = measure_speed()
    plan = expected_durations(out if not overwrite else out / ".none", size, stages, cores, speed)
    exp, most = sum(e for e, _ in plan.values()), sum(m for _, m in plan.values())
    print(f"initlab reproduce --preset {name}: expected duration about {format_seconds(exp)} (at most "
          f"{format_seconds(most)}) on {cores} worker processes; this machine measured {speed:.2f}x the reference "
          "machine's time (> 1: slower or loaded); by stage: "
          + ", ".join(f"{n} {format_seconds(e)}" for n, (e, _) in plan.items()), flush=True)
    sections[2] += (f" Expected before the run: about {format_seconds(exp)} (at most {format_seconds(most)}; "
                    f"machine speed {speed:.2f}x the reference's time).")
    out.mkdir(parents=True, exist_ok=True)
    with machine_speed(speed):
        _run_stages(out, stages, known, size, overwrite, workers, scheduler, cores, plan, times, times_path, sections)
    report = out / "report.md"
    compared = confirmatory_comparison(out, stages)
    if compared:
        differ = [c for c in compared if "in the confirmatory run:" in c]
        atomic_write_text(report, read_text(report).rstrip() + "\n\n## Against the confirmatory runs\n\n"
                          "Each claim this run decided, with the word of the preregistered run its stage repeats "
                          "(recomputed from docs/results, Holm-corrected as the README shows it):\n\n"
                          + "\n".join(compared) + "\n")
    print(f"\nreport: {report}")
    print(f"\nverdicts of this run (preset {name}; its report's words, Holm-corrected; the README's confirmatory "
          "words come from docs/results):")
    for line in verdict_summary(out, stages):
        print(f"  {line}")
    if compared:
        print(f"  against the confirmatory runs (docs/results): {len(compared) - len(differ)} of {len(compared)} decided "
              f"words agree" + (f"; {len(differ)} differ{'s' if len(differ) == 1 else ''}, which and why: the report's "
                                "last section" if differ else ""))
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
