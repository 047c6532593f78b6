"""Training loops of the synthetic SPT experiments: one model, one seed, resumable after every epoch.

Two loops, both driven by one ``torch.Generator`` per run (batch order; SPT masks), so a run is a
function of its seed:

* :func:`pretrain` -- masked reconstruction (SPT): each token is replaced by the mask token with
  probability ``mask_rate`` and the loss is the cross entropy on the masked positions (Devlin et al. 2019,
  §3.1, without the 80/10/10 split). It stops by :func:`spt_stop_epoch` on the masked-reconstruction loss of
  a fixed, held-out validation set (masks drawn once from ``val_mask_seed``); the *rule's epoch* is the
  best validation epoch. Training goes on (results frozen) to the largest requested snapshot epoch, so
  the fixed-epoch snapshots of the SPT-duration curve come from the same run.
* :func:`finetune` -- label training of the mean-pooled classifier, stopping by :func:`finetune_stop` on
  validation accuracy (or after a fixed number of epochs). Each epoch records the running training
  loss/accuracy and the validation accuracy; the reported test accuracy is that of the best validation
  epoch (:func:`select_on_validation`). Test accuracy selects nothing. The learning rate is constant, or
  (``schedule="cosine"``) warms up linearly over ``warmup_epochs`` and then decays by a half cosine to 0 at
  ``max_epochs`` (Loshchilov & Hutter, "SGDR", arXiv:1608.03983, eq. 5 without restarts; :func:`lr_factor`),
  applied per optimiser step by ``torch.optim.lr_scheduler.LambdaLR``.

Resume: with a :class:`Checkpoint`, both loops save after every epoch -- model, optimiser, generator state
and the curves so far, atomically -- and a restarted loop continues from the last saved epoch. The result
is bit-identical to an uninterrupted run (same arithmetic in the same order; tested with a real SIGINT).

Every step checks the loss (:class:`initlab.runs.LossGuard`: NaN/inf, or a loss past 10^4 times the loop's
first one, the divergence rule shared with LRA and SPLADE) and the gradient norm
(:func:`initlab.runs.check_finite`): either raises :class:`initlab.runs.NonFiniteError` (or its subclass
:class:`initlab.runs.DivergenceError`) naming the loop and the step, before that step's update.
"""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F

from initlab.nn.encoder import SequenceTransformer
from initlab.nn.masking import mask_tokens
from initlab.runs import LossGuard, atomic_write_bytes, check_finite, check_finite_tensors

__all__ = ["SCHEDULES", "lr_factor", "spt_stop_epoch", "finetune_stop", "select_on_validation", "Checkpoint", "pretrain", "guarded_step", "finetune", "accuracy",
           "masked_loss"]


SCHEDULES = ("constant", "cosine")


def lr_factor(step: int, total_steps: int, warmup_steps: int, schedule: str) -> float:
    """The learning-rate multiplier at optimiser step ``step`` (0-based): 1 for ``"constant"``; for ``"cosine"``,
    ``(step + 1) / warmup_steps`` during the warm-up, then ``0.5 (1 + cos(pi p))`` with ``p = (step -
    warmup_steps) / (total_steps - warmup_steps)`` clipped to [0, 1] (SGDR, arXiv:1608.03983, eq. 5, one cycle).

    Raises:
        ValueError: unknown ``schedule``, ``total_steps < 1`` or ``warmup_steps`` outside ``[0, total_steps)``.
    """
    import math

    if schedule not in SCHEDULES:
        raise ValueError(f"schedule: expected one of {SCHEDULES}, got {schedule!r}")
    if total_steps < 1 or not 0 <= warmup_steps < total_steps:
        raise ValueError(f"total_steps/warmup_steps: expected total >= 1 and 0 <= warmup < total, got {total_steps}, {warmup_steps}")
    if schedule == "constant":
        return 1.0
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    p = min(max((step - warmup_steps) / (total_steps - warmup_steps), 0.0), 1.0)
    return 0.5 * (1.0 + math.cos(math.pi * p))


