"""The ``splade`` stage of ``initlab reproduce``: the synthetic SPLADE phase diagram of a preset and its figures
(:data:`STAGE`)."""

from __future__ import annotations

from pathlib import Path

from initlab.config import derive, from_dict
from initlab.evidence.rules import Verdict
from initlab.experiment.stage import Stage, StageClaim, check_preset, finished_summary
from initlab.paper_figs import synthetic_splade_phase_figures
from initlab.synthetic.splade import claims as splade_claims
from initlab.synthetic.splade.phase import runner as splade_phase
from initlab.textio import read_json, read_text

__all__ = ["splade", "estimate", "stage_claims", "stage_config", "STAGE"]


def stage_config(preset: str) -> splade_phase.PhaseConfig:
    """The config the stage runs for ``preset``: the preset's, on the fused SPLADE head (``engine = "fused"``: the same
    vectors to rounding without the ``(B, T, V)`` logits, :mod:`initlab.mlmhead.fused`). The presets themselves keep
    their engine, so ``initlab synthetic splade --preset P`` and the saved runs keep their cell keys.

    Raises:
        ValueError: unknown ``preset``.
    """
    check_preset(preset)
    return derive(splade_phase.PRESETS[preset], engine="fused")


def splade(out_dir: Path, preset: str = "default", overwrite: bool = False, *, workers: int | None = None,
           scheduler: str | None = None) -> str:
    """The ``splade`` stage: the synthetic SPLADE phase diagram of ``preset`` (four families, head scale s x
    rescaling k) on the fused head (:func:`stage_config`) and its figures; markdown summary, with the collapsed cells said once, expected or not
    (:func:`initlab.synthetic.splade.phase.runner.collapse_note`).

    Raises:
        ValueError: unknown ``preset``.
    """
    out_dir = Path(out_dir)
    cfg = stage_config(preset)
    if finished_summary(out_dir, preset, overwrite) is None:
        splade_phase.run_phase(out_dir, cfg, overwrite=overwrite, progress=True, workers=workers, scheduler=scheduler,
                               draw=synthetic_splade_phase_figures.draw_phase)
    figs = sorted(p.name for p in out_dir.glob("splade_*.png"))
    md = read_text(out_dir / "summary.md") + "\n" + "\n".join(f"![{f}]({f})" for f in figs) + "\n"
    note = splade_phase.collapse_note(out_dir, cfg)
    if note:
        md += "\n**Collapsed cells** (printed once on the console):\n\n```\n" + note + "\n```\n"
    return md


def stage_claims(out_dir: Path) -> list[StageClaim]:
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


def estimate(out_dir: Path, preset: str, workers: int) -> tuple[float, float]:
    """``(expected, at most)`` reference seconds of the stage's remaining work in ``out_dir`` (nothing is created
    or checked)."""
    return splade_phase.expected_seconds(out_dir, stage_config(preset), workers)


#: the stage's record (:class:`initlab.experiment.stage.Stage`): ``initlab reproduce``'s ``default`` run skips it (it
#: decides the synthetic SPLADE's head-norm effect where it shows, in domain: :mod:`initlab.synthetic.splade.ood.stage`)
STAGE = Stage("splade", splade, estimate, claims=stage_claims,
              decides="`initlab synthetic splade --preset full`")
