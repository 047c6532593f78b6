"""initlab.synthetic.spt.batched: M models trained as one batched model equal the one-at-a-time loops (the
reference) in float64 -- losses, gradients, parameters and every returned number -- with per-model seeds, data and
learning rates, for masked reconstruction (SPT) and label training; a non-finite model is taken out alone."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from initlab.config import derive
from initlab.nn import batched as nb
from initlab.nn.encoder import freeze
from initlab.nn.masking import mask_tokens
from initlab.synthetic import spt
from initlab.synthetic.spt import batched, training
from initlab.synthetic.spt.cells import fresh_model, seed_data, spt_inputs
from initlab.synthetic.spt.tasks import MASK_ID, TaskConfig

TINY = derive(spt.BASE, seeds=(0,), task=TaskConfig(T=20), n_train=64, n_val=32, n_test=64, d_model=8, d_ff=8,
              batch_size=16, probe_size=4)
SEEDS = (3, 5, 11)


def _close(a, b, what):
    """Equal to float64 rounding: a relative 1e-9 of the larger magnitude (both are float64 computations of the same
    operations, the batched matmul possibly summing in another order)."""
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    assert a.shape == b.shape, what
    tol = 1e-9 * max(1.0, float(b.abs().max()) if b.numel() else 1.0)
    assert torch.equal(a.isnan(), b.isnan()), what
    assert float((a - b).nan_to_num().abs().max()) <= tol if a.numel() else True, what


def _models(depth=1, variant="full", **over):
    return [fresh_model(TINY, depth, variant, s, **over).double() for s in SEEDS]


def test_batched_adamw_step_equals_torch_adamw_per_model_rate():
    # one update from equal gradients: each model's parameters as torch.optim.AdamW at its own rate gives them
    models = _models()
    params = nb.stack(models)
    lrs = [1e-3, 3e-2, 1e-1]
    opt = batched.BatchedAdamW(params, list(params), weight_decay=0.01)
    refs = [torch.optim.AdamW(m.parameters(), lr=lr, weight_decay=0.01) for m, lr in zip(models, lrs)]
    gen = torch.Generator().manual_seed(0)
    for _ in range(3):
        for n, p in params.items():
            p.grad = torch.randn(p.shape, generator=gen, dtype=p.dtype)
            for i, m in enumerate(models):
                dict(m.named_parameters())[n].grad = p.grad[i].clone()
        opt.step(params, lrs)
        for o in refs:
            o.step()
    for i, m in enumerate(models):
        for n, p in m.named_parameters():
            assert torch.equal(params[n][i], p.detach()), n  # the same operations: bitwise


@pytest.mark.parametrize("over", [dict(), dict(variant="attn_only"), dict(depth=2), dict(proximity_bias=0.4),
                                  dict(pooling="last"), dict(pos_encoding="none"), dict(pre_norm=False),
                                  dict(use_residual=False)])
def test_one_step_losses_and_gradients_match(over):
    over = dict(over)
    depth, variant = over.pop("depth", 1), over.pop("variant", "full")
    models = _models(depth, variant, **over)
    params = nb.stack(models)
    x = torch.stack([seed_data(TINY, s)["xtr"][:16] for s in SEEDS])
    y = torch.stack([seed_data(TINY, s)["ytr"][:16] for s in SEEDS])
    inp, masked = mask_tokens(x.reshape(-1, x.shape[-1]), 0.15, torch.Generator().manual_seed(1), mask_id=MASK_ID)
    inp, masked = inp.view(x.shape), masked.view(x.shape)
    masked[:, 0, 0] = True
    cfg = models[0].cfg
    for kind in ("spt", "label"):
        for p in params.values():
            p.grad = None
        if kind == "spt":
            losses = torch.stack([training.masked_loss(lg, t, mk) for lg, t, mk in
                                  zip(nb.reconstruct(params, cfg, inp), x, masked)])
        else:
            losses = torch.stack([F.cross_entropy(lg, t) for lg, t in zip(nb.classify(params, cfg, x), y)])
        losses.sum().backward()
        for i, m in enumerate(models):
            m.zero_grad()
            ref = (training.masked_loss(m.reconstruct(inp[i]), x[i], masked[i]) if kind == "spt"
                   else F.cross_entropy(m.classify(x[i]), y[i]))
            ref.backward()
            _close(losses[i].detach(), ref.detach(), f"{kind} loss {i}")
            for n, p in m.named_parameters():
                if p.grad is None:  # a head the loss does not use
                    assert params[n].grad is None, n
                else:
                    _close(params[n].grad[i], p.grad, f"{kind} grad {n} of model {i}")


def _assert_result_close(got, ref, where):
    assert set(got) == set(ref), where
    for k, v in ref.items():
        if k == "states":
            assert set(got[k]) == set(v), where
            for e in v:
                for n in v[e]:
                    _close(got[k][e][n], v[e][n], f"{where} state {e} {n}")
        elif k == "history":
            assert len(got[k]) == len(v), where
            for hg, hr in zip(got[k], v):
                for f in hr:
                    _close(hg[f], hr[f], f"{where} history {f}")
        elif isinstance(v, list):
            _close(got[k], v, f"{where} {k}")
        elif isinstance(v, float):
            _close(got[k], v, f"{where} {k}")
        else:
            assert got[k] == v, f"{where} {k}: {got[k]} != {v}"


SPT_KW = dict(weight_decay=0.01, batch_size=16, mask_rate=0.15, mask_id=MASK_ID, window=2, min_rel=0.02,
              max_epochs=6, snapshots=(1, 4))


def test_pretrain_batched_equals_one_at_a_time_per_model_rates_and_seeds():
    lrs = [3e-3, 1e-2, 3e-3]
    refs = []
    for s, lr in zip(SEEDS, lrs):
        x, xv = spt_inputs(TINY, "local", s)
        r = training.pretrain(fresh_model(TINY, 1, "full", s).double(), x, xv, torch.Generator().manual_seed(7 * s), s + 5,
                              lr=lr, **SPT_KW)
        refs.append(r)
    data = [spt_inputs(TINY, "local", s) for s in SEEDS]
    got = batched.pretrain_batched(_models(), [d[0] for d in data], [d[1] for d in data],
                                   [torch.Generator().manual_seed(7 * s) for s in SEEDS], [s + 5 for s in SEEDS],
                                   lrs=lrs, **SPT_KW)
    assert len({r["stop_epoch"] for r in refs}) > 1  # models leave the batch at different epochs
    for i, (g, r) in enumerate(zip(got, refs)):
        _assert_result_close(g, r, f"model {i}")


def _ft_ref(s, lr, max_epochs, patience, schedule="constant", warmup=0, frozen=()):
    m = fresh_model(TINY, 1, "full", s).double()
    if frozen:
        freeze(m, frozen)
    d = {k: v for k, v in seed_data(TINY, s).items() if k != "probe"}
    return training.finetune(m, d, torch.Generator().manual_seed(7919 * s + 3), lr=lr, weight_decay=0.01,
                             batch_size=16, max_epochs=max_epochs, patience=patience, schedule=schedule,
                             warmup_epochs=warmup)


@pytest.mark.parametrize("schedule,frozen", [("constant", ()), ("cosine", ("qkvo",))])
def test_finetune_batched_equals_one_at_a_time(schedule, frozen):
    lrs, max_epochs, patience = [1e-2, 3e-2, 3e-3], [6, 6, 4], [2, 0, 2]
    warm = [2, 2, 1] if schedule == "cosine" else [0, 0, 0]
    refs = [_ft_ref(s, lr, e, p, schedule, w, frozen) for s, lr, e, p, w in zip(SEEDS, lrs, max_epochs, patience, warm)]
    models = _models()
    if frozen:
        for m in models:
            freeze(m, frozen)
    data = [{k: v for k, v in seed_data(TINY, s).items() if k != "probe"} for s in SEEDS]
    got = batched.finetune_batched(models, data, [torch.Generator().manual_seed(7919 * s + 3) for s in SEEDS],
                                   lrs=lrs, weight_decay=0.01, batch_size=16, max_epochs=max_epochs,
                                   patience=patience, schedule=schedule, warmup_epochs=warm)
    for i, ((g, gstate), (r, rmodel)) in enumerate(zip(got, refs)):
        _assert_result_close(g, r, f"model {i}")
        for n, p in rmodel.state_dict().items():
            _close(gstate[n], p, f"final {n} of model {i}")
    if frozen:  # frozen groups are never updated
        for (g, gstate), m in zip(got, _models()):
            for n, p in m.named_parameters():
                if ".attn." in n:
                    assert torch.equal(gstate[n], p.detach())


def test_a_non_finite_model_is_taken_out_alone():
    # model 1 gets a NaN weight: its loss is NaN at the first step; the others train on, equal to their references
    models = _models()
    with torch.no_grad():
        models[1].cls_head.weight[0, 0] = float("nan")
    data = [{k: v for k, v in seed_data(TINY, s).items() if k != "probe"} for s in SEEDS]
    got = batched.finetune_batched(models, data, [torch.Generator().manual_seed(7919 * s + 3) for s in SEEDS],
                                   lrs=[1e-2] * 3, weight_decay=0.01, batch_size=16, max_epochs=[3] * 3,
                                   patience=[0] * 3, wheres=["a", "b", "c"])
    assert set(got[1]) == {"error"} and "b" in str(got[1]["error"]) and "step 0" in str(got[1]["error"])
    for i in (0, 2):
        r, _ = _ft_ref(SEEDS[i], 1e-2, 3, 0)
        _assert_result_close(got[i][0], r, f"model {i}")
        assert math.isfinite(got[i][0]["test_acc"])


# -- the cells: the batched engine returns the one-seed cells' results ------------------------------------------------
from initlab.synthetic.spt import cells as spt_cells  # noqa: E402
from initlab.synthetic.spt.runner import expand_groups, plan  # noqa: E402

CELLS_CFG = derive(TINY, seeds=(0, 1, 2), n_train=32, n_val=16, n_test=32, finetune_max_epochs=3, finetune_patience=1,
                   spt_max_epochs=4, spt_window=2, spt_sweep_epochs=(1,), depths=(1,))


def _same_result(got, ref, where):
    if isinstance(ref, dict):
        assert set(got) == set(ref), where
        for k in ref:
            _same_result(got[k], ref[k], f"{where}.{k}")
    elif isinstance(ref, list):
        assert len(got) == len(ref), where
        for i, (a, b) in enumerate(zip(got, ref)):
            _same_result(a, b, f"{where}[{i}]")
    elif isinstance(ref, float):
        _close(got, ref, where)
    else:
        assert got == ref, where


@pytest.fixture()
def float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # models built by the cells are then float64
    yield
    torch.set_default_dtype(old)


def test_spt_seeds_and_finetune_seeds_give_the_one_seed_cells_results(tmp_path, float64):
    cfg, seeds = CELLS_CFG, [0, 1, 2]
    args = {"config": cfg}
    one, many = tmp_path / "one", tmp_path / "many"
    ref = {spt_cells.spt_cell_name("local", "full", 1, s): spt_cells.spt_cell(
        str(one), "x", {**args, "source": "local", "variant": "full", "depth": 1, "seed": s, "snapshots": [1]})
        for s in seeds}
    got = spt_cells.spt_seeds(many, cfg, "local", "full", 1, seeds, (1,))
    _same_result(got, ref, "spt")
    for e in ("rule", 1):  # the checkpoints the fine-tuning cells load
        for s in seeds:
            a = torch.load(spt_cells.ckpt_path(many, "local", "full", 1, s, e), weights_only=True)
            b = torch.load(spt_cells.ckpt_path(one, "local", "full", 1, s, e), weights_only=True)
            for n in b:
                _close(a[n], b[n], f"checkpoint {e} {n}")
    lrs = [1e-2, 3e-3, 1e-2]
    for cond in ("spt", "frozen_attn", "hybrid_qk"):
        ref = {spt_cells.ft_cell_name(cond, s): spt_cells.finetune_cell(
            str(one), "x", {**args, "condition": cond, "seed": s, "lr": lr}) for s, lr in zip(seeds, lrs)}
        got = spt_cells.finetune_seeds(many, cfg, cond, seeds, lrs)
        _same_result(got, ref, cond)


def test_batched_plan_groups_cells_and_a_run_reports_every_condition(tmp_path):
    cfg = derive(CELLS_CFG, engine="batched", conditions=("scratch", "spt", "scratch_matched", "hybrid_qk"))
    cells = plan(cfg)
    names = [c.name for c in cells]
    assert "spt_local_full_d1__seeds0-1-2" in names and "ft_scratch_matched__seeds0-1-2" in names
    matched = cells[names.index("ft_scratch_matched__seeds0-1-2")]
    assert set(matched.needs) == {"spt_local_full_d1__seeds0-1-2", "ft_spt__seeds0-1-2"}
    assert set(matched.args["matched_from"]) == set(matched.needs)
    single = plan(derive(cfg, engine="single"))
    assert sum(c.units for c in cells) == pytest.approx(sum(c.units for c in single))
    assert all(c.key["config"]["engine"] == "batched" for c in cells)
    assert all("engine" not in c.key["config"] for c in single)  # saved runs' keys unchanged
    md = spt.run(cfg, tmp_path / "run", progress=False, workers=1)
    for cond in cfg.conditions:
        assert f"| {cond} |" in md
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["config"]["engine"] == "batched"


def test_a_learning_rate_selection_is_one_group_per_condition():
    cfg = derive(CELLS_CFG, engine="batched", conditions=("scratch", "alibi_scratch"), lr_sweep=(1e-3, 1e-2))
    groups = [c for c in plan(cfg) if c.args["kind"] == "finetune_group"]
    assert [c.name for c in groups] == ["ft_scratch__sweep__seeds0-1-2", "ft_alibi_scratch__sweep__seeds0-1-2"]
    for c in groups:
        assert c.args["lr_sweep"] and sorted(zip(c.args["lrs"], c.args["seeds"])) == sorted(
            (lr, s) for lr in (1e-3, 1e-2) for s in (0, 1, 2))
    single = [c for c in plan(derive(cfg, engine="single")) if c.args["kind"] == "finetune"]
    assert sum(c.units for c in groups) == pytest.approx(sum(c.units for c in single))
    # a group's result expands to the one-seed cells' names
    assert expand_groups({"g": {"kind": "group", "cells": {"ft_scratch__lr0.001__seed0": {"kind": "finetune"}}},
                          "init_grad__seed0": {"kind": "init_grad"}}) == {
        "ft_scratch__lr0.001__seed0": {"kind": "finetune"}, "init_grad__seed0": {"kind": "init_grad"}}
