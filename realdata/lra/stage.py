"""The optional ``lra_listops`` stage of ``initlab reproduce``: the preregistered CPU ListOps SPT-vs-scratch
experiment (:data:`STAGE`; run only when named in ``--only``)."""

from __future__ import annotations

from pathlib import Path

from initlab.experiment.stage import Stage, check_preset
from initlab.realdata.lra import experiment as lra_experiment

__all__ = ["lra_listops", "estimate", "STAGE"]


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


def estimate(out_dir: Path, preset: str, workers: int) -> tuple[float, float]:
    """``(expected, at most)`` reference seconds of the stage's remaining work in ``out_dir`` (nothing is created
    or checked)."""
    return lra_experiment.expected_seconds(out_dir, toy=preset == "quick")


#: the stage's record (:class:`initlab.experiment.stage.Stage`); it decides no claim here
STAGE = Stage("lra_listops", lra_listops, estimate, optional=True)
