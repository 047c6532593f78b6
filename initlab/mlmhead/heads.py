"""Find the MLM-head projection ``W_head`` of a Hugging Face masked-LM model and rescale it.

SPLADE (Formal et al., "SPLADE v2: Sparse Lexical and Expansion Model for Information Retrieval",
arXiv:2109.10086, eq. 1) turns the masked-LM logits of every token into term weights,

    z = H W_head^T / k + b          (T, V)      H: (T, d) input of the vocabulary projection
    a_j = max_t log(1 + ReLU(z_tj))  (V,)

so the scale of the vocabulary projection ``W_head`` (shape ``(V, d)``) sets the scale of every term
weight, score and FLOPS value at initialisation. Dividing ``W_head`` by a constant ``k`` before
training (MLM-head rescaling) fixes backbones whose head norm is large. For tied models (the head
shares its tensor with the input embeddings) the one shared tensor is divided, so the input
embeddings are divided too; whether that changes the encoder's hidden states depends on where the
family's embedding LayerNorm sits, which :func:`initlab.mlmhead.report.inspect_model` measures.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch


#: ``config.model_type`` -> family name. Ettin checkpoints use ``modernbert``; GTE-MLM
#: (Alibaba-NLP/gte-en-mlm-base) uses the remote-code type ``new``.
FAMILIES: dict[str, str] = {
    "bert": "BERT",
    "distilbert": "DistilBERT",
    "albert": "ALBERT",
    "roberta": "RoBERTa",
    "modernbert": "ModernBERT",
    "new": "GTE-MLM",
}
#: families whose modelling code lives on the hub (loaded only with ``trust_remote_code=True``).
REMOTE_CODE_FAMILIES = frozenset({"new"})
#: the rescaling factors every report tabulates.
K_GRID: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
#: name of the config attribute that records the cumulative rescaling factor.
K_ATTR = "mlm_head_rescale_k"



# ------------------------------------------------------------------------------------------------
# finding and rescaling the head
# ------------------------------------------------------------------------------------------------
def family_of(model_or_config: Any) -> str:
    """The architecture family (``"BERT"``, ..., ``"GTE-MLM"``) of a model or config.

    Raises:
        ValueError: ``config.model_type`` is not one of :data:`FAMILIES` (the known ones are named).
    """
    config = getattr(model_or_config, "config", model_or_config)
    model_type = getattr(config, "model_type", None)
    if model_type not in FAMILIES:
        raise ValueError(
            f"unknown model family {model_type!r}: expected config.model_type in {sorted(FAMILIES)} "
            "(BERT, DistilBERT, ALBERT, RoBERTa, ModernBERT/Ettin, GTE-MLM)"
        )
    return FAMILIES[model_type]


def _output_module(model: Any) -> torch.nn.Module:
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "get_output_embeddings"):
        raise TypeError(f"model: expected a transformers PreTrainedModel, got {type(model).__name__}")
    family_of(model)
    out = model.get_output_embeddings()
    if out is None or not isinstance(getattr(out, "weight", None), torch.Tensor):
        raise ValueError(
            f"model {type(model).__name__} has no MLM head (get_output_embeddings() is None); load the "
            "checkpoint with AutoModelForMaskedLM"
        )
    return out


def head_projection(model: Any) -> torch.nn.Parameter:
    """The vocabulary projection ``W_head`` of a masked-LM model, shape ``(V, d)``.

    ``d`` is the width of the head's input ``H`` (the hidden size, or ``embedding_size`` for ALBERT).
    For tied models this is the same Parameter as the input embeddings.

    Raises:
        TypeError: ``model`` is not a transformers model.
        ValueError: unknown family, or no MLM head.
    """
    return _output_module(model).weight


def head_bias(model: Any) -> torch.Tensor | None:
    """The vocabulary bias ``b`` ``(V,)`` added after the projection, or ``None`` if the family has none."""
    return getattr(_output_module(model), "bias", None)


def _param_name(model: Any, tensor: torch.Tensor) -> str:
    """The name of ``tensor`` among ``model``'s parameters (``"the MLM-head bias"`` if it is not one)."""
    for name, p in model.named_parameters(remove_duplicate=False):
        if p is tensor:
            return name
    return "the MLM-head bias"


