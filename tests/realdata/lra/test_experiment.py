"""The preregistered CPU ListOps experiment: verdict rules and a toy end-to-end run."""

from __future__ import annotations

import json

import pytest

from initlab.realdata.lra import experiment as E
from initlab.realdata.lra.config import PRESETS, LISTOPS_PLATEAU_SEEDS


def test_preregistered_rule_is_what_the_docs_say():
    c = PRESETS["cpu-listops-plateau"]
    assert (c.spt_patience, c.spt_min_rel_gain, c.spt_epochs, c.patience, c.epochs) == (5, 0.005, 100, 8, 50)
    assert LISTOPS_PLATEAU_SEEDS == (10, 11, 12) and c.listops_gen.seed == 1 and c.listops_gen.n_val == 1000


@pytest.mark.parametrize("spt, scratch, want", [
    ([0.40, 0.41, 0.42], [0.37, 0.38, 0.39], "SPT gain"),
    ([0.40, 0.41, 0.36], [0.37, 0.38, 0.37], "no difference detected"),  # +1.7 points, one loss
    ([0.30, 0.31, 0.32], [0.37, 0.38, 0.39], "SPT loss"),
    ([0.50, 0.38, 0.38], [0.37, 0.38, 0.39], "no difference detected"),  # big mean, but not every seed
])
def test_verdict(spt, scratch, want):
    assert E.verdict(spt, scratch) == want


def test_toy_experiment_end_to_end(tmp_path):
    s = E.run_listops_plateau(tmp_path / "x", (0,), preset="toy")
    assert s["seeds"] == [0] and s["verdict"] in ("SPT gain", "SPT loss", "no difference detected")
    row = s["per_seed"][0]
    assert 0 < row["prox_init_spt"] <= 1 and 0 < row["uniform_proximity"] <= 1 and row["spt_epochs_run"] == 2
    assert json.loads((tmp_path / "x" / "summary.json").read_text())["verdict"] == s["verdict"]
    assert "Verdict" in (tmp_path / "x" / "summary.md").read_text() and (tmp_path / "x" / "listops_plateau.png").is_file()
