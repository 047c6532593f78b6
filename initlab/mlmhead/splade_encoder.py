"""The fused SPLADE head inside a sentence-transformers ``SparseEncoder``: same vectors, no ``(B, T, V)`` logits.

A SPLADE ``SparseEncoder`` is ``Transformer(transformer_task="fill-mask")`` + ``SpladePooling("max")``: the
transformer module computes the masked-LM logits ``z = H W_head^T + b`` of every token, ``(B, T, V)``, and the
pooling module ``a_j = max_t log(1 + ReLU(z_tj))`` over the unmasked tokens (SPLADE v2, "SPLADE v2: Sparse Lexical
and Expansion Model for Information Retrieval", arXiv:2109.10086, eq. 1). :func:`use_engine` switches a model
between that path (``"dense"``) and ``"fused"``: the transformer module runs the encoder to its last hidden states
``(B, T, hidden)``, applies the family's head transform (:func:`initlab.mlmhead.heads.head_input`, ``(B, T, d)``)
and :func:`initlab.mlmhead.fused.splade_max_pool` with the vocabulary projection ``W_head (V, d)`` and its bias
``b (V,)``, which never holds the ``(B, T, V)`` logits; the pooling module passes the vector on. The parameters are
the model's own (a tied ``W_head`` stays the input embeddings' tensor and gets both gradients), so
``SparseEncoder.encode``, ``SpladeLoss``, ``SparseEncoderTrainer`` and ``save`` work unchanged, and a saved model is
the standard two modules (their classes and configs): it loads in plain sentence-transformers, with the dense path.

How: the engine is the two module *instances*' ``forward`` (an instance attribute set here, removed for
``"dense"``), never their classes, so nothing of it is saved. With the fused engine ``features`` carries no
``token_embeddings`` (the logits it would hold are never built): ``encode(output_value="token_embeddings")`` needs
the dense engine.

Gradients: the pooled weight goes back through the first token holding the maximum (ties: the first one in
``t`` wins, as :func:`initlab.mlmhead.fused.splade_max_pool` documents); sentence-transformers' ``torch.max`` picks one
of the tied positions too, so with ties (equal hidden states at two unmasked positions) the two engines may send a
gradient to different tokens; without ties they are equal to rounding (tests/mlmhead/test_splade_encoder.py,
float64).
"""

from __future__ import annotations

import inspect
import types
from typing import Any

import torch

from initlab.mlmhead.heads import head_bias, head_input, head_projection

__all__ = ["ENGINES", "use_engine", "fuse_splade", "engine_of"]

#: the SPLADE head engines: sentence-transformers' own path, and the fused head
ENGINES: tuple[str, ...] = ("dense", "fused")

#: the encoder inputs a Transformer module's features may carry (the rest is sentence-transformers' bookkeeping)
_ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids", "inputs_embeds")


def _modules(model: Any) -> tuple[Any, Any]:
    """The (Transformer, SpladePooling) modules of a SPLADE SparseEncoder, checked.

    Raises:
        TypeError: ``model`` is not a SparseEncoder of exactly those two modules.
        ValueError: the transformer module is not ``fill-mask``, or the pooling is not the max of ``log(1 + ReLU)``.
    """
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    if not isinstance(model, SparseEncoder):
        raise TypeError(f"model: expected a sentence-transformers SparseEncoder, got {type(model).__name__}")
    mods = list(model)
    if len(mods) != 2 or not isinstance(mods[0], Transformer) or not isinstance(mods[1], SpladePooling):
        raise TypeError("model: expected a SparseEncoder of two modules, Transformer(transformer_task='fill-mask') + "
                        f"SpladePooling, got {[type(m).__name__ for m in mods]}")
    tr, pool = mods
    if getattr(tr, "transformer_task", None) != "fill-mask":
        raise ValueError(f"model: expected its Transformer module with transformer_task='fill-mask', got "
                         f"{getattr(tr, 'transformer_task', None)!r}")
    if pool.pooling_strategy != "max" or pool.activation_function != "relu":
        raise ValueError("model: the fused head computes SpladePooling(pooling_strategy='max', activation_function="
                         f"'relu'), got pooling_strategy={pool.pooling_strategy!r}, activation_function="
                         f"{pool.activation_function!r}; use engine 'dense'")
    return tr, pool


def _fused_transformer_forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
    """The Transformer module's forward under the fused engine: ``features["sentence_embedding"]`` ``(B, V)``."""
    from initlab.mlmhead.fused import splade_max_pool

    if "cu_seq_lens_q" in features:
        raise ValueError("the fused SPLADE head takes padded batches (input_ids, attention_mask of shape (B, T)); this "
                         "batch is unpadded (flash-attention varlen features): use engine 'dense'")
    hf = self.auto_model
    body = hf.base_model
    params = inspect.signature(body.forward).parameters
    given = {**features, **kwargs}
    inputs = {k: given[k] for k in _ENCODER_INPUTS if k in given and k in params}
    hidden = body(**inputs, return_dict=True).last_hidden_state  # (B, T, hidden)
    mask = features["attention_mask"]
    features["sentence_embedding"] = splade_max_pool(head_input(hf, hidden), head_projection(hf), head_bias(hf), mask)
    return features


def _fused_pooling_forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
    """The SpladePooling module's forward under the fused engine: the vector is already pooled."""
    if "sentence_embedding" not in features:
        raise RuntimeError("SpladePooling under the fused engine expects the Transformer module (fused too) before it")
    if self.embedding_dimension is None:
        self.embedding_dimension = int(features["sentence_embedding"].shape[-1])
    return features


def engine_of(model: Any) -> str:
    """The engine of a SPLADE SparseEncoder: ``"fused"`` or ``"dense"`` (see :func:`use_engine`)."""
    tr, pool = _modules(model)
    fused = [isinstance(m.__dict__.get("forward"), types.MethodType) for m in (tr, pool)]
    if fused[0] != fused[1]:
        raise RuntimeError("model: half fused (one module's forward replaced, not the other's); call use_engine again")
    return "fused" if fused[0] else "dense"


def use_engine(model: Any, engine: str) -> Any:
    """Switch a SPLADE SparseEncoder's head between sentence-transformers' path and the fused head; returns ``model``.

    Args:
        model: a ``SparseEncoder`` of ``Transformer(transformer_task="fill-mask")`` + ``SpladePooling("max", "relu")``
            over a masked-LM model of a family of :data:`initlab.mlmhead.heads.FAMILIES`.
        engine: ``"dense"`` (the standard modules' own forward: logits ``(B, T, V)``, then the pooling) or ``"fused"``
            (module docstring). Switching changes no parameter and no saved file.
    Returns:
        ``model``, in place.
    Raises:
        ValueError: unknown ``engine``; a model the fused head does not compute (see :func:`_modules`), or of an
            unknown family / without an MLM head (:func:`initlab.mlmhead.heads.head_projection`).
        TypeError: ``model`` is not such a SparseEncoder.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine: expected one of {list(ENGINES)}, got {engine!r}")
    tr, pool = _modules(model)
    if engine == "dense":
        for m in (tr, pool):
            m.__dict__.pop("forward", None)
        return model
    head_projection(tr.auto_model)  # unknown family or no MLM head: refused now, not at the first batch
    tr.forward = types.MethodType(_fused_transformer_forward, tr)
    pool.forward = types.MethodType(_fused_pooling_forward, pool)
    return model


def fuse_splade(model: Any) -> Any:
    """``use_engine(model, "fused")``: the fused SPLADE head in a SPLADE SparseEncoder, in place; returns ``model``."""
    return use_engine(model, "fused")
