"""Training loops of the synthetic SPT experiments, for one model or a vectorized ensemble of models.

An *ensemble* is the set of models of one condition, one per seed: same architecture, different init,
data and batch order. The vectorized path stacks their parameters (leading member dimension E, as
``torch.func.stack_module_state`` does) and runs one batched-parameter forward/backward per step
(:func:`batched_forward`: ``baddbmm`` per linear layer; ``torch.func.vmap`` over ``functional_call`` was
measured slower than the per-seed loop at these sizes because the fused attention kernel has no
batching rule and vmap's per-op overhead dominates on d = 32), with one AdamW over the stacked
tensors. AdamW is elementwise and the ensemble loss is the *sum* of the members' mean losses, so each
member receives exactly its own gradient and update: the ensemble equals training the seeds one after
another (the sequential reference path, ``vectorized=False`` on one member at a time, which calls the
public ``SequenceTransformer.reconstruct`` / ``classify``), up to float rounding (tested to 1e-5).

Both loops are driven by per-member ``torch.Generator`` objects (batch order; SPT masks) consumed in
the same order on both paths.

* :func:`pretrain_members` -- masked reconstruction (SPT). Budget rule: run until the masked-
  reconstruction loss on a held-out validation set (fixed masks) has not improved for ``patience``
  epochs, or ``max_epochs``; the *rule's epoch* is the best-validation epoch. Training continues (for
  that member, results frozen) to the largest requested snapshot epoch, so fixed-epoch snapshots
  (e.g. 1, 10, 50) exist too.
* :func:`finetune_members` -- label training for a fixed number of epochs; each epoch records the
  running training accuracy and the validation accuracy; the reported test accuracy is the one of the
  weights of the best *validation-accuracy* epoch (earliest on ties). Test accuracy never selects
  anything (it is computed only for those weights, the initial and the final ones).

Every step checks each member's loss (:class:`initlab.runs.LossGuard`: NaN/inf, or more than 10^4 times
that member's first loss) and the gradient norm (:func:`initlab.runs.check_finite`): a bad value raises
:class:`initlab.runs.NonFiniteError` (:class:`initlab.runs.DivergenceError` for the divergence rule) naming
the loop and step.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F

from initlab.nn.encoder import SequenceTransformer
from initlab.nn.masking import mask_tokens
from initlab.runs import LossGuard, check_finite

__all__ = ["PretrainMember", "FinetuneMember", "pretrain_members", "finetune_members", "best_epoch_rule",
           "select_on_validation"]


# -- the two selection rules (pure functions, tested on hand-made numbers) -------------------------
def best_epoch_rule(val_losses: Sequence[float], patience: int, max_epochs: int) -> tuple[int, int]:
    """Early-stopping rule on a validation-loss curve ``val_losses[e]`` (e = 0 is before training).

    Training stops at the first epoch ``e`` such that the best loss so far is ``patience`` epochs old
    (``e - best >= patience``), or at ``max_epochs``. An epoch counts as an improvement only if its
    loss is strictly lower than the best so far.

    Returns:
        ``(best_epoch, stop_epoch)``; ``best_epoch`` is the rule's epoch (its checkpoint is used).
    Raises:
        ValueError: ``patience < 1``, or ``val_losses`` shorter than the rule needs.
    """
    if patience < 1:
        raise ValueError(f"patience: expected an int >= 1, got {patience}")
    best, best_e = float("inf"), 0
    for e, v in enumerate(val_losses):
        if v < best:
            best, best_e = v, e
        if e - best_e >= patience or e >= max_epochs:
            return best_e, e
    raise ValueError(f"val_losses: {len(val_losses)} values do not reach the stopping point "
                     f"(patience {patience}, max_epochs {max_epochs})")


def select_on_validation(val_acc: Sequence[float], test_acc: Sequence[float]) -> int:
    """Index of the best validation accuracy (earliest on ties); ``test_acc`` only checks the lengths."""
    if len(val_acc) != len(test_acc) or not val_acc:
        raise ValueError(f"val_acc/test_acc: expected equal non-empty lengths, got {len(val_acc)}/{len(test_acc)}")
    best = max(val_acc)
    return next(i for i, v in enumerate(val_acc) if v == best)


# -- members ---------------------------------------------------------------------------------------
@dataclass
class PretrainMember:
    """One model to self-pretrain: ``x (N, T)`` inputs, ``x_val (Nv, T)`` validation inputs,
    ``gen`` its batch/mask generator, ``val_gen_seed`` the seed of its fixed validation masks."""

    model: SequenceTransformer
    x: torch.Tensor
    x_val: torch.Tensor
    gen: torch.Generator
    val_gen_seed: int


@dataclass
class FinetuneMember:
    """One model to fine-tune on ``(x, y)``; ``(x_val, y_val)`` selects the epoch, ``(x_test, y_test)``
    is only measured. ``gen`` orders the batches."""

    model: SequenceTransformer
    x: torch.Tensor
    y: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    gen: torch.Generator


# -- forward passes ----------------------------------------------------------------------------------
def _linear(P: dict[str, torch.Tensor], name: str, x: torch.Tensor) -> torch.Tensor:
    """Per-member ``nn.Linear``: ``x (E, ..., in)`` with ``W (E, out, in)``, ``b (E, out)`` -> ``(E, ..., out)``."""
    W, b = P[f"{name}.weight"], P[f"{name}.bias"]
    E, sh = x.shape[0], x.shape
    y = torch.baddbmm(b.unsqueeze(1), x.reshape(E, -1, sh[-1]), W.transpose(1, 2))
    return y.reshape(*sh[:-1], W.shape[1])


def _layernorm(P: dict[str, torch.Tensor], name: str, x: torch.Tensor) -> torch.Tensor:
    """Per-member ``nn.LayerNorm`` (eps 1e-5), or the identity when the model has none under ``name``."""
    if f"{name}.weight" not in P:
        return x
    view = (x.shape[0],) + (1,) * (x.dim() - 2) + (x.shape[-1],)
    y = F.layer_norm(x, x.shape[-1:], eps=1e-5)
    return y * P[f"{name}.weight"].view(view) + P[f"{name}.bias"].view(view)


def batched_forward(P: dict[str, torch.Tensor], pos: torch.Tensor, cfg, tokens: torch.Tensor, head: str) -> torch.Tensor:
    """The forward of :class:`SequenceTransformer` for E models at once (the batched-parameter model).

    Args:
        P: parameter name (as in ``named_parameters()``) -> stacked tensor ``(E, *shape)``.
        pos: the fixed positional table ``(max_len, d)``; cfg: the shared ``ModelConfig``.
        tokens: ``(E, B, T)`` long ids (checked beforehand by the caller).
        head: ``"cls"`` (mean pooling + classifier, ``(E, B, n_classes)``) or ``"mlm"`` (per-position
            decoder, ``(E, B, T, vocab_size)``).
    Same arithmetic as the encoder's fast path (``scaled_dot_product_attention`` on the ``(E*B, H, T, d_head)``
    batch; no padding, no dropout).
    """
    E, B, T = tokens.shape
    H, dh = cfg.n_heads, cfg.d_model // cfg.n_heads
    W_emb = P["tok_emb.weight"]
    x = W_emb[torch.arange(E)[:, None, None], tokens] + pos[:T]  # (E, B, T, d)

    def sub(x, f, ln):  # Block._sub: pre-norm x + f(LN(x)), post-norm LN(x + f(x)), optional residual
        if cfg.pre_norm:
            out = f(_layernorm(P, ln, x))
            return x + out if cfg.use_residual else out
        out = f(x)
        return _layernorm(P, ln, x + out) if cfg.use_residual else _layernorm(P, ln, out)

    for layer in range(cfg.n_layers):
        pre = f"blocks.{layer}"

        def att(z, pre=pre):
            q, k, v = (_linear(P, f"{pre}.attn.{w}", z).view(E, B, T, H, dh).transpose(2, 3) for w in ("W_Q", "W_K", "W_V"))
            o = F.scaled_dot_product_attention(*(t.reshape(E * B, H, T, dh) for t in (q, k, v)))  # the fast path
            o = o.view(E, B, H, T, dh).transpose(2, 3).reshape(E, B, T, cfg.d_model)
            return _linear(P, f"{pre}.attn.W_O", o)

        x = sub(x, att, f"{pre}.ln1")
        if cfg.use_ffn:
            x = sub(x, lambda z, pre=pre: _linear(P, f"{pre}.ffn.2", F.gelu(_linear(P, f"{pre}.ffn.0", z))), f"{pre}.ln2")
    x = _layernorm(P, "ln_f", x)
    return _linear(P, "cls_head", x.mean(dim=2)) if head == "cls" else _linear(P, "mlm_head", x)


def _mlm_loss_weighted(logits: torch.Tensor, target: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
    """Mean cross entropy over masked positions, written without boolean indexing (vmap-able)."""
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), reduction="none")
    w = masked.reshape(-1).to(ce.dtype)
    return (ce * w).sum() / w.sum()


class _Engine:
    """Forward/backward/step for M models, either one at a time (public API) or stacked under vmap."""

    def __init__(self, models: Sequence[SequenceTransformer], vectorized: bool, lr: float, weight_decay: float):
        self.models, self.vectorized = list(models), vectorized
        if vectorized:
            named = [dict(m.named_parameters()) for m in self.models]
            self.params = {n: torch.stack([d[n].detach() for d in named]).requires_grad_(p.requires_grad)
                           for n, p in named[0].items()}
            self.trainable = {k: v for k, v in self.params.items() if v.requires_grad}
            self.pos, self.cfg = self.models[0].pos, self.models[0].cfg
            self.opt = torch.optim.AdamW(list(self.trainable.values()), lr=lr, weight_decay=weight_decay)
        else:
            self.opts = [torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=lr, weight_decay=weight_decay)
                         for m in self.models]
        self.guard: LossGuard | None = None  # made at the first step (it takes the loop's name)

    def train(self, mode: bool) -> None:
        for m in self.models:
            m.train(mode)

    def logits(self, tokens: Sequence[torch.Tensor], head: str) -> list[torch.Tensor]:
        """Per-member logits for per-member inputs ``tokens[m] (B, T)``."""
        if self.vectorized:
            return list(batched_forward(self.params, self.pos, self.cfg, torch.stack(list(tokens)), head).unbind(0))
        fn = "classify" if head == "cls" else "reconstruct"
        return [getattr(m, fn)(t) for m, t in zip(self.models, tokens)]

    def step(self, losses: torch.Tensor, where: str, step: int) -> None:
        """Backward of ``losses.sum()`` (M,), the loss guard (per member) and gradient check, one optimizer step
        per member."""
        if self.guard is None:
            self.guard = LossGuard(where)
        self.guard.check(losses.detach(), step=step)
        if self.vectorized:
            self.opt.zero_grad(set_to_none=True)
            losses.sum().backward()
            grads = [p.grad for p in self.trainable.values() if p.grad is not None]
            check_finite(torch.stack([g.norm() for g in grads]).sum(), where=where, step=step, what="gradient")
            self.opt.step()
            return
        for o in self.opts:
            o.zero_grad(set_to_none=True)
        losses.sum().backward()
        grads = [p.grad for m in self.models for p in m.parameters() if p.grad is not None]
        check_finite(torch.stack([g.norm() for g in grads]).sum(), where=where, step=step, what="gradient")
        for o in self.opts:
            o.step()

    def member(self, i: int) -> SequenceTransformer:
        """Member ``i`` as a plain model holding its current weights (a copy on the vectorized path)."""
        if not self.vectorized:
            return self.models[i]
        m = copy.deepcopy(self.models[i])
        with torch.no_grad():
            for name, p in m.named_parameters():
                p.copy_(self.params[name][i])
        return m

    def state(self, i: int) -> dict[str, torch.Tensor]:
        """Member ``i``'s ``state_dict`` (parameters only: the positional table is not persistent)."""
        if self.vectorized:
            return {k: v[i].detach().clone() for k, v in self.params.items()}
        return {k: v.detach().clone() for k, v in self.models[i].state_dict().items()}


