"""``initlab diagnose`` data: every non-blank line is a sequence ('#' starts a comment only with --skip-comments, and
the skipped lines are counted), and labels are one class per value (0 and 0.0 are one class; a label whose type
differs from the first row's is refused in one line naming the row)."""

from __future__ import annotations

import json

import pytest

from initlab.diagnose.data import read_sequences


def _jsonl(path, labels):
    path.write_text("".join(json.dumps({"text": f"text number {i}", "y": y}) + "\n" for i, y in enumerate(labels)))
    return path


def test_integer_and_float_labels_of_one_value_are_one_class(tmp_path):
    """skll#436: 0/1 and 0.0/1.0 were four classes."""
    s = read_sequences(_jsonl(tmp_path / "a.jsonl", [0, 1, 0.0, 1.0, 0, 1.0]), labels="y")
    assert sorted(set(s.labels)) == ["0", "1"]
    (tmp_path / "a.tsv").write_text("text\ty\n" + "".join(f"t {i}\t{y}\n" for i, y in enumerate(["0", "1", "0.0", "1.0"])))
    assert sorted(set(read_sequences(tmp_path / "a.tsv", labels="y").labels)) == ["0", "1"]


def test_label_of_another_type_is_refused_naming_the_row(tmp_path):
    with pytest.raises(ValueError) as err:
        read_sequences(_jsonl(tmp_path / "m.jsonl", [0, 1, "1", 0]), labels="y")
    msg = str(err.value)
    assert "m.jsonl:3" in msg and "'1'" in msg and "string" in msg and "number" in msg and "\n" not in msg
    with pytest.raises(ValueError, match=r"b\.jsonl:2: --labels y: label True is a bool"):
        read_sequences(_jsonl(tmp_path / "b.jsonl", [0, True, 1]), labels="y")
    (tmp_path / "m.tsv").write_text("text\ty\nx 1\t0\nx 2\tpos\nx 3\t1\n")
    with pytest.raises(ValueError, match=r"m\.tsv:3: --labels y: label 'pos' is a word"):
        read_sequences(tmp_path / "m.tsv", labels="y")


def test_word_labels_stay_as_they_are(tmp_path):
    s = read_sequences(_jsonl(tmp_path / "w.jsonl", ["pos", "neg", "pos"]), labels="y")
    assert s.labels == ["pos", "neg", "pos"]


def test_every_non_blank_line_is_read_even_one_starting_with_hash(tmp_path):
    """fastNLP#367: 6 of 12 lines were measured because six started with '#' (hashtags, headings)."""
    lines = [f"#tag{i} a post about topic {i}" if i % 2 else f"a plain line {i}" for i in range(12)]
    (tmp_path / "posts.txt").write_text("\n".join(lines) + "\n\n")
    s = read_sequences(tmp_path / "posts.txt")
    assert s.texts == lines and s.skipped_comments == 0
    s = read_sequences(tmp_path / "posts.txt", skip_comments=True)
    assert len(s.texts) == 6 and s.skipped_comments == 6


def test_diagnose_cli_reads_hash_lines_and_says_what_it_skipped(tmp_path, capsys):
    from initlab.app import cli

    ids = tmp_path / "posts.txt"
    ids.write_text("\n".join(f"#{w} {w} {w}" if i % 2 else f"{w} plain {w}" for i, w in
                             enumerate("alpha beta gamma delta eps zeta eta theta iota kappa lam mu".split())) + "\n")
    out = tmp_path / "d.json"
    assert cli.main(["diagnose", "initlab:spt", "--data", str(ids), "--batch", "12", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["measure"]["batch"] == 12
    capsys.readouterr()
    assert cli.main(["diagnose", "initlab:spt", "--data", str(ids), "--batch", "6", "--skip-comments"]) == 0
    assert "6 lines starting with '#' skipped" in capsys.readouterr().out


def test_the_format_is_read_from_the_data_not_only_the_file_name(tmp_path):
    """A file of JSON objects named .txt was measured as text lines (each line's JSON syntax as the text), and
    --labels refused; the data decide: every line a JSON object is JSONL, a NumPy header is an array."""
    import numpy as np

    p = tmp_path / "posts.txt"
    p.write_text("".join(json.dumps({"text": f"post {i}", "y": i % 2}) + "\n" for i in range(4)))
    s = read_sequences(p, labels="y")
    assert s.fmt == "jsonl" and s.texts == ["post 0", "post 1", "post 2", "post 3"] and s.labels == ["0", "1", "0", "1"]
    ids = tmp_path / "ids.bin"
    with open(ids, "wb") as fh:
        np.save(fh, np.array([[5, 6, 7], [8, 9, 10]]))
    assert read_sequences(ids).fmt == "npy"
