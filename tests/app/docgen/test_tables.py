"""The committed result tables in docs/generated/<preset>/ are not stale.

Runs ``initlab reproduce --preset P`` into a temporary folder, regenerates the tables with
``python -m initlab.app.docgen.tables`` and compares them with the committed copies: the numbers of untrained computations (theory checks, the score-scale
theory and Monte Carlo) to within one unit of their last printed digit; the tables of trained models
(``tables.TRAINED_STAGES``) on structure and words only, since their numbers and near-threshold verdicts move
with the CPU. Trained numbers are not compared with committed ones. Only the stages with a committed page are run. ``quick`` runs in CI (all
four stages, about a minute on 2 idle cores, about two under load); ``default`` is marked ``slow``
(``pytest -m slow``; the committed pages, and so the run, cover the stages theory and score_scale, about 25 s on
2 idle cores). When this fails after an intended change, regenerate the copies with the command in the failure
message.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from initlab.app.docgen import tables

ROOT = Path(__file__).resolve().parents[3]
GENERATED = ROOT / "docs" / "generated"


def committed_stages(preset: str) -> list[str]:
    return [s for s in tables.STAGE_TITLES if (GENERATED / preset / f"{s}.md").is_file()]


def regenerate(preset: str) -> str:
    return (f"initlab reproduce --preset {preset} --only {','.join(committed_stages(preset))} --out /tmp/{preset} && "
            f"python -m initlab.app.docgen.tables /tmp/{preset} --out docs/generated/{preset}")


def test_compare_tables_tolerates_last_digit_and_kernel_noise_only():
    page = "intro\n\n| a | b |\n| --- | --- |\n| x | 0.119 [0.118-0.120] |\n| y | 7.93e-11 |\n| z | 0.01 [-0.151, +0.2] |\n"
    assert tables.compare_tables(page, page.replace("0.119 [", "0.120 [")) == []  # one unit of the last digit
    assert tables.compare_tables(page, page.replace("7.93e-11", "8.41e-11")) == []  # rounding-level error
    assert tables.compare_tables(page, page.replace("-0.151", "-0.154")) == []  # AVX2 vs AVX-512, measured in CI
    assert tables.compare_tables(page, page.replace("0.119 [", "0.130 [")) != []  # 9 %: a real change
    assert tables.compare_tables(page, page.replace("0.01 [", "0.03 [")) != []
    assert tables.compare_tables(page, page.replace("| x |", "| z |")) != []
    assert tables.compare_tables(page, page + "\n| a |\n| --- |\n") != []
    assert tables.compare_tables(page, page.replace("intro", "another caption")) == []


def test_trained_stages_compare_structure_and_words_not_numbers():
    """A trained model's numbers move with the CPU (modernbert best k - k = 1: +0.057 committed, +0.053
    on a 2-core AVX-512 machine, beyond one printed unit and 5 %); across machines a trained stage's tables are
    compared on structure and words only, and a verdict near its threshold may flip."""
    page = ("| family | best k - k = 1 | flag |\n| --- | --- | ---: |\n| modernbert | +0.057 [unbounded] | 0.082 1C |\n"
            "\n| claim | verdict |\n| --- | --- |\n| a | **inconclusive**: +0.041 [-0.217, +0.299] (90 % TOST, 2 seeds) |\n"
            "| b | **not run**: missing: scratch_matched |\n")
    drifted = page.replace("+0.057", "+0.053").replace("0.082 1C", "0.079").replace("**inconclusive**: +0.041", "**reproduced**: +0.001")
    assert tables.compare_tables(page, drifted) != []  # as numbers of an untrained computation: a real change
    assert tables.compare_tables(page, drifted, trained=True) == []
    assert "spt" in tables.TRAINED_STAGES and "splade" in tables.TRAINED_STAGES and "theory" not in tables.TRAINED_STAGES
    for changed in (page.replace("modernbert", "bert"), page.replace("[unbounded]", "[wide]"),
                    page.replace("missing: scratch_matched", "missing: spt"), page.replace("| flag |", "| flags |"),
                    page + "| c | x |\n", page.replace("| a |", "| a | b |")):
        assert tables.compare_tables(page, changed, trained=True) != [], changed


def test_extract_tables_keeps_captions_and_skips_timings():
    md = "## Stage\n\nCaption line one\nline two.\n\n| a |\n| --- |\n| 1 |\n\n_stage took 3 s_\n\n| b |\n| --- |\n"
    assert tables.extract_tables(md) == [("Caption line one line two.", ["| a |", "| --- |", "| 1 |"]), ("", ["| b |", "| --- |"])]


def test_write_tables_refuses_a_folder_without_report(tmp_path):
    with pytest.raises(FileNotFoundError, match="report.md"):
        tables.write_tables(tmp_path, tmp_path / "out")


@pytest.mark.parametrize("preset", ["quick", pytest.param("default", marks=pytest.mark.slow)])
def test_committed_tables_match_a_fresh_run(preset, tmp_path):
    committed, results, out = GENERATED / preset, tmp_path / preset, tmp_path / "tables"
    stages = committed_stages(preset)
    assert stages, f"no committed pages in docs/generated/{preset}"
    env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    run = subprocess.run([sys.executable, "-m", "initlab.app.cli", "reproduce", "--preset", preset, "--only", ",".join(stages),
                          "--out", str(results)],
                         capture_output=True, text=True, env=env, timeout=3600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert tables.main([str(results), "--out", str(out)]) == 0
    fresh = sorted(p.name for p in out.glob("*.md"))
    assert fresh == sorted(p.name for p in committed.glob("*.md")), f"stages differ; regenerate: {regenerate(preset)}"
    for name in fresh:  # trained stages: structure and words only (their numbers move with the CPU)
        diffs = tables.compare_tables((committed / name).read_text(encoding="utf-8"), (out / name).read_text(encoding="utf-8"),
                                      trained=name.removesuffix(".md") in tables.TRAINED_STAGES)
        assert not diffs, f"docs/generated/{preset}/{name} is stale; regenerate: {regenerate(preset)}\n" + "\n".join(diffs[:10])
