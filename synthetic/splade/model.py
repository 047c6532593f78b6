"""Tiny masked-LM backbone for the synthetic SPLADE experiment: tokenizer, model, MLM pretraining, head inflation.

* :func:`build_tokenizer` -- a word-level ``tokenizers`` model (whitespace split, ``[CLS] x [SEP]``)
  wrapped in ``PreTrainedTokenizerFast`` so sentence-transformers can load it from a folder;
* :func:`build_model` -- ``BertForMaskedLM`` from a ``BertConfig`` built in-process (no download);
  the MLM decoder weight is tied to the input word embeddings (BERT's default);
* :func:`pretrain_mlm` -- a short masked-token reconstruction run on the corpus documents
  (``DataCollatorForLanguageModeling``: 15 % of tokens, 80/10/10 mask/random/keep), so the head's
  rows carry lexical co-occurrence information;
* :func:`inflate_head` -- multiplies the head projection ``W_head`` (``cls.predictions.decoder.weight``,
  shape ``(V, d)``) by a factor, imitating backbones whose MLM head has a large norm. The decoder bias
  and the head transform (dense + LayerNorm before the decoder) are *not* changed. Because the head is
  tied, the input word embeddings are the same tensor and are multiplied too; BERT's embedding
  LayerNorm (after word + position + token-type embeddings are summed) then partly normalises the
  inflation away in the hidden states (the position/type parts weigh less), so hidden states change
  a little, the logits ``z = H W_head^T + b`` mostly by the factor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from typing import Any

import torch

from initlab.config import check_ranges, ranged
from initlab.synthetic.splade.data import SPECIAL_TOKENS

__all__ = ["BackboneConfig", "build_tokenizer", "build_model", "mlm_param_groups", "pretrain_mlm", "sparse_mlm_loss",
           "inflate_head", "head_weight"]


@dataclass(frozen=True)
class BackboneConfig:
    """Tiny BERT and its MLM pretraining. ``d`` is the width, ``layers`` the depth, T ``max_len`` tokens."""

    d: int = ranged(64, "[1, inf)")
    layers: int = ranged(2, "[1, inf)")
    heads: int = ranged(2, "[1, inf)")
    ffn: int = ranged(128, "[1, inf)")
    max_len: int = ranged(40, "[3, inf)")  # [CLS], one token, [SEP]
    mlm_steps: int = ranged(400, "[0, inf)")
    mlm_batch: int = ranged(32, "[1, inf)")
    mlm_lr: float = ranged(1e-3, "(0, inf)")
    mlm_probability: float = ranged(0.15, "(0, 1)")

    def __post_init__(self) -> None:
        check_ranges(self)


def build_tokenizer(vocab: list[str]):
    """Word-level fast tokenizer over ``vocab`` (special tokens must be its first entries).

    Raises:
        ValueError: ``vocab`` does not start with the special tokens or has duplicates.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    if tuple(vocab[: len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
        raise ValueError(f"vocab: expected to start with {SPECIAL_TOKENS}")
    if len(set(vocab)) != len(vocab):
        raise ValueError("vocab: duplicate tokens")
    ids = {w: i for i, w in enumerate(vocab)}
    tok = Tokenizer(models.WordLevel(vocab=ids, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.BertProcessing(("[SEP]", ids["[SEP]"]), ("[CLS]", ids["[CLS]"]))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]", model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )


def build_model(vocab_size: int, cfg: BackboneConfig, seed: int):
    """``BertForMaskedLM`` with tied head, initialised deterministically from ``seed``."""
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(
        vocab_size=vocab_size, hidden_size=cfg.d, num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads,
        intermediate_size=cfg.ffn, max_position_embeddings=cfg.max_len, type_vocab_size=2,
        pad_token_id=0, tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    return BertForMaskedLM(config)


def head_weight(model) -> torch.nn.Parameter:
    """The MLM head projection ``W_head`` of a ``BertForMaskedLM``, shape ``(V, d)``."""
    return model.get_output_embeddings().weight


def mlm_param_groups(model, cfg) -> list[dict]:
    """AdamW parameter groups of MLM pretraining: weight decay ``cfg.mlm_weight_decay`` (0.01 when the config has
    no such field) on every parameter, except the word embeddings (the tied ``W_head``) when
    ``cfg.decay_embeddings`` is False and the 1-d parameters (biases, LayerNorm gains) when
    ``cfg.decay_norms_biases`` is False. With both True this is one group of all parameters in
    ``model.parameters()`` order: the recipe of the first synthetic SPLADE runs, unchanged."""
    wd = float(getattr(cfg, "mlm_weight_decay", 0.01))
    decay_emb, decay_1d = getattr(cfg, "decay_embeddings", True), getattr(cfg, "decay_norms_biases", True)
    if decay_emb and decay_1d:
        return [{"params": list(model.parameters()), "weight_decay": wd}]
    emb = model.get_input_embeddings().weight
    decay, no_decay = [], []
    for p in model.parameters():
        skip = (p is emb and not decay_emb) or (p.ndim < 2 and not decay_1d)
        (no_decay if skip else decay).append(p)
    return [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]


#: the encoder body and the MLM prediction head of each masked-LM class (head: hidden ``(n, d)`` -> logits ``(n, V)``)
_BODY_HEAD = {"BertForMaskedLM": ("bert", lambda m, h: m.cls(h)), "RobertaForMaskedLM": ("roberta", lambda m, h: m.lm_head(h)),
              "AlbertForMaskedLM": ("albert", lambda m, h: m.predictions(h)),
              "ModernBertForMaskedLM": ("model", lambda m, h: m.decoder(m.head(h)))}


def sparse_mlm_loss(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The masked-LM loss of ``model`` (BERT, RoBERTa, ALBERT or ModernBERT masked LM) computing the prediction head
    only at the masked positions (``labels != -100``): the same mean cross-entropy as ``model(..., labels=labels).loss``
    (the other positions carry no loss), without the ``(B, T, V)`` logits of the unmasked tokens (ModernBERT's own
    ``sparse_prediction``, for every family). ``input_ids``, ``attention_mask``, ``labels``: ``(B, T)``.

    Raises:
        ValueError: a model class without a known body and head.
    """
    name = type(model).__name__
    if name not in _BODY_HEAD:
        raise ValueError(f"sparse_mlm_loss: expected one of {sorted(_BODY_HEAD)}, got {name}")
    body, head = _BODY_HEAD[name]
    h = getattr(model, body)(input_ids=input_ids, attention_mask=attention_mask)[0]  # (B, T, d)
    sel = labels != -100
    logits = head(model, h[sel])  # (n, V)
    return torch.nn.functional.cross_entropy(logits, labels[sel])


def pretrain_mlm(model, tokenizer, texts: list[str], cfg: BackboneConfig, seed: int, progress: bool = False,
                 on_step: Any = None, sparse: bool = False) -> list[float]:
    """Masked-token reconstruction on ``texts`` for ``cfg.mlm_steps`` AdamW steps; returns the loss per step.
    ``on_step``: called with no argument after each step (progress reports; it does not change the training).
    ``sparse``: compute the head at the masked positions only (:func:`sparse_mlm_loss`; the same loss, far fewer
    operations at a large vocabulary; float rounding differs from the dense path, so a backbone is not bitwise
    the dense one's).

    Raises:
        initlab.runs.NonFiniteError: a NaN/inf loss, or one past the divergence rule
            (:class:`initlab.runs.LossGuard`), before that step's update.
    """
    from transformers import DataCollatorForLanguageModeling

    from initlab.runs import LossGuard

    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=cfg.mlm_probability, return_tensors="pt")
    enc = tokenizer(texts, truncation=True, max_length=cfg.max_len)
    examples = [{"input_ids": ids} for ids in enc["input_ids"]]
    opt = torch.optim.AdamW(mlm_param_groups(model, cfg), lr=cfg.mlm_lr, betas=(0.9, getattr(cfg, "mlm_beta2", 0.999)))
    model.train()
    losses = []
    guard = LossGuard("synthetic SPLADE MLM pretraining")
    steps = range(cfg.mlm_steps)
    if progress:
        from initlab.executor import progress_bar

        steps = progress_bar(steps, desc="MLM pretraining", leave=False)
    for step in steps:
        idx = torch.randint(len(examples), (cfg.mlm_batch,), generator=gen).tolist()
        batch = collator([examples[i] for i in idx])
        if sparse:
            loss = sparse_mlm_loss(model, batch["input_ids"], batch["attention_mask"], batch["labels"])
        else:
            loss = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]).loss
        guard.check(loss.detach(), step=step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step()
    model.eval()
    return losses


@torch.no_grad()
def inflate_head(model, factor: float):
    """Multiply the MLM head projection ``W_head`` by ``factor`` in place (tied input embeddings move with it).

    Raises:
        ValueError: ``factor`` is not a finite positive number.
    """
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor <= 0:
        raise ValueError(f"inflation factor: expected a finite number > 0, got {factor!r}")
    head_weight(model).mul_(float(factor))
    return model
