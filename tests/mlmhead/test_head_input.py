"""``head_input``: the family's head transform, so that ``head_input(H) @ W_head.T + b`` are the model's logits."""

from __future__ import annotations

import pytest
import torch

from initlab.mlmhead import tiny_masked_lm
from initlab.mlmhead.heads import head_bias, head_input, head_projection

FAMILIES = ["bert", "distilbert", "albert", "roberta", "modernbert"]


@pytest.mark.parametrize("family", FAMILIES)
def test_head_input_reproduces_the_logits_float64(family):
    model = tiny_masked_lm(family, 53, hidden=16, layers=1, seed=3).double()
    ids = torch.randint(5, 53, (3, 7), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits
        hidden = model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state
        h = head_input(model, hidden)
        W, b = head_projection(model), head_bias(model)
        ours = torch.nn.functional.linear(h, W, b)
    assert h.shape == (3, 7, W.shape[1])
    assert logits.dtype == torch.float64
    torch.testing.assert_close(ours, logits, rtol=1e-12, atol=1e-12)


def test_head_input_refuses_a_model_without_a_head():
    model = tiny_masked_lm("bert", 20, hidden=16, layers=1)
    with pytest.raises(TypeError, match="model"):
        head_input(torch.nn.Linear(2, 2), torch.zeros(1, 2))
    with pytest.raises(ValueError, match="no MLM head"):
        head_input(model.bert, torch.zeros(1, 16))
