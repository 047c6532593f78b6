"""``splade train`` does not resume from a Trainer checkpoint whose weights or optimizer state hold NaN or infinity:
:func:`initlab.realdata.splade.train.check_resume_checkpoint` names the tensors."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from initlab.realdata.splade.train import check_resume_checkpoint
from initlab.runs import NonFiniteCheckpointError


def _checkpoint(folder, weight=0.0, moment=0.0):
    folder.mkdir()
    save_file({"bert.embeddings.word_embeddings.weight": torch.full((4, 3), 0.5).index_fill_(0, torch.tensor([1]), weight),
               "bert.embeddings.position_ids": torch.arange(4)}, str(folder / "model.safetensors"))
    torch.save({"state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.full((4, 3), moment)}}, "param_groups": []},
               folder / "optimizer.pt")
    return folder


def test_a_finite_trainer_checkpoint_passes(tmp_path):
    check_resume_checkpoint(_checkpoint(tmp_path / "checkpoint-2"))


@pytest.mark.parametrize("weight, moment, name", [(float("nan"), 0.0, "model.safetensors.bert.embeddings.word_embeddings.weight"),
                                                  (0.0, float("inf"), "optimizer.pt.state.0.exp_avg")])
def test_a_non_finite_trainer_checkpoint_is_refused_naming_the_tensor(tmp_path, weight, moment, name):
    folder = _checkpoint(tmp_path / "checkpoint-2", weight, moment)
    with pytest.raises(NonFiniteCheckpointError, match=rf"resume checkpoint .*checkpoint-2: 1 tensor\(s\) .*\({name}\)"):
        check_resume_checkpoint(folder)
