"""initlab.realdata.splade.claims: the grid's one README row, held by the realdata SPLADE record."""

from __future__ import annotations

from pathlib import Path

from initlab.app.docgen import claims as docgen
from initlab.realdata import splade
from initlab.realdata.splade import claims

ROOT = Path(__file__).resolve().parents[3]


def test_the_grid_row_says_not_run_without_a_verdict_function():
    (row,) = claims.CLAIM_ROWS
    assert row.claim.startswith("The SPLADE grid: 7 backbones") and row.verdict is None and row.files == ()
    assert row.verdict_text.startswith("**not run** (needs GPUs") and row.headline_text.word == "**not run**"


def test_the_record_holds_the_row_right_after_the_synthetic_splade_rows():
    assert splade.EXPERIMENT.claims is claims and splade.EXPERIMENT.claim_rows() == claims.CLAIM_ROWS
    rows = docgen.all_claims()
    at = rows.index(claims.CLAIM_ROWS[0])
    assert rows[at - 1].claim.startswith("Rescaling a normal-norm head too far")
    assert "| The SPLADE grid: 7 backbones × k in {1, ..., 32} on MS MARCO, BEIR-13 | table of the seed | **not run** |" \
        in docgen.claims_table(ROOT / "docs" / "results")
