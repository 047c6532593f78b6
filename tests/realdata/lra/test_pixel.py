"""The authors' pixel input path on CPU: linear pixel embedding, masked-pixel L1 pretraining, fine-tuning."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from initlab.realdata.lra import train as T
from initlab.realdata.lra.config import PRESETS, LRAConfig
from initlab.realdata.lra.tokens import MASK_ID, N_SPECIAL, PAD_ID
from initlab.realdata.lra.masking import masked_pixel_l1
from initlab.realdata.lra.model import PixelLinearEmbedding
from initlab.realdata.lra.pixel_fixture import write_cifar_like


def test_pixel_linear_embedding_is_affine_in_the_value():
    torch.manual_seed(0)
    emb = PixelLinearEmbedding(8, N_SPECIAL).double()
    ids = torch.tensor([[PAD_ID, MASK_ID, N_SPECIAL, N_SPECIAL + 255, N_SPECIAL + 51]])
    out = emb(ids)
    w, b = emb.proj.weight[:, 0], emb.proj.bias
    torch.testing.assert_close(out[0, 2], b)
    torch.testing.assert_close(out[0, 3], w + b)
    torch.testing.assert_close(out[0, 4], 0.2 * w + b)
    torch.testing.assert_close(out[0, :2], emb.special.weight[[PAD_ID, MASK_ID]])


def test_masked_pixel_l1_value():
    tok = torch.tensor([[N_SPECIAL + 0, N_SPECIAL + 255, N_SPECIAL + 102]])
    pred = torch.tensor([[0.5, 0.5, 0.4]])
    loss, n = masked_pixel_l1(pred, tok, torch.tensor([[True, False, True]]))
    assert n == 2 and float(loss) == pytest.approx((0.5 + 0.0) / 2)
    zero, n0 = masked_pixel_l1(pred, tok, torch.zeros(1, 3, dtype=torch.bool))
    assert n0 == 0 and float(zero) == 0.0


def test_pixel_options_are_checked():
    with pytest.raises(ValueError, match="pixel_input: 'linear' applies to the pixel tasks"):
        LRAConfig(task="listops", pixel_input="linear")
    with pytest.raises(ValueError, match="spt_loss: 'l1'.*needs pixel_input='linear'"):
        LRAConfig(task="image", spt_loss="l1")
    assert PRESETS["image"].pixel_input == "linear" and PRESETS["image"].spt_loss == "l1"
    assert PRESETS["pathfinder"].pixel_input == "linear" and PRESETS["pathfinder"].spt_loss == "ce"


@pytest.mark.parametrize("spt_loss", ["l1", "ce"])
def test_image_linear_input_pretrain_then_finetune(tmp_path, spt_loss):
    data = write_cifar_like(tmp_path / "cifar", n_per_batch=8, n_test=8)
    cfg = replace(PRESETS["image"], data_dir=str(data), n_layers=1, d_model=16, n_heads=2, d_ff=32, batch_size=8,
                  spt_batch_size=8, warmup_steps=1, spt_warmup_steps=1, epochs=1, spt_epochs=2, spt_loss=spt_loss,
                  bf16=False, cpu_threads=1, metrics_examples=2, device="cpu", init="spt")
    pt = T.pretrain(cfg, tmp_path / "pt", progress=False)
    assert pt["spt_loss"] == spt_loss and len(pt["history"]) == 2
    losses = [r["val_loss"] for r in pt["history"]]
    assert all(0 < v < (1.0 if spt_loss == "l1" else 10.0) for v in losses)  # L1 of values in [0, 1] is below 1
    state = T.load_weights(tmp_path / "pt" / "spt_best.safetensors")
    assert "tok_emb.proj.weight" in state and state["tok_emb.proj.weight"].shape == (16, 1)
    ft = T.finetune(cfg, tmp_path / "ft", tmp_path / "pt" / "spt_best.safetensors", progress=False)
    assert ft["n_copied_from_spt"] > 0 and 0.0 <= ft["test_acc"] <= 1.0
    model = T.build_model(cfg)
    T.init_from_spt(model, state, "all")
    torch.testing.assert_close(model.backbone.tok_emb.proj.weight, state["tok_emb.proj.weight"])
    assert json.loads((tmp_path / "ft" / "config.json").read_text())["config"]["pixel_input"] == "linear"
