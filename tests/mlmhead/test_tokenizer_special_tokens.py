"""A tokenizer without a pad token is refused, naming the checkpoint and the fix, before anything is written
(``mlmhead inspect``, ``splade train``, ``splade eval``); without a mask token ``diagnose`` never masks with an
ordinary word: ``--pretrained`` is refused, fresh weights mask with an id no sequence of the data uses."""

from __future__ import annotations

import json
from pathlib import Path

from initlab.mlmhead import tiny_masked_lm, tiny_tokenizer
from initlab.app.testing import run_cli as _run, one_line as _line

FIX = Path(__file__).parents[1] / "realdata" / "fixtures" / "splade"
TRIPLES = str(FIX / "msmarco" / "triples.train.small.tsv")


def _checkpoint(folder: Path, *, pad: bool = True, mask: bool = True) -> Path:
    tok = tiny_tokenizer(folder)
    tiny_masked_lm("bert", len(tok), hidden=16, layers=1).save_pretrained(folder)
    if not pad:
        tok.pad_token = None
    if not mask:
        tok.mask_token = None
    tok.save_pretrained(folder)
    return folder


def test_inspect_names_the_checkpoint_and_the_pad_fix(tmp_path):
    m = _checkpoint(tmp_path / "m", pad=False)
    rc, _, err = _run(["mlmhead", "inspect", str(m)])
    line = _line(err)
    assert rc == 2 and str(m) in line and "no pad token" in line and "[PAD]" in line and "save_pretrained" in line


def test_splade_train_refuses_a_tokenizer_without_pad_and_writes_nothing(tmp_path):
    m = _checkpoint(tmp_path / "m", pad=False)
    out = tmp_path / "run"
    rc, _, err = _run(["splade", "train", "--preset", "quick", "--set", "tiny_model=", "--backbone", str(m), "--k", "1",
                       "--no-progress", "--train-source", TRIPLES, "--out", str(out)])
    line = _line(err)
    assert rc == 2 and str(m) in line and "no pad token" in line
    assert not out.exists()


def test_splade_eval_refuses_a_tokenizer_without_pad_and_writes_nothing(tmp_path):
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling, Transformer

    m = _checkpoint(tmp_path / "m")
    tr = Transformer(str(m), transformer_task="fill-mask", max_seq_length=32)
    tr.tokenizer.pad_token = None
    SparseEncoder(modules=[tr, SpladePooling(pooling_strategy="max")]).save(str(tmp_path / "model"), safe_serialization=True)
    out = tmp_path / "ev"
    rc, _, err = _run(["splade", "eval", "--model", str(tmp_path / "model"), "--sets", f"beir:{FIX / 'beir' / 'scifact'}",
                       "--out", str(out)])
    assert rc == 2 and "no pad token" in _line(err) and not out.exists()


def test_diagnose_pretrained_without_a_mask_token_is_refused(tmp_path):
    m = _checkpoint(tmp_path / "m", mask=False)
    (tmp_path / "t.txt").write_text("the cat sleeps on the sofa\na train leaves the airport\nthe bees dance\n")
    rc, _, err = _run(["diagnose", str(m), "--pretrained", "--data", str(tmp_path / "t.txt"), "--spt-probe", "2"])
    line = _line(err)
    assert rc == 2 and "no mask token" in line and str(m) in line


def test_diagnose_fresh_weights_without_a_mask_token_mask_with_an_unused_id(tmp_path):
    m = _checkpoint(tmp_path / "m", mask=False)
    tok = tiny_tokenizer(tmp_path / "t2")
    guess = 103 if len(tok) > 103 else 4  # the id masked with before (BERT's [MASK] id in bert-base's vocabulary)
    word = tok.convert_ids_to_tokens(guess)
    data = tmp_path / "t.txt"
    data.write_text(f"the cat sleeps on the sofa {word}\na train leaves the airport {word}\nthe bees dance\n")
    out = tmp_path / "d.json"
    rc, stdout, err = _run(["diagnose", str(m), "--data", str(data), "--spt-probe", "2", "--json", str(out)])
    assert rc == 0, err
    r = json.loads(out.read_text())
    used = {i for t in data.read_text().splitlines() for i in tok(t)["input_ids"]}
    note = next(n for n in r["notes"] if "mask" in n)
    mask_id = int(note.split("id ")[1].split()[0].rstrip(",;"))
    assert mask_id not in used and mask_id != tok.convert_tokens_to_ids("the")
