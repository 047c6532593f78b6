"""initlab.diagnose.data readers (good and bad files), the bag-of-tokens probe and the preregistered rule."""

from __future__ import annotations

import json

import numpy as np
import pytest

from initlab.diagnose.data import make_batch, read_sequences
from initlab.diagnose.probes import bag_of_tokens_probe
from initlab.diagnose.verdict import MIN_BLIND_SHARE, predict


def test_readers_each_format(tmp_path):
    (tmp_path / "a.txt").write_text("# comment\nfirst text\n\nsecond text\n")
    s = read_sequences(tmp_path / "a.txt")  # every non-blank line is a sequence, '#' or not
    assert s.texts == ["# comment", "first text", "second text"] and s.labels is None
    s = read_sequences(tmp_path / "a.txt", skip_comments=True)
    assert s.texts == ["first text", "second text"] and s.skipped_comments == 1
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps({"text": f"t{i}", "y": i % 2}) for i in range(4)) + "\n")
    s = read_sequences(tmp_path / "a.jsonl", labels="y")
    assert s.texts == ["t0", "t1", "t2", "t3"] and s.labels == ["0", "1", "0", "1"]
    (tmp_path / "a.tsv").write_text("Source\tTarget\n( MAX 1 2 )\t2\n( MIN 3 4 )\t3\n")
    s = read_sequences(tmp_path / "a.tsv", labels="Target")
    assert s.texts == ["( MAX 1 2 )", "( MIN 3 4 )"] and s.labels == ["2", "3"]
    np.save(tmp_path / "a.npy", np.array([[5, 6, 7, -1], [8, 9, -1, -1]]))
    s = read_sequences(tmp_path / "a.npy")
    assert [list(x) for x in s.ids] == [[5, 6, 7], [8, 9]]
    b = make_batch(s.ids, None, pad_id=0, n=2, seed=0)
    assert b.real.tolist() == [[True, True, True], [True, True, False]] and not b.true_labels


@pytest.mark.parametrize("name,content,labels,words", [
    ("e.txt", "", None, "expected at least 2 sequences"),
    ("b.jsonl", '{"text": "a"}\nnot json\n', None, "b.jsonl:2: not a JSON object"),
    ("f.jsonl", '{"txt": "a"}\n{"txt": "b"}\n', None, "with a string 'text' field"),
    ("n.jsonl", '{"text": "a"}\n{"text": null}\n', None, "n.jsonl:2: field 'text' is null; expected a string"),
    ("m.jsonl", '{"text": "a"}\n{"text": 1984}\n', None, "m.jsonl:2: field 'text' is the number 1984"),
    ("l.jsonl", '{"text": "a", "y": 1}\n{"text": "b"}\n', "y", "l.jsonl:2: --labels y"),
    ("h.tsv", "a\tb\n1\t2\n3\t4\n", None, "no text column in the header"),
    ("r.tsv", "text\tlabel\nx\t1\ny\n", "label", "r.tsv:3: 1 tab-separated fields"),
    ("c.tsv", "text\tlabel\nx\t1\ny\t1\n", "label", "at least 2 distinct labels"),
    ("t.txt", "a\nb\n", "y", "text-line files have no label columns"),
])
def test_bad_files_one_line_errors(tmp_path, name, content, labels, words):
    (tmp_path / name).write_text(content)
    with pytest.raises(ValueError) as err:
        read_sequences(tmp_path / name, labels=labels)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_bad_npy(tmp_path):
    np.save(tmp_path / "f.npy", np.zeros((3, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="2-D integer array"):
        read_sequences(tmp_path / "f.npy")
    (tmp_path / "g.npy").write_bytes(b"not an array")
    with pytest.raises(ValueError, match="not a readable .npy"):
        read_sequences(tmp_path / "g.npy")


def test_bag_of_tokens_probe_sees_counts_and_not_order():
    g = np.random.default_rng(0)
    ids, by_count, by_order = [], [], []
    for i in range(200):
        x = g.integers(0, 10, size=30)
        ids.append(x)
        by_count.append(str(int((x < 5).sum() > 15)))  # a function of the counts
        by_order.append(str(i % 2))  # unrelated to the tokens
    assert bag_of_tokens_probe(ids, by_count)["normalised"] > 0.6
    assert bag_of_tokens_probe(ids, by_order)["normalised"] < 0.3


def _m(b, u):
    return {"layers": [{"label_share": b, "entropy_gap": u}]}


LOW_BAG = {"accuracy": 0.6, "majority": 0.5, "normalised": 0.2}


def test_rule_words_and_thresholds():
    helps = predict(_m(0.95, 0.01), LOW_BAG)
    assert helps["spt_helps"] is True and "self-pretraining is predicted to help" in helps["verdict"]
    counts = predict(_m(0.95, 0.01), {"accuracy": 0.97, "majority": 0.5, "normalised": 0.94})
    assert counts["spt_helps"] is False and "token counts" in counts["verdict"]
    far = predict(_m(0.95, 0.5), None)
    assert far["spt_helps"] is False and "not blind: attention is far from uniform at init" in far["verdict"]
    assert predict(_m(MIN_BLIND_SHARE - 1e-9, 0.0), None)["spt_helps"] is False
    assert predict(_m(MIN_BLIND_SHARE - 1e-9, 0.0), LOW_BAG)["spt_helps"] is False
    assert predict(_m(MIN_BLIND_SHARE, 0.0), LOW_BAG)["spt_helps"] is True


def test_without_labels_blind_shares_alone_predict_nothing():
    """R1 and R2 passing without labels: the verdict says what was measured and that the prediction needs the
    labels (R3), never "predicted to help"; a failed R1 or R2 still decides "not predicted to help"."""
    p = predict(_m(0.95, 0.01), None)
    assert p["spt_helps"] is None and p["checks"] == {"R1": True, "R2": True, "R3": None}
    assert "predicted to help" not in p["verdict"]
    assert p["verdict"].startswith("no prediction without labels")
    assert "blind share 0.95" in p["verdict"] and "entropy gap 0.01" in p["verdict"] and "--labels" in p["verdict"]
    assert predict(_m(MIN_BLIND_SHARE, 0.0), None)["spt_helps"] is None
    assert predict(_m(0.95, 0.5), None)["spt_helps"] is False
