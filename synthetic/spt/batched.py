"""The training loops of :mod:`initlab.synthetic.spt.training` for M models at once: one batched model.

The M models (the seeds, or the learning rates, of one arm) share a :class:`initlab.nn.encoder.ModelConfig`; their
parameters are stacked on a leading model axis (:func:`initlab.nn.batched.stack`) and every step computes the M
forward and backward passes in one batched call (:mod:`initlab.nn.batched`). Everything else stays per model, as in
the one-at-a-time loops, which remain the reference (:func:`initlab.synthetic.spt.training.pretrain`,
:func:`initlab.synthetic.spt.training.finetune`):

* its data and initial weights (the caller builds each model and data set as the one-at-a-time cell does);
* its own ``torch.Generator`` (batch order and SPT masks, drawn in the same order as the reference loop);
* its own AdamW state and learning rate (:class:`BatchedAdamW`: ``torch.optim.AdamW``'s update, a rate per model)
  and its own schedule (:func:`initlab.synthetic.spt.training.lr_factor`);
* its own loss (computed per model, so the gradient is that model's loss's), its own
  :class:`initlab.runs.LossGuard` and gradient check;
* its own stopping rule: a model that stops is taken out of the batch with its results as they were then, so the
  others go on unchanged (each model's arithmetic never reads another's).

A model whose loss or gradient becomes non-finite is taken out too, and its entry of the returned list holds the
:class:`initlab.runs.NonFiniteError` under ``"error"`` (the one-at-a-time loop raises it); the caller decides (a
learning-rate selection records it, a run raises it).

Equality (tests/synthetic/spt/test_batched.py): in float64, losses, gradients, parameters and every returned number
equal the one-at-a-time loops' to rounding, with per-model learning rates and seeds, for SPT and label training. In
float32 the two can differ in the last bits: a batched matmul over M models may round differently from one model's
matmul, and training amplifies such differences over many steps, so a seed trained batched and the same seed trained
alone agree in distribution, not bit for bit (which is why a run records its engine: ``SPTConfig.engine``).

Scope: no per-epoch resume file (a batched group is restarted after an interrupt; it is one cell of the executor),
models of one config only.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from initlab.nn import batched as nb
from initlab.nn.encoder import SequenceTransformer
from initlab.nn.masking import mask_tokens
from initlab.runs import LossGuard, NonFiniteError
from initlab.synthetic.spt.training import finetune_stop, lr_factor, select_on_validation, spt_stop_epoch

__all__ = ["BatchedAdamW", "pretrain_batched", "finetune_batched", "accuracy_batched"]


class BatchedAdamW:
    """``torch.optim.AdamW`` (its single-tensor update: no amsgrad, no maximize) on stacked parameters
    ``name -> (M, *shape)``, with a learning rate per model and every model's state its own.

    The update of model m is, elementwise, the one ``torch.optim.AdamW(lr=lr[m], betas, eps, weight_decay)`` applies
    to model m's parameters (same operations in the same order, the per-model factors rounded from the same Python
    floats), so given equal gradients it gives equal parameters. ``names``: the parameters updated (the trainable
    ones; the others are not touched, as an optimiser built on the trainable parameters only).

    Raises:
        ValueError: an unknown name.
    """

    def __init__(self, params: dict[str, torch.Tensor], names: Sequence[str], *, weight_decay: float,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        unknown = [n for n in names if n not in params]
        if unknown:
            raise ValueError(f"names: unknown parameters {unknown}")
        self.names = list(names)
        self.weight_decay, self.betas, self.eps = float(weight_decay), betas, eps
        self.steps = {n: 0 for n in self.names}
        self.exp_avg = {n: torch.zeros_like(params[n]) for n in self.names}
        self.exp_avg_sq = {n: torch.zeros_like(params[n]) for n in self.names}

    def keep(self, idx: torch.Tensor) -> None:
        """Keep only the models ``idx`` (a long index into the model axis), in that order."""
        for d in (self.exp_avg, self.exp_avg_sq):
            for n in d:
                d[n] = d[n][idx]

    @torch.no_grad()
    def step(self, params: dict[str, torch.Tensor], lrs: Sequence[float]) -> None:
        """One update of every model, model m at learning rate ``lrs[m]`` (its scheduled rate at this step)."""
        beta1, beta2 = self.betas
        for n in self.names:
            p, g = params[n], params[n].grad
            if g is None:  # as torch's optimisers: a parameter without a gradient is not touched, its step not counted
                continue
            self.steps[n] += 1
            bc1 = 1 - beta1 ** self.steps[n]
            bc2_sqrt = (1 - beta2 ** self.steps[n]) ** 0.5
            shape = (-1,) + (1,) * (p.dim() - 1)
            if self.weight_decay != 0:
                p.mul_(torch.tensor([1 - lr * self.weight_decay for lr in lrs], dtype=p.dtype).view(shape))
            m, v = self.exp_avg[n], self.exp_avg_sq[n]
            m.lerp_(g, 1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            denom = (v.sqrt() / bc2_sqrt).add_(self.eps)
            neg_step = torch.tensor([-(lr / bc1) for lr in lrs], dtype=p.dtype).view(shape)
            p.add_(m * neg_step / denom)  # addcdiv_(m, denom, value=-step): self + (value * m) / denom


def _keep(params: dict[str, torch.Tensor], idx: torch.Tensor) -> dict[str, torch.Tensor]:
    return {n: p.detach()[idx].clone().requires_grad_(p.requires_grad) for n, p in params.items()}


def _stack_batches(parts: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.stack(list(parts))


class _Group:
    """The models still in the batch: their positions in the caller's list (``alive``), stacked parameters, optimiser."""

    def __init__(self, models: Sequence[SequenceTransformer], weight_decay: float):
        self.cfg = nb.check_config(models[0].cfg)
        self.params = nb.stack(models)
        self.alive = list(range(len(models)))
        trainable = [n for n, p in models[0].named_parameters() if p.requires_grad]
        self.opt = BatchedAdamW(self.params, trainable, weight_decay=weight_decay)

    def drop(self, gone: set[int]) -> None:
        """Take the models at caller positions ``gone`` out of the batch."""
        if not gone:
            return
        rows = [r for r, i in enumerate(self.alive) if i not in gone]
        idx = torch.tensor(rows, dtype=torch.long)
        self.params = _keep(self.params, idx)
        self.opt.keep(idx)
        self.alive = [self.alive[r] for r in rows]

    def state(self, i: int) -> dict[str, torch.Tensor]:
        """The state dict of the model at caller position ``i``."""
        return nb.unstack(self.params, self.alive.index(i))

    def guarded_step(self, losses: torch.Tensor, guards: Sequence[LossGuard], wheres: Sequence[str], step: int,
                     lrs: Sequence[float], errors: dict[int, NonFiniteError]) -> list[float]:
        """One optimiser step of every model in the batch on its own loss (``losses (M_alive,)``), guarded per model
        as :func:`initlab.synthetic.spt.training.guarded_step`; a model that fails is recorded in ``errors`` (caller
        position -> error) and taken out before the update. Returns the losses as floats."""
        vals = losses.detach().tolist()
        bad: set[int] = set()
        for r, i in enumerate(self.alive):
            err = guards[i].verdict(vals[r], step=step)
            if err is not None:
                errors[i], bad = err, bad | {i}
        for p in self.params.values():
            p.grad = None
        losses.sum().backward()
        norms = torch.stack([p.grad.flatten(1).norm(dim=1) for p in self.params.values() if p.grad is not None]).sum(0)
        for r, (i, v) in enumerate(zip(self.alive, norms.tolist())):
            if i not in bad and not math.isfinite(v):
                errors[i], bad = NonFiniteError(wheres[i], step, "gradient", v, None), bad | {i}
        keep_lrs = [lr for r, lr in enumerate(lrs) if self.alive[r] not in bad]
        if bad:
            grads = {n: p.grad for n, p in self.params.items()}
            rows = torch.tensor([r for r, i in enumerate(self.alive) if i not in bad], dtype=torch.long)
            self.drop(bad)
            for n, p in self.params.items():
                if grads[n] is not None:
                    p.grad = grads[n][rows]
        if self.alive:
            self.opt.step(self.params, keep_lrs)
        return vals


