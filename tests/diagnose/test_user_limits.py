"""A limit the user sets is honoured or refused in one line, never clamped to what the model or the data can take:
``diagnose --max-length`` beyond the model's usable length, ``--batch`` beyond the sequences of the file. The
defaults (512 tokens, 64 sequences) fit the model and the data, and say what they measured."""

from __future__ import annotations

import json

from initlab.app.testing import run_cli as _run


def _data(tmp_path, n=6, words=8):
    p = tmp_path / "d.txt"
    p.write_text("".join(" ".join(f"w{(i * 7 + j) % 23}" for j in range(words)) + "\n" for i in range(n)))
    return p


def test_max_length_beyond_the_model_is_refused_not_clamped(tmp_path):
    from initlab.diagnose.models import load_backend

    limit = load_backend("initlab:spt").max_len
    out = tmp_path / "d.json"
    rc, _, err = _run(["diagnose", "initlab:spt", "--data", str(_data(tmp_path)), "--max-length", str(limit + 1),
                       "--json", str(out)])
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and f"--max-length {limit + 1}" in lines[0] and str(limit) in lines[0]
    assert not out.exists()
    rc, _, err = _run(["diagnose", "initlab:spt", "--data", str(_data(tmp_path)), "--max-length", str(limit),
                       "--json", str(out)])
    assert rc == 0, err


def test_batch_beyond_the_sequences_is_refused_and_the_default_says_what_it_measured(tmp_path):
    data = _data(tmp_path, n=6)
    rc, _, err = _run(["diagnose", "initlab:spt", "--data", str(data), "--batch", "8"])
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "--batch 8" in lines[0] and "6 sequences" in lines[0]
    out = tmp_path / "d.json"
    rc, stdout, err = _run(["diagnose", "initlab:spt", "--data", str(data), "--json", str(out)])
    assert rc == 0, err
    r = json.loads(out.read_text())
    assert r["measure"]["batch"] == 6 and any("6 sequences" in n for n in r["notes"])


def test_sequences_cut_at_the_length_are_counted(tmp_path):
    data = _data(tmp_path, n=4, words=12)
    out = tmp_path / "d.json"
    rc, _, err = _run(["diagnose", "initlab:spt", "--data", str(data), "--max-length", "5", "--batch", "4",
                       "--json", str(out)])
    assert rc == 0, err
    assert any("4 of 4 sequences are longer than 5 tokens" in n for n in json.loads(out.read_text())["notes"])
