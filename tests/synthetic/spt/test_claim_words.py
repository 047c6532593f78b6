"""The words the SPT claims read with: a predicted negative never as a bare "not reproduced", a sensitivity run
never with a confirmatory word, late cells said where a row needs them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from initlab.evidence.rules import INCONCLUSIVE, NOT, REPRODUCED, Verdict
from initlab.synthetic.spt import claims as sc

ROOT = Path(__file__).resolve().parents[3]
CONFIRMATORY = re.compile(r"\b(reproduced|partly|confirmed)\b", re.IGNORECASE)


@pytest.mark.parametrize("claim_id", sorted(sc.PREDICTED_NEGATIVE))
def test_a_predicted_negative_reads_as_the_prediction(claim_id):
    met = sc.claim_word(claim_id, Verdict(NOT, "gain"))
    assert "as predicted" in met and "not reproduced" not in met
    assert sc.claim_word(claim_id, Verdict(REPRODUCED, "gain")) == "**reproduced, against the prediction**"
    assert sc.claim_word(claim_id, Verdict(INCONCLUSIVE, "gain")) == "**inconclusive**"
    assert sc.claim_word("spt_gain", Verdict(NOT, "gain")) == "**not reproduced**"  # a positive claim that failed


def _row(path: Path, title: str) -> str:
    return next(ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.startswith(f"| {title}"))


def test_no_generated_row_shows_a_predicted_negative_as_a_bare_not_reproduced():
    """The interventions row (README and docs/claims.md, generated from docs/results) holds the predicted negatives:
    wherever one of them reads "not reproduced", it says so as the prediction held."""
    title = "Interventions on the explanation"
    for page in (ROOT / "README.md", ROOT / "docs" / "claims.md"):
        row = _row(page, title)
        assert "**not reproduced**" not in row, page
        assert "as predicted" in row, page


def _sensitivity_cells(text: str) -> list[str]:
    """The cells of the causal-tuned column of docs/synthetic_spt.md's sensitivity table."""
    lines = text.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("| claim |") and "causal-tuned" in ln)
    col = [c.strip() for c in lines[head].strip("|").split("|")].index(
        next(c.strip() for c in lines[head].strip("|").split("|") if "causal-tuned" in c))
    cells = []
    for ln in lines[head + 2:]:
        if not ln.startswith("|"):
            break
        cells.append([c.strip() for c in ln.strip("|").split("|")][col])
    return cells


def test_the_sensitivity_run_carries_no_confirmatory_word():
    text = (ROOT / "docs" / "synthetic_spt.md").read_text(encoding="utf-8")
    cells = _sensitivity_cells(text)
    assert len(cells) == 5
    bad = [c for c in cells if CONFIRMATORY.search(c)]
    assert not bad, bad
    for ln in text.splitlines():  # nor anywhere a line speaks of it
        if "sensitivity" in ln.lower():
            assert not re.search(r"\*\*(reproduced|not reproduced|partly)\*\*", ln), ln


def test_the_check_catches_a_confirmatory_word():
    table = ("| claim | causal run | causal-tuned (sensitivity) | x |\n| --- | --- | --- | --- |\n"
             "| a | **reproduced** | **reproduced** +8.9 | y |\n")
    assert CONFIRMATORY.search(_sensitivity_cells(table)[0])


def test_late_cells_are_named_in_the_row_that_needs_them():
    row = _row(ROOT / "docs" / "claims.md", "Interventions on the explanation")
    assert "late cells: lastpool_scratch of seeds 8273, 8274 finished after the preregistered deadline" in row


def test_an_exploratory_column_carries_no_confirmatory_word():
    """A run saved with an empty preregistration (exploratory) reads "consistent", never "reproduced" or "partly",
    in the side-by-side table; a preregistered run beside it keeps its words."""
    import json

    def load(name):
        return json.loads((ROOT / "docs" / "results" / name / "summary.json").read_text(encoding="utf-8"))

    explore, full = load("synthetic_spt_explore"), load("synthetic_spt_full")
    assert explore["preregistration"] == "" and full["preregistration"]
    table = sc.spt_comparison_table([("explore", explore), ("full", full)])
    rows = [ln.split(" | ") for ln in table.splitlines()[2:]]
    explore_cells = [r[1] for r in rows]
    assert not any(CONFIRMATORY.search(c) for c in explore_cells)
    assert any("**consistent**" in c for c in explore_cells)
    assert any(CONFIRMATORY.search(r[2]) for r in rows)  # the preregistered column keeps its words
    assert "explore, exploratory" in table.splitlines()[0]
    page = (ROOT / "docs" / "synthetic_spt.md").read_text(encoding="utf-8")
    three = sc.spt_comparison_table([("earlier", load("synthetic_spt_earlier")), ("explore", explore), ("full", full)])
    assert three in page  # the page shows the table as its command prints it