def _perm_batches(n: int, bs: int, gen: torch.Generator) -> list[torch.Tensor]:
    perm = torch.randperm(n, generator=gen)  # as training._batches: one draw per epoch
    return [perm[i: i + bs] for i in range(0, n, bs)]


@torch.no_grad()
def accuracy_batched(params: dict[str, torch.Tensor], cfg: Any, x: torch.Tensor, y: torch.Tensor, bs: int = 512) -> list[float]:
    """Per-model classification accuracy on ``x (M, N, T)``, ``y (M, N)`` (as
    :func:`initlab.synthetic.spt.training.accuracy`, the same chunks of ``bs``)."""
    M, N = y.shape
    correct = [0] * M
    for i in range(0, N, bs):
        hit = (nb.classify(params, cfg, x[:, i: i + bs]).argmax(-1) == y[:, i: i + bs]).sum(1).tolist()
        correct = [c + h for c, h in zip(correct, hit)]
    return [c / N for c in correct]


def _spt_losses(logits: torch.Tensor, target: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
    """Per-model :func:`initlab.synthetic.spt.training.masked_loss`: ``logits (M, B, T, V)`` -> ``(M,)``."""
    return torch.stack([F.cross_entropy(lg[mk], t[mk]) for lg, t, mk in zip(logits, target, masked)])


def pretrain_batched(
    models: Sequence[SequenceTransformer], xs: Sequence[torch.Tensor], x_vals: Sequence[torch.Tensor],
    gens: Sequence[torch.Generator], val_mask_seeds: Sequence[int], *, lrs: Sequence[float], weight_decay: float,
    batch_size: int, mask_rate: float, mask_id: int, window: int, min_rel: float, max_epochs: int,
    snapshots: Sequence[int] = (), progress: Any = None, wheres: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """:func:`initlab.synthetic.spt.training.pretrain` of M models at once (module docstring).

    Args:
        models: M freshly built models of one config (their weights are read, not changed).
        xs, x_vals: per model, training inputs ``(N, T)`` (one N for all) and validation inputs ``(Nv, T)``.
        gens, val_mask_seeds, lrs: per model, as ``gen``, ``val_mask_seed`` and ``lr`` of the reference.
        progress: an :class:`initlab.executor.Progress` (or None): ``start(0)``, then ``advance(1)`` per model-epoch.
        wheres: per model, the loop's name in an error.
    Returns:
        Per model, the reference's dict (without ``resumed_epochs`` resume: always 0), or ``{"error":
        NonFiniteError}`` for a model whose loss or gradient became non-finite.
    Raises:
        ValueError: lists of different lengths, or training sets of different sizes.
    """
    M = len(models)
    wheres = list(wheres or [f"synthetic SPT pretrain (batched model {i})" for i in range(M)])
    if not (len(xs) == len(x_vals) == len(gens) == len(val_mask_seeds) == len(lrs) == len(wheres) == M) or M == 0:
        raise ValueError("models, xs, x_vals, gens, val_mask_seeds, lrs, wheres: expected lists of one length >= 1")
    if len({len(x) for x in xs}) != 1:
        raise ValueError("xs: expected training sets of one size")
    g = _Group(models, weight_decay)
    cfg = g.cfg
    vals = [mask_tokens(xv, mask_rate, torch.Generator().manual_seed(s), mask_id=mask_id, at_least_one=True)
            for xv, s in zip(x_vals, val_mask_seeds)]
    last_snap = max(snapshots, default=0)

    @torch.no_grad()
    def val_losses() -> list[float]:
        lg = nb.reconstruct(g.params, cfg, _stack_batches([vals[i][0] for i in g.alive]))
        return [float(v) for v in _spt_losses(lg, _stack_batches([x_vals[i] for i in g.alive]),
                                                 _stack_batches([vals[i][1] for i in g.alive]))]

    first = val_losses()
    st = [{"epoch": 0, "step": 0, "curve": [first[i]], "stop": None, "best_epoch": 0, "states": {"rule": g.state(i)}}
          for i in range(M)]
    guards = [LossGuard(w) for w in wheres]
    errors: dict[int, NonFiniteError] = {}
    out: list[dict[str, Any] | None] = [None] * M
    if progress is not None:
        progress.start(0)
    n = len(xs[0])
    while g.alive:
        for i in g.alive:
            st[i]["epoch"] += 1
        batches = {i: _perm_batches(n, batch_size, gens[i]) for i in g.alive}
        for b in range(len(batches[g.alive[0]])):
            inp, tgt, msk = [], [], []
            for i in g.alive:
                idx = batches[i][b]
                xi, mi = mask_tokens(xs[i][idx], mask_rate, gens[i], mask_id=mask_id, at_least_one=True)
                inp.append(xi), tgt.append(xs[i][idx]), msk.append(mi)
            losses = _spt_losses(nb.reconstruct(g.params, cfg, _stack_batches(inp)), _stack_batches(tgt),
                                 _stack_batches(msk))
            alive = list(g.alive)
            g.guarded_step(losses, guards, wheres, st[alive[0]]["step"], [lrs[i] for i in alive], errors)
            for i in alive:
                st[i]["step"] += 1
            for i in alive:
                if i in errors and out[i] is None:
                    out[i] = {"error": errors[i]}
            if not g.alive:
                break
        if not g.alive:
            break
        vl = val_losses() if any(st[i]["stop"] is None for i in g.alive) else None
        done: set[int] = set()
        for r, i in enumerate(g.alive):
            s = st[i]
            if s["stop"] is None:
                s["curve"].append(vl[r])
                if s["curve"][-1] < s["curve"][s["best_epoch"]]:
                    s["best_epoch"] = len(s["curve"]) - 1
                    s["states"]["rule"] = g.state(i)
                s["stop"] = spt_stop_epoch(s["curve"], window, min_rel, max_epochs)
            if s["epoch"] in snapshots:
                s["states"][s["epoch"]] = g.state(i)
            if progress is not None:
                progress.advance(1)
            if not (s["stop"] is None or s["epoch"] < max(s["stop"], last_snap)):
                out[i] = {"val_loss": s["curve"], "best_epoch": s["best_epoch"], "stop_epoch": s["stop"],
                          "epochs_run": s["epoch"], "steps": s["step"], "resumed_epochs": 0, "states": s["states"]}
                done.add(i)
        g.drop(done)
    return out  # type: ignore[return-value]


def finetune_batched(
    models: Sequence[SequenceTransformer], data: Sequence[dict[str, torch.Tensor]], gens: Sequence[torch.Generator], *,
    lrs: Sequence[float], weight_decay: float, batch_size: int, max_epochs: Sequence[int], patience: Sequence[int],
    progress: Any = None, wheres: Sequence[str] | None = None, schedule: str = "constant",
    warmup_epochs: Sequence[int] | None = None,
) -> list[tuple[dict[str, Any], dict[str, torch.Tensor]] | dict[str, Any]]:
    """:func:`initlab.synthetic.spt.training.finetune` of M models at once (module docstring).

    Args:
        models: M built (and loaded, frozen) models of one config; their ``requires_grad`` flags, which must agree,
            choose the trained parameters.
        data: per model, the reference's ``data`` dict (one training-set size for all).
        gens, lrs, max_epochs, patience, warmup_epochs: per model, as in the reference (``warmup_epochs`` None: 0).
        progress: as in :func:`pretrain_batched`.
    Returns:
        Per model, ``(the reference's result dict with resumed_epochs 0, the final model's state dict)``, or
        ``{"error": NonFiniteError}`` for a model whose loss or gradient became non-finite.
    Raises:
        ValueError: lists of different lengths, training sets of different sizes, or models whose trainable
            parameters differ; an invalid schedule (:func:`initlab.synthetic.spt.training.lr_factor`).
    """
    M = len(models)
    wheres = list(wheres or [f"synthetic SPT fine-tune (batched model {i})" for i in range(M)])
    warmup_epochs = list(warmup_epochs or [0] * M)
    if M == 0 or not all(len(v) == M for v in (data, gens, lrs, max_epochs, patience, wheres, warmup_epochs)):
        raise ValueError("models, data, gens, lrs, max_epochs, patience, wheres, warmup_epochs: expected lists of one "
                         "length >= 1")
    if len({len(d["xtr"]) for d in data}) != 1:
        raise ValueError("data: expected training sets of one size")
    flags = [[p.requires_grad for p in m.parameters()] for m in models]
    if any(f != flags[0] for f in flags):
        raise ValueError("models: expected the same trainable parameters in every model")
    n = len(data[0]["xtr"])
    per_epoch = -(-n // batch_size)
    totals = [e * per_epoch for e in max_epochs]
    warms = [w * per_epoch for w in warmup_epochs]
    for t, w in zip(totals, warms):
        lr_factor(0, t, w, schedule)  # checks the arguments before any work
    g = _Group(models, weight_decay)
    cfg = g.cfg

    def stacked(key: str, who: Sequence[int]) -> torch.Tensor:
        return _stack_batches([data[i][key] for i in who])

    every = list(range(M))
    init_test = accuracy_batched(g.params, cfg, stacked("xte", every), stacked("yte", every))
    init_val = accuracy_batched(g.params, cfg, stacked("xva", every), stacked("yva", every))
    st = [{"epoch": 0, "step": 0, "init_test_acc": init_test[i],
           "history": [{"epoch": 0, "train_loss": float("nan"), "train_acc": float("nan"), "val_acc": init_val[i]}],
           "best": g.state(i), "val": [init_val[i]]} for i in range(M)]
    guards = [LossGuard(w) for w in wheres]
    errors: dict[int, NonFiniteError] = {}
    finals: dict[int, dict[str, torch.Tensor]] = {}
    if progress is not None:
        progress.start(0)
    g.drop({i for i in every if finetune_stop(st[i]["val"], patience[i], max_epochs[i])})
    finals.update({i: nb.unstack(nb.stack(models[i:i + 1]), 0) for i in every if i not in g.alive})
    while g.alive:
        for i in g.alive:
            st[i]["epoch"] += 1
        tot = {i: 0.0 for i in g.alive}
        correct = {i: 0 for i in g.alive}
        batches = {i: _perm_batches(n, batch_size, gens[i]) for i in g.alive}
        for b in range(per_epoch):
            alive = list(g.alive)
            idx = [batches[i][b] for i in alive]
            yb = _stack_batches([data[i]["ytr"][j] for i, j in zip(alive, idx)])
            logits = nb.classify(g.params, cfg, _stack_batches([data[i]["xtr"][j] for i, j in zip(alive, idx)]))
            losses = torch.stack([F.cross_entropy(lg, y) for lg, y in zip(logits, yb)])
            lrs_now = [lrs[i] * lr_factor(st[i]["step"], totals[i], warms[i], schedule) for i in alive]
            vals = g.guarded_step(losses, guards, wheres, st[alive[0]]["step"], lrs_now, errors)
            hits = (logits.detach().argmax(-1) == yb).sum(1).tolist()
            for r, i in enumerate(alive):
                st[i]["step"] += 1
                tot[i] += vals[r] * len(idx[r])
                correct[i] += hits[r]
            if not g.alive:
                break
        if not g.alive:
            break
        va = accuracy_batched(g.params, cfg, stacked("xva", g.alive), stacked("yva", g.alive))
        done: set[int] = set()
        for r, i in enumerate(g.alive):
            s = st[i]
            s["val"].append(va[r])
            s["history"].append({"epoch": s["epoch"], "train_loss": tot[i] / n, "train_acc": correct[i] / n,
                                 "val_acc": va[r]})
            if select_on_validation(s["val"]) == s["epoch"]:
                s["best"] = g.state(i)
            if progress is not None:
                progress.advance(1)
            if finetune_stop(s["val"], patience[i], max_epochs[i]):
                finals[i] = g.state(i)
                done.add(i)
        g.drop(done)
    out: list[Any] = []
    for i in every:
        if i in errors:
            out.append({"error": errors[i]})
            continue
        s = st[i]
        b = select_on_validation(s["val"])
        both = nb.stack([_loaded(models[i], s["best"]), _loaded(models[i], finals[i])])
        acc = accuracy_batched(both, cfg, stacked("xte", [i, i]), stacked("yte", [i, i]))
        out.append(({"history": s["history"], "best_epoch": b, "val_acc": s["val"][b], "test_acc": acc[0],
                     "final_test_acc": acc[1], "init_test_acc": s["init_test_acc"], "epochs_run": s["epoch"],
                     "steps": s["step"], "resumed_epochs": 0}, finals[i]))
    return out


def _loaded(model: SequenceTransformer, state: dict[str, torch.Tensor]) -> SequenceTransformer:
    m = SequenceTransformer(model.cfg).to(next(model.parameters()).dtype)
    m.load_state_dict(state)
    return m
