"""The stages of ``initlab reproduce``: each runs a library experiment, then draws its figures from what it saved.

Every stage is ``stage(out_dir, preset="default", overwrite=False) -> markdown`` and writes into
``out_dir``; a finished stage (``out_dir/DONE`` beside its ``summary.md``) is not redone unless
``overwrite`` (then the old folder is moved aside), and its saved summary is returned. Presets, the one
vocabulary of every CLI: ``quick`` (a smoke test: minutes on a laptop CPU), ``default`` (the CPU
reproduction), ``full`` (larger grids and more seeds, still CPU).

* ``theory``      -- attention-gradient theorems checked on fresh random cases (:mod:`initlab.theory.verify.runner`);
* ``spt``         -- synthetic length-100 self-pretraining experiments (:mod:`initlab.synthetic.spt`);
* ``score_scale`` -- SPLADE score-scale analysis against k, theory vs Monte Carlo (:mod:`initlab.theory.score_scale.closed_form`);
* ``splade``      -- synthetic SPLADE phase diagram: four families, head scale s x rescale k (:mod:`initlab.synthetic.splade.phase.runner`);
* ``lra_listops`` -- optional: generated ListOps on CPU, self-pretraining vs from scratch (:mod:`initlab.realdata.lra.sweep`).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from initlab.paper_figs import score_scale_figures, spt_figures, synthetic_splade_figures, theory_figures
from initlab.realdata.lra import experiment as lra_experiment
from initlab.config import to_dict
from initlab.runs import ConfigMismatchError, RunDir, atomic_write_json, atomic_write_text, torch_threads
from initlab.synthetic import spt as synthetic_spt
from initlab.synthetic.splade.phase import runner as splade_phase
from initlab.theory.attention import case as ac
from initlab.theory.attention import gradient as ag
from initlab.theory.attention import masked_reconstruction as am
from initlab.theory.score_scale import closed_form as score_scale
from initlab.theory.score_scale import monte_carlo as score_scale_mc
from initlab.theory.verify import runner as verify

__all__ = ["PRESETS", "STAGES", "OPTIONAL_STAGES", "run_reproduce", "theory", "spt", "score_scale_stage", "splade", "lra_listops"]

PRESETS = ("quick", "default", "full")


def _check_preset(preset: str) -> None:
    if preset not in PRESETS:
        raise ValueError(f"preset: expected one of {list(PRESETS)}, got {preset!r}")


def finished_summary(out_dir: Path, preset: str, overwrite: bool) -> str | None:
    """Check ``preset``; then the saved ``summary.md`` of a finished stage folder, or None if it must (re)run.

    Raises:
        ValueError: unknown ``preset``.
    """
    _check_preset(preset)
    out_dir = Path(out_dir)
    if overwrite or not (out_dir / "DONE").exists() or not (out_dir / "summary.md").exists():
        return None
    return (out_dir / "summary.md").read_text()


def run_unless_finished(out_dir: Path, preset: str, overwrite: bool, body: Callable[[Path, str, bool], str]) -> str:
    """The saved summary of a finished stage folder (see :func:`finished_summary`), else ``body(out_dir, preset, overwrite)``.

    Raises:
        ValueError: unknown ``preset``.
    """
    done = finished_summary(out_dir, preset, overwrite)
    if done is not None:
        return done
    return body(Path(out_dir), preset, overwrite)


# ------------------------------------------------------------------------------------------------
# theory
# ------------------------------------------------------------------------------------------------
def theory(out_dir: Path, preset: str = "default", overwrite: bool = False) -> str:
    """The ``theory`` stage: verify every statement, the T2 and T4 curves, two figures; markdown summary.

    Writes ``config.json``, ``verify.json``, ``t2_curve.json``, ``t4_curve.json``, ``t6_dropout.json``,
    ``t7_table.json``, ``t2_band_ratio.png``, ``t6_dropout_rate.png``, ``t7_depth.png``,
    ``t4_projection_vs_p.png``, ``summary.md``, then ``DONE``; finished pieces are kept as cells.

    Raises:
        ValueError: unknown ``preset``.
    """
    with torch_threads(1):
        return run_unless_finished(out_dir, preset, overwrite, _theory)


def _theory(out_dir: Path, preset: str, overwrite: bool) -> str:
    cfg = verify.PRESETS[preset]
    run = RunDir(out_dir, overwrite=overwrite, config=cfg)  # a resumed folder of another config is refused
    big = preset == "full"
    Ts = [4, 8, 16, 32, 64, 128, 256] + ([512] if big else [])
    t2_args = {"seed": cfg.seed, "Ts": Ts, "widths": [1, 2, 4], "reps": 8 if big else 3}
    t4_args = {"seed": cfg.seed + 1, "ps": [0.0, 0.2, 0.4, 0.6, 0.8, 0.95], "T": 16, "K": 4, "q": 0.15, "w": 2,
               "n": max(2000, cfg.mc_samples)}
    # every cell records the arguments it was computed with: a resume under others raises ConfigMismatchError
    if not run.has_cell("verify", key=cfg):
        run.save_cell("verify", verify.run_verify(cfg, progress=True), key=cfg)
    report = run.load_cell("verify", key=cfg)
    run.write_json("verify.json", report)
    if not run.has_cell("t2_curve", key=t2_args):
        run.save_cell("t2_curve", t2_band_curve(**t2_args), key=t2_args)
    if not run.has_cell("t4_curve", key=t4_args):
        run.save_cell("t4_curve", t4_projection_curve(**t4_args), key=t4_args)
    t2, t4 = run.load_cell("t2_curve", key=t2_args), run.load_cell("t4_curve", key=t4_args)
    measured = {r["statement"]: r.get("measured", {}) for r in report["statements"]}
    if measured.get("T6", {}).get("dropout_mc"):
        run.write_json("t6_dropout.json", measured["T6"]["dropout_mc"]["rows"])
    if measured.get("T7", {}).get("table"):
        run.write_json("t7_table.json", measured["T7"]["table"])
    run.write_json("t2_curve.json", t2)
    run.write_json("t4_curve.json", t4)
    theory_figures.draw_all(out_dir)
    md = _theory_summary(report, preset, t2, t4)
    atomic_write_text(out_dir / "summary.md", md)
    run.mark_done()
    return md


def t2_band_curve(seed: int, Ts: Sequence[int], widths: Sequence[int], reps: int) -> list[dict[str, Any]]:
    """Measured |<grad_S L, P^(w)>| / ||grad_S L||_F (mean and max over ``reps`` random cases) vs T."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for w in widths:
        for T in [T for T in Ts if T > 2 * w + 1]:  # for T <= 2w + 1 the band is (nearly) all-ones
            vals = []
            for _ in range(reps):
                case = ac.random_case(gen, T, d=4, heads=1, e=3, f="tanh", loss="mse")
                G = ac.score_gradient(case)[0]
                vals.append(abs(float((G * ag.band_pattern(T, w)).sum())) / float(G.norm()))
            rows.append({"w": w, "T": T, "mean_ratio": sum(vals) / len(vals), "max_ratio": max(vals), "bound": ag.band_relative_bound(T, w)})
    return rows


