"""The causal-round conditions of initlab.synthetic.spt on tiny configs: the ALiBi distance bias, last-token
pooling, the W_Q/W_K init scale, SPT without position codes, the warm-up + cosine schedule (and its resume),
the widened learning-rate selection (spt included, interior flag, a diverged rate recorded, not fatal) and the
learning curves in the summary."""

from __future__ import annotations

import json
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from initlab.config import derive
from initlab.nn.encoder import ModelConfig, SequenceTransformer
from initlab.runs import NonFiniteError
from initlab.synthetic import spt
from initlab.synthetic.spt import cells, training
from initlab.synthetic.spt.cells import fresh_model, seed_data
from initlab.synthetic.spt.config import condition_spec
from initlab.nn.attention_metrics import proximity_mass
from initlab.synthetic.spt.tasks import TaskConfig

TINY = derive(spt.BASE, seeds=(0, 1), task=TaskConfig(T=20), n_train=32, n_val=16, n_test=32, d_model=8, d_ff=8,
              batch_size=16, finetune_max_epochs=3, finetune_patience=2, spt_max_epochs=4, spt_window=2,
              spt_sweep_epochs=(1, 2), depths=(1,), probe_size=4)
CAUSAL = ("scratch", "spt", "alibi_scratch", "qkscale_scratch", "lastpool_scratch", "spt_nopos")


def _model(**kw) -> SequenceTransformer:
    torch.manual_seed(0)
    return SequenceTransformer(ModelConfig(vocab_size=12, max_len=16, d_model=8, d_ff=8, **kw)).double()


def test_proximity_bias_alone_gives_the_alibi_map_and_both_paths_agree():
    m = _model(proximity_bias=0.7)
    with torch.no_grad():
        for lin in (m.blocks[0].attn.W_Q, m.blocks[0].attn.W_K):
            lin.weight.zero_()
            lin.bias.zero_()
    x = torch.randint(2, 12, (3, 10))
    with torch.no_grad():
        _, maps = m.encode(x, return_attn=True)
    pos = torch.arange(10, dtype=torch.float64)
    want = torch.softmax(-0.7 * (pos[:, None] - pos[None, :]).abs(), -1)
    assert torch.allclose(maps[0][:, 0], want.expand(3, 10, 10), atol=1e-12)
    assert proximity_mass(maps[0], 2) > 0.5  # a proximity pattern before any training


@settings(max_examples=20, deadline=None)
@given(slope=st.floats(0.0, 3.0), seed=st.integers(0, 1000))
def test_proximity_bias_fast_path_equals_reference(slope, seed):
    torch.manual_seed(seed)
    m = SequenceTransformer(ModelConfig(vocab_size=12, max_len=16, d_model=8, d_ff=8, proximity_bias=slope)).double()
    x = torch.randint(2, 12, (2, 9))
    real = torch.ones(2, 9, dtype=torch.bool)
    real[1, 6:] = False
    fast = m.encode(x, real)
    ref, _ = m.encode(x, real, return_attn=True)
    assert torch.allclose(fast[real], ref[real], atol=1e-10)


def test_last_pooling_reads_the_last_real_token_and_its_label_gradient_is_not_query_blind():
    m = _model(pooling="last")
    H = torch.randn(2, 5, 8, dtype=torch.float64)
    real = torch.tensor([[True] * 5, [True, True, True, False, False]])
    assert torch.equal(m.pool_last(H, real), torch.stack([H[0, 4], H[1, 2]]))
    assert torch.equal(m.pool_last(H), H[:, -1])
    # at exactly uniform attention the mean-pooled label gradient on the scores is the same for every query
    # (T1); with last-token pooling only the last query's row gets a gradient: the premise differs
    x, y = torch.randint(2, 12, (4, 6)), torch.tensor([0, 1, 0, 1])
    for pooling in ("mean", "last"):
        mm = _model(pooling=pooling, use_ffn=False, use_layernorm=False)
        with torch.no_grad():
            for lin in (mm.blocks[0].attn.W_Q, mm.blocks[0].attn.W_K):
                lin.weight.zero_()
                lin.bias.zero_()
        H, _ = mm.encode(x, return_attn=True)
        S = mm.blocks[0].attn.last_scores
        S.retain_grad()
        pooled = mm.pool_last(H) if pooling == "last" else mm.pool(H)
        torch.nn.functional.cross_entropy(mm.cls_head(pooled), y).backward()
        G = S.grad[:, 0]  # (B, T, T)
        rows_equal = torch.allclose(G, G[:, :1].expand_as(G), atol=1e-12)
        assert rows_equal == (pooling == "mean")
        if pooling == "last":
            assert G[:, :-1].abs().max() < 1e-12 and G[:, -1].abs().max() > 1e-6