def _batches(n: int, bs: int, gens: Sequence[torch.Generator]) -> list[list[torch.Tensor]]:
    """Per member a random permutation of ``range(n)`` cut into batches (one draw per member and epoch)."""
    perms = [torch.randperm(n, generator=g) for g in gens]
    return [[p[i : i + bs] for p in perms] for i in range(0, n, bs)]


# -- SPT ---------------------------------------------------------------------------------------------------
def pretrain_members(
    members: Sequence[PretrainMember], *, lr: float, weight_decay: float, batch_size: int, mask_rate: float,
    mask_id: int, patience: int, max_epochs: int, snapshots: Sequence[int] = (), vectorized: bool = True,
    on_epoch: Callable[[int, int], None] | None = None, where: str = "synthetic SPT pretrain",
) -> list[dict[str, Any]]:
    """Masked-reconstruction SPT of every member under the early-stopping rule (module docstring).

    Args:
        snapshots: extra fixed epochs whose weights are kept (0 = the initial weights).
        on_epoch: called as ``on_epoch(epoch, last_epoch)`` after each epoch (progress).
    Returns:
        per member ``{"val_loss": [...], "best_epoch", "stop_epoch", "states": {epoch: state_dict}}``
        with ``states`` holding the rule's epoch (key ``"rule"``) and every snapshot epoch; the curve
        runs to ``max(stop_epoch, max(snapshots))`` for that member.
    Raises:
        initlab.runs.NonFiniteError: NaN/inf or diverged loss, or NaN/inf gradient (nothing is returned).
    """
    M = len(members)
    eng = _Engine([m.model for m in members], vectorized, lr, weight_decay)
    val = [mask_tokens(m.x_val, mask_rate, torch.Generator().manual_seed(m.val_gen_seed), mask_id=mask_id, at_least_one=True)
           for m in members]
    last_snap = max(snapshots, default=0)
    curves: list[list[float]] = [[] for _ in range(M)]
    best = [(float("inf"), 0)] * M
    stop: list[int | None] = [None] * M
    states: list[dict[Any, Any]] = [{} for _ in range(M)]

    def evaluate(ep: int) -> None:
        eng.train(False)
        with torch.no_grad():
            logits = eng.logits([v[0] for v in val], "mlm")
        eng.train(True)
        for i, m in enumerate(members):
            if stop[i] is not None and ep > max(stop[i], last_snap):
                continue
            v = float(_mlm_loss_weighted(logits[i], m.x_val, val[i][1]))
            curves[i].append(v)
            if stop[i] is None:
                if v < best[i][0]:
                    best[i] = (v, ep)
                    states[i]["rule"] = eng.state(i)
                if ep - best[i][1] >= patience or ep >= max_epochs:
                    stop[i] = ep
            if ep in snapshots:
                states[i][ep] = eng.state(i)

    evaluate(0)
    ep, step = 0, 0
    while any(s is None or ep < max(s, last_snap) for s in stop):
        ep += 1
        eng.train(True)
        for idx in _batches(len(members[0].x), batch_size, [m.gen for m in members]):
            xb = [m.x[j] for m, j in zip(members, idx)]
            pairs = [mask_tokens(b, mask_rate, m.gen, mask_id=mask_id, at_least_one=True) for b, m in zip(xb, members)]
            logits = eng.logits([p[0] for p in pairs], "mlm")
            if vectorized:
                losses = torch.stack([_mlm_loss_weighted(lg, b, p[1]) for lg, b, p in zip(logits, xb, pairs)])
            else:
                losses = torch.stack([F.cross_entropy(lg[p[1]], b[p[1]]) for lg, b, p in zip(logits, xb, pairs)])
            eng.step(losses, where, step)
            step += 1
        evaluate(ep)
        if on_epoch is not None:
            on_epoch(ep, max(max(s or max_epochs, last_snap) for s in stop))
    return [{"val_loss": curves[i], "best_epoch": best[i][1], "stop_epoch": stop[i], "states": states[i]} for i in range(M)]


