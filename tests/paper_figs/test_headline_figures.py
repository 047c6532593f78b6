"""The headline figures' drawing half: the hash chunk a PNG carries is written once, after the header, and read
back exactly; a file that is not a PNG is refused by name. (The numbers and the command:
tests/app/docgen/test_headline_figures.py.)"""

from __future__ import annotations

import pytest

from initlab.paper_figs import headline_figures as draw


def _numbers():
    return {"run": "a test", "families": {"bert": {"k": [1.0, 4.0], "seeds": [0, 1], "ndcg": [[0.2, 0.3], [0.4, 0.5]],
                                                   "mean": [0.25, 0.45], "head_norm": 12.5}}}


def test_the_hash_chunk_round_trips(tmp_path):
    d = _numbers()
    paths = draw.with_hash(draw.draw_ndcg(d, tmp_path / "ndcg.png"), draw.data_hash(d))
    assert [p.name for p in paths] == ["ndcg.png"]
    assert draw.png_text(paths[0])[draw.HASH_KEY] == draw.data_hash(d)
    d["families"]["bert"]["mean"][0] = 0.26
    assert draw.png_text(paths[0])[draw.HASH_KEY] != draw.data_hash(d)  # other numbers, other hash


def test_the_hash_ignores_key_order():
    assert draw.data_hash({"a": 1, "b": [1, 2]}) == draw.data_hash({"b": [1, 2], "a": 1})


def test_a_file_that_is_not_a_png_is_named(tmp_path):
    p = tmp_path / "x.png"
    p.write_text("not a picture")
    with pytest.raises(ValueError, match="x.png: not a PNG file"):
        draw.png_text(p)
