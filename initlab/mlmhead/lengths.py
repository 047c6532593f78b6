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

__all__ = ["usable_length", "check_length", "fitting_default", "truncation_counts", "warn_truncation",
           "TRUNCATION_WARN_SHARE"]

#: a warning is raised when more than this share of the tokens of a set of texts is cut by the length limit
TRUNCATION_WARN_SHARE = 0.01

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


def truncation_counts(tokenizer: Any, texts: Any, max_length: int, *, batch: int = 1024) -> dict[str, Any]:
    """What a length cut at ``max_length`` tokens (special tokens included) removes from ``texts``.

    Each text is tokenised in full (batches of ``batch``, special tokens added as the model sees them) and its
    length compared with ``max_length``.

    Returns:
        ``{"texts", "truncated_texts", "tokens", "tokens_cut", "tokens_cut_share", "max_length"}``: how many texts
        are longer than ``max_length``, their tokens in all and the share of all tokens beyond the cut.
    """
    texts = list(texts)
    n_trunc = total = cut = 0
    for start in range(0, len(texts), batch):
        ids = tokenizer(texts[start:start + batch], add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        for row in ids:
            total += len(row)
            if len(row) > max_length:
                n_trunc += 1
                cut += len(row) - max_length
    return {"texts": len(texts), "truncated_texts": n_trunc, "tokens": total, "tokens_cut": cut,
            "tokens_cut_share": cut / total if total else 0.0, "max_length": int(max_length)}


def warn_truncation(what: str, counts: dict[str, Any], *, stacklevel: int = 2) -> None:
    """Warn (``RuntimeWarning``) when more than :data:`TRUNCATION_WARN_SHARE` of the tokens of ``counts``
    (:func:`truncation_counts`) are cut, naming ``what`` (e.g. ``"scifact documents"``)."""
    if counts["tokens_cut_share"] > TRUNCATION_WARN_SHARE:
        warnings.warn(f"{what}: {counts['truncated_texts']} of {counts['texts']} texts are longer than "
                      f"{counts['max_length']} tokens; {counts['tokens_cut_share']:.1%} of their tokens are cut and never "
                      "seen by the model (raise the length limit if the model allows it)", RuntimeWarning,
                      stacklevel=stacklevel + 1)
