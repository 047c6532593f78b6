"""The vectorized ensemble equals the per-seed sequential path; NaN/inf stops training."""

from __future__ import annotations

import pytest
import torch

from initlab.nn.encoder import ModelConfig, SequenceTransformer, freeze
from initlab.runs import DivergenceError, NonFiniteError
from initlab.synthetic.spt.ensemble import FinetuneMember, PretrainMember, batched_forward, finetune_members, pretrain_members
from initlab.synthetic.spt.tasks import MASK_ID, TaskConfig, make_task, vocab_size

TASK = TaskConfig(T=20)
SEEDS = (0, 1, 2)


def _models(n_layers=1, frozen=False, **kw):
    out = []
    for s in SEEDS:
        torch.manual_seed(s)
        m = SequenceTransformer(ModelConfig(vocab_size=vocab_size(TASK), max_len=20, d_model=8, d_ff=12, n_layers=n_layers, **kw))
        if frozen:
            freeze(m, ["qkvo"])
        out.append(m)
    return out


@pytest.mark.parametrize("kw", [dict(), dict(n_heads=2, n_layers=2), dict(use_ffn=False, use_layernorm=False)])
def test_batched_forward_equals_each_model(kw):
    models = _models(**kw)
    tok = torch.stack([make_task("local", 4, 10 + s, TASK)[0] for s in SEEDS])
    P = {n: torch.stack([dict(m.named_parameters())[n] for m in models]) for n, _ in models[0].named_parameters()}
    cls = batched_forward(P, models[0].pos, models[0].cfg, tok, "cls")
    mlm = batched_forward(P, models[0].pos, models[0].cfg, tok, "mlm")
    for i, m in enumerate(models):
        torch.testing.assert_close(cls[i], m.classify(tok[i]), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(mlm[i], m.reconstruct(tok[i]), rtol=1e-5, atol=1e-5)


def _pre_members(models):
    return [PretrainMember(m, make_task("local", 48, 100 + s, TASK)[0], make_task("local", 16, 200 + s, TASK)[0],
                           torch.Generator().manual_seed(s), 300 + s) for s, m in zip(SEEDS, models)]


def _ft_members(models):
    mk = lambda k, s, n: make_task("local", n, 1000 * s + k, TASK)  # noqa: E731
    return [FinetuneMember(m, *mk(1, s, 48), *mk(6, s, 16), *mk(2, s, 16), torch.Generator().manual_seed(s))
            for s, m in zip(SEEDS, models)]


def test_pretrain_ensemble_equals_sequential():
    kw = dict(lr=3e-3, weight_decay=0.01, batch_size=16, mask_rate=0.15, mask_id=MASK_ID, patience=1, max_epochs=3, snapshots=(0, 2))
    ens = pretrain_members(_pre_members(_models()), vectorized=True, **kw)
    seq = [pretrain_members([m], vectorized=False, **kw)[0] for m in _pre_members(_models())]
    for a, b in zip(ens, seq):
        assert (a["best_epoch"], a["stop_epoch"]) == (b["best_epoch"], b["stop_epoch"])
        assert a["val_loss"] == pytest.approx(b["val_loss"], abs=1e-5)
        assert set(a["states"]) == set(b["states"]) >= {"rule", 0, 2}
        for e in a["states"]:
            for k in a["states"][e]:
                # W_K's bias adds a per-query constant to the scores, which softmax ignores: its gradient is 0
                # up to rounding, and Adam normalises that rounding noise into steps of size lr on either path.
                if not k.endswith("W_K.bias"):
                    torch.testing.assert_close(a["states"][e][k], b["states"][e][k], rtol=0, atol=1e-5)


def test_finetune_ensemble_equals_sequential_with_frozen_attention():
    kw = dict(lr=3e-3, weight_decay=0.01, batch_size=16, epochs=3)
    ens, ens_models = finetune_members(_ft_members(_models(frozen=True)), vectorized=True, **kw)
    seq = [finetune_members([m], vectorized=False, **kw) for m in _ft_members(_models(frozen=True))]
    init = _models()
    for a, am, (b, bm), m0 in zip(ens, ens_models, seq, init):
        assert (a["best_epoch"], a["test_acc"], a["final_test_acc"]) == (b[0]["best_epoch"], b[0]["test_acc"], b[0]["final_test_acc"])
        for ha, hb in zip(a["history"][1:], b[0]["history"][1:]):
            assert ha["train_loss"] == pytest.approx(hb["train_loss"], abs=1e-5)
            assert (ha["train_acc"], ha["val_acc"]) == (hb["train_acc"], hb["val_acc"])
        for (n, p), q in zip(am.named_parameters(), bm[0].parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=1e-5)
        torch.testing.assert_close(am.blocks[0].attn.W_Q.weight, m0.blocks[0].attn.W_Q.weight, rtol=0, atol=0)  # frozen


def _inject(monkeypatch, at_step: int, factor, member: int | None = None):
    """Multiply the members' losses (all, or only ``member``'s) by ``factor`` at optimisation step ``at_step``,
    before the guard sees them: a deterministic NaN or divergence, whatever the CPU's rounding."""
    from initlab.synthetic.spt import ensemble

    real = ensemble._Engine.step

    def step(self, losses, where, step_):
        if step_ == at_step:
            scale = torch.ones_like(losses)
            scale[slice(None) if member is None else member] = factor
            losses = losses * scale
        return real(self, losses, where, step_)

    monkeypatch.setattr(ensemble._Engine, "step", step)


@pytest.mark.parametrize("vectorized", [True, False])
def test_nan_loss_stops_with_nonfinite_error(monkeypatch, vectorized):
    _inject(monkeypatch, 3, float("nan"))
    with pytest.raises(NonFiniteError, match=r"synthetic SPT pretrain: non-finite loss \(nan\) at step 3;"):
        pretrain_members(_pre_members(_models()), lr=3e-3, weight_decay=0.0, batch_size=16, mask_rate=0.15, mask_id=MASK_ID,
                         patience=5, max_epochs=20, vectorized=vectorized)
    with pytest.raises(NonFiniteError, match=r"synthetic SPT fine-tune: non-finite loss \(nan\) at step 3;"):
        finetune_members(_ft_members(_models()), lr=3e-3, weight_decay=0.0, batch_size=16, epochs=20, vectorized=vectorized)


@pytest.mark.parametrize("vectorized", [True, False])
def test_one_member_diverging_stops_the_ensemble(monkeypatch, vectorized):
    # member 1's loss 10^6 times its value at step 3: the divergence rule, per member (the others are fine)
    _inject(monkeypatch, 3, 1e6, member=1)
    with pytest.raises(DivergenceError, match=r"synthetic SPT fine-tune: loss diverged \(.* at step 3, more than 10000"):
        finetune_members(_ft_members(_models()), lr=3e-3, weight_decay=0.0, batch_size=16, epochs=20, vectorized=vectorized)
