"""Every experiment's record (:class:`initlab.experiment.record.Experiment`), in one place: the roof loops over these.

:data:`EXPERIMENTS` is the list of records in the console script's usage order; the console script's command table
(:func:`initlab.app.cli.command_table`) is built from it. :func:`reading_order` sorts them by each record's
``order``: the one order of the reproduce stages (:data:`initlab.app.stages.REGISTRY`) and of the claims tables
(:data:`initlab.app.docgen.claims.EXPERIMENTS`). A new experiment is its package's ``EXPERIMENT`` and one entry here.
"""

from __future__ import annotations

from typing import Sequence

from initlab.experiment.record import Experiment
from initlab.realdata import lra
from initlab.realdata import splade as realdata_splade
from initlab.synthetic import diagnose, spt
from initlab.synthetic.splade import ood as splade_ood
from initlab.synthetic.splade import phase as splade_phase
from initlab.theorycheck import score_scale, verify

__all__ = ["EXPERIMENTS", "by_name", "reading_order"]

#: every experiment's record, in the console script's usage order
EXPERIMENTS: tuple[Experiment, ...] = (verify.EXPERIMENT, score_scale.EXPERIMENT, spt.EXPERIMENT, splade_phase.EXPERIMENT,
                                       splade_ood.EXPERIMENT, realdata_splade.EXPERIMENT, lra.EXPERIMENT,
                                       diagnose.EXPERIMENT)


def reading_order(records: Sequence[Experiment] = EXPERIMENTS) -> tuple[Experiment, ...]:
    """``records`` sorted by their ``order`` (:attr:`initlab.experiment.record.Experiment.order`), lower first; records
    without one come after every placed record; ties keep the order of ``records``."""
    return tuple(sorted(records, key=lambda e: (e.order is None, e.order or 0)))


def by_name(name: str) -> Experiment:
    """The record named ``name``.

    Raises:
        KeyError: no record has that name (the message lists the names).
    """
    for exp in EXPERIMENTS:
        if exp.name == name:
            return exp
    raise KeyError(f"experiment {name!r}: expected one of {[e.name for e in EXPERIMENTS]}")
