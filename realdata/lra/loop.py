"""Parts shared by the LRA training loops: the plateau rule, the guarded optimizer step, failure records.

* :func:`epochs_since_gain` -- epochs since the last new best of a per-epoch metric (the plateau rule
  stops a stage when it reaches the stage's patience);
* :func:`optimizer_step` -- one step that stops on a NaN/inf or diverged loss (before backward; the run's
  :class:`~initlab.runs.LossGuard`) or a NaN/inf gradient norm (before the update) with
  :class:`~initlab.runs.NonFiniteError`, in step with every DDP rank;
* :func:`dropout_seed` -- the torch seed of an epoch's dropout masks on one DDP rank;
* :func:`record_failure` -- the ``results.json`` of a stopped run (the folder gets no ``DONE``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from initlab.runs import LossGuard, NonFiniteError, RunDir, check_finite, rank_seed

if TYPE_CHECKING:
    from initlab.realdata.lra.config import LRAConfig

__all__ = ["epochs_since_gain", "dropout_seed"]


def dropout_seed(seed: int, epoch: int, rank: int = 0) -> int:
    """The torch seed set before an epoch on DDP rank ``rank``: :func:`initlab.runs.rank_seed` of
    ``seed * 1000 + epoch``.

    It drives the dropout masks (the data order and the SPT masks have their own generators). Rank 0 keeps
    the single-process seed ``seed * 1000 + epoch``, so one-process runs are unchanged; every other rank
    gets its own stream, so two GPUs draw different masks even where their batches have the same shape
    (Image, Pathfinder); before, every rank was seeded alike. Deterministic for a given ``(seed, epoch, rank)``.
    """
    return rank_seed(int(seed) * 1000 + int(epoch), rank)


def epochs_since_gain(values: Sequence[float], *, higher_is_better: bool, min_rel_gain: float = 0.0) -> int:
    """Epochs since the last one that set a new best of ``values`` (one per epoch; 0 = the last did).

    A value is a new best when it beats the best so far: ``v > best`` (``higher_is_better``) or
    ``v < best * (1 - min_rel_gain)`` (losses, positive). The plateau rule stops a run when this reaches
    its patience. An empty list gives 0.
    """
    best, since = None, 0
    for v in values:
        gain = best is None or (v > best if higher_is_better else v < best * (1.0 - min_rel_gain))
        best, since = (v, 0) if gain else (best, since + 1)
    return since


def optimizer_step(loss, model, opt, sched, params, accelerator, cfg: LRAConfig, *, guard: LossGuard, step: int,
                   last: Path) -> float:
    """One guarded optimisation step; returns the loss as a float.

    Raises :class:`NonFiniteError` (naming ``step`` and the last finite checkpoint) on a NaN/inf loss or
    :class:`~initlab.runs.DivergenceError` on a loss past ``guard``'s divergence rule, both before backward,
    or on a NaN/inf gradient norm, before the optimizer touches the weights. Under DDP the loss is summed
    over ranks first, so every rank reaches the same verdict at the same step instead of hanging in a
    collective.
    """
    where = guard.where
    ckpt = last if last.exists() else None
    probe = loss.detach().float().reshape(1)
    if accelerator.num_processes > 1:
        probe = accelerator.reduce(probe, "sum")
    guard.check(probe[0], step=step, last_checkpoint=ckpt)
    opt.zero_grad(set_to_none=True)
    accelerator.backward(loss)
    norm = accelerator.clip_grad_norm_(params, cfg.grad_clip if cfg.grad_clip else float("inf"))
    check_finite(norm, where=where, step=step, what="gradient", last_checkpoint=ckpt)
    opt.step()
    sched.step()
    return float(probe[0]) / accelerator.num_processes


def record_failure(run: RunDir, kind: str, cfg: LRAConfig, err: NonFiniteError, history: list) -> None:
    """results.json of a run stopped by a non-finite value (no DONE: the folder stays resumable)."""
    run.write_json("results.json", {"kind": kind, "task": cfg.task, "failed": True, "error": str(err),
                                    "step": err.step, "what": err.what, "last_checkpoint": err.last_checkpoint,
                                    "history": history})
