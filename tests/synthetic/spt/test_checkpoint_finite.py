"""A synthetic SPT checkpoint holding a NaN or infinite tensor is refused naming the tensors: the resume file of a
loop (weights, optimizer state, the best epoch's weights) and the SPT checkpoint a fine-tuning cell loads."""

from __future__ import annotations

import pytest
import torch

from initlab.config import derive
from initlab.runs import NonFiniteCheckpointError
from initlab.synthetic import spt
from initlab.synthetic.spt import training
from initlab.synthetic.spt.cells import ckpt_path, finetune_cell, fresh_model, seed_data
from initlab.synthetic.spt.tasks import TaskConfig

TINY = derive(spt.BASE, seeds=(0,), task=TaskConfig(T=20), n_train=64, n_val=32, n_test=64, d_model=8, d_ff=8,
              batch_size=16, probe_size=4, finetune_max_epochs=3, conditions=("scratch", "spt"))


class _Stop(Exception):
    pass


class _StopAfter:
    def __init__(self, n):
        self.n, self.done = n, 0

    def start(self, done, total=None):
        pass

    def advance(self, k=1.0):
        self.done += 1
        if self.done == self.n:
            raise _Stop


@pytest.mark.parametrize("part", ["model", "opt"])
def test_a_resume_file_with_a_nan_tensor_is_refused_naming_it(tmp_path, part):
    ck = training.Checkpoint(tmp_path / "ft.pt")
    with pytest.raises(_Stop):
        training.finetune(fresh_model(TINY, 1, "full", 0), seed_data(TINY, 0), torch.Generator().manual_seed(3), lr=3e-3,
                          weight_decay=0.01, batch_size=16, max_epochs=3, patience=0, checkpoint=ck,
                          progress=_StopAfter(1))
    saved = torch.load(ck.path, weights_only=True)
    if part == "model":
        name = "model.blocks.0.attn.W_Q.weight"
        saved["model"]["blocks.0.attn.W_Q.weight"][0, 0] = float("nan")
    else:
        name = "opt.state.0.exp_avg"
        saved["opt"]["state"][0]["exp_avg"].view(-1)[0] = float("inf")
    torch.save(saved, ck.path)
    with pytest.raises(NonFiniteCheckpointError, match=rf"resume checkpoint .*ft\.pt: 1 tensor\(s\) .*\({name}\)"):
        ck.load()


def test_a_fine_tuning_cell_refuses_an_spt_checkpoint_with_a_nan_weight(tmp_path):
    state = fresh_model(TINY, 1, "full", 0).state_dict()
    state["tok_emb.weight"][1, 1] = float("nan")
    path = ckpt_path(tmp_path, "local", "full", 1, 0, "rule")
    path.parent.mkdir(parents=True)
    torch.save(state, path)
    with pytest.raises(NonFiniteCheckpointError, match=r"SPT checkpoint .*: 1 tensor\(s\) .*\(tok_emb\.weight\)"):
        finetune_cell(str(tmp_path), "ft_spt__seed0", {"config": TINY, "condition": "spt", "seed": 0, "lr": 1e-3})
