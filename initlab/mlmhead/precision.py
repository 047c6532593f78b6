"""The floating-point dtype a masked-LM checkpoint is loaded in: float32 for training and measuring, unless asked.

A Hugging Face checkpoint records the dtype its weights were saved in (``config.dtype``, formerly
``config.torch_dtype``), and transformers 5 loads a checkpoint in that dtype by default (``dtype="auto"``;
transformers 4 loaded float32). A bfloat16 or float16 checkpoint then trains with *half-precision master
weights*: every optimizer update is rounded to the weight's own precision, and an update smaller than half a
unit in the last place is lost. bfloat16 keeps 8 significant bits, so a weight ``w`` moves only when the
update exceeds about ``|w| 2^-9``; an AdamW step of size about ``lr = 2e-5`` (Adam normalises the step) is lost
on every weight with ``|w| > 2e-5 * 2^9 = 0.01``, most of a BERT-like initialisation (std 0.02). Mixed
precision keeps float32 master weights and computes in half precision (the Trainer's ``bf16=True``, used on
CUDA), which is what the SPLADE recipe intends (Micikevicius et al., "Mixed Precision Training", ICLR 2018).

So initlab loads a checkpoint for training in float32 unless a precision is asked for explicitly, and says so
when the stored dtype differs (a ``UserWarning`` naming it). ``mlmhead inspect`` and ``rescale`` load float32
too (their measurements and the division then do not depend on how the checkpoint was stored); ``rescale``
saves in the stored dtype again.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

__all__ = ["WEIGHTS_DTYPES", "stored_dtype", "resolve_weights_dtype", "dtype_kwargs"]

#: the choices of a weights-dtype option: a dtype name, or ``"stored"`` (the checkpoint's own dtype).
WEIGHTS_DTYPES = ("float32", "bfloat16", "float16", "stored")

_HALF = (torch.bfloat16, torch.float16)


def stored_dtype(config: Any) -> torch.dtype | None:
    """The dtype a checkpoint's config records (``config.dtype`` or ``config.torch_dtype``), or None if none.

    Raises:
        ValueError: the recorded value is not a torch floating-point dtype name.
    """
    value = getattr(config, "dtype", None)
    if value is None:
        value = getattr(config, "torch_dtype", None)
    if value is None or value == "auto":
        return None
    if isinstance(value, str):
        dt = getattr(torch, value.replace("torch.", ""), None)
        if not isinstance(dt, torch.dtype):
            raise ValueError(f"config dtype {value!r}: not a torch dtype name")
        value = dt
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(f"config dtype {value!r}: expected a floating-point dtype")
    return value


def resolve_weights_dtype(config: Any, requested: str = "float32", *, what: str = "backbone",
                          option: str = "--set weights_dtype") -> torch.dtype:
    """The dtype to load ``config``'s checkpoint in for training, by the policy of the module docstring.

    ``requested`` is one of :data:`WEIGHTS_DTYPES`: ``"float32"`` (default), ``"bfloat16"``, ``"float16"``, or
    ``"stored"`` (the checkpoint's recorded dtype; float32 when it records none). Warns (``UserWarning``, naming
    ``what``, the stored dtype and ``option``) when float32 is loaded from a half-precision checkpoint, and when
    half-precision master weights are asked for.

    Raises:
        ValueError: ``requested`` is not one of :data:`WEIGHTS_DTYPES` (naming ``option``).
    """
    if requested not in WEIGHTS_DTYPES:
        raise ValueError(f"{option} {requested!r}: expected one of {list(WEIGHTS_DTYPES)}")
    stored = stored_dtype(config)
    name = lambda dt: str(dt).replace("torch.", "")  # noqa: E731
    if requested == "stored":
        dtype = stored or torch.float32
    else:
        dtype = getattr(torch, requested)
    if dtype in _HALF:
        warnings.warn(f"{what}: training with {name(dtype)} master weights ({option}={requested}); updates smaller than "
                      f"half a {name(dtype)} unit are rounded away. The default, float32, keeps them", UserWarning,
                      stacklevel=2)
    elif stored in _HALF:
        warnings.warn(f"{what}: its checkpoint stores {name(stored)} weights; loading them in float32 for training "
                      f"(float32 master weights). To train in {name(stored)} instead: {option}=stored", UserWarning,
                      stacklevel=2)
    return dtype


def dtype_kwargs(dtype: torch.dtype) -> dict[str, torch.dtype]:
    """The ``from_pretrained`` keyword that sets the load dtype: ``dtype`` (transformers >= 4.56), else ``torch_dtype``."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}
