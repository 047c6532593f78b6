"""``initlab diagnose``: a run on a tiny checkpoint fixture, its outputs, and bad input (exit 2, one line, nothing written)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from initlab.app.testing import run_cli as _run


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny BERT masked-LM checkpoint folder with its tokenizer, and labelled JSONL texts (no download)."""
    from initlab.mlmhead.tiny import default_texts, tiny_masked_lm, tiny_tokenizer

    root = tmp_path_factory.mktemp("diag")
    tok = tiny_tokenizer(root / "bert")
    tiny_masked_lm("bert", len(tok)).save_pretrained(root / "bert")
    tok.save_pretrained(root / "bert")
    with open(root / "texts.jsonl", "w") as f:
        for i, t in enumerate(default_texts()):
            f.write(json.dumps({"text": t, "label": "a" if i % 2 else "b"}) + "\n")
    np.save(root / "ids.npy", np.random.default_rng(0).integers(2, 20, size=(12, 16)))
    return root


def test_diagnose_writes_report_json_and_figure(tiny, tmp_path):
    out = tmp_path / "d.json"
    rc, stdout, err = _run(["diagnose", str(tiny / "bert"), "--data", str(tiny / "texts.jsonl"), "--labels", "label",
                            "--batch", "8", "--json", str(out)])
    assert rc == 0, err
    assert "verdict: " in stdout and "label blind share" in stdout and "bag-of-tokens probe" in stdout
    r = json.loads(out.read_text())
    assert r["labels"] == "user" and len(r["measure"]["layers"]) == 2
    assert 0 <= r["measure"]["layers"][0]["label_share"] <= 1
    assert isinstance(r["prediction"]["spt_helps"], bool)
    assert (tmp_path / "d.png").read_bytes()[:4] == b"\x89PNG"
    before = out.read_text()
    rc, _, err = _run(["diagnose", str(tiny / "bert"), "--data", str(tiny / "texts.jsonl"), "--json", str(out)])
    assert rc == 2 and "file exists" in err and "--overwrite" in err and len(err.strip().splitlines()) == 1
    assert out.read_text() == before  # never silently overwritten
    rc, _, err = _run(["diagnose", str(tiny / "bert"), "--data", str(tiny / "texts.jsonl"), "--batch", "4",
                       "--json", str(out), "--overwrite"])
    assert rc == 0, err
    r = json.loads(out.read_text())
    assert r["labels"] == "random probe" and r["prediction"]["checks"]["R3"] is None


def test_without_labels_the_report_names_what_it_measured_and_predicts_nothing(tiny, tmp_path):
    """The tiny BERT at initialisation passes R1 and R2 (first-layer blind share about 0.9, attention uniform): with
    labels that is a prediction, without them only a measurement."""
    out = tmp_path / "d.json"
    rc, stdout, err = _run(["diagnose", str(tiny / "bert"), "--data", str(tiny / "texts.jsonl"), "--batch", "8",
                            "--json", str(out)])
    assert rc == 0, err
    p = json.loads(out.read_text())["prediction"]
    assert p["checks"] == {"R1": True, "R2": True, "R3": None}
    assert p["spt_helps"] is None
    assert "self-pretraining is predicted to help" not in stdout
    assert "verdict: no prediction without labels" in stdout and "R3 bag-of-tokens probe < 0.5: skipped (needs --labels)" in stdout


def test_random_label_probe_and_spt_probe_on_an_initlab_config(tiny, tmp_path):
    rc, stdout, err = _run(["diagnose", "initlab:spt", "--data", str(tiny / "ids.npy"), "--spt-probe", "3"])
    assert rc == 0, err
    assert "random-label probe" in stdout and "SPT probe (3 steps)" in stdout


@pytest.mark.parametrize("case", ["no_data", "folder_no_config", "text_without_tokenizer", "figure_is_json",
                                  "labels_on_npy", "unknown_builtin", "offline_hub", "bad_probe"])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tiny, tmp_path, monkeypatch, case):
    out = tmp_path / "o.json"
    (tmp_path / "empty").mkdir()
    argv = {
        "no_data": ["diagnose", str(tiny / "bert"), "--data", str(tmp_path / "missing.txt")],
        "folder_no_config": ["diagnose", str(tmp_path / "empty"), "--data", str(tiny / "texts.jsonl")],
        "text_without_tokenizer": ["diagnose", "builtin:bert-base", "--data", str(tiny / "texts.jsonl")],
        "figure_is_json": ["diagnose", "initlab:spt", "--data", str(tiny / "ids.npy"), "--figure", str(out)],
        "labels_on_npy": ["diagnose", "initlab:spt", "--data", str(tiny / "ids.npy"), "--labels", "y"],
        "unknown_builtin": ["diagnose", "builtin:gpt-base", "--data", str(tiny / "ids.npy")],
        "offline_hub": ["diagnose", "someone/some-model-not-cached", "--data", str(tiny / "texts.jsonl")],
        "bad_probe": ["diagnose", "initlab:spt", "--data", str(tiny / "ids.npy"), "--spt-probe", "0"],
    }[case]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rc, _, err = _run(argv + ["--json", str(out)])
    assert rc == 2
    last = err.strip().splitlines()[-1]
    assert "error:" in last
    if case != "bad_probe":  # argparse's own error prints the usage line first
        assert len(err.strip().splitlines()) == 1, err
    assert not out.exists() and not out.with_suffix(".png").exists()
    expected = {"no_data": "no such file", "folder_no_config": "no config.json", "text_without_tokenizer": "token ids",
                "figure_is_json": "same path as --json", "labels_on_npy": "no label columns",
                "unknown_builtin": "builtin:bert-base", "offline_hub": "HF_HUB_OFFLINE", "bad_probe": "--spt-probe"}[case]
    assert expected in last


def test_pretrained_and_cls_pooling(tiny):
    rc, stdout, err = _run(["diagnose", str(tiny / "bert"), "--pretrained", "--data", str(tiny / "texts.jsonl"),
                            "--pooling", "cls", "--batch", "6"])
    assert rc == 0, err
    assert "(bert, pretrained)" in stdout and "cls pooling" in stdout
