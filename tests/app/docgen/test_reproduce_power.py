"""The power table of ``initlab reproduce``'s default in docs/benchmarks.md: current, and computed from the saved runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from initlab.app.docgen import reproduce_power
from initlab.synthetic.splade.ood import stage as splade_stage
from initlab.synthetic.spt import config as spt_config

ROOT = Path(__file__).resolve().parents[3]


def test_the_page_holds_the_current_table():
    assert reproduce_power.main(["--results", str(ROOT / "docs" / "results"), "--page",
                                 str(ROOT / "docs" / "benchmarks.md"), "--check"]) == 0


def test_the_table_names_each_stage_seed_count_the_presets_run():
    table = reproduce_power.table_markdown(ROOT / "docs" / "results")
    assert f"`spt` {len(spt_config.PRESETS['default'].seeds)} (" in table
    assert f"`splade_in_domain` {len(splade_stage.stage_config('default').seeds)} (" in table
    rows = [r for r in table.splitlines() if r.startswith("| `")]
    assert len(rows) == 6 and sum("not planned" in r for r in rows) == 1


def test_a_stale_block_is_refused_and_rewritten(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(f"head\n{reproduce_power.BEGIN_MARK}\nSTALE-ROW\n{reproduce_power.END_MARK}\ntail\n", encoding="utf-8")
    args = ["--results", str(ROOT / "docs" / "results"), "--page", str(page)]
    assert reproduce_power.main(args + ["--check"]) == 1
    assert reproduce_power.main(args) == 0 and reproduce_power.main(args + ["--check"]) == 0
    assert page.read_text(encoding="utf-8").startswith("head\n") and "STALE-ROW" not in page.read_text(encoding="utf-8")
    page.write_text("no block", encoding="utf-8")
    with pytest.raises(ValueError, match="expected one"):
        reproduce_power.main(args)
