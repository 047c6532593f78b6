"""initlab.diagnose.models: the built-in base configs and the model errors (no weights are built here)."""

from __future__ import annotations

import pytest

from initlab.diagnose.models import BUILTIN_CONFIGS, builtin_config, load_backend

BASE = {"bert-base": (12, 30522), "roberta-base": (12, 50265), "modernbert-base": (22, 50368),
        "albert-base": (12, 30000), "distilbert-base": (6, 30522)}


@pytest.mark.parametrize("name", BUILTIN_CONFIGS)
def test_builtin_configs_are_the_published_base_sizes(name):
    transformers = pytest.importorskip("transformers")
    raw = dict(builtin_config(name))
    cfg = transformers.AutoConfig.for_model(raw.pop("model_type"), **raw)
    layers = getattr(cfg, "num_hidden_layers", None) or cfg.n_layers
    hidden = getattr(cfg, "hidden_size", None) or cfg.dim
    assert (layers, cfg.vocab_size) == BASE[name] and hidden == 768


@pytest.mark.parametrize("spec,words", [
    ("initlab:nope", "unknown initlab config"),
    ("builtin:nope", "builtin:bert-base"),
    ("missing/folder/x", "no such folder"),
])
def test_bad_model_names(spec, words):
    with pytest.raises((ValueError, FileNotFoundError), match=words):
        load_backend(spec)


def test_bad_config_files(tmp_path):
    (tmp_path / "m.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a readable JSON file of ModelConfig fields"):
        load_backend(str(tmp_path / "m.json"))
    (tmp_path / "k.json").write_text('{"vocab_size": 10, "max_len": 8, "d_model": 8, "n_heads": 3}')
    with pytest.raises(ValueError, match="n_heads"):
        load_backend(str(tmp_path / "k.json"))
    (tmp_path / "ok.json").write_text('{"vocab_size": 10, "max_len": 8, "d_model": 8, "n_heads": 2}')
    assert load_backend(str(tmp_path / "ok.json")).n_heads == 2
    with pytest.raises(ValueError, match="--pretrained"):
        load_backend(str(tmp_path / "ok.json"), pretrained=True)
