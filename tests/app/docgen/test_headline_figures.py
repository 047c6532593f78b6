"""The README's headline figures: drawn from docs/results by one command, and checked for staleness by their
numbers (recomputed from the saved JSON, the same on every CPU) and the hash each PNG carries, never by pixels."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from initlab.app.docgen import headline_figures as hf
from initlab.paper_figs import headline_figures as draw

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "docs" / "results"
FIGS = ROOT / "docs" / "figures" / "headline"


def test_committed_headline_figures_are_current():
    assert hf.stale(RESULTS, FIGS) == [], (
        "headline figures are stale: run python -m initlab.app.docgen.headline_figures docs/results")


def test_the_readme_shows_every_headline_figure():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for fig in hf.FIGURES:
        assert f"](docs/figures/headline/{fig}.png)" in readme, fig


def _copy(tmp_path: Path) -> Path:
    dest = tmp_path / "results"
    for name in set(hf.FIGURES.values()):
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(RESULTS / name, dest / name)
    return dest


def test_an_edited_number_makes_data_and_figure_stale(tmp_path):
    res, out = _copy(tmp_path), tmp_path / "figs"
    assert hf.main([str(res), "--out", str(out)]) == 0 and hf.stale(res, out) == []
    assert hf.main([str(res), "--out", str(out), "--check"]) == 0
    path = res / hf.SPT
    s = json.loads(path.read_text())
    s["summary"]["per_seed"]["spt"][0]["test_acc"] += 0.01
    path.write_text(json.dumps(s))
    problems = hf.stale(res, out)
    assert any("data.json" in p for p in problems) and any("spt_accuracy.png" in p for p in problems)
    assert not any("splade_ndcg_vs_k.png" in p for p in problems)  # only the figure whose numbers moved
    assert hf.main([str(res), "--out", str(out), "--check"]) == 1


def test_a_figure_from_other_numbers_is_caught_even_with_current_data(tmp_path):
    res, out = _copy(tmp_path), tmp_path / "figs"
    hf.draw_all(res, out)
    other = draw.draw_ndcg(hf.headline_data(res)["splade_ndcg_vs_k"], tmp_path / "plain.png")[0]  # no hash chunk
    shutil.copy(other, out / "splade_ndcg_vs_k.png")
    assert [p for p in hf.stale(res, out) if "splade_ndcg_vs_k.png" in p]


def test_the_numbers_are_what_the_saved_file_holds():
    data = hf.headline_data(RESULTS)
    saved = json.loads((RESULTS / hf.SPT).read_text())["summary"]["per_seed"]
    acc = {c["condition"]: c for c in data["spt_accuracy"]["conditions"]}
    assert acc["spt"]["test_acc"] == [r["test_acc"] for r in sorted(saved["spt"], key=lambda r: r["seed"])]
    assert data["spt_proximity"]["conditions"]["scratch"]["start"] == [
        r["prox_start"] for r in sorted(saved["scratch"], key=lambda r: r["seed"])]
    fam = data["splade_ndcg_vs_k"]["families"]["modernbert"]
    assert fam["k"] == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0] and len(fam["seeds"]) == 5
    assert draw.png_text(FIGS / "spt_accuracy.png")[draw.HASH_KEY] == draw.data_hash(data["spt_accuracy"])


def test_bad_input_is_one_line(tmp_path, capsys):
    assert hf.main([str(tmp_path / "nothing"), "--out", str(tmp_path / "o")]) == 2
    assert "results_dir" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert hf.main([str(empty), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "saved result file not found" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
