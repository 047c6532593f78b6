"""A masked-LM checkpoint holding a NaN or infinite weight is refused by every loader, in one line naming the
tensor(s), before anything is measured or written: ``mlmhead inspect`` (not NaN statistics and a recommended k),
``mlmhead rescale`` (not a failed reload check blaming its own save), ``diagnose --pretrained``, ``splade train``
(its backbone) and ``splade eval``. Checkpoints are tiny in-process models with a NaN injected (no download)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from initlab.mlmhead import tiny_masked_lm, tiny_tokenizer
from initlab.mlmhead.checkpoint import check_checkpoint_weights, load_masked_lm
from initlab.runs import NonFiniteCheckpointError
from initlab.app.testing import run_cli as _run, one_line as _one_line

FIX = Path(__file__).parents[1] / "realdata" / "fixtures" / "splade"
TRIPLES = str(FIX / "msmarco" / "triples.train.small.tsv")
BAD = "bert.encoder.layer.0.attention.self.query.weight"


def nan_checkpoint(folder: Path, value: float = float("nan"), names: tuple[str, ...] = (BAD,)) -> Path:
    """A tiny BERT masked LM saved with ``value`` in one entry of each tensor of ``names``."""
    tok = tiny_tokenizer(folder)
    model = tiny_masked_lm("bert", len(tok), hidden=16, layers=2)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for n in names:
            params[n].view(-1)[3] = value
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_inspect_refuses_a_non_finite_weight_naming_it(tmp_path, value):
    nan_checkpoint(tmp_path / "m", value)
    rc, out, err = _run(["mlmhead", "inspect", str(tmp_path / "m")])
    line = _one_line(err)
    assert rc == 2 and BAD in line and "NaN or infinite" in line and "1 tensor(s)" in line, line
    assert "recommend" not in out.lower() and "nan" not in out.lower()


def test_rescale_refuses_a_nan_weight_and_writes_nothing(tmp_path):
    nan_checkpoint(tmp_path / "m")
    rc, _, err = _run(["mlmhead", "rescale", str(tmp_path / "m"), "--k", "2", "--out", str(tmp_path / "r")])
    line = _one_line(err)
    assert rc == 2 and BAD in line and "reload" not in line
    assert not (tmp_path / "r").exists()


def test_several_tensors_are_named_with_a_count(tmp_path):
    names = tuple(f"bert.encoder.layer.{i}.{part}" for i in (0, 1) for part in
                  ("attention.self.query.weight", "attention.self.key.weight", "output.dense.bias"))
    nan_checkpoint(tmp_path / "m", names=names)
    with pytest.raises(NonFiniteCheckpointError) as err:
        load_masked_lm(tmp_path / "m")
    assert sorted(err.value.tensors) == sorted(names) and "6 tensor(s)" in str(err.value) and "(2 more)" in str(err.value)
    with pytest.raises(NonFiniteCheckpointError):
        check_checkpoint_weights(tmp_path / "m")


def test_diagnose_pretrained_refuses_a_nan_weight(tmp_path):
    nan_checkpoint(tmp_path / "m")
    (tmp_path / "t.txt").write_text("the cat sleeps on the sofa\na train leaves the airport\n")
    rc, _, err = _run(["diagnose", str(tmp_path / "m"), "--pretrained", "--data", str(tmp_path / "t.txt"),
                       "--json", str(tmp_path / "d.json")])
    assert rc == 2 and BAD in _one_line(err)
    assert not (tmp_path / "d.json").exists()


def test_splade_train_refuses_a_nan_backbone_before_writing(tmp_path):
    nan_checkpoint(tmp_path / "m")
    out = tmp_path / "run"
    rc, _, err = _run(["splade", "train", "--preset", "quick", "--set", "tiny_model=", "--backbone", str(tmp_path / "m"),
                       "--k", "1", "--no-progress", "--train-source", TRIPLES, "--out", str(out)])
    assert rc == 2 and BAD in _one_line(err)
    assert not out.exists()


def test_splade_eval_refuses_a_nan_checkpoint(tmp_path):
    from safetensors.torch import load_file, save_file
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling, Transformer

    nan_checkpoint(tmp_path / "m", names=())
    tr = Transformer(str(tmp_path / "m"), transformer_task="fill-mask", max_seq_length=32)
    SparseEncoder(modules=[tr, SpladePooling(pooling_strategy="max")]).save(str(tmp_path / "model"), safe_serialization=True)
    st = tmp_path / "model" / "model.safetensors"
    tensors = load_file(str(st))
    tensors[BAD][0, 0] = float("nan")
    save_file(tensors, str(st), metadata={"format": "pt"})
    out = tmp_path / "ev"
    rc, _, err = _run(["splade", "eval", "--model", str(tmp_path / "model"), "--sets", f"beir:{FIX / 'beir' / 'scifact'}",
                       "--out", str(out)])
    assert rc == 2 and BAD in _one_line(err) and not out.exists()
