"""initlab.runs.check_inputs: fingerprints of a run's inputs recorded at its start and compared on resume."""

from __future__ import annotations

import json
import os

import pytest

from initlab import runs


def test_a_folder_without_a_record_is_accepted_and_recorded(tmp_path):
    data = tmp_path / "d.tsv"
    data.write_text("a\tb\n")
    run = tmp_path / "run"
    run.mkdir()
    runs.check_inputs(run, {"data": data, "splits": "sha256:abc", "none": None})
    rec = json.loads((run / runs.INPUTS_FILE).read_text())
    assert set(rec) == {"data", "splits"} and rec["data"]["size"] == 4 and rec["data"]["sha256"].startswith("sha256:")
    runs.check_inputs(run, {"data": data, "splits": "sha256:abc", "later": data})  # a new label is added
    assert "later" in json.loads((run / runs.INPUTS_FILE).read_text())


def test_same_bytes_pass_other_bytes_are_refused_naming_the_file(tmp_path):
    data = tmp_path / "d.tsv"
    data.write_text("a\tb\n")
    run = tmp_path / "run"
    runs.check_inputs(run, {"data": data})
    os.utime(data, (1, 1))  # touched: same bytes
    runs.check_inputs(run, {"data": data})
    data.write_text("a\tc\n")  # same size, other bytes
    with pytest.raises(runs.ConfigMismatchError, match=r"other inputs: data .*d\.tsv: content changed"):
        runs.check_inputs(run, {"data": data})
    data.write_text("a\tcc\n")
    with pytest.raises(runs.ConfigMismatchError, match=r"size 4 -> 5 bytes"):
        runs.check_inputs(run, {"data": data})
    runs.check_inputs(run, {"splits": "sha256:0"})
    with pytest.raises(runs.ConfigMismatchError, match=r"other inputs: splits: sha256:0 -> sha256:1"):
        runs.check_inputs(run, {"splits": "sha256:1"})


def test_a_folder_input_names_the_file_added_removed_or_changed(tmp_path, monkeypatch):
    d = tmp_path / "data"
    d.mkdir()
    (d / "a.txt").write_text("1")
    (d / "b.txt").write_text("2")
    run = tmp_path / "run"
    runs.check_inputs(run, {"data": d})
    (d / "c.txt").write_text("3")
    with pytest.raises(runs.ConfigMismatchError, match=r"c\.txt: was added"):
        runs.check_inputs(run, {"data": d})
    (d / "c.txt").unlink()
    (d / "a.txt").unlink()
    with pytest.raises(runs.ConfigMismatchError, match=r"a\.txt: is gone"):
        runs.check_inputs(run, {"data": d})
    (d / "c.txt").write_text("3")
    monkeypatch.setattr(runs.inputs, "FOLDER_DIGEST_OVER", 1)  # a large folder: recorded as digests
    run2 = tmp_path / "run2"
    runs.check_inputs(run2, {"data": d, "more": d})
    (d / "b.txt").write_text("9")
    with pytest.raises(runs.ConfigMismatchError, match="a file changed"):
        runs.check_inputs(run2, {"data": d})


def test_a_folder_is_fingerprinted_through_its_links_as_it_is_read(tmp_path):
    """A data folder whose sub-folder is a link (to another disk, a shared copy) is read through the link; its files
    were left out of the record, so a changed file there passed a resumed run's check."""
    shared = tmp_path / "shared" / "images"
    shared.mkdir(parents=True)
    (shared / "a.png").write_bytes(b"one")
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.txt").write_text("x\n")
    (data / "images").symlink_to(shared, target_is_directory=True)
    (data / "loop").symlink_to(data, target_is_directory=True)  # a link cycle is walked once
    run = tmp_path / "run"
    runs.check_inputs(run, {"data": data})
    assert set(json.loads((run / runs.INPUTS_FILE).read_text())["data"]["files"]) == {"meta.txt", "images/a.png"}
    (shared / "a.png").write_bytes(b"two")
    with pytest.raises(runs.ConfigMismatchError, match=r"images/a\.png: content changed"):
        runs.check_inputs(run, {"data": data})