# -- the stopping and selection rules (pure functions, tested on hand-made curves) -------------------------
def spt_stop_epoch(val_losses: Sequence[float], window: int, min_rel: float, max_epochs: int) -> int | None:
    """The SPT stopping rule on the validation-loss curve so far (``val_losses[e]``, e = 0 before training).

    With ``b(e) = min(val_losses[:e + 1])`` (the best loss up to epoch e), training stops at the current
    epoch ``e = len(val_losses) - 1`` if ``e >= max_epochs``, or if ``e >= window`` and the best loss improved
    by less than ``min_rel`` (relative) over the last ``window`` epochs: ``b(e - window) - b(e) <
    min_rel * b(e - window)``. Returns ``e`` when it stops there, else None.

    Raises:
        ValueError: an empty curve, ``window < 1`` or ``min_rel < 0``.
    """
    if not val_losses:
        raise ValueError("val_losses: expected at least the epoch-0 loss")
    if window < 1 or min_rel < 0:
        raise ValueError(f"window/min_rel: expected window >= 1 and min_rel >= 0, got {window} and {min_rel}")
    e = len(val_losses) - 1
    if e >= max_epochs:
        return e
    if e >= window:
        old, now = min(val_losses[: e - window + 1]), min(val_losses)
        if old - now < min_rel * old:
            return e
    return None


def select_on_validation(val_acc: Sequence[float]) -> int:
    """Index of the best validation accuracy (earliest on ties).

    Raises:
        ValueError: an empty list.
    """
    if not val_acc:
        raise ValueError("val_acc: expected at least one epoch")
    best = max(val_acc)
    return next(i for i, v in enumerate(val_acc) if v == best)


def finetune_stop(val_acc: Sequence[float], patience: int, max_epochs: int) -> bool:
    """True if fine-tuning stops after the current epoch ``e = len(val_acc) - 1``: ``e >= max_epochs``, or
    (``patience > 0``) the best validation accuracy so far is ``patience`` epochs old."""
    e = len(val_acc) - 1
    if e >= max_epochs:
        return True
    return patience > 0 and e - select_on_validation(val_acc) >= patience


# -- per-epoch checkpoints ---------------------------------------------------------------------------
class Checkpoint:
    """The resume file of one loop: ``path`` written atomically after every epoch, removed when the loop ends.

    ``load()`` returns the saved dict or None, read with ``torch.load(weights_only=True)`` (what :meth:`save_epoch`
    stores: tensors, numbers, lists and dicts), so a file planted in a shared run folder cannot run code; a file that
    does not load that way (another torch version, or one holding other objects) raises ``RuntimeError`` naming it,
    and one whose weights or optimizer state hold NaN or infinity :class:`initlab.runs.NonFiniteCheckpointError`
    naming the tensors.
    """

    def __init__(self, path: str | Path | None):
        self.path = None if path is None else Path(path)

    def load(self) -> dict[str, Any] | None:
        if self.path is None or not self.path.exists():
            return None
        try:  # tensors, numbers, lists and dicts only: a file planted in a shared run folder cannot run code
            saved = torch.load(self.path, weights_only=True)
        except Exception as err:  # noqa: BLE001 -- any unpickling failure: name the file
            raise RuntimeError(f"{self.path}: resume checkpoint does not load ({err}); remove it to restart the cell") from err
        if isinstance(saved, dict):
            check_finite_tensors(f"resume checkpoint {self.path}", {k: saved.get(k) for k in ("model", "opt", "state")})
        return saved

    def save(self, state: dict[str, Any]) -> None:
        if self.path is None:
            return
        buf = io.BytesIO()
        torch.save(state, buf)
        atomic_write_bytes(self.path, buf.getvalue())

    def resume(self, model: torch.nn.Module, opt: torch.optim.Optimizer, gen: torch.Generator,
               fresh: Callable[[], dict[str, Any]], sched: Any = None) -> tuple[dict[str, Any], int]:
        """``(loop state, epochs resumed)``: ``(fresh(), 0)`` when nothing is saved, else the saved state with
        ``model``, ``opt``, ``gen`` (and a learning-rate scheduler ``sched``, when given and saved) restored to the
        end of its last epoch."""
        saved = self.load()
        if saved is None:
            return fresh(), 0
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        if sched is not None and "sched" in saved:
            sched.load_state_dict(saved["sched"])
        gen.set_state(saved["gen"])
        return saved["state"], saved["state"]["epoch"]

    def save_epoch(self, model: torch.nn.Module, opt: torch.optim.Optimizer, gen: torch.Generator,
                   state: dict[str, Any], sched: Any = None) -> None:
        """Save the end of an epoch: what :meth:`resume` restores."""
        saved = {"model": model.state_dict(), "opt": opt.state_dict(), "gen": gen.get_state(), "state": state}
        if sched is not None:
            saved["sched"] = sched.state_dict()
        self.save(saved)

    def clear(self) -> None:
        if self.path is not None and self.path.exists():
            self.path.unlink()


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _batches(n: int, bs: int, gen: torch.Generator) -> list[torch.Tensor]:
    """A random permutation of ``range(n)`` cut into batches (one draw per epoch)."""
    perm = torch.randperm(n, generator=gen)
    return [perm[i : i + bs] for i in range(0, n, bs)]