# -- fine-tuning -------------------------------------------------------------------------------------
@torch.no_grad()
def _accuracies(eng: _Engine, xs: Sequence[torch.Tensor], ys: Sequence[torch.Tensor], bs: int = 256) -> list[float]:
    eng.train(False)
    correct = torch.zeros(len(xs))
    for i in range(0, len(xs[0]), bs):
        logits = eng.logits([x[i : i + bs] for x in xs], "cls")
        correct += torch.stack([(lg.argmax(-1) == y[i : i + bs]).sum() for lg, y in zip(logits, ys)]).float()
    eng.train(True)
    return (correct / len(xs[0])).tolist()


def finetune_members(
    members: Sequence[FinetuneMember], *, lr: float, weight_decay: float, batch_size: int, epochs: int,
    vectorized: bool = True, on_epoch: Callable[[int, int], None] | None = None,
    where: str = "synthetic SPT fine-tune",
) -> tuple[list[dict[str, Any]], list[SequenceTransformer]]:
    """Label training of every member for ``epochs`` epochs; selection on validation accuracy.

    Each epoch records the running training loss/accuracy (over the epoch's batches) and the validation
    accuracy; the weights of the best validation epoch (earliest on ties, epoch 0 = the initial model
    included) are kept and only they, and the final weights, are evaluated on the test set.

    Returns:
        per member ``{"history": [{epoch, train_loss, train_acc, val_acc}], "best_epoch", "val_acc",
        "test_acc" (at best_epoch), "final_test_acc", "init_test_acc"}``; and the final models (plain
        copies on the vectorized path). Epoch 0 has train_loss/train_acc NaN.
    Raises:
        initlab.runs.NonFiniteError: NaN/inf or diverged loss, or NaN/inf gradient.
    """
    M = len(members)
    eng = _Engine([m.model for m in members], vectorized, lr, weight_decay)
    hist: list[list[dict[str, float]]] = [[] for _ in range(M)]
    best: list[tuple[float, int, dict[str, torch.Tensor]]] = [(-1.0, -1, {})] * M

    def record(ep: int, tl: list[float], ta: list[float]) -> None:
        va = _accuracies(eng, [m.x_val for m in members], [m.y_val for m in members])
        for i in range(M):
            hist[i].append({"epoch": ep, "train_loss": tl[i], "train_acc": ta[i], "val_acc": va[i]})
            if va[i] > best[i][0]:
                best[i] = (va[i], ep, eng.state(i))

    init_test = _accuracies(eng, [m.x_test for m in members], [m.y_test for m in members])
    record(0, [float("nan")] * M, [float("nan")] * M)
    step, n = 0, len(members[0].x)
    eng.train(True)
    for ep in range(1, epochs + 1):
        tot, correct = torch.zeros(M), torch.zeros(M)
        for idx in _batches(n, batch_size, [m.gen for m in members]):
            xb = [m.x[j] for m, j in zip(members, idx)]
            yb = [m.y[j] for m, j in zip(members, idx)]
            logits = eng.logits(xb, "cls")
            losses = torch.stack([F.cross_entropy(lg, y) for lg, y in zip(logits, yb)])
            eng.step(losses, where, step)
            step += 1
            with torch.no_grad():
                tot += losses.detach() * len(yb[0])
                correct += torch.stack([(lg.argmax(-1) == y).sum() for lg, y in zip(logits, yb)]).float()
        record(ep, (tot / n).tolist(), (correct / n).tolist())
        if on_epoch is not None:
            on_epoch(ep, epochs)
    final_test = _accuracies(eng, [m.x_test for m in members], [m.y_test for m in members])
    out, finals = [], [eng.member(i) for i in range(M)]
    for i, mem in enumerate(members):
        b = select_on_validation([r["val_acc"] for r in hist[i]], [0.0] * len(hist[i]))
        assert b == best[i][1], "online and offline validation selection disagree"
        chosen = copy.deepcopy(finals[i])
        chosen.load_state_dict(best[i][2])
        out.append({"history": hist[i], "best_epoch": b, "val_acc": best[i][0], "test_acc": _plain_accuracy(chosen, mem.x_test, mem.y_test),
                    "final_test_acc": final_test[i], "init_test_acc": init_test[i]})
    return out, finals


@torch.no_grad()
def _plain_accuracy(model: SequenceTransformer, x: torch.Tensor, y: torch.Tensor, bs: int = 256) -> float:
    model.eval()
    correct = sum(int((model.classify(x[i : i + bs]).argmax(-1) == y[i : i + bs]).sum()) for i in range(0, len(x), bs))
    model.train()
    return correct / len(x)
