"""A resumed or reused SPLADE run proves that its inputs are the ones it started on (``inputs.json``): the training
files and the backbone of ``splade train``, the checkpoint (weights, tokenizer, config) and the local data of
``splade eval``. A change is refused with ConfigMismatchError naming the file; nothing is reused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from initlab.config import derive
from initlab.realdata.splade.config import cell_config, get_preset
from initlab.realdata.splade.sweep import eval_checkpoint
from initlab.realdata.splade.train import train_splade
from initlab.runs import ConfigMismatchError

FIX = Path(__file__).parents[1] / "fixtures" / "splade"


@pytest.fixture
def triples(tmp_path):
    p = tmp_path / "triples.tsv"
    shutil.copy(FIX / "msmarco" / "triples.train.small.tsv", p)
    return p


def _cfg(triples):
    return cell_config(derive(get_preset("quick"), train_source=str(triples)), "tiny", 1)


def _edit_first_line(p: Path):
    lines = p.read_text().splitlines()
    lines[0] = lines[0] + " changed"
    p.write_text("\n".join(lines) + "\n")


def test_an_interrupted_training_refuses_a_changed_training_file(tmp_path, triples):
    out = tmp_path / "run"
    train_splade(_cfg(triples), out, progress=False)
    (out / "train_results.json").unlink()  # as if interrupted after its last Trainer checkpoint
    shutil.rmtree(out / "model")
    _edit_first_line(triples)
    with pytest.raises(ConfigMismatchError, match=r"train_source .*triples\.tsv"):
        train_splade(_cfg(triples), out, progress=False)
    assert not (out / "model").exists()


def test_a_reused_finished_training_refuses_a_changed_training_file(tmp_path, triples):
    out = tmp_path / "run"
    train_splade(_cfg(triples), out, progress=False)
    _edit_first_line(triples)
    with pytest.raises(ConfigMismatchError, match=r"triples\.tsv"):
        train_splade(_cfg(triples), out, progress=False, reuse_finished=True)


def _sets(tmp_path):
    beir = tmp_path / "beir"
    shutil.copytree(FIX / "beir", beir)
    return beir, [f"beir:{beir / 'scifact'}", f"beir:{beir / 'arguana'}"]


def _interrupt_after_first_set(out: Path, names):
    (out / "DONE").unlink()
    (out / "results.json").unlink()
    cells = sorted((out / "cells").glob("*.json"))
    second = [c for c in cells if "arguana" in c.name]
    for c in second:
        c.unlink()
        c.with_suffix(".key").unlink(missing_ok=True)


def test_a_resumed_evaluation_refuses_a_changed_tokenizer(tmp_path, checkpoint):
    beir, names = _sets(tmp_path)
    out = tmp_path / "ev"
    eval_checkpoint(checkpoint, names, out, top_k=5, batch_size=8)
    _interrupt_after_first_set(out, names)
    vocab = checkpoint / "tokenizer.json"
    obj = json.loads(vocab.read_text())
    obj["model"]["vocab"] = {("zz" + w if w.isalpha() and len(w) > 3 else w): i for w, i in obj["model"]["vocab"].items()}
    vocab.write_text(json.dumps(obj))  # same weights, another tokenizer: the finished set would not be reproduced
    with pytest.raises(ConfigMismatchError, match=r"checkpoint .*tokenizer\.json"):
        eval_checkpoint(checkpoint, names, out, top_k=5, batch_size=8)


def test_a_resumed_evaluation_refuses_changed_local_data(tmp_path, checkpoint):
    beir, names = _sets(tmp_path)
    out = tmp_path / "ev"
    eval_checkpoint(checkpoint, names, out, top_k=5, batch_size=8)
    _interrupt_after_first_set(out, names)
    qrels = beir / "scifact" / "qrels" / "test.tsv"
    head, *rows = qrels.read_text().splitlines()
    qrels.write_text("\n".join([head] + rows[1:]) + "\n")  # one judgement fewer: the finished set's numbers change
    with pytest.raises(ConfigMismatchError, match=r"test\.tsv"):
        eval_checkpoint(checkpoint, names, out, top_k=5, batch_size=8)
