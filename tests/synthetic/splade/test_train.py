"""The training guards of the synthetic SPLADE pieces: the cell's Trainer callback and the backbone's MLM
pretraining stop on an injected NaN or a diverged loss (deterministic injection, not an absurd learning rate)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from initlab.runs import DivergenceError, NonFiniteError
from initlab.synthetic.splade.data import SPECIAL_TOKENS
from initlab.synthetic.splade.model import BackboneConfig, build_model, build_tokenizer, pretrain_mlm
from initlab.synthetic.splade.train import finite_guard_callback

VOCAB = list(SPECIAL_TOKENS) + [f"w{i}" for i in range(20)]
TINY = BackboneConfig(d=16, layers=1, heads=2, ffn=32, max_len=16)


class _State:
    def __init__(self, step: int):
        self.global_step = step


def test_cell_callback_stops_on_nan_and_on_a_diverged_total_loss():
    guard = finite_guard_callback("cell")
    guard.on_log(None, _State(1), None, logs={"loss": 3.0, "base_loss": 3.0, "document_regularizer_loss": 0.0})
    # the weighted FLOPS parts start at weight 0 and grow by design: not under the divergence rule
    guard.on_log(None, _State(2), None, logs={"loss": 4.0, "base_loss": 2.0, "document_regularizer_loss": 2.0})
    with pytest.raises(NonFiniteError, match=r"cell \(base_loss\): non-finite loss \(nan\) at step 3"):
        guard.on_log(None, _State(3), None, logs={"loss": 3.0, "base_loss": float("nan")})
    with pytest.raises(DivergenceError, match=r"cell \(loss\): loss diverged \(3e\+06 at step 4, more than 10000 times"):
        guard.on_log(None, _State(4), None, logs={"loss": 3e6, "base_loss": 3e6})
    model = torch.nn.Linear(2, 2)
    model.weight.grad = torch.full_like(model.weight, float("inf"))
    with pytest.raises(NonFiniteError, match=r"cell: non-finite gradient \(nan\) at step 6"):
        guard.on_pre_optimizer_step(None, _State(5), None, model=model)


@pytest.mark.parametrize("factor, error, words", [(float("nan"), NonFiniteError, "non-finite loss (nan) at step 3"),
                                                  (1e6, DivergenceError, "loss diverged")])
def test_backbone_mlm_pretraining_stops_before_the_bad_update(factor, error, words):
    tok = build_tokenizer(VOCAB)
    model = build_model(len(VOCAB), TINY, seed=0)
    real, calls = model.forward, {"n": 0}

    def forward(*a, **k):  # the loss of step 3 times ``factor``
        out = real(*a, **k)
        calls["n"] += 1
        if calls["n"] == 4:
            out.loss = out.loss * factor
        return out

    model.forward = forward
    texts = [" ".join(f"w{(i * 7 + j) % 20}" for j in range(8)) for i in range(16)]
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        pretrain_mlm(model, tok, texts, replace(TINY, mlm_steps=6, mlm_batch=4), seed=0)
