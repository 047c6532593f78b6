"""The diagnose validation's saved SPT checkpoint holding a NaN weight is refused naming the tensor, not
fine-tuned from."""

from __future__ import annotations

import pytest
import torch

from initlab.runs import NonFiniteCheckpointError
from initlab.synthetic.diagnose.run import run_arm
from initlab.synthetic.diagnose.settings import SETTINGS, Budget, setting_model


def test_a_saved_spt_checkpoint_with_a_nan_weight_is_refused(tmp_path):
    s, b = SETTINGS["local_T50"], Budget(n_train=32, n_val=16, n_test=16, spt_epochs=1, finetune_max_epochs=1)
    state = setting_model(s, 2901, b).state_dict()
    state["blocks.0.attn.W_K.weight"][0, 1] = float("nan")
    ck = tmp_path / "ckpt" / f"{s.name}__seed2901__spt.pt"
    ck.parent.mkdir()
    torch.save({"state": state, "info": {"val_loss": 1.0, "epochs": 1, "steps": 2}}, ck)
    with pytest.raises(NonFiniteCheckpointError, match=r"SPT checkpoint .*: 1 tensor\(s\) .*\(blocks\.0\.attn\.W_K\.weight\)"):
        run_arm(tmp_path, s, 2901, "spt", b, log=lambda *a: None)
    assert not (tmp_path / "cells").exists()
