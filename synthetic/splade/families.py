"""Tiny masked-LM backbones of four families for the synthetic SPLADE phase diagram.

Each family is built with transformers' own class, with the head tied to the input word embeddings
as in the released checkpoints:

* ``bert`` -- ``BertForMaskedLM``: word + position + token-type embeddings, summed, then LayerNorm;
* ``roberta`` -- ``RobertaForMaskedLM``: the same embedding sum (positions offset by the padding id);
* ``albert`` -- ``AlbertForMaskedLM``: factorised embeddings, ``W_head`` is ``(V, E)`` with E < d,
  word + position + token-type summed then LayerNorm, then projected to d;
* ``modernbert`` -- ``ModernBertForMaskedLM``: word embeddings go straight into a LayerNorm (no
  position embeddings, rotary positions inside attention), so multiplying the tied matrix by a
  constant changes the input only through the LayerNorm's epsilon.

The input side of the tie therefore differs by family: a tied rescale of ``W_head`` changes the
hidden states in BERT, RoBERTa and ALBERT (the word embedding's weight against the position and
type embeddings changes before the LayerNorm) and almost not at all in ModernBERT.

Scaling a cell's weights: :func:`scale_backbone` imposes a head scale, the input word embeddings ``e * W`` and
the output projection ``h * W`` (``W`` the pretrained tied matrix). ``tied=True`` needs ``e == h`` and
keeps the one shared tensor; ``tied=False`` unties the head first (:func:`initlab.mlmhead.untie_head`: its own
copy of the matrix and of the bias) and scales the two copies separately. Every division by an MLM-head
rescaling factor k is :func:`initlab.mlmhead.rescale_mlm_head`, the tool the experiments validate. With powers of
two the products are exact in floating point, so "head scale s then rescale k" and "scale s / k" give bitwise the
same weights.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from initlab.config import check_ranges, ranged
from initlab.mlmhead.heads import is_tied, rescaled, untie_head
from initlab.synthetic.splade.data import SyntheticCorpus
from initlab.synthetic.splade.model import build_tokenizer, pretrain_mlm

__all__ = ["FAMILIES", "FamilyConfig", "build_family_model", "family_tokenizer", "scale_backbone",
           "natural_scale", "prepare_family_backbone", "hidden_change"]

#: the four families, in figure order.
FAMILIES: tuple[str, ...] = ("bert", "roberta", "albert", "modernbert")


@dataclass(frozen=True)
class FamilyConfig:
    """Tiny backbone shape and MLM pretraining recipe of one family.

    ``d`` width, ``layers`` depth, ``heads`` attention heads, ``ffn`` feed-forward width,
    ``albert_embedding`` ALBERT's factorised embedding width E, ``max_len`` T tokens;
    ``mlm_steps`` AdamW steps of batch ``mlm_batch`` at (constant) learning rate ``mlm_lr`` and second-moment
    decay ``mlm_beta2``, masking ``mlm_probability`` of the tokens; decoupled weight decay
    ``mlm_weight_decay``, applied to the tied word embeddings (= ``W_head``) only if ``decay_embeddings`` and to
    biases and LayerNorm gains only if ``decay_norms_biases`` (:func:`initlab.synthetic.splade.model.mlm_param_groups`);
    ``initializer_range`` the std of the family's normal initialisation (transformers' ``initializer_range``).
    The defaults are the recipe of the first runs (every family the same); the natural-norm presets of
    :mod:`initlab.synthetic.splade.phase.config` give each family its own.
    """

    d: int = ranged(64, "[1, inf)")
    layers: int = ranged(2, "[1, inf)")
    heads: int = ranged(2, "[1, inf)")
    ffn: int = ranged(128, "[1, inf)")
    albert_embedding: int = ranged(32, "[1, inf)")
    max_len: int = ranged(40, "[3, inf)")  # [CLS], one token, [SEP]
    mlm_steps: int = ranged(400, "[0, inf)")
    mlm_batch: int = ranged(32, "[1, inf)")
    mlm_lr: float = ranged(1e-3, "(0, inf)")
    mlm_probability: float = ranged(0.15, "(0, 1)")
    mlm_beta2: float = ranged(0.999, "[0, 1)")
    mlm_weight_decay: float = ranged(0.01, "[0, inf)")
    decay_embeddings: bool = True
    decay_norms_biases: bool = True
    initializer_range: float = ranged(0.02, "(0, inf)")

    def __post_init__(self) -> None:
        check_ranges(self)
        if self.d % self.heads:
            raise ValueError(f"FamilyConfig.heads: must divide d={self.d}, got {self.heads}")


def _check_family(family: str) -> None:
    if family not in FAMILIES:
        raise ValueError(f"family: expected one of {list(FAMILIES)}, got {family!r}")


def family_tokenizer(family: str, vocab: list[str]):
    """Word-level tokenizer (``[CLS] x [SEP]``, PAD 0, CLS 2, SEP 3, MASK 4) with the family's input names
    (ModernBERT takes no ``token_type_ids``)."""
    _check_family(family)
    tok = build_tokenizer(vocab)
    if family == "modernbert":
        tok.model_input_names = ["input_ids", "attention_mask"]
    return tok


def build_family_model(family: str, vocab_size: int, cfg: FamilyConfig, seed: int):
    """A randomly initialised masked-LM model of ``family`` with its head tied, deterministic by ``seed``.

    Raises:
        ValueError: unknown ``family``.
    """
    import transformers

    _check_family(family)
    common = dict(vocab_size=vocab_size, pad_token_id=0, tie_word_embeddings=True, initializer_range=cfg.initializer_range)
    shape = dict(hidden_size=cfg.d, num_hidden_layers=cfg.layers, num_attention_heads=cfg.heads,
                 intermediate_size=cfg.ffn)
    if family == "bert":
        config = transformers.BertConfig(max_position_embeddings=cfg.max_len, type_vocab_size=2, **shape, **common)
        cls = transformers.BertForMaskedLM
    elif family == "roberta":  # positions start after the padding id
        config = transformers.RobertaConfig(max_position_embeddings=cfg.max_len + 2, type_vocab_size=1,
                                            bos_token_id=2, eos_token_id=3, **shape, **common)
        cls = transformers.RobertaForMaskedLM
    elif family == "albert":
        config = transformers.AlbertConfig(embedding_size=cfg.albert_embedding, max_position_embeddings=cfg.max_len,
                                           type_vocab_size=2, bos_token_id=2, eos_token_id=3, **shape, **common)
        cls = transformers.AlbertForMaskedLM
    else:
        config = transformers.ModernBertConfig(max_position_embeddings=cfg.max_len, bos_token_id=2, eos_token_id=3,
                                               cls_token_id=2, sep_token_id=3, global_attn_every_n_layers=1,
                                               attn_implementation="eager", **shape, **common)
        cls = transformers.ModernBertForMaskedLM
    torch.manual_seed(seed)
    model = cls(config)
    model.tie_weights()
    return model


def _word_embeddings(model) -> torch.nn.Embedding:
    return model.get_input_embeddings()


def _output(model) -> torch.nn.Module:
    return model.get_output_embeddings()


@torch.no_grad()
def scale_backbone(model, e: float, h: float, tied: bool):
    """Input word embeddings ``<- e * W``, output projection ``<- h * W`` (``W``: the current tied matrix).

    ``tied=True``: one shared tensor multiplied by ``e`` (``h`` must equal ``e``). ``tied=False``: the
    head is untied first (own weight and bias copies; ``config.tie_word_embeddings = False``) and each
    copy is multiplied by its own factor. Returns ``model``.

    Raises:
        ValueError: ``e`` or ``h`` not finite and > 0, ``tied`` with ``e != h``, or a head that is not tied
            to begin with.
    """
    for name, v in (("e", e), ("h", h)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ValueError(f"{name}: expected a finite number > 0, got {v!r}")
    emb, out = _word_embeddings(model), _output(model)
    if emb.weight.data_ptr() != out.weight.data_ptr():
        raise ValueError("scale_backbone: expected a model whose head is tied to the input embeddings")
    if tied:
        if e != h:
            raise ValueError(f"tied scaling needs e == h, got e={e!r}, h={h!r}")
        emb.weight.mul_(float(e))
        return model
    untie_head(model)
    emb.weight.mul_(float(e))
    model.get_output_embeddings().weight.mul_(float(h))
    return model


@torch.no_grad()
def hidden_change(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, k: float) -> float:
    """Relative change ``||H_k - H_1||_F / ||H_1||_F`` of the last hidden states (non-padding tokens)
    when the tied matrix is divided by ``k`` (:func:`initlab.mlmhead.rescaled`: :func:`initlab.mlmhead.rescale_mlm_head`,
    then the weights and the recorded k restored bit-exactly).

    Raises:
        ValueError: the head is not tied (only the tied matrix feeds the hidden states).
    """
    if not is_tied(model):
        raise ValueError("hidden_change: expected a model whose head is tied to the input embeddings")
    model.eval()

    def hidden() -> torch.Tensor:
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        return out.hidden_states[-1][attention_mask.bool()].double()

    h1 = hidden()
    with rescaled(model, float(k)):
        hk = hidden()
    return float((hk - h1).norm() / h1.norm())


@torch.no_grad()
def natural_scale(model, tokenizer, texts: list[str], max_len: int) -> dict[str, float]:
    """The family's natural head scale after pretraining: ``head_frobenius``, ``head_row_norm`` (mean),
    ``logit_std`` / ``logit_mean`` (token logits over non-padding tokens and all V, the initial logit
    scale), and ``hidden_change_k2`` / ``hidden_change_k16`` (:func:`hidden_change` at k = 2, 16)."""
    w = _output(model).weight.detach().double()
    enc = tokenizer(texts, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
    ids, mask = enc["input_ids"], enc["attention_mask"]
    model.eval()
    z = model(input_ids=ids, attention_mask=mask).logits[mask.bool()].double()
    return {
        "head_frobenius": float(w.norm()),
        "head_row_norm": float(w.norm(dim=1).mean()),
        "logit_mean": float(z.mean()),
        "logit_std": float(z.std()),
        "hidden_change_k2": hidden_change(model, ids, mask, 2.0),
        "hidden_change_k16": hidden_change(model, ids, mask, 16.0),
    }


def prepare_family_backbone(folder: Path, family: str, corpus: SyntheticCorpus, cfg: FamilyConfig, seed: int,
                            progress: bool = False, on_step: Any = None, sparse_mlm: bool = False) -> Path:
    """MLM-pretrained tied backbone of ``family`` saved in ``folder`` (reused if finished there).

    The folder holds the model and tokenizer files, ``mlm_losses.json`` and ``natural_scale.json``
    (:func:`natural_scale` on the first 64 corpus documents, and ``pretrain_cpu_seconds``). Returns ``folder``.
    ``sparse_mlm``: the MLM head at the masked positions only (:func:`initlab.synthetic.splade.model.sparse_mlm_loss`).

    Raises:
        ValueError: unknown ``family``.
    """
    _check_family(family)
    folder = Path(folder)
    if (folder / "natural_scale.json").exists():
        return folder
    import time

    c0 = time.process_time()
    tokenizer = family_tokenizer(family, corpus.vocab)
    model = build_family_model(family, len(corpus.vocab), cfg, seed)
    losses = pretrain_mlm(model, tokenizer, list(corpus.docs.values()), cfg, seed, progress=progress, on_step=on_step,
                          sparse=sparse_mlm)
    if not all(math.isfinite(x) for x in losses):
        raise FloatingPointError(f"{family} MLM pretraining: non-finite loss at step "
                                 f"{next(i for i, x in enumerate(losses) if not math.isfinite(x))}")
    scale = natural_scale(model, tokenizer, list(corpus.docs.values())[:64], cfg.max_len)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "mlm_losses.json").write_text(json.dumps(losses))
    (tmp / "natural_scale.json").write_text(json.dumps({"family": family, **scale,
                                                        "pretrain_cpu_seconds": time.process_time() - c0}))
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)
    return folder


def load_family_backbone(folder: Path) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from a :func:`prepare_family_backbone` folder, head tied, eval mode.

    Raises:
        ValueError: the folder's weights lack a tensor or hold one the model has no place for
            (:func:`initlab.mlmhead.checkpoint.check_loaded_keys`), or hold NaN or infinity
            (:class:`initlab.runs.NonFiniteCheckpointError`).
    """
    import transformers

    from initlab.mlmhead.checkpoint import check_loaded_keys
    from initlab.mlmhead.precision import dtype_kwargs
    from initlab.runs import check_finite_tensors

    model, info = transformers.AutoModelForMaskedLM.from_pretrained(str(folder), output_loading_info=True,
                                                                    **dtype_kwargs(torch.float32))  # float32 always
    check_loaded_keys(f"backbone {folder}", model, info)  # a damaged cached backbone: refused, not half random
    check_finite_tensors(f"backbone {folder}", model)  # nor with a NaN weight
    model.tie_weights()
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    return model.eval(), tok
