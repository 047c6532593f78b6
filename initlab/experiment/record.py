"""The record every experiment package exposes to the roof: :class:`Experiment`.

Each experiment package defines one ``EXPERIMENT`` (in its ``__init__``); the roof loops over the records instead
of naming each experiment's pieces by hand. Today a record carries the experiment's claims -- its claims module,
which holds the verdict functions, their README rows (``CLAIM_ROWS``) and the declared claim families -- and the
roof's claims table and page (:mod:`initlab.app.docgen.claims`) are built from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from initlab.evidence.families import Family
from initlab.evidence.rows import Claim

__all__ = ["Experiment"]


@dataclass(frozen=True)
class Experiment:
    """One experiment, as the roof sees it.

    ``name`` (e.g. ``synthetic_spt``); ``claims`` its claims module: one verdict function per claim and the
    claims' README rows as ``CLAIM_ROWS`` (a list of :class:`initlab.evidence.rows.Claim`); ``families`` the
    claim families the claims page's legend names, as ``(label, families)`` pairs (each families tuple declared in
    the claims module).

    Raises:
        ValueError: an empty ``name``, or a ``claims`` module without ``CLAIM_ROWS``.
    """

    name: str
    claims: ModuleType
    families: tuple[tuple[str, tuple[Family, ...]], ...] = ()

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("Experiment.name: expected a non-empty name")
        if not isinstance(getattr(self.claims, "CLAIM_ROWS", None), list):
            raise ValueError(f"Experiment {self.name!r}: claims: expected a module with a list CLAIM_ROWS, got "
                             f"{getattr(self.claims, '__name__', self.claims)!r}")

    def claim_rows(self) -> list[Claim]:
        """The README rows of this experiment's claims, read from its claims module now (so an added row counts)."""
        return list(self.claims.CLAIM_ROWS)