def guarded_step(model, opt, loss: torch.Tensor, where: str, step: int, guard: LossGuard) -> None:
    """One optimizer step of ``model`` on the scalar ``loss``, guarded: ``guard`` checks the loss, then the summed
    gradient norm must be finite (``initlab.runs.check_finite``), then ``opt`` steps. Every SPT training loop
    steps through it.

    Raises:
        initlab.runs.NonFiniteError: a non-finite loss or gradient (``where`` and ``step`` name it); nothing stepped.
        initlab.runs.DivergenceError: the guard's divergence rule.
    """
    guard.check(loss.detach(), step=step)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    check_finite(torch.stack([g.norm() for g in grads]).sum(), where=where, step=step, what="gradient")
    opt.step()


def masked_loss(logits: torch.Tensor, target: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
    """Mean cross entropy over masked positions: ``logits (B, T, V)``, ``target (B, T)``, ``masked (B, T)`` bool."""
    return F.cross_entropy(logits[masked], target[masked])


# -- SPT ---------------------------------------------------------------------------------------------------
def pretrain(
    model: SequenceTransformer, x: torch.Tensor, x_val: torch.Tensor, gen: torch.Generator, val_mask_seed: int, *,
    lr: float, weight_decay: float, batch_size: int, mask_rate: float, mask_id: int, window: int, min_rel: float,
    max_epochs: int, snapshots: Sequence[int] = (), checkpoint: Checkpoint | None = None,
    progress: Any = None, where: str = "synthetic SPT pretrain",
) -> dict[str, Any]:
    """Masked-reconstruction SPT of ``model`` on inputs ``x (N, T)`` under the stopping rule (module docstring).

    Args:
        x_val: ``(Nv, T)`` validation inputs (their masks are drawn once from ``val_mask_seed``).
        gen: batch-order and mask generator (its state is part of the checkpoint).
        snapshots: extra fixed epochs whose weights are kept.
        checkpoint: per-epoch resume file (None: none).
        progress: an :class:`initlab.executor.Progress` (or None): ``start(resumed epochs)`` once, then
            ``advance(1)`` after every epoch.
    Returns:
        ``{"val_loss": [...], "best_epoch", "stop_epoch", "epochs_run", "resumed_epochs", "states": {key:
        state_dict}}`` with ``states`` holding the rule's checkpoint (key ``"rule"``) and every snapshot
        epoch; the curve runs to ``epochs_run = max(stop_epoch, max(snapshots))``.
    Raises:
        initlab.runs.NonFiniteError: a NaN/inf loss or gradient (nothing is returned).
    """
    ck = checkpoint or Checkpoint(None)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    val_in, val_masked = mask_tokens(x_val, mask_rate, torch.Generator().manual_seed(val_mask_seed), mask_id=mask_id,
                                     at_least_one=True)
    last_snap = max(snapshots, default=0)

    @torch.no_grad()
    def val_loss() -> float:
        model.eval()
        v = float(masked_loss(model.reconstruct(val_in), x_val, val_masked))
        model.train()
        return v

    st, resumed = ck.resume(model, opt, gen, lambda: {"epoch": 0, "step": 0, "curve": [val_loss()], "stop": None,
                                                      "best_epoch": 0, "states": {"rule": _state(model)}})
    curve = st["curve"]
    if progress is not None:
        progress.start(resumed)
    guard = LossGuard(where)
    model.train()
    while st["stop"] is None or st["epoch"] < max(st["stop"], last_snap):
        st["epoch"] += 1
        for idx in _batches(len(x), batch_size, gen):
            inp, masked = mask_tokens(x[idx], mask_rate, gen, mask_id=mask_id, at_least_one=True)
            guarded_step(model, opt, masked_loss(model.reconstruct(inp), x[idx], masked), where, st["step"], guard)
            st["step"] += 1
        if st["stop"] is None:
            curve.append(val_loss())
            if curve[-1] < curve[st["best_epoch"]]:
                st["best_epoch"] = len(curve) - 1
                st["states"]["rule"] = _state(model)
            st["stop"] = spt_stop_epoch(curve, window, min_rel, max_epochs)
        if st["epoch"] in snapshots:
            st["states"][st["epoch"]] = _state(model)
        ck.save_epoch(model, opt, gen, st)
        if progress is not None:
            progress.advance(1)
    ck.clear()
    return {"val_loss": curve, "best_epoch": st["best_epoch"], "stop_epoch": st["stop"], "epochs_run": st["epoch"],
            "steps": st["step"], "resumed_epochs": resumed, "states": st["states"]}


# -- fine-tuning -------------------------------------------------------------------------------------
@torch.no_grad()
def accuracy(model: SequenceTransformer, x: torch.Tensor, y: torch.Tensor, bs: int = 512) -> float:
    """Classification accuracy of ``model`` on ``x (N, T)``, ``y (N,)`` (eval mode; mode restored)."""
    was = model.training
    model.eval()
    correct = sum(int((model.classify(x[i : i + bs]).argmax(-1) == y[i : i + bs]).sum()) for i in range(0, len(x), bs))
    model.train(was)
    return correct / len(x)


def finetune(
    model: SequenceTransformer, data: dict[str, torch.Tensor], gen: torch.Generator, *, lr: float,
    weight_decay: float, batch_size: int, max_epochs: int, patience: int, checkpoint: Checkpoint | None = None,
    progress: Any = None, where: str = "synthetic SPT fine-tune", schedule: str = "constant", warmup_epochs: int = 0,
) -> tuple[dict[str, Any], SequenceTransformer]:
    """Label training of ``model`` on ``data`` (keys ``xtr, ytr, xva, yva, xte, yte``) with early stopping.

    Stops by :func:`finetune_stop` (``patience = 0``: after exactly ``max_epochs`` epochs). Only the
    trainable parameters (``requires_grad``) are optimised. ``checkpoint`` and ``progress`` as in
    :func:`pretrain`; ``schedule`` / ``warmup_epochs`` as in :func:`lr_factor` (the horizon is ``max_epochs``).

    Returns:
        ``({"history": [{epoch, train_loss, train_acc, val_acc}], "best_epoch", "val_acc", "test_acc" (at
        best_epoch), "final_test_acc", "init_test_acc", "epochs_run", "steps", "resumed_epochs"}, final
        model)``; epoch 0 (before training) has NaN training loss and accuracy.
    Raises:
        initlab.runs.NonFiniteError: a NaN/inf loss or gradient.
    """
    ck = checkpoint or Checkpoint(None)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=weight_decay)
    x, y, n = data["xtr"], data["ytr"], len(data["xtr"])
    per_epoch = -(-n // batch_size)
    total, warm = max_epochs * per_epoch, warmup_epochs * per_epoch
    lr_factor(0, total, warm, schedule)  # checks the arguments before any work
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, total, warm, schedule))
    st, resumed = ck.resume(model, opt, gen, lambda: {
        "epoch": 0, "step": 0, "init_test_acc": accuracy(model, data["xte"], data["yte"]),
        "history": [{"epoch": 0, "train_loss": float("nan"), "train_acc": float("nan"),
                     "val_acc": accuracy(model, data["xva"], data["yva"])}],
        "best": _state(model)}, sched=sched)
    val = [h["val_acc"] for h in st["history"]]
    if progress is not None:
        progress.start(resumed)
    guard = LossGuard(where)
    model.train()
    while not finetune_stop(val, patience, max_epochs):
        st["epoch"] += 1
        tot, correct = 0.0, 0
        for idx in _batches(n, batch_size, gen):
            logits = model.classify(x[idx])
            loss = F.cross_entropy(logits, y[idx])
            guarded_step(model, opt, loss, where, st["step"], guard)
            sched.step()
            st["step"] += 1
            tot += float(loss.detach()) * len(idx)
            correct += int((logits.detach().argmax(-1) == y[idx]).sum())
        val.append(accuracy(model, data["xva"], data["yva"]))
        st["history"].append({"epoch": st["epoch"], "train_loss": tot / n, "train_acc": correct / n, "val_acc": val[-1]})
        if select_on_validation(val) == st["epoch"]:
            st["best"] = _state(model)
        ck.save_epoch(model, opt, gen, st, sched=sched)
        if progress is not None:
            progress.advance(1)
    b = select_on_validation(val)
    chosen = copy.deepcopy(model)
    chosen.load_state_dict(st["best"])
    out = {"history": st["history"], "best_epoch": b, "val_acc": val[b], "test_acc": accuracy(chosen, data["xte"], data["yte"]),
           "final_test_acc": accuracy(model, data["xte"], data["yte"]), "init_test_acc": st["init_test_acc"],
           "epochs_run": st["epoch"], "steps": st["step"], "resumed_epochs": resumed}
    ck.clear()
    return out, model
