"""Every experiment's record (:class:`initlab.experiment.record.Experiment`), in one place: the roof loops over these.

:data:`EXPERIMENTS` is the list of records in the console script's usage order; the console script's command table
(:func:`initlab.app.cli.command_table`) is built from it. A new experiment is its package's ``EXPERIMENT`` and
one entry here.
"""

from __future__ import annotations

from initlab.experiment.record import Experiment
from initlab.realdata import lra
from initlab.realdata import splade as realdata_splade
from initlab.synthetic import diagnose, splade, spt
from initlab.synthetic.splade import ood as splade_ood
from initlab.theorycheck import score_scale, verify

__all__ = ["EXPERIMENTS", "by_name"]

#: every experiment's record, in the console script's usage order
EXPERIMENTS: tuple[Experiment, ...] = (verify.EXPERIMENT, score_scale.EXPERIMENT, spt.EXPERIMENT, splade.EXPERIMENT,
                                       splade_ood.EXPERIMENT, realdata_splade.EXPERIMENT, lra.EXPERIMENT,
                                       diagnose.EXPERIMENT)


def by_name(name: str) -> Experiment:
    """The record named ``name``.

    Raises:
        KeyError: no record has that name (the message lists the names).
    """
    for exp in EXPERIMENTS:
        if exp.name == name:
            return exp
    raise KeyError(f"experiment {name!r}: expected one of {[e.name for e in EXPERIMENTS]}")
