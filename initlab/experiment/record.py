"""The record every experiment package exposes to the roof: :class:`Experiment` (with its :class:`Command` entries).

Each experiment package defines one ``EXPERIMENT`` (in its ``__init__``); the roof loops over the records instead of
naming each experiment's pieces by hand. A record carries the experiment's claims -- its claims module, which holds
the verdict functions, their README rows (``CLAIM_ROWS``) and the declared claim families -- and what the roof needs
to find the rest: its preset table, its command-line entries, its ``initlab reproduce`` stages and its figure
functions, and its place in the reading order of the results. Its plan, cells and summary are not fields: they are
reached through its stages and commands, each a thin call of the experiment's own runner (which plans its cells,
runs them and writes the summary), so the roof never names them. The roof's claims table and page
(:mod:`initlab.app.docgen.claims`), the console script's command table (:mod:`initlab.app.cli`) and the reproduce
stage registry (:mod:`initlab.app.stages`) are built from the records.

Presets, commands, stages and figures are named as ``"package.module:NAME"`` strings, the console script's convention:
the console script reads every record to print its usage, and a name costs no import (the synthetic SPT presets
alone import torch). ``tests/test_architecture.py`` resolves every such string (the module exists, defines the
name, and the record's package may import it); :func:`resolve` imports one when it is used.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Mapping

from initlab.evidence.families import Family
from initlab.experiment.rows import Claim
from initlab.experiment.stage import Stage

__all__ = ["Command", "Experiment", "resolve"]

#: ``"initlab.package.module:name"``, a name to import when it is used
_NAMED = re.compile(r"initlab(?:\.[A-Za-z_]\w*)+:[A-Za-z_]\w*")


def _check_named(what: str, value: str) -> None:
    if not isinstance(value, str) or not _NAMED.fullmatch(value):
        raise ValueError(f"{what}: expected a name 'initlab.package.module:name', got {value!r}")


def resolve(target: str) -> Any:
    """The object ``"initlab.package.module:name"`` names (the module is imported now).

    Raises:
        ValueError: ``target`` is not of that form.
        ImportError: the module does not exist; AttributeError: it does not define the name.
    """
    _check_named("target", target)
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Command:
    """One ``initlab GROUP NAME`` subcommand: ``group`` and ``name`` (None: the group runs it directly), ``target``
    the ``"module:function"`` of its ``main(argv, prog=...) -> int``, ``help`` its one-line help in the usage.

    Raises:
        ValueError: an empty ``group`` or ``help``, an empty-string ``name``, or a ``target`` not of the form
            ``"initlab.package.module:function"``.
    """

    group: str
    name: str | None
    target: str
    help: str

    def __post_init__(self) -> None:
        if not self.group or self.name == "" or not self.help:
            raise ValueError(f"Command {self.group!r} {self.name!r}: expected a non-empty group, name (or None) and help")
        _check_named(f"Command {self.group} {self.name or ''}".rstrip() + ": target", self.target)


@dataclass(frozen=True)
class Experiment:
    """One experiment, as the roof sees it.

    ``name`` (e.g. ``synthetic_spt``); ``claims`` its claims module: one verdict function per claim and the
    claims' README rows as ``CLAIM_ROWS`` (a list of :class:`initlab.experiment.rows.Claim`), or None for an
    experiment whose claims another record's module holds or that decides none; ``families`` the claim families
    the claims page's legend names, as ``(label, families)`` pairs (each families tuple declared in a claims
    module); ``presets`` the ``"module:NAME"`` of its preset table (preset name -> frozen config; None: it has
    none); ``commands`` its ``initlab`` subcommands, in usage order; ``stages`` the ``"module:NAME"`` of each of
    its ``initlab reproduce`` stages, a :class:`initlab.experiment.stage.Stage` record (usually ``STAGE`` of the
    experiment's ``stage`` module), in run order; ``figures`` the ``"module:function"`` of each figure function
    that draws its saved results (:mod:`initlab.paper_figs`); ``order`` its place in the reading order of the
    results, lower first: ``initlab reproduce`` runs the stages in this order (the default stages, then the optional
    ones) and the claims tables show the claims in it (None: after every placed record; ties and None keep the
    order of :data:`initlab.app.experiments.EXPERIMENTS`, which is the console script's usage order).

    Raises:
        ValueError: an empty ``name``; a ``claims`` module without ``CLAIM_ROWS``; a ``presets``, ``stages`` or
            ``figures`` entry not of the form ``"initlab.package.module:name"``; an ``order`` that is not an int or
            None; a record that holds no claims, command or stage.
    """

    name: str
    claims: ModuleType | None = None
    families: tuple[tuple[str, tuple[Family, ...]], ...] = ()
    presets: str | None = None
    commands: tuple[Command, ...] = ()
    stages: tuple[str, ...] = ()
    figures: tuple[str, ...] = ()
    order: int | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("Experiment.name: expected a non-empty name")
        if self.claims is not None and not isinstance(getattr(self.claims, "CLAIM_ROWS", None), list):
            raise ValueError(f"Experiment {self.name!r}: claims: expected a module with a list CLAIM_ROWS, got "
                             f"{getattr(self.claims, '__name__', self.claims)!r}")
        if self.presets is not None:
            _check_named(f"Experiment {self.name!r}: presets", self.presets)
        for fig in self.figures:
            _check_named(f"Experiment {self.name!r}: figures", fig)
        for stage in self.stages:
            _check_named(f"Experiment {self.name!r}: stages", stage)
        if self.order is not None and (isinstance(self.order, bool) or not isinstance(self.order, int)):
            raise ValueError(f"Experiment {self.name!r}: order: expected an int or None, got {self.order!r}")
        if not all(isinstance(c, Command) for c in self.commands):
            raise ValueError(f"Experiment {self.name!r}: commands: expected Command records, got {self.commands!r}")
        if self.claims is None and not self.commands and not self.stages:
            raise ValueError(f"Experiment {self.name!r}: expected claims, a command or a reproduce stage; got none")

    def claim_rows(self) -> list[Claim]:
        """The README rows of this experiment's claims, read from its claims module now (so an added row counts);
        [] without a claims module."""
        return [] if self.claims is None else list(self.claims.CLAIM_ROWS)

    def stage_records(self) -> list[Stage]:
        """Its ``initlab reproduce`` stages, imported now, in its own order.

        Raises:
            ValueError: a ``stages`` entry names something that is not a :class:`initlab.experiment.stage.Stage`.
        """
        found = [resolve(target) for target in self.stages]
        bad = [t for t, s in zip(self.stages, found) if not isinstance(s, Stage)]
        if bad:
            raise ValueError(f"Experiment {self.name!r}: stages: expected names of Stage records, got {bad}")
        return found

    def preset_table(self) -> Mapping[str, Any]:
        """Its preset table (preset name -> config), imported now.

        Raises:
            ValueError: the experiment has no preset table.
        """
        if self.presets is None:
            raise ValueError(f"Experiment {self.name!r}: has no preset table")
        return resolve(self.presets)
