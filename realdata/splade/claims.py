"""The SPLADE-at-scale experiment's claims: its one README row, the backbone x k grid, not run.

Imported as ``initlab.realdata.splade.claims``. The grid (seven backbones x k on MS MARCO and BEIR-13) needs GPUs
this project did not have, so its row carries that reason instead of a verdict function
(:class:`initlab.experiment.rows.Claim` with ``verdict_text``), rendered by :mod:`initlab.app.docgen.claims`.
"""

from __future__ import annotations

from initlab.experiment.rows import Claim, Headline

__all__ = ["CLAIM_ROWS"]

CLAIM_ROWS: list[Claim] = [
    Claim("The SPLADE grid: 7 backbones × k in {1, ..., 32} on MS MARCO, BEIR-13", "table of the seed",
          "[SPLADE at scale](docs/splade_at_scale.md)",
          verdict_text="**not run** (needs GPUs this project did not have); pipeline tested end to end on fixtures",
          headline_text=Headline("**not run**", "needs GPUs; pipeline tested on fixtures")),
]
