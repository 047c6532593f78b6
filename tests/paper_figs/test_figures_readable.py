"""The SPLADE figures read on their own: print resolution, axis labels, legends outside the data.

Drawn from small hand-written result files (the figures only read saved results).
"""

from __future__ import annotations

import csv
import json

import pytest
from PIL import Image

from initlab.paper_figs import score_scale_figures, splade_scale_figures


def _dpi(path) -> float:
    return min(Image.open(path).info["dpi"])


@pytest.fixture()
def sweep(tmp_path):
    rows = [{"backbone": bb, "k": k, "nanobeir_flops": 30.0 / k + i, "nanobeir_nDCG@10": 0.3 + 0.01 * k + 0.1 * i}
            for i, bb in enumerate(["bert-base-uncased", "answerdotai/ModernBERT-base"]) for k in (1, 2, 4, 8, 16, 32)]
    (tmp_path / "summary.json").write_text(json.dumps(rows))
    cell = tmp_path / "bert__k1"
    cell.mkdir()
    with open(cell / "loss_curve.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["step", "loss", "base_loss", "query_regularizer_loss", "document_regularizer_loss"])
        for s in range(0, 100, 10):
            w.writerow([s, 3.0 - s / 50 + 0.2, 3.0 - s / 50, 0.05, 0.15])
    return tmp_path


def test_splade_scale_figures_are_print_resolution(sweep):
    assert splade_scale_figures.main([str(sweep)]) == 0
    for png in (sweep / "nanobeir_vs_flops.png", sweep / "bert__k1" / "loss_curve.png"):
        assert _dpi(png) >= 199, png


def test_score_scale_figure_is_print_resolution_with_labelled_panels(tmp_path):
    rows = [{"sigma": s, "k": k, **{f"{p}_{key}": (s / k) + 0.1 for p in ("th", "mc") for key, _, _ in score_scale_figures.PANELS},
             **{f"mc_{key}_se": 0.01 for key, _, _ in score_scale_figures.PANELS}} for s in (1, 4) for k in (1, 2, 4)]
    out = score_scale_figures.plot_theory_vs_mc(rows, tmp_path / "f.png")
    assert _dpi(out) >= 199
    assert all(title and ylabel for _, title, ylabel in score_scale_figures.PANELS)
