"""LRA labels follow the one integer rule (:func:`initlab.textio.integer_field`): ``1`` and ``1.0`` are 1, a
fractional label is refused naming the file and line (the AAN and Pathfinder readers truncated 0.5 to 0)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from initlab.realdata.lra import data as D

FIX = Path(__file__).parents[1] / "fixtures" / "lra"


def test_aan_fractional_label_is_refused_naming_file_and_line(tmp_path):
    aan = tmp_path / "aan"
    shutil.copytree(FIX / "aan", aan)
    p = aan / "new_aan_pairs.train.tsv"
    rows = p.read_text().splitlines()
    first = 1 if rows[0].lower().startswith("label") else 0
    cols = rows[first].split("\t")
    cols[0] = "0.5"
    rows[first] = "\t".join(cols)
    p.write_text("\n".join(rows) + "\n")
    with pytest.raises(ValueError, match=rf"new_aan_pairs\.train\.tsv:{first + 1}: label '0\.5' is a fractional value"):
        D.load_retrieval(aan)


def test_listops_target_written_with_a_decimal_point_is_that_integer(tmp_path):
    lo = tmp_path / "listops"
    shutil.copytree(FIX / "listops", lo)
    ref = D.load_listops(FIX / "listops")
    p = lo / "basic_train.tsv"
    head, *rows = p.read_text().splitlines()
    p.write_text("\n".join([head] + [r + ".0" for r in rows if r.strip()]) + "\n")
    assert D.load_listops(lo).train.labels.tolist() == ref.train.labels.tolist()
    p.write_text("\n".join([head] + [rows[0] + ".5"]) + "\n")
    with pytest.raises(ValueError, match=r"basic_train\.tsv:2: Target '\d\.5' is a fractional value"):
        D.load_listops(lo)


def test_pathfinder_fractional_label_is_refused(tmp_path):
    from PIL import Image

    base = tmp_path / "lra_release" / "pathfinder32" / "curv_contour_length_14"
    (base / "imgs" / "0").mkdir(parents=True)
    (base / "metadata").mkdir()
    lines = []
    for i in range(3):
        Image.fromarray(np.full((32, 32), i * 40, dtype=np.uint8)).save(base / "imgs" / "0" / f"sample_{i}.png")
        lines.append(f"imgs/0 sample_{i}.png {i} {'0.5' if i == 1 else i % 2}")
    (base / "metadata" / "0.npy").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"0\.npy:2: label '0\.5' is a fractional value"):
        D.load_pathfinder(tmp_path)