def test_qk_scale_multiplies_only_the_initial_wq_wk():
    base, big = fresh_model(TINY, 1, "full", 0), fresh_model(TINY, 1, "full", 0, 4.0)
    for (n, a), (_, b) in zip(base.state_dict().items(), big.state_dict().items()):
        if n.endswith(("W_Q.weight", "W_K.weight")):
            assert torch.allclose(b, 4.0 * a)
        else:
            assert torch.equal(a, b)


def test_condition_specs_of_the_causal_arms():
    spec = condition_spec(TINY)
    assert spec["alibi_scratch"]["model"] == {"proximity_bias": TINY.alibi_slope} and spec["alibi_scratch"]["spt"] is None
    assert spec["qkscale_scratch"]["qk_scale"] == TINY.qk_init_scale
    assert spec["lastpool_scratch"]["model"] == {"pooling": "last"}
    assert spec["spt_nopos"]["spt"] == ("nopos", "rule") and spec["spt"]["model"] == {}


def test_cosine_schedule_factor():
    f = [training.lr_factor(s, 10, 2, "cosine") for s in range(12)]
    assert f[0] == pytest.approx(0.5) and f[1] == pytest.approx(1.0) and f[2] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(f[2:], f[3:])) and f[10] == pytest.approx(0.0, abs=1e-12) and f[11] == f[10]
    assert f[6] == pytest.approx(0.5)  # half-way through the decay
    assert all(training.lr_factor(s, 10, 0, "constant") == 1.0 for s in range(12))
    with pytest.raises(ValueError, match="schedule"):
        training.lr_factor(0, 10, 0, "linear")
    with pytest.raises(ValueError, match="warmup"):
        training.lr_factor(0, 10, 10, "cosine")
    with pytest.raises(ValueError, match="ft_schedule"):
        derive(TINY, ft_schedule="step")
    with pytest.raises(ValueError, match="warmup_epochs"):
        derive(TINY, warmup_epochs=3)


class _Stop(Exception):
    pass


class _After:
    def __init__(self, n):
        self.n, self.done = n, 0

    def start(self, done, total=None):
        pass

    def advance(self, k=1.0):
        self.done += 1
        if self.n is not None and self.done == self.n:
            raise _Stop


def _cosine(ck, progress):
    d = seed_data(TINY, 0)
    return training.finetune(fresh_model(TINY, 1, "full", 0), d, torch.Generator().manual_seed(3), lr=3e-3, weight_decay=0.01,
                             batch_size=16, max_epochs=6, patience=0, checkpoint=ck, progress=progress,
                             schedule="cosine", warmup_epochs=1)


def test_cosine_finetune_resumes_bit_identically_and_differs_from_constant(tmp_path):
    ref, _ = _cosine(None, None)
    ck = training.Checkpoint(tmp_path / "ft.pt")
    with pytest.raises(_Stop):
        _cosine(ck, _After(3))
    out, _ = _cosine(ck, _After(None))
    out.pop("resumed_epochs"), ref.pop("resumed_epochs")
    assert json.dumps(out) == json.dumps(ref)
    const, _ = training.finetune(fresh_model(TINY, 1, "full", 0), seed_data(TINY, 0), torch.Generator().manual_seed(3), lr=3e-3,
                                 weight_decay=0.01, batch_size=16, max_epochs=6, patience=0)
    assert const["history"] != ref["history"]


