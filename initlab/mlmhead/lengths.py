"""Usable input length of a masked-LM checkpoint, derived from the model's own position table.

Length policy (the same in ``mlmhead inspect``, ``splade train`` and ``splade eval``): a requested
length in tokens (special tokens included) above the model's usable length is refused with a
``ValueError`` before anything is written; nothing is silently capped or extrapolated.

The usable length per family (``config.model_type``):

* BERT, DistilBERT, ALBERT -- absolute position table: ``max_position_embeddings``;
* RoBERTa -- absolute table whose positions start after the padding index:
  ``max_position_embeddings - pad_token_id - 1`` (514 - 1 - 1 = 512 for roberta-base);
* ModernBERT/Ettin, GTE-MLM -- rotary positions, no table: ``max_position_embeddings`` is the context the
  model was trained with; longer inputs run but extrapolate, so they are refused too.

The tokenizer's ``model_max_length`` is only a truncation default written by whoever saved the
tokenizer (transformers uses ~1e30 when none is known). When it disagrees with the model's usable length,
the model's position table wins and a warning names both.
"""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["usable_length", "check_length", "fitting_default"]

_ABSOLUTE = {"bert", "distilbert", "albert"}
_OFFSET = {"roberta", "xlm-roberta", "camembert"}
_ROTARY = {"modernbert", "new"}


def usable_length(model_or_config: Any, tokenizer: Any = None) -> tuple[int | None, str]:
    """``(usable length in tokens or None if the config states none, how it was derived)``.

    Warns (``UserWarning``) when ``tokenizer.model_max_length`` is a real number that differs.
    """
    config = getattr(model_or_config, "config", model_or_config)
    mtype = getattr(config, "model_type", None)
    n = getattr(config, "max_position_embeddings", None)
    if n is None:
        return None, f"config of model_type {mtype!r} states no max_position_embeddings"
    n = int(n)
    if mtype in _OFFSET:
        pad = int(getattr(config, "pad_token_id", 1) or 0)
        limit, how = n - pad - 1, f"max_position_embeddings {n} minus the {pad + 1} positions before the first token ({mtype})"
    elif mtype in _ROTARY:
        limit, how = n, f"max_position_embeddings {n}, the trained context of the rotary positions ({mtype})"
    else:
        limit, how = n, f"max_position_embeddings {n}, the position table ({mtype})"
    tok_max = getattr(tokenizer, "model_max_length", None) if tokenizer is not None else None
    if isinstance(tok_max, int) and tok_max < 1_000_000 and tok_max != limit:
        warnings.warn(f"the tokenizer's model_max_length ({tok_max}) differs from the model's usable length ({limit}: "
                      f"{how}); initlab uses the model's", UserWarning, stacklevel=2)
    return limit, how


def check_length(requested: int, model_or_config: Any, *, flag: str, tokenizer: Any = None) -> int:
    """Return ``requested`` if the model can take it, else raise ``ValueError`` naming ``flag``, the
    requested length, the model's usable length and where it comes from."""
    limit, how = usable_length(model_or_config, tokenizer)
    if limit is not None and int(requested) > limit:
        raise ValueError(f"{flag} {requested}: longer than the model's usable length {limit} tokens ({how}); "
                         f"pass {flag} {limit} or less")
    return int(requested)


def fitting_default(preferred: int, model_or_config: Any, tokenizer: Any = None) -> int:
    """A default length that fits the model: the smaller of ``preferred`` and the model's usable length
    (``preferred`` when the config states none). For a command's *default* only; a length the user asked for
    is checked with :func:`check_length` and refused when too long, never capped."""
    limit, _ = usable_length(model_or_config, tokenizer)
    return int(preferred) if limit is None else min(int(preferred), int(limit))