def t4_projection_curve(seed: int, ps: Sequence[float], T: int, K: int, q: float, w: int, n: int) -> list[dict[str, Any]]:
    """Closed form vs Monte Carlo (linearised loss, and cross-entropy at beta = 1) of E<D, band> vs p."""
    gen = torch.Generator().manual_seed(seed)
    P = ag.band_pattern(T, w, diagonal=False)
    C = torch.eye(K, dtype=torch.float64)
    rows = []
    for p in ps:
        lin, lin_se = am.monte_carlo_projection(P, p, q, C, n, gen, loss="linear")
        ce, ce_se = am.monte_carlo_projection(P, p, q, C, n, gen, loss="ce")
        rows.append({"p": p, "closed_form": am.expected_projection(P, p, q, C), "mc_linear": lin, "mc_linear_se": lin_se, "mc_ce": ce, "mc_ce_se": ce_se})
    return rows


def _theory_summary(report: dict[str, Any], preset: str, t2: list[dict], t4: list[dict]) -> str:
    lines = [
        "## Theory: attention-gradient theorems T1, T1', T2, T3, T3', T4, T5, T6, T7",
        "",
        f"`initlab theory verify` (preset `{preset}`, {report['config']['cases']} cases per statement, "
        f"seed {report['config']['seed']}, symbolic derivations {'on' if report['config']['symbolic'] else 'off'}): "
        f"**{'all PASS' if report['passed'] else 'FAIL'}** in {report['seconds']:.1f} s.",
        "",
        "| statement | cases | max abs err | max rel err | verdict |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for r in report["statements"]:
        lines.append(f"| {r['statement']} | {r['cases']} | {r['max_abs_error']:.2e} | {r['max_rel_error']:.2e} | {r['verdict']} |")
    fails = [f"- {r['statement']} failure: {f}" for r in report["statements"] for f in r["failures"][:5]]
    if fails:
        lines += [""] + fails
    lines += ["", "T2 band derivative relative to the gradient norm (mean over random cases; bound ||d||/sqrt(T)):", ""]
    for w in sorted({row["w"] for row in t2}):
        sub = sorted((row for row in t2 if row["w"] == w), key=lambda row: row["T"])
        a, b = sub[0], sub[-1]
        lines.append(f"- w = {a['w']}: T = {a['T']}: {a['mean_ratio']:.3g} (bound {a['bound']:.3g}); T = {b['T']}: {b['mean_ratio']:.3g} (bound {b['bound']:.3g})")
    lines += ["", "T4 expected descent projection on the off-diagonal band, copy path (closed form / MC linearised / MC cross-entropy at beta = 1):", ""]
    for row in t4:
        lines.append(f"- p = {row['p']:.2f}: {row['closed_form']:.4g} / {row['mc_linear']:.4g} ± {row['mc_linear_se']:.1g} / {row['mc_ce']:.4g} ± {row['mc_ce_se']:.1g}")
    lines += ["", "Figures: `t2_band_ratio.png`, `t4_projection_vs_p.png`, `t6_dropout_rate.png`, `t7_depth.png`; "
                  "full report: `verify.json`; statements, derivations and checks: docs/theory.md."]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# synthetic SPT
# ------------------------------------------------------------------------------------------------
def spt(out_dir: Path, preset: str = "default", overwrite: bool = False) -> str:
    """The ``spt`` stage: the synthetic self-pretraining experiments of ``preset``, figures, summary.

    Raises:
        ValueError: unknown ``preset``.
    """
    return run_unless_finished(out_dir, preset, overwrite, _spt)


def _spt(out_dir: Path, preset: str, overwrite: bool) -> str:
    return synthetic_spt.run(synthetic_spt.PRESETS[preset], out_dir, overwrite=overwrite, workers=None,
                             draw=spt_figures.make_figures)


# ------------------------------------------------------------------------------------------------
# score scale
# ------------------------------------------------------------------------------------------------
def score_scale_stage(out_dir: Path, preset: str = "default", overwrite: bool = False) -> str:
    """The ``score_scale`` stage: theory + Monte Carlo table for k in {1, ..., 32} at a few sigma.

    Writes JSON/CSV/config, a figure and ``summary.md``; each (sigma, k) cell is saved as it finishes.

    Raises:
        ValueError: unknown ``preset``.
    """
    return run_unless_finished(out_dir, preset, overwrite, _score_scale)


def _score_scale(out_dir: Path, preset: str, overwrite: bool) -> str:
    from tqdm.auto import tqdm

    cfg = score_scale.PRESETS[preset]
    run = RunDir(out_dir, overwrite=overwrite, config=cfg)  # a resumed folder of another config is refused
    rows = []
    for sigma, k in tqdm([(s, k) for s in cfg.sigmas for k in cfg.ks], desc="score-scale cells"):
        name = f"sigma={sigma:g}_k={k:g}"
        key = {"config": to_dict(cfg), "sigma": sigma, "k": k}  # a cell of another config is never reused
        if run.has_cell(name, key=key):
            rows.append(run.load_cell(name, key=key))
            continue
        th = score_scale.theory_row(cfg, sigma, k)
        mc = score_scale_mc.monte_carlo(cfg, sigma, k)
        row = {"sigma": sigma, "k": k, **{f"th_{n}": v for n, v in th.items() if n not in ("sigma", "k")},
               **{f"mc_{n}": v for n, v in mc.items()}}
        run.save_cell(name, row, key=key)
        rows.append(row)
    mech = score_scale.mechanism(cfg)
    run.write_json("score_scale.json", {"config": to_dict(cfg), "rows": rows, "mechanism": mech})
    run.write_csv("score_scale.csv", rows)
    fig = score_scale_figures.plot_theory_vs_mc(rows, out_dir / "score_scale_theory_vs_mc.png").name
    md = _score_scale_summary(cfg, rows, mech, fig)
    atomic_write_text(out_dir / "summary.md", md)
    run.mark_done()
    return md


def _score_scale_summary(cfg: score_scale.ScoreScaleConfig, rows: list[dict[str, Any]], mech: dict[str, Any], fig: str | None) -> str:
    lines = [
        "## MLM-head score scale: theory vs Monte Carlo",
        "",
        f"Gaussian logit model z ~ N(mu_b + mu_h/k, (sigma/k)^2), mu_b = {cfg.mu_b:g}, V = {cfg.vocab}, "
        f"L_q = {cfg.L_q}, L_d = {cfg.L_d}, B = {cfg.batch}, lambda_d = {cfg.lambda_d:g}, {cfg.pooling} pooling; "
        f"Monte Carlo: {cfg.mc_batches} batches of B queries and B documents over all V entries per cell. "
        "mu_h is the mean of the head's logit without its bias (the part divided by k). grad FLOPS / grad rank is the "
        "ratio of the FLOPS regulariser's gradient norm to the ranking loss's; it is inf in theory when the ranking "
        "gradient underflows to 0 and nan in the Monte Carlo when no dimension is active (both gradients exactly 0).",
        "",
        "| sigma | k | active dims d (th / MC) | E[a_d] (th / MC) | FLOPS reg d (th / MC) | score spread (th / MC) | "
        "grad FLOPS / grad rank (th / MC) | softmax entropy / ln B (MC) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        ratio_mc = r.get("mc_grad_flops", float("nan")) / r.get("mc_grad_rank", float("nan")) if r.get("mc_grad_rank") else float("nan")
        lines.append(
            f"| {r['sigma']:g} | {r['k']:g} | {r['th_active_dims_d']:.4g} / {r['mc_active_dims_d']:.4g} | "
            f"{r['th_Ea_d']:.4g} / {r['mc_Ea_d']:.4g} | {r['th_flops_reg_d']:.4g} / {r['mc_flops_reg_d']:.4g} | "
            f"{r['th_score_spread']:.4g} / {r['mc_score_spread']:.4g} | {r.get('th_grad_ratio', float('nan')):.3g} / "
            f"{ratio_mc:.3g} | {r['mc_softmax_entropy_ratio']:.3f} |"
        )
    lines += [
        "",
        "Mechanism (theory): " + score_scale.describe_mechanism(mech),
    ]
    if fig:
        lines += ["", f"![theory vs Monte Carlo]({fig})"]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# synthetic SPLADE
# ------------------------------------------------------------------------------------------------
def splade(out_dir: Path, preset: str = "default", overwrite: bool = False) -> str:
    """The ``splade`` stage: the synthetic SPLADE phase diagram of ``preset`` (four families, head scale s x
    rescaling k) and its figures; markdown summary.

    Raises:
        ValueError: unknown ``preset``.
    """
    out_dir = Path(out_dir)
    if finished_summary(out_dir, preset, overwrite) is None:
        splade_phase.run_phase(out_dir, splade_phase.PRESETS[preset], overwrite=overwrite, progress=False,
                               draw=synthetic_splade_figures.draw_phase)
    figs = sorted(p.name for p in out_dir.glob("splade_*.png"))
    return (out_dir / "summary.md").read_text() + "\n" + "\n".join(f"![{f}]({f})" for f in figs) + "\n"


# ------------------------------------------------------------------------------------------------
# LRA ListOps on CPU (optional)
# ------------------------------------------------------------------------------------------------
def lra_listops(out_dir: Path, preset: str = "default", overwrite: bool = False) -> str:
    """The preregistered CPU ListOps SPT-vs-scratch experiment (:mod:`initlab.realdata.lra.experiment`).

    ``quick``: the toy preset, seed 0, the same budget rule (seconds); ``default`` and ``full``: the
    preregistered preset and seeds (about 8 CPU-minutes). Not part of the default run.

    Raises:
        ValueError: unknown ``preset``.
    """
    _check_preset(preset)
    if preset == "quick":
        summary = lra_experiment.run_listops_plateau(out_dir, (0,), overwrite=overwrite, preset="toy")
    else:
        summary = lra_experiment.run_listops_plateau(out_dir, overwrite=overwrite)
    return lra_experiment.summary_markdown(summary, summary.get("seconds_this_call"))


#: stage name -> function; the default run, in order.
STAGES: dict[str, Callable[..., str]] = {"theory": theory, "spt": spt, "score_scale": score_scale_stage, "splade": splade}
#: stages run only when named in ``--only``.
OPTIONAL_STAGES: dict[str, Callable[..., str]] = {"lra_listops": lra_listops}


def _stage_time_line(name: str, rec: dict[str, Any] | None, was_done: bool) -> str:
    if rec is None:  # finished by a version of initlab that did not record stage times
        return f"_stage `{name}` was finished by an earlier run whose time was not recorded_"
    when = f", finished {rec['finished']} (resumed run: not redone)" if was_done else ""
    return f"_stage `{name}` took {rec['seconds']:.1f} s{when}_"


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


def run_reproduce(out: Path, preset: str = "default", stages: Sequence[str] | None = None, overwrite: bool = False) -> Path:
    """Run the selected stages into ``out`` and write ``out/report.md``; returns the report path.

    ``out/stage_times.json`` keeps the wall-clock seconds of each stage's real run, so a resumed call
    reports a finished stage with the time it took then.

    Raises:
        ValueError: unknown ``preset`` or stage name, or no stage.
        ConfigMismatchError: a requested stage was finished under another preset (see ``stage_times.json``).
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
    out = Path(out)
    sections = [
        "# initlab reproduce report",
        "",
        f"preset `{preset}`, stages {', '.join(stages)}; started {time.strftime('%Y-%m-%d %H:%M:%S')}.",
        "",
    ]
    # Wall-clock time of each stage's real run, kept across resumes: a stage finished by an earlier call
    # is reported with the time it took then, not the second it takes to read its summary.
    times_path = out / "stage_times.json"
    times: dict[str, Any] = json.loads(times_path.read_text()) if times_path.is_file() else {}
    _check_stage_presets(out, stages, times, preset, overwrite)
    out.mkdir(parents=True, exist_ok=True)
    for name in stages:
        print(f"\n=== initlab reproduce: stage {name} ===", flush=True)
        was_done = (out / name / "DONE").exists() and not overwrite
        if was_done:
            print(f"stage {name}: finished by an earlier call; its saved summary is reused (--overwrite redoes it)", flush=True)
        t0 = time.perf_counter()
        md = known[name](out / name, preset=preset, overwrite=overwrite)
        dt = time.perf_counter() - t0
        if not was_done:
            times[name] = {"seconds": dt, "finished": time.strftime("%Y-%m-%d %H:%M:%S"), "preset": preset}
            atomic_write_json(times_path, times)
        sections += [relink(md.rstrip(), name), "", _stage_time_line(name, times.get(name), was_done), ""]
        atomic_write_text(out / "report.md", "\n".join(sections) + "\n")
    report = out / "report.md"
    print(f"\nreport: {report}")
    return report
