"""The optional T6 / T7 figures of initlab.paper_figs.theory_figures draw from saved JSON only."""

from __future__ import annotations

import json

import pytest

from initlab.paper_figs import theory_figures as tf


def test_t6_t7_figures_from_saved_rows(tmp_path):
    t6 = [{"n": 100, "blind_fraction": 0.03, "per_mask_median": 0.27}, {"n": 1600, "blind_fraction": 0.007, "per_mask_median": 0.28}]
    t7 = [{"label": "depth 2, residual, FFN", "min": 0.2, "median": 0.6, "max": 0.7}, {"label": "depth 2, no residual", "min": 0.0, "median": 0.0, "max": 0.0}]
    assert tf.plot_t6(t6, tmp_path / "a.png").stat().st_size > 1000
    assert tf.plot_t7(t7, tmp_path / "b.png").stat().st_size > 1000
    (tmp_path / "t6_dropout.json").write_text(json.dumps(t6))
    (tmp_path / "t7_table.json").write_text(json.dumps(t7))
    with pytest.raises(FileNotFoundError, match="t2_curve.json"):  # the T2 / T4 curves are still required
        tf.draw_all(tmp_path)
