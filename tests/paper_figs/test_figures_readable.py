"""Every figure reads on its own: print resolution, a colour bar on every heatmap and attention map, axis
labels, legends that cover no data, tick labels and annotations that do not overlap, readable fonts.

Each figure is drawn from a small hand-written result folder (the figures only read saved results) and
checked by :mod:`figs_checks`; the checks themselves are shown to catch each defect on a bad figure.
"""

from __future__ import annotations

import json

import pytest
from PIL import Image

from initlab.paper_figs import (common, lra_figures, score_scale_figures, splade_scale_figures, spt_figures,
                                synthetic_splade_phase_figures, theory_figures)

import figs_saved_results as fx
from figs_checks import all_problems, colorbar_problems, label_problems, legend_problems, overlap_problems


def _dpi(path) -> float:
    return min(Image.open(path).info["dpi"])


def _spt(tmp):
    return spt_figures.make_figures(fx.write_spt_run(tmp / "spt"))


def _theory(tmp):
    return theory_figures.draw_all(fx.write_theory(tmp / "theory"))


def _score_scale(tmp):
    return [score_scale_figures.plot_theory_vs_mc(fx.score_scale_rows(), tmp / "score_scale_theory_vs_mc.png")]


def _phase(tmp):
    return synthetic_splade_phase_figures.draw_phase(fx.write_phase(tmp / "phase"))


def _lra(tmp):
    d = fx.write_lra(tmp / "lra")
    data = json.loads((d / "results.json").read_text())
    return [lra_figures.plot_sweep(data["rows"], d / "hybrid.png", title="hybrid"),
            lra_figures.plot_listops_plateau(json.loads((d / "summary.json").read_text()), d / "listops_plateau.png")]


def _splade_scale(tmp):
    d = fx.write_splade_scale(tmp / "splade")
    return [splade_scale_figures.plot_nanobeir_vs_flops(d / "summary.json", d / "nanobeir_vs_flops.png"),
            splade_scale_figures.plot_loss_curve(d / "bert__k1" / "loss_curve.csv", d / "loss.png", title="bert, k = 1")]


DRAWERS = {"spt": (_spt, 5), "theory": (_theory, 4), "score_scale": (_score_scale, 1), "phase": (_phase, 7),
           "lra": (_lra, 2), "splade_scale": (_splade_scale, 2)}


@pytest.mark.parametrize("name", sorted(DRAWERS))
def test_every_figure_reads_on_its_own(name, tmp_path, kept_figures):
    draw, n_figures = DRAWERS[name]
    paths = draw(tmp_path)
    pngs = [p for p in paths if p.suffix == ".png"]
    assert len(pngs) == n_figures and len(kept_figures) == n_figures, (paths, len(kept_figures))
    for png in pngs:
        assert _dpi(png) >= 199, png
    if name == "spt":  # the SPT figures also come as vector PDFs
        pdfs = [p for p in paths if p.suffix == ".pdf"]
        assert sorted(p.stem for p in pdfs) == sorted(p.stem for p in pngs)
        assert all(p.read_bytes().startswith(b"%PDF") for p in pdfs)
    problems = {str(png.name): all_problems(fig) for png, fig in zip(pngs, kept_figures)}
    assert not any(problems.values()), {k: v for k, v in problems.items() if v}


def test_spt_attention_maps_have_one_colour_bar_per_panel_and_key_query_axes(tmp_path, kept_figures):
    run = fx.write_spt_run(tmp_path / "spt")
    spt_figures.attention_maps_figure(run, json.loads((run / "metrics.json").read_text()))
    fig, = kept_figures
    maps = [ax for ax in fig.axes if ax.images]
    assert len(maps) == 7  # SPT epochs 1, 2 and the stopping rule's checkpoint; scratch and SPT start/end
    assert all(ax.images[0].colorbar is not None for ax in maps)
    assert all(ax.get_xlabel() == "key position j" and ax.get_ylabel() == "query position i" for ax in maps)
    rule = [r["rule_epoch"] for r in json.loads((run / "metrics.json").read_text())["summary"]["spt_runs"]
            if (r["source"], r["variant"], r["depth"]) == ("local", "full", 1)][0]
    assert any(f"stopping rule's checkpoint (epoch {rule})" in ax.get_title() for ax in maps)


