"""Training precision: a backbone whose checkpoint stores bfloat16 trains with float32 master weights unless
asked otherwise (initlab.mlmhead.precision), and says so."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from initlab.config import derive
from initlab.realdata.splade.config import PRESETS
from initlab.realdata.splade.modeling import build_tiny_backbone
from initlab.realdata.splade.train import train_splade

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "splade"
TRIPLES = FIX / "msmarco" / "triples.train.small.tsv"


def _bf16_backbone(folder: Path) -> Path:
    """The tiny BERT of the quick preset, saved in bfloat16 (its config records dtype bfloat16)."""
    from transformers import AutoConfig, BertForMaskedLM

    texts = [w for line in TRIPLES.read_text(encoding="utf-8").splitlines() for w in line.split("\t")]
    build_tiny_backbone(folder, texts, hidden=32, layers=1, seed=0)
    BertForMaskedLM.from_pretrained(folder, dtype=torch.float32).to(torch.bfloat16).save_pretrained(folder)
    assert AutoConfig.from_pretrained(folder).dtype == torch.bfloat16
    return folder


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _changed_fraction(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> float:
    keys = sorted(set(before) & set(after))
    assert keys, "no common weight names"
    changed = sum(int((after[k].float() != before[k].float()).sum()) for k in keys)
    return changed / sum(before[k].numel() for k in keys)


def _train(backbone: Path, out: Path, **more):
    cfg = derive(PRESETS["quick"], tiny_model="", backbone=str(backbone), k=1.0, learning_rate=2e-5, max_steps=4,
                 train_source=str(TRIPLES), **more)
    return train_splade(cfg, out, progress=False)


def test_bf16_checkpoint_trains_with_float32_master_weights(tmp_path):
    """Same start and recipe, 4 steps at lr 2e-5: float32 master weights move nearly every entry; bfloat16 master
    weights (asked for with weights_dtype=stored) lose most updates to rounding (about a quarter of the
    entries move; the bound below is loose: the lost share depends only on |w| against lr 2^9)."""
    backbone = _bf16_backbone(tmp_path / "bf16-backbone")
    start = _weights(backbone)
    with pytest.warns(UserWarning, match=r"stores bfloat16 weights; loading them in float32 for training"):
        res = _train(backbone, tmp_path / "f32")
    assert res["weights_dtype"] == "float32"
    trained = _weights(tmp_path / "f32" / "model")
    assert {t.dtype for t in trained.values()} == {torch.float32}
    f32_moved = _changed_fraction(start, trained)
    with pytest.warns(UserWarning, match=r"training with bfloat16 master weights"):
        res = _train(backbone, tmp_path / "stored", weights_dtype="stored")
    assert res["weights_dtype"] == "bfloat16"
    bf16_moved = _changed_fraction(start, _weights(tmp_path / "stored" / "model"))
    assert f32_moved > 0.95, f32_moved
    assert bf16_moved < 0.6, bf16_moved


def test_float32_checkpoint_loads_without_a_warning(tmp_path, recwarn):
    from initlab.realdata.splade.modeling import build_splade

    texts = [w for line in TRIPLES.read_text(encoding="utf-8").splitlines() for w in line.split("\t")]
    folder = build_tiny_backbone(tmp_path / "f32", texts)
    model = build_splade(str(folder), k=1.0)
    assert next(model.parameters()).dtype == torch.float32
    assert not [w for w in recwarn if "master weights" in str(w.message) or "stores" in str(w.message)]


def test_unknown_weights_dtype_is_refused():
    with pytest.raises((TypeError, ValueError), match="weights_dtype"):
        derive(PRESETS["quick"], weights_dtype="float64")
