"""The non-finite and divergence guard of every training loop (docs/conventions.md, "NaN and divergence policy"),
and the finite-tensor check of every checkpoint a loader reads (docs/conventions.md, "Checkpoint policy").
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = ['NonFiniteError', 'DivergenceError', 'check_finite', 'NonFiniteCheckpointError', 'nonfinite_tensors',
           'check_finite_tensors', 'LossGuard', 'DIVERGENCE_FACTOR', 'DIVERGENCE_FLOOR']


class NonFiniteError(FloatingPointError):
    """A training loss or gradient became NaN or infinite.

    Attributes:
        where: the training loop (e.g. ``"synthetic SPT pretrain"``).
        step: the optimisation step (0-based) at which the non-finite value appeared.
        what: ``"loss"`` or ``"gradient"``.
        value: the offending value (a float; NaN or +-inf here, finite for :class:`DivergenceError`).
        last_checkpoint: the last checkpoint written with finite weights, or None.

    Instances pickle (a worker process can send one back to its parent).
    """

    def __init__(self, where: str, step: int, what: str = "loss", value: float | None = None,
                 last_checkpoint: str | Path | None = None):
        self.where, self.step, self.what, self.value = where, int(step), what, value
        self.last_checkpoint = None if last_checkpoint is None else str(last_checkpoint)
        super().__init__(self._message())

    def _message(self) -> str:
        ckpt = self.last_checkpoint or "none written"
        return (f"{self.where}: non-finite {self.what} ({self.value}) at step {self.step}; training stopped. "
                f"Last finite checkpoint: {ckpt}. Lower the learning rate or check the inputs.")

    def __reduce__(self):
        return (type(self), (self.where, self.step, self.what, self.value, self.last_checkpoint))

    def with_checkpoint(self, last_checkpoint: str | Path | None) -> "NonFiniteError":
        """The same error naming ``last_checkpoint`` (for loops that look the checkpoint up only on failure)."""
        cls, args = self.__reduce__()
        return cls(*args[:-1], last_checkpoint)


#: The divergence rule (docs/conventions.md, "NaN and divergence policy"): a training loss larger than
#: ``DIVERGENCE_FACTOR`` times its early value stops the run. 10^4 because no training loss of this
#: package grows that much in a run that trains (cross-entropies start near ln(#classes) and a confidently
#: wrong prediction costs tens of nats; the SPLADE totals add FLOPS terms whose weights ramp up from 0: at most
#: 2.7 times the first logged total in the cells of ``initlab synthetic splade --preset quick``), while a run
#: that blew up does (the toy LRA model at lr = 1e3: 3.1 at step 0, 2.4e6 at step 1, then 1e7-1e8, finite on
#: some CPUs and NaN on others).
DIVERGENCE_FACTOR = 1e4
#: The early value is floored at this (loss units; nats for cross-entropies), so a run that starts near
#: zero loss (a resumed or almost solved fine-tuning) is not stopped for rising to a few nats.
DIVERGENCE_FLOOR = 1.0


class DivergenceError(NonFiniteError):
    """A training loss stayed finite but grew past :data:`DIVERGENCE_FACTOR` times its early value.

    A subclass of :class:`NonFiniteError`, so every loop, sweep and command treats it the same way (no
    ``DONE``, no model, exit 1, a sweep cell marked failed). ``what`` is ``"loss"``; ``early`` is the early
    value the rule compared with (floored at :data:`DIVERGENCE_FLOOR`), ``factor`` the rule's factor.
    """

    def __init__(self, where: str, step: int, value: float, early: float, factor: float = DIVERGENCE_FACTOR,
                 last_checkpoint: str | Path | None = None):
        self.early, self.factor = float(early), float(factor)
        super().__init__(where, step, "loss", float(value), last_checkpoint)

    def _message(self) -> str:
        ckpt = self.last_checkpoint or "none written"
        return (f"{self.where}: loss diverged ({self.value:.4g} at step {self.step}, more than {self.factor:g} times "
                f"its early value {self.early:.4g}); training stopped. Last finite checkpoint: {ckpt}. Lower the "
                "learning rate or check the inputs.")

    def __reduce__(self):
        return (type(self), (self.where, self.step, self.value, self.early, self.factor, self.last_checkpoint))


def _as_floats(value: Any) -> list[float]:
    """A Python number or a tensor (any shape) as a list of floats."""
    if hasattr(value, "detach"):
        return [float(v) for v in value.detach().float().reshape(-1).cpu().tolist()]
    return [float(value)]


def check_finite(value: Any, *, where: str, step: int, what: str = "loss",
                 last_checkpoint: str | Path | None = None) -> float:
    """Return ``float(value)`` or raise :class:`NonFiniteError` if it is NaN or infinite.

    ``value`` is a Python number or a 0-d tensor (a loss, or a gradient norm for ``what="gradient"``).
    """
    v = float(value.detach()) if hasattr(value, "detach") else float(value)
    if not math.isfinite(v):
        raise NonFiniteError(where, step, what, v, last_checkpoint)
    return v


class NonFiniteCheckpointError(ValueError):
    """A checkpoint holds a tensor with a NaN or infinite value (a damaged file, or one saved from a diverged
    training): refused as bad input (exit 2), before anything measures, trains or saves from it.

    Attributes:
        what: the checkpoint as named in the message (``"MODEL PATH"``, ``"SPT checkpoint PATH"``).
        tensors: the names of the non-finite tensors (every one).
    """

    def __init__(self, what: str, tensors: Sequence[str]):
        self.what, self.tensors = what, list(tensors)
        shown = ", ".join(self.tensors[:4]) + (f" ... ({len(self.tensors) - 4} more)" if len(self.tensors) > 4 else "")
        super().__init__(f"{what}: {len(self.tensors)} tensor(s) hold NaN or infinite values ({shown}); the "
                         "checkpoint is damaged or was saved from a diverged training: use another checkpoint")

    def __reduce__(self):
        return (type(self), (self.what, self.tensors))


def nonfinite_tensors(state: Any, prefix: str = "") -> list[str]:
    """The names of the floating-point tensors in ``state`` holding a NaN or an infinite value: ``state`` is a
    tensor, a module (its ``state_dict()``), or dicts, lists and tuples of them (an optimizer's state: its
    ``state.0.exp_avg``); names are the keys joined by dots. Integer tensors and other values are skipped."""
    if hasattr(state, "state_dict") and callable(state.state_dict) and not hasattr(state, "is_floating_point"):
        state = state.state_dict()
    if hasattr(state, "is_floating_point"):  # a tensor
        import torch

        floating = state.is_floating_point() or state.is_complex()
        return [prefix or "tensor"] if floating and not bool(torch.isfinite(state).all()) else []
    out: list[str] = []
    if isinstance(state, Mapping):
        for k, v in state.items():
            out += nonfinite_tensors(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(state, (list, tuple)):
        for i, v in enumerate(state):
            out += nonfinite_tensors(v, f"{prefix}.{i}" if prefix else str(i))
    return out


def check_finite_tensors(what: str, state: Any) -> None:
    """Refuse a loaded checkpoint holding a non-finite tensor (:func:`nonfinite_tensors` of ``state``).

    Raises:
        NonFiniteCheckpointError: (a ``ValueError``) one line naming the checkpoint (``what``) and the tensors
            (the first four and a count).
    """
    bad = nonfinite_tensors(state)
    if bad:
        raise NonFiniteCheckpointError(what, bad)


class LossGuard:
    """The NaN and divergence guard of one training loop's loss, checked before each optimizer step.

    ``check(loss, step=...)`` raises :class:`NonFiniteError` when any element of ``loss`` is NaN/inf and
    :class:`DivergenceError` when an element exceeds ``factor`` times its *early value*: that element's
    absolute value at the first call (the loss of the weights the run starts from; a resumed run starts a new
    reference), floored at ``floor``. ``loss`` is a number or a tensor of any shape whose elements are
    separate losses (one per ensemble member, say), each with its own early value. The first call fixes the
    shape. Under DDP pass the loss summed over ranks, so every rank reaches the same verdict.

    Args:
        where: the training loop, as named in the error (e.g. ``"LRA SPT listops"``).
        factor: the growth that stops a run (default :data:`DIVERGENCE_FACTOR`); ``None`` checks finiteness only.
        floor: the smallest early value (default :data:`DIVERGENCE_FLOOR`).

    Raises:
        ValueError: ``factor`` not > 1 or ``floor`` not > 0.
    """

    def __init__(self, where: str, *, factor: float | None = DIVERGENCE_FACTOR, floor: float = DIVERGENCE_FLOOR):
        if factor is not None and not (math.isfinite(factor) and factor > 1):
            raise ValueError(f"factor: expected a finite number > 1 or None, got {factor!r}")
        if not (math.isfinite(floor) and floor > 0):
            raise ValueError(f"floor: expected a finite number > 0, got {floor!r}")
        self.where, self.factor, self.floor = where, factor, float(floor)
        self.early: list[float] | None = None

    def verdict(self, value: Any, *, step: int, last_checkpoint: str | Path | None = None) -> NonFiniteError | None:
        """The error :meth:`check` would raise for ``value`` at ``step``, or None (the early value is then set
        if this is the first finite call). For loops that must agree on a verdict before raising (DDP)."""
        vals = _as_floats(value)
        bad = [v for v in vals if not math.isfinite(v)]
        if bad:
            return NonFiniteError(self.where, step, "loss", bad[0], last_checkpoint)
        if self.early is None:
            self.early = [max(abs(v), self.floor) for v in vals]
            return None
        if len(vals) != len(self.early):
            raise ValueError(f"{self.where}: LossGuard got {len(vals)} losses at step {step}, {len(self.early)} at its "
                             "first step")
        if self.factor is not None:
            for v, e in zip(vals, self.early):
                if abs(v) > self.factor * e:
                    return DivergenceError(self.where, step, v, e, self.factor, last_checkpoint)
        return None

    def check(self, value: Any, *, step: int, last_checkpoint: str | Path | None = None) -> float:
        """Return the sum of ``value``'s elements as a float, or raise (see the class docstring)."""
        err = self.verdict(value, step=step, last_checkpoint=last_checkpoint)
        if err is not None:
            raise err
        return float(sum(_as_floats(value)))