@pytest.fixture(scope="module")
def causal_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("causal") / "run"
    spt.run(derive(TINY, conditions=CAUSAL), out, progress=False, workers=1)
    return out


def test_every_causal_arm_runs_and_keeps_its_learning_curve(causal_run):
    m = json.loads((causal_run / "metrics.json").read_text())["summary"]
    assert set(m["per_seed"]) == set(CAUSAL)
    for cond in CAUSAL:
        for seed in ("0", "1"):
            c = m["curves"][cond][seed]
            assert len(c["train_acc"]) == len(c["val_acc"]) >= 2 and c["train_acc"][0] is None
    conds = {c["condition"]: c for c in m["conditions"]}
    assert conds["alibi_scratch"]["prox_start_mean"] > conds["scratch"]["prox_start_mean"] + 0.1
    nopos = [r for r in m["spt_runs"] if r["source"] == "nopos"]
    assert len(nopos) == 2 and (causal_run / "ckpt" / "spt_nopos_full_d1_seed0_erule.pt").exists()
    state = torch.load(causal_run / "ckpt" / "spt_nopos_full_d1_seed0_erule.pt", weights_only=True)
    local = torch.load(causal_run / "ckpt" / "spt_local_full_d1_seed0_erule.pt", weights_only=True)
    assert not torch.equal(state["blocks.0.attn.W_Q.weight"], local["blocks.0.attn.W_Q.weight"])


def test_lr_selection_covers_spt_flags_edges_and_survives_a_diverged_rate(tmp_path, monkeypatch):
    real = training.guarded_step

    def step(model, opt, loss, where, n, guard):  # the largest rate "diverges" at its first step (injected)
        if opt.param_groups[0]["lr"] > 0.05:
            loss = loss * float("nan")
        return real(model, opt, loss, where, n, guard)

    monkeypatch.setattr(training, "guarded_step", step)
    cfg = derive(TINY, lr_sweep=(1e-3, 1e-2, 1e-1), conditions=("scratch", "spt"))
    spt.run(cfg, tmp_path / "lr", progress=False, workers=1)
    m = json.loads((tmp_path / "lr" / "metrics.json").read_text())["summary"]
    for cond in ("scratch", "spt"):
        sel = m["lr_selection"][cond]
        assert sel["rows"]["0.1"]["val_acc_mean"] == 0.0 and sel["chosen"] != 0.1
        assert sel["interior"] == (sel["chosen"] == 0.01)
    diverged = json.loads((tmp_path / "lr" / "cells" / "ft_scratch__lr0.1__seed0.json").read_text())
    assert "non-finite" in diverged["diverged"]
    # outside a learning-rate selection a divergence still stops the run
    with pytest.raises(NonFiniteError):
        spt.run(derive(TINY, seeds=(0,), conditions=("scratch",), label_lr=(("scratch", 0.1),)), tmp_path / "x",
                progress=False, workers=1)
    with pytest.raises(ValueError, match="scratch_matched"):
        spt.run(derive(TINY, lr_sweep=(1e-3,), conditions=("scratch", "spt", "scratch_matched")), tmp_path / "y",
                progress=False, workers=1)


def test_report_lr_choice_interior_flag():
    from initlab.synthetic.spt.report import lr_choice

    rec = lambda v: {"val_acc": v, "test_acc": v, "epochs_run": 3, "final_train_acc": v}  # noqa: E731
    edge = lr_choice({"scratch": {1e-3: [rec(0.5)], 1e-2: [rec(0.6)], 1e-1: [rec(0.7)]}})["scratch"]
    inner = lr_choice({"scratch": {1e-3: [rec(0.5)], 1e-2: [rec(0.8)], 1e-1: [rec(0.7)]}})["scratch"]
    assert (edge["chosen"], edge["interior"]) == (1e-1, False) and (inner["chosen"], inner["interior"]) == (1e-2, True)
    assert not math.isnan(inner["rows"]["0.01"]["train_acc_mean"])