#: the fix named by every vocabulary-size error
RESIZE_FIX = ("call model.resize_token_embeddings(len(tokenizer)) on the model loaded with its tokenizer and save "
              "both again (it resizes the input embeddings, the MLM head and its bias together)")


def check_head_shapes(model: Any) -> None:
    """Refuse an MLM head whose bias does not have one entry per row of ``W_head (V, d)``.

    Raises:
        ValueError: one line naming the bias parameter, both shapes and the fix (:data:`RESIZE_FIX`).
    """
    W, b = head_projection(model), head_bias(model)
    if b is not None and tuple(b.shape) != (W.shape[0],):
        raise ValueError(f"MLM-head bias {_param_name(model, b)} has shape {tuple(b.shape)} but W_head has "
                         f"{W.shape[0]} rows (expected bias shape {(int(W.shape[0]),)}): tokens were added or removed "
                         f"without resizing it; {RESIZE_FIX}")


def reachable_rows(tokenizer: Any, vocab: int) -> torch.Tensor:
    """``(V,)`` bool: the rows of a ``V``-row vocabulary projection that some token id of ``tokenizer`` reaches.

    A model vocabulary may be padded beyond its tokenizer (ModernBERT pads to a multiple of 64): the rows past
    every token id are logits no text can be written with. Ids of ``tokenizer.get_vocab()`` (added tokens
    included) at or beyond ``V`` are ignored here (:func:`check_vocab` refuses them).
    """
    ids = torch.tensor(sorted(set(tokenizer.get_vocab().values())), dtype=torch.long)
    rows = torch.zeros(int(vocab), dtype=torch.bool)
    rows[ids[ids < vocab]] = True
    return rows


def check_vocab(model: Any, tokenizer: Any) -> dict[str, int]:
    """Check that every token id of ``tokenizer`` has a row in ``model``'s input embeddings and MLM head.

    Returns:
        ``{"tokenizer": len(tokenizer), "rows": V, "reached_rows": n, "unreached_rows": V - n}``; unreached rows
        (a vocabulary padded beyond the tokenizer) are accepted and left out of the sparse statistics by callers.
    Raises:
        ValueError: one line naming both sizes and the fix, when a token id is beyond the model's rows (a token
            added to the tokenizer without :meth:`resize_token_embeddings`), or the bias has the wrong size
            (:func:`check_head_shapes`).
    """
    check_head_shapes(model)
    V = int(head_projection(model).shape[0])
    emb = model.get_input_embeddings()
    rows = min(V, int(emb.weight.shape[0])) if emb is not None else V
    top = max(tokenizer.get_vocab().values()) + 1
    if top > rows:
        raise ValueError(f"the tokenizer has {len(tokenizer)} tokens (ids up to {top - 1}) but the model's vocabulary has "
                         f"{rows} rows: tokens were added to the tokenizer without resizing the model; {RESIZE_FIX}")
    reached = int(reachable_rows(tokenizer, V).sum())
    return {"tokenizer": len(tokenizer), "rows": V, "reached_rows": reached, "unreached_rows": V - reached}


def check_pad_token(tokenizer: Any, what: str, *, config: Any = None, folder: Any = None) -> None:
    """Refuse a tokenizer without a pad token: texts of different lengths cannot be batched with it (transformers'
    own error names no checkpoint, and it comes only at the first batch, after a run has written its folder).

    Args:
        what: names the checkpoint in the error (``"MODEL PATH"``, ``"backbone PATH"``).
        config: the model's config; its ``pad_token_id`` names the token to set.
        folder: where to save the fixed tokenizer (named in the fix).
    Raises:
        ValueError: one line naming the checkpoint and the fix (set the model's pad token and save the tokenizer).
    """
    if getattr(tokenizer, "pad_token", None) is not None and getattr(tokenizer, "pad_token_id", None) is not None:
        return
    pad_id = getattr(config, "pad_token_id", None) if config is not None else None
    token = None
    if pad_id is not None:
        try:
            token = tokenizer.convert_ids_to_tokens(int(pad_id))
        except Exception:  # noqa: BLE001 -- an id the tokenizer does not know: name the id instead
            token = None
    name = repr(token) if token else "its padding token"
    where = f" (its config.json pad_token_id {pad_id})" if pad_id is not None else ""
    save = f"; tokenizer.save_pretrained({str(folder)!r})" if folder is not None else " and save the tokenizer again"
    raise ValueError(f"{what}: its tokenizer has no pad token, so texts of different lengths cannot be batched; give it "
                     f"the model's pad token{where}: tokenizer.pad_token = {name}{save}")


