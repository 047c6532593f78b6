"""``python -m initlab.app.docgen.mlmhead_doc``: docs/mlmhead.md's inspect/rescale example is the real output."""

from __future__ import annotations

from pathlib import Path

import pytest

from initlab.app.docgen import mlmhead_doc as D

ROOT = Path(__file__).resolve().parents[3]


def test_docs_mlmhead_example_is_the_real_output():
    """Regenerate with `python -m initlab.app.docgen.mlmhead_doc --docs docs/mlmhead.md` (numbers compared to 2 %)."""
    page = (ROOT / "docs" / "mlmhead.md").read_text(encoding="utf-8")
    committed, fresh = D.current_block(page), D.render_example()
    assert D.same_output(committed, fresh), (
        "docs/mlmhead.md's inspect example is stale: run python -m initlab.app.docgen.mlmhead_doc --docs docs/mlmhead.md\n"
        + fresh)
    for cmd in D.COMMANDS:
        assert f"$ {cmd}\n" in committed


def test_same_output_tolerates_rounding_only():
    assert D.same_output("k 1 | 0.0972 | 8.6e-08", "k 1 | 0.0973 | 9.1e-08")  # < 2 %; tiny values within 1e-5
    assert not D.same_output("k 1 | 0.0972", "k 1 | 0.0872")
    assert not D.same_output("COLLAPSED at k = 1", "recommended k = 1")
    assert not D.same_output("a 1 b", "a 1 b 2")


def test_replace_block_needs_one_pair_of_markers(tmp_path):
    page = f"intro\n{D.BEGIN}\nold\n{D.END}\nrest\n"
    assert D.replace_block(page, "new\n") == f"intro\n{D.BEGIN}\nnew\n{D.END}\nrest\n"
    assert D.current_block(page) == "old\n"
    with pytest.raises(ValueError, match="expected one"):
        D.replace_block("no markers", "x")
    p = tmp_path / "page.md"
    p.write_text("no markers\n")
    with pytest.raises(SystemExit):
        D.main(["--docs", str(p), "--check"])
