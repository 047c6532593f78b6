"""``mlmhead inspect --texts``: every non-blank line is a text, also one starting with '#' (a hashtag, a heading);
``--skip-comments`` skips those and says how many."""

from __future__ import annotations

import json

from initlab.app.cli import main as cli_main
from initlab.mlmhead import tiny_masked_lm, tiny_tokenizer
from initlab.mlmhead.tiny import default_texts


def test_inspect_reads_lines_starting_with_hash(tmp_path, capsys):
    tok = tiny_tokenizer(tmp_path / "m")
    tiny_masked_lm("bert", tok.vocab_size, hidden=16, layers=1).save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    texts = tmp_path / "posts.txt"
    texts.write_text("".join(f"#news item {i} the cat sleeps\n" if i % 2 else f"item {i} bees dance\n" for i in range(12)))
    out = tmp_path / "r.json"
    assert cli_main(["mlmhead", "inspect", str(tmp_path / "m"), "--texts", str(texts), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["n_texts"] == 12
    capsys.readouterr()
    assert cli_main(["mlmhead", "inspect", str(tmp_path / "m"), "--texts", str(texts), "--skip-comments", "--json",
                     str(out), "--overwrite"]) == 0
    assert json.loads(out.read_text())["n_texts"] == 6
    assert "6 lines starting with '#' skipped" in capsys.readouterr().out


def test_packaged_texts_are_forty_sentences_none_a_comment():
    texts = default_texts()
    assert len(texts) == 40 and not any(t.startswith("#") for t in texts)
