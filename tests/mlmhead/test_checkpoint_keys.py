"""A checkpoint that transformers would load with tensors initialised at random is refused by every loader, in one
line naming the cause: a sharded checkpoint whose stale ``model.safetensors.index.json`` lacks backbone tensors, a
checkpoint holding backbone tensors its config has no place for, and a checkpoint saved tied (no MLM decoder weight)
whose config says ``tie_word_embeddings: false``. Loaders: ``mlmhead inspect``, ``mlmhead rescale``,
``diagnose --pretrained``, ``splade train`` (a local backbone) and ``splade eval``. Checkpoints are built from tiny
in-process models (no download)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from initlab.mlmhead import tiny_masked_lm, tiny_tokenizer
from initlab.app.testing import run_cli as _run, one_line as _one_line

FIX = Path(__file__).parents[1] / "realdata" / "fixtures" / "splade"
TRIPLES = str(FIX / "msmarco" / "triples.train.small.tsv")


def _save(folder: Path, family: str = "bert", **save_kw) -> Path:
    tok = tiny_tokenizer(folder)
    tiny_masked_lm(family, len(tok), hidden=16, layers=2).save_pretrained(folder, **save_kw)
    tok.save_pretrained(folder)
    return folder


def stale_index(folder: Path) -> list[str]:
    """A sharded checkpoint whose index no longer lists one shard (that shard deleted): the keys it held."""
    _save(folder, max_shard_size="20KB")
    idx_path = folder / "model.safetensors.index.json"
    idx = json.loads(idx_path.read_text())
    wm = idx["weight_map"]
    shard = wm["bert.embeddings.position_embeddings.weight"]
    gone = sorted(k for k, v in wm.items() if v == shard)
    for k in gone:
        del wm[k]
    (folder / shard).unlink()
    idx_path.write_text(json.dumps(idx))
    return gone


def extra_layer(folder: Path) -> None:
    """config.json edited to one layer while the weights hold two: layer 1's tensors have no place."""
    _save(folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["num_hidden_layers"] = 1
    (folder / "config.json").write_text(json.dumps(cfg))


def tied_saved_untied_config(folder: Path, family: str = "bert") -> None:
    """Saved tied (no decoder weight in the file), then config.json set to tie_word_embeddings: false."""
    _save(folder, family)
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg.get("tie_word_embeddings", True) is True
    cfg["tie_word_embeddings"] = False
    (folder / "config.json").write_text(json.dumps(cfg))


def test_stale_index_is_refused_by_inspect_naming_missing_tensors(tmp_path):
    gone = stale_index(tmp_path / "m")
    rc, _, err = _run(["mlmhead", "inspect", str(tmp_path / "m")])
    line = _one_line(err)
    assert rc == 2 and "backbone tensor" in line and gone[0] in line and "index" in line


def test_stale_index_is_refused_by_rescale_and_nothing_is_written(tmp_path):
    stale_index(tmp_path / "m")
    rc, _, err = _run(["mlmhead", "rescale", str(tmp_path / "m"), "--k", "2", "--out", str(tmp_path / "r")])
    assert rc == 2 and "backbone tensor" in _one_line(err)
    assert not (tmp_path / "r").exists()


def test_stale_index_is_refused_by_diagnose_pretrained(tmp_path):
    stale_index(tmp_path / "m")
    (tmp_path / "t.txt").write_text("the cat sleeps on the sofa\na train leaves the airport\n")
    rc, _, err = _run(["diagnose", str(tmp_path / "m"), "--pretrained", "--data", str(tmp_path / "t.txt")])
    assert rc == 2 and "backbone tensor" in _one_line(err)


def test_unexpected_backbone_tensors_are_refused(tmp_path):
    extra_layer(tmp_path / "m")
    rc, _, err = _run(["mlmhead", "inspect", str(tmp_path / "m")])
    line = _one_line(err)
    assert rc == 2 and "bert.encoder.layer.1." in line and "no place" in line


@pytest.mark.parametrize("family", ["bert", "roberta", "modernbert", "distilbert", "albert"])
def test_tied_checkpoint_under_an_untied_config_names_the_fix(tmp_path, family):
    tied_saved_untied_config(tmp_path / "m", family)
    rc, _, err = _run(["mlmhead", "inspect", str(tmp_path / "m")])
    line = _one_line(err)
    assert rc == 2 and '"tie_word_embeddings": true' in line and "saved with tied" in line and "no MLM head" not in line


def test_tied_checkpoint_under_an_untied_config_is_refused_by_rescale_and_diagnose(tmp_path):
    tied_saved_untied_config(tmp_path / "m")
    rc, _, err = _run(["mlmhead", "rescale", str(tmp_path / "m"), "--k", "2", "--out", str(tmp_path / "r")])
    assert rc == 2 and '"tie_word_embeddings": true' in _one_line(err) and not (tmp_path / "r").exists()
    (tmp_path / "t.txt").write_text("the cat sleeps on the sofa\na train leaves the airport\n")
    rc, _, err = _run(["diagnose", str(tmp_path / "m"), "--pretrained", "--data", str(tmp_path / "t.txt")])
    assert rc == 2 and '"tie_word_embeddings": true' in _one_line(err)


@pytest.mark.parametrize("broken", [stale_index, tied_saved_untied_config])
def test_splade_train_refuses_a_broken_backbone_before_writing(tmp_path, broken):
    broken(tmp_path / "m")
    out = tmp_path / "run"
    rc, _, err = _run(["splade", "train", "--preset", "quick", "--set", "tiny_model=", "--backbone", str(tmp_path / "m"),
                       "--k", "1", "--no-progress", "--train-source", TRIPLES, "--out", str(out)])
    line = _one_line(err)
    assert rc == 2 and ("backbone tensor" in line or '"tie_word_embeddings": true' in line)
    assert not out.exists()


def test_splade_eval_refuses_a_checkpoint_missing_tensors(tmp_path):
    from safetensors.torch import load_file, save_file
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling, Transformer

    _save(tmp_path / "m")
    tr = Transformer(str(tmp_path / "m"), transformer_task="fill-mask", max_seq_length=32)
    SparseEncoder(modules=[tr, SpladePooling(pooling_strategy="max")]).save(str(tmp_path / "model"), safe_serialization=True)
    st = tmp_path / "model" / "model.safetensors"
    tensors = load_file(str(st))
    del tensors["bert.encoder.layer.0.attention.self.query.weight"]
    save_file(tensors, str(st), metadata={"format": "pt"})
    out = tmp_path / "ev"
    rc, _, err = _run(["splade", "eval", "--model", str(tmp_path / "model"), "--sets", f"beir:{FIX / 'beir' / 'scifact'}",
                       "--out", str(out)])
    line = _one_line(err)
    assert rc == 2 and "bert.encoder.layer.0.attention.self.query.weight" in line and not out.exists()