def is_tied(model: Any) -> bool:
    """Whether ``W_head`` shares storage with the input embeddings (one tensor)."""
    w = head_projection(model)
    emb = model.get_input_embeddings()
    return emb is not None and emb.weight.data_ptr() == w.data_ptr() and emb.weight.shape == w.shape


def check_k(k: Any) -> float:
    """``k`` as a float if it is a positive finite number.

    Raises:
        TypeError: ``k`` is not a number (a bool included).
        ValueError: ``k <= 0``, NaN or inf.
    """
    if isinstance(k, bool) or not isinstance(k, (int, float)):
        raise TypeError(f"k: expected a positive finite float, got {type(k).__name__} {k!r}")
    k = float(k)
    if not math.isfinite(k) or k <= 0:
        raise ValueError(f"k: expected a positive finite float, got {k!r}")
    return k


def untie_head(model: Any) -> Any:
    """Give a tied MLM head its own copy of ``W_head`` ``(V, d)`` (and of its bias, so the bias survives a
    save/reload) and set ``config.tie_word_embeddings = False``, in place; the values are unchanged. A head that is
    not tied is left alone. Returns ``model``.

    Raises:
        TypeError: ``model`` is not a transformers model.
        ValueError: unknown family, or no MLM head.
    """
    out = _output_module(model)
    if is_tied(model):
        out.weight = torch.nn.Parameter(out.weight.detach().clone(), requires_grad=out.weight.requires_grad)
        if getattr(out, "bias", None) is not None:
            out.bias = torch.nn.Parameter(out.bias.detach().clone(), requires_grad=out.bias.requires_grad)
        model.config.tie_word_embeddings = False
    return model


def rescale_mlm_head(model: Any, k: float, *, untie: bool = False) -> Any:
    """Divide the MLM head's vocabulary projection ``W_head`` by ``k``, in place; return ``model``.

    ``W_head <- W_head / k`` (MLM-head rescaling, see the module docstring); the bias ``b``
    is left alone, so the logits become ``z = H W_head^T / k + b``. For a tied model the one shared
    tensor is divided once and stays tied (the input embeddings are divided too); with
    ``untie=True`` the head first gets its own copy (and its own bias copy, so the bias survives a
    save/reload), ``config.tie_word_embeddings`` is set to False, and only the head is divided.
    The cumulative factor is recorded as ``model.config.mlm_head_rescale_k`` (multiplied with any
    earlier value).

    Args:
        model: a transformers masked-LM model of a family in :data:`FAMILIES`.
        k: the rescaling factor, finite and > 0 (``k = 1`` changes nothing but is recorded).
        untie: untie the head from the input embeddings before dividing.
    Returns:
        ``model`` (modified in place).
    Raises:
        ValueError: ``k <= 0``, NaN or inf, or so extreme that ``W_head / k`` over/underflows; unknown
            family; model without an MLM head; a bias of the wrong size (:func:`check_head_shapes`).
        TypeError: ``k`` not a number, or ``model`` not a transformers model.
    """
    k = check_k(k)
    out = _output_module(model)  # validates family and head before anything changes
    check_head_shapes(model)
    with torch.no_grad():  # a k so small (large) that W_head / k overflows (underflows) is refused up front
        w = out.weight.detach()
        q = w / k
        if not bool(torch.isfinite(q).all()) or int(torch.count_nonzero(q)) != int(torch.count_nonzero(w)):
            raise ValueError(f"k: {k!r} makes W_head / k overflow or underflow in {w.dtype}; expected a moderate "
                             "positive factor (e.g. 1 to 64)")
        del q
    if untie:
        untie_head(model)
    with torch.no_grad():
        out.weight.div_(k)
    previous = float(getattr(model.config, K_ATTR, None) or 1.0)
    setattr(model.config, K_ATTR, previous * k)
    return model


