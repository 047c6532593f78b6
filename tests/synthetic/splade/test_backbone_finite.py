"""A synthetic SPLADE cell's saved backbone holding a NaN weight is refused naming the tensor
(:func:`initlab.synthetic.splade.families.load_family_backbone`, which the phase and out-of-domain cells load)."""

from __future__ import annotations

import pytest
import torch

from initlab.mlmhead import tiny_masked_lm, tiny_tokenizer
from initlab.runs import NonFiniteCheckpointError
from initlab.synthetic.splade.families import load_family_backbone


def test_a_saved_backbone_with_a_nan_weight_is_refused(tmp_path):
    tok = tiny_tokenizer(tmp_path)
    model = tiny_masked_lm("bert", len(tok), hidden=16, layers=1)
    with torch.no_grad():
        model.bert.encoder.layer[0].output.dense.bias[2] = float("nan")
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    with pytest.raises(NonFiniteCheckpointError, match=r"backbone .*: 1 tensor\(s\) .*bert\.encoder\.layer\.0\.output\.dense\.bias"):
        load_family_backbone(tmp_path)
