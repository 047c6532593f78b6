"""Tiny in-process masked-LM checkpoints and sample texts (tests, docs examples, benchmarks): no downloads."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Sequence

import torch

from initlab.mlmhead.heads import FAMILIES, REMOTE_CODE_FAMILIES, head_projection
from initlab.textio import decode_text

# ------------------------------------------------------------------------------------------------
# tiny in-process checkpoints (tests, README sample, benchmark): no downloads
# ------------------------------------------------------------------------------------------------
_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def default_texts() -> list[str]:
    """The packaged sample texts (``initlab/mlmhead/data/default_texts.txt``): 40 unrelated English sentences."""
    text = decode_text(resources.files("initlab.mlmhead").joinpath("data/default_texts.txt").read_bytes(), "default_texts.txt")
    return parse_texts(text, "default_texts.txt")


def parse_texts(text: str, name: str, *, skip_comments: bool = False) -> list[str]:
    """Every non-blank line of ``text``, stripped (a line starting with ``#`` is a text too, unless
    ``skip_comments``; :func:`count_comments` counts those)."""
    lines = [ln.strip() for ln in text.splitlines()]
    texts = [ln for ln in lines if ln and not (skip_comments and ln.startswith("#"))]
    if len(texts) < 2:
        raise ValueError(f"{name}: expected at least 2 non-empty text lines (one text per line), got {len(texts)}")
    return texts


def count_comments(text: str) -> int:
    """How many non-blank lines of ``text`` start with ``#`` (what ``skip_comments`` skips)."""
    return sum(1 for ln in text.splitlines() if ln.strip().startswith("#"))


def tiny_tokenizer(folder: str | Path, words: Sequence[str] | None = None):
    """A word-piece ``BertTokenizerFast`` over a small vocabulary, built offline in ``folder``.

    The vocabulary is the five BERT special tokens, then the lower-cased words of ``words`` (default:
    the words of :func:`default_texts`), sorted and de-duplicated, then single letters as fallbacks.
    """
    import re

    from transformers import BertTokenizerFast

    if words is None:
        words = re.findall(r"[a-z]+", " ".join(default_texts()).lower())
    vocab = list(_SPECIALS) + sorted(set(w.lower() for w in words) | set("abcdefghijklmnopqrstuvwxyz0123456789"))
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)


def tiny_masked_lm(family: str, vocab_size: int, *, hidden: int = 32, layers: int = 2, heads: int = 2,
                   seed: int = 0, head_scale: float = 1.0, base_size: bool = False):
    """A randomly initialised masked-LM model of ``family`` (a ``config.model_type`` key of :data:`FAMILIES`).

    Special-token ids follow :func:`tiny_tokenizer` (PAD 0, CLS 2, SEP 3, MASK 4). ``head_scale``
    multiplies the shared head/embedding tensor after init (to imitate high-norm backbones).
    ``base_size=True`` gives the bert-base shape (d 768, 12 layers, 12 heads, ~110M parameters for
    V = 30522). GTE-MLM is remote code and cannot be built offline.

    Raises:
        ValueError: unknown or remote-code ``family``.
    """
    import transformers

    if family not in FAMILIES or family in REMOTE_CODE_FAMILIES:
        raise ValueError(f"family: expected one of {sorted(set(FAMILIES) - REMOTE_CODE_FAMILIES)}, got {family!r}")
    if base_size:
        hidden, layers, heads = 768, 12, 12
    inter = 4 * hidden
    common = dict(vocab_size=vocab_size, pad_token_id=0)
    if family == "bert":
        cfg = transformers.BertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                                      intermediate_size=inter, max_position_embeddings=128 if not base_size else 512, **common)
    elif family == "distilbert":
        cfg = transformers.DistilBertConfig(dim=hidden, n_layers=layers, n_heads=heads, hidden_dim=inter,
                                            max_position_embeddings=128, **common)
    elif family == "albert":
        cfg = transformers.AlbertConfig(embedding_size=max(8, hidden // 2), hidden_size=hidden, num_hidden_layers=layers,
                                        num_attention_heads=heads, intermediate_size=inter, max_position_embeddings=128,
                                        bos_token_id=2, eos_token_id=3, **common)
    elif family == "roberta":
        cfg = transformers.RobertaConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                                         intermediate_size=inter, max_position_embeddings=130, bos_token_id=2,
                                         eos_token_id=3, **common)
    else:  # modernbert
        cfg = transformers.ModernBertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                                            intermediate_size=inter, max_position_embeddings=128, bos_token_id=2,
                                            eos_token_id=3, cls_token_id=2, sep_token_id=3, **common)
    torch.manual_seed(seed)
    model = transformers.AutoModelForMaskedLM.from_config(cfg).eval()
    if head_scale != 1.0:
        with torch.no_grad():
            head_projection(model).mul_(float(head_scale))
    return model
