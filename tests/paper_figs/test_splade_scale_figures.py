"""The SPLADE-at-scale figure draws without matplotlib's "No artists with labels found to put in legend" warning
when a sweep has no NanoBEIR points (the quick preset evaluates no NanoBEIR set), and says why it is empty."""

from __future__ import annotations

import json
import warnings

from initlab.paper_figs.splade_scale_figures import plot_nanobeir_vs_flops


def test_a_sweep_without_nanobeir_points_draws_no_empty_legend(tmp_path):
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps([{"backbone": "tiny-bert", "k": 1.0, "nanobeir_flops": None, "nanobeir_nDCG@10": None},
                                   {"backbone": "tiny-bert", "k": 2.0, "nanobeir_flops": "nan", "nanobeir_nDCG@10": "nan"}]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        png = plot_nanobeir_vs_flops(summary, tmp_path / "f.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_points_still_get_their_legend(tmp_path):
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps([{"backbone": "bert-base-uncased", "k": k, "nanobeir_flops": f, "nanobeir_nDCG@10": n}
                                   for k, f, n in ((1.0, 3.0, 0.3), (2.0, 1.5, 0.35))]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert plot_nanobeir_vs_flops(summary, tmp_path / "f.png").exists()