def test_conditions_keep_their_colour_across_figures():
    assert common.condition_color("scratch") == common.condition_color("depth2_scratch") == common.condition_color("frozen_attn")
    assert common.condition_color("spt") == common.condition_color("spt_e50") != common.condition_color("scratch")
    assert common.family_color("answerdotai/ModernBERT-base") == common.FAMILY_COLORS["modernbert"]
    assert common.family_color("FacebookAI/roberta-base") == common.FAMILY_COLORS["roberta"]  # not bert's
    assert common.family_color("bert-base-uncased") == common.FAMILY_COLORS["bert"]
    assert common.family_color("gpt2") is None


def test_log_tick_labels_are_plain_numbers():
    assert [common.plain_number(v) for v in (20.0, 0.05, 1.0, 300.0)] == ["20", "0.05", "1", "300"]
    assert common.plain_number(1e-6) == "$10^{-6}$" and common.plain_number(1e6) == "$10^{6}$"


# --- the checks catch each defect --------------------------------------------------------------------------
def _bad_figure():
    plt = common.pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(6, 3))
    a.imshow([[0.0, 1.0], [1.0, 0.0]])  # no colour bar, no labels
    b.plot([0, 1, 2], [0, 1, 2], "o", label="points")
    b.legend(loc="center")  # over the middle point
    b.set_xticks([1.0, 1.01], ["a long tick label", "another long one"])  # on top of each other
    b.text(0.5, 0.5, "note one")
    b.text(0.5, 0.5, "note two")
    fig.canvas.draw()
    return fig


def test_the_checks_catch_each_defect():
    fig = _bad_figure()
    assert any("without a colour bar" in p for p in colorbar_problems(fig))
    assert any("legend covers 1 data point" in p for p in legend_problems(fig))
    problems = overlap_problems(fig)
    assert any("x tick labels" in p for p in problems) and any("texts" in p for p in problems)
    assert any("no x label" in p for p in label_problems(fig))
    common.pyplot().close(fig)


def test_label_points_avoids_markers_and_other_labels():
    plt = common.pyplot()
    fig, ax = plt.subplots(figsize=(3, 2))
    pts = [(1.0, 1.0), (1.05, 1.0), (1.1, 1.0), (1.0, 1.02)]  # crowded
    ax.plot(*zip(*pts), "o")
    ax.set_xlim(0.9, 1.3)
    ax.set_ylim(0.9, 1.1)
    fig.canvas.draw()
    common.label_points(ax, pts, ["k=1", "k=2", "k=4", "k=8"])
    fig.canvas.draw()
    assert not overlap_problems(fig)
    plt.close(fig)


# --- command lines ------------------------------------------------------------------------------------------
def test_figure_command_lines_draw_and_reject_a_wrong_folder(tmp_path, capsys):
    assert spt_figures.main([str(fx.write_spt_run(tmp_path / "spt"))]) == 0
    assert "spt_attention_maps.pdf" in capsys.readouterr().out
    assert theory_figures.main([str(fx.write_theory(tmp_path / "theory"))]) == 0
    assert synthetic_splade_phase_figures.main([str(fx.write_phase(tmp_path / "phase")), "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "splade_phase_bert.png").exists()
    lra = fx.write_lra(tmp_path / "lra")
    assert lra_figures.main([str(lra)]) == 0
    (lra / "results.json").unlink()  # the folder of the CPU ListOps plateau experiment: summary.json only
    (lra / "listops_plateau.png").unlink()
    assert lra_figures.main([str(lra)]) == 0 and (lra / "listops_plateau.png").exists()
    assert splade_scale_figures.main([str(fx.write_splade_scale(tmp_path / "splade"))]) == 0
    capsys.readouterr()
    empty = tmp_path / "empty"
    empty.mkdir()
    for mod in (spt_figures, theory_figures, synthetic_splade_phase_figures, lra_figures,
                splade_scale_figures):
        with pytest.raises(SystemExit) as got:
            mod.main([str(empty)])
        assert got.value.code == 2
        assert str(empty) in capsys.readouterr().err, mod.__name__
    assert score_scale_figures.main([str(empty)]) == 2  # returns rather than exits, as it always has
    assert "score_scale.json" in capsys.readouterr().err


def test_figure_command_line_names_a_folder_of_another_run(tmp_path, capsys):
    (tmp_path / "metrics.json").write_text(json.dumps({"config": {}, "cells": {}}))  # not an SPT run
    with pytest.raises(SystemExit):
        spt_figures.main([str(tmp_path)])
    assert "not a folder written by `initlab synthetic spt`" in capsys.readouterr().err