@contextmanager
def rescaled(model: Any, k: float) -> Iterator[Any]:
    """Within the ``with`` block, ``model`` rescaled by :func:`rescale_mlm_head` ``(model, k)`` (tied: the one shared
    tensor, so the input embeddings are divided too); on leaving, ``W_head`` ``(V, d)`` is restored bit-exactly from
    a copy and ``config.mlm_head_rescale_k`` to its earlier value (or absence). Yields ``model``.

    Raises:
        the errors of :func:`rescale_mlm_head` (nothing is changed then).
    """
    W = head_projection(model)
    W0 = W.detach().clone()
    missing = object()
    recorded = getattr(model.config, K_ATTR, missing)
    try:
        rescale_mlm_head(model, k)
        yield model
    finally:
        with torch.no_grad():
            W.copy_(W0)
        if recorded is missing:
            if hasattr(model.config, K_ATTR):
                delattr(model.config, K_ATTR)
        else:
            setattr(model.config, K_ATTR, recorded)


# ------------------------------------------------------------------------------------------------
# the head's input: the family's transform between the last hidden states and W_head
# ------------------------------------------------------------------------------------------------
def _gte_transform(head: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """GTE-MLM's ``lm_head`` without its decoder: ``transform`` (a Sequential) in some revisions of its remote code,
    ``dense`` -> ``transform_act_fn`` -> ``norm`` in others."""
    if hasattr(head, "transform"):
        return head.transform(hidden)
    return head.norm(head.transform_act_fn(head.dense(hidden)))


def _roberta_transform(head: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    from transformers.models.roberta.modeling_roberta import gelu  # the activation RobertaLMHead.forward calls

    return head.layer_norm(gelu(head.dense(hidden)))


#: ``config.model_type`` -> the head transform of that family's masked-LM class, ``(model, hidden) -> head input``;
#: each is the family's own head forward with the final vocabulary projection left out
_HEAD_TRANSFORMS = {
    "bert": lambda m, h: m.cls.predictions.transform(h),  # dense -> act -> LayerNorm
    "roberta": lambda m, h: _roberta_transform(m.lm_head, h),  # dense -> gelu -> layer_norm
    "albert": lambda m, h: m.predictions.LayerNorm(m.predictions.activation(m.predictions.dense(h))),
    "modernbert": lambda m, h: m.head(h),  # dense -> act -> norm
    "distilbert": lambda m, h: m.vocab_layer_norm(m.activation(m.vocab_transform(h))),
    "new": lambda m, h: _gte_transform(m.lm_head, h),  # GTE-MLM (remote code)
}


def head_input(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """The input ``H`` of the vocabulary projection: the family's head transform applied to the encoder's last
    hidden states, so that ``H @ W_head.T + b`` are the model's masked-LM logits.

    Args:
        model: a transformers masked-LM model of a family in :data:`FAMILIES`.
        hidden: ``(..., hidden_size)`` last hidden states of ``model``'s encoder (``model.base_model``).
    Returns:
        ``(..., d)``, ``d`` the width of ``W_head (V, d)`` (``embedding_size`` for ALBERT): BERT's
        ``cls.predictions.transform``, RoBERTa's ``lm_head`` dense -> gelu -> layer_norm, ALBERT's
        ``predictions`` dense -> activation -> LayerNorm, ModernBERT's ``head``, DistilBERT's ``vocab_transform`` ->
        activation -> ``vocab_layer_norm``, GTE-MLM's ``lm_head`` transform.
    Raises:
        TypeError: ``model`` is not a transformers model.
        ValueError: unknown family, or no MLM head.
    """
    _output_module(model)  # validates the model, its family and its head
    return _HEAD_TRANSFORMS[model.config.model_type](model, hidden)
