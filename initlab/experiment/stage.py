"""What every ``initlab reproduce`` stage shares: the reproduce presets, the finished-folder rule, and the records
:class:`Stage` (one stage: its run, cost-model and verdict functions) and :class:`StageClaim` (one claim as a finished
stage decides it).

The stages themselves live with their experiments; the roof (:mod:`initlab.app.stages`) runs them. Presets, the one
vocabulary of every CLI: ``quick`` (a smoke test: minutes on a laptop CPU), ``default`` (the CPU reproduction),
``full`` (larger grids and more seeds, still CPU).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from initlab.evidence.rules import Verdict
from initlab.runs import holds_run_folder
from initlab.textio import read_text

__all__ = ["PRESETS", "check_preset", "finished_summary", "run_unless_finished", "StageClaim", "Stage"]

PRESETS = ("quick", "default", "full")


def check_preset(preset: str) -> None:
    """Raises ValueError unless ``preset`` is one of :data:`PRESETS`."""
    if preset not in PRESETS:
        raise ValueError(f"preset: expected one of {list(PRESETS)}, got {preset!r}")


def finished_summary(out_dir: Path, preset: str, overwrite: bool) -> str | None:
    """Check ``preset``; then the saved ``summary.md`` of a finished stage folder, or None if it must (re)run.

    Raises:
        ValueError: unknown ``preset``.
    """
    check_preset(preset)
    out_dir = Path(out_dir)
    if overwrite or not (out_dir / "DONE").exists() or not (out_dir / "summary.md").exists():
        return None
    return read_text(out_dir / "summary.md")


@holds_run_folder("out_dir")
def run_unless_finished(out_dir: Path, preset: str, overwrite: bool, body: Callable[..., str], **kwargs: Any) -> str:
    """The saved summary of a finished stage folder (see :func:`finished_summary`), else
    ``body(out_dir, preset, overwrite, **kwargs)``.

    Raises:
        ValueError: unknown ``preset``.
    """
    done = finished_summary(out_dir, preset, overwrite)
    if done is not None:
        return done
    return body(Path(out_dir), preset, overwrite, **kwargs)

@dataclass(frozen=True)
class StageClaim:
    """One claim as a finished stage decides it: its ``title``, the :class:`~initlab.evidence.rules.Verdict`
    (recomputed from the stage's saved raw numbers, with the words its own report shows), the ``unit`` its numbers
    are printed in (:func:`initlab.experiment.text.number`), what ``verdict.n`` counts (``counted``), and for an
    all-of claim whose parts differ in unit, each part's (``part_units``; empty: ``unit`` for every part)."""

    title: str
    verdict: Verdict
    unit: str = "points"
    counted: str = "seed"
    part_units: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stage:
    """One stage of ``initlab reproduce``.

    ``run(out_dir, preset="default", overwrite=False, *, workers=None, scheduler=None) -> markdown`` runs it into
    ``out_dir``; ``estimate(out_dir, preset, workers) -> (expected, at most)`` gives the reference seconds of its
    remaining work from the experiment's own cost model (nothing is created or checked; None: no estimate, the
    stage is left out of the printed duration); ``optional`` stages run only when named in ``--only``;
    ``claims(out_dir) -> [StageClaim]`` reads a finished stage's claims for the closing verdict summary (None: the
    stage decides no claim); a default stage runs in every ``initlab reproduce`` run whose run file does not skip it;
    ``decides`` the command that decides the claims this stage's
    ``default`` leaves undecided (the console's closing line names it); ``confirmed(results) -> {title: Verdict}``
    the words the preregistered runs behind this stage's claims gave them, recomputed (Holm-corrected, as the
    README shows them) from the saved runs under ``results`` (docs/results), keyed by the titles ``claims`` uses
    (None: nothing to compare with).
    """

    name: str
    run: Callable[..., str]
    estimate: Callable[[Path, str, int], tuple[float, float]] | None = None
    optional: bool = False
    claims: Callable[[Path], list[StageClaim]] | None = None
    decides: str = ""
    confirmed: Callable[[Path], dict[str, Verdict]] | None = None
