"""``initlab.runs.nonfinite_tensors`` finds every floating tensor holding NaN or infinity in a checkpoint's nested
state; ``check_finite_tensors`` refuses it in one line naming them (the first four and a count)."""

from __future__ import annotations

import math
import pickle

import pytest
import torch

from initlab.runs import NonFiniteCheckpointError, check_finite_tensors, nonfinite_tensors


def test_nested_state_is_walked_and_named_by_path():
    m = torch.nn.Linear(3, 2)
    with torch.no_grad():
        m.bias[1] = -math.inf
    state = {"model": m, "opt": {"state": {0: {"exp_avg": torch.tensor([1.0, math.nan]), "step": torch.tensor(4)}}},
             "ids": torch.arange(3), "history": [1.0, math.nan], "halves": [torch.tensor([math.inf], dtype=torch.float16)]}
    assert nonfinite_tensors(state) == ["model.bias", "opt.state.0.exp_avg", "halves.0"]  # numbers are not tensors
    assert nonfinite_tensors({"w": torch.zeros(2, 2), "i": torch.tensor([2**62])}) == []
    assert nonfinite_tensors(torch.tensor([math.nan], dtype=torch.bfloat16)) == ["tensor"]


def test_the_error_is_one_line_naming_four_and_a_count_and_pickles():
    state = {f"layer{i}.weight": torch.tensor([math.nan]) for i in range(6)}
    with pytest.raises(NonFiniteCheckpointError) as err:
        check_finite_tensors("MODEL m", state)
    msg = str(err.value)
    assert msg.startswith("MODEL m: 6 tensor(s) hold NaN or infinite values (layer0.weight, layer1.weight, "
                          "layer2.weight, layer3.weight ... (2 more))") and "\n" not in msg
    assert isinstance(err.value, ValueError) and len(err.value.tensors) == 6
    again = pickle.loads(pickle.dumps(err.value))  # a worker process sends it back to its parent
    assert str(again) == msg
    check_finite_tensors("MODEL m", {"w": torch.ones(3)})  # finite: nothing raised
