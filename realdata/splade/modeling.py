"""SPLADE models on sentence-transformers' SparseEncoder, MLM-head rescaling, safe checkpoints.

The model is ``SparseEncoder([Transformer(backbone, transformer_task="fill-mask"), SpladePooling("max")])``:
the masked-LM logits ``z = H W_head^T + b`` of every token ``(B, T, V)`` become term weights
``max_t log(1 + ReLU(z_t))`` ``(B, V)`` (SPLADE-max, SPLADE v2 arXiv:2109.10086 eq. 6). Before training
``W_head`` is divided by ``k`` with :func:`initlab.mlmhead.rescale_mlm_head` (tied weights stay tied).

Engine: by default the two modules run the fused SPLADE head (:func:`initlab.mlmhead.splade_encoder.use_engine`
``"fused"``: the same vectors without building the ``(B, T, V)`` logits, in training and evaluation);
``engine="dense"`` keeps sentence-transformers' own path. The saved checkpoint is the standard two modules either
way. Every model built or loaded here is first checked to give the dense path's vectors on two probe texts
(:func:`check_engine`), which is the only check a remote-code family (GTE-MLM, whose head transform no offline test
can build) gets.

The backbone is loaded for training in float32 unless ``weights_dtype`` asks otherwise, whatever dtype its
checkpoint stores (:mod:`initlab.mlmhead.precision`: a bfloat16 checkpoint would otherwise train with bfloat16
master weights and lose most small updates).

Checkpoints are saved as safetensors (``model.safetensors``) and loaded with ``use_safetensors=True`` so
no pickle is ever unpickled for the weights.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch

__all__ = ["build_tiny_backbone", "build_splade", "check_backbone_checkpoint", "check_engine", "fit_vocab_to_tokenizer",
           "text_module", "vocab_rows", "load_splade", "checkpoint_is_safetensors", "PROBE_TEXTS"]

_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
#: position table of the tiny in-process backbone (the README's recipe): inputs up to 128 tokens.
TINY_POSITIONS = 128
#: the texts :func:`check_engine` encodes through both engines (one short, one longer: padding in the batch)
PROBE_TEXTS = ("a cat", "the quick brown fox jumps over the lazy dog near the river bank")


def build_tiny_backbone(folder: str | Path, texts: Sequence[str], *, hidden: int = 32, layers: int = 1, seed: int = 0) -> Path:
    """Write a tiny randomly initialised BERT masked LM and its WordPiece tokenizer to ``folder``.

    The vocabulary is the five BERT special tokens, the lower-cased words of ``texts`` and single
    characters. Dropout is 0 so that runs are deterministic across process counts. Offline; for tests
    and dry runs only. Returns ``folder``.
    """
    import re

    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    folder = Path(folder)
    if (folder / "config.json").exists() and (folder / "model.safetensors").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    words = sorted(set(re.findall(r"[a-z0-9]+", " ".join(texts).lower())) | set("abcdefghijklmnopqrstuvwxyz0123456789"))
    vocab = list(_SPECIALS) + words
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    # transformers 5 builds the fast tokenizer from the vocabulary mapping (vocab_file alone gives all-[UNK])
    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    if tok.tokenize(words[-1]) != [words[-1]]:
        raise RuntimeError("tiny tokenizer does not know its own vocabulary")
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
                     intermediate_size=2 * hidden, max_position_embeddings=TINY_POSITIONS, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0, pad_token_id=0)
    torch.manual_seed(seed)
    model = BertForMaskedLM(cfg)
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    return folder


def build_splade(backbone: str, *, k: float = 1.0, query_max_length: int = 64, doc_max_length: int = 256,
                 trust_remote_code: bool = False, device: str | None = None, weights_dtype: str = "float32",
                 engine: str = "fused"):
    """A SPLADE-max SparseEncoder on the masked-LM ``backbone`` (hub id or folder), head divided by ``k``.

    ``engine``: ``"fused"`` (default) or ``"dense"``, the SPLADE head's path (module docstring; checked by
    :func:`check_engine`).

    ``weights_dtype`` (one of :data:`initlab.mlmhead.precision.WEIGHTS_DTYPES`) is the dtype of the trained
    (master) weights: float32 by default whatever the checkpoint stores; ``"stored"`` keeps the checkpoint's.
    A warning names the stored dtype when it differs (:func:`~initlab.mlmhead.precision.resolve_weights_dtype`).

    A vocabulary padded beyond the tokenizer (ModernBERT pads to a multiple of 64) is cut to the rows token ids
    reach (:func:`fit_vocab_to_tokenizer`), so the sparse vectors, the FLOPS regulariser and the scores of training
    hold no dimension that no token can name.

    Raises:
        ValueError: ``k <= 0`` (from :func:`rescale_mlm_head`), a backbone without an MLM head, or an unknown
            ``weights_dtype`` or ``engine``; a tokenizer with token ids beyond the model's rows, or an MLM-head bias of
            the wrong size (one line with both sizes and the fix, :func:`initlab.mlmhead.heads.check_vocab`); a fused
            head that does not give the dense path's vectors (:func:`check_engine`).
    """
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling, Transformer
    from transformers import AutoConfig

    from initlab.mlmhead import rescale_mlm_head
    from initlab.mlmhead.precision import dtype_kwargs, resolve_weights_dtype

    kw = {"trust_remote_code": True} if trust_remote_code else {}
    dtype = resolve_weights_dtype(AutoConfig.from_pretrained(str(backbone), **kw), weights_dtype,
                                  what=f"backbone {backbone}")
    tr = Transformer(str(backbone), transformer_task="fill-mask", max_seq_length=doc_max_length,
                     query_length=query_max_length, document_length=doc_max_length,
                     model_kwargs={**kw, **dtype_kwargs(dtype)}, config_kwargs=dict(kw), processor_kwargs=dict(kw))
    if tr.auto_model.dtype != dtype:  # remote code may ignore the keyword: the master weights must be `dtype`
        tr.auto_model.to(dtype)
    fit_vocab_to_tokenizer(tr.auto_model, tr.tokenizer, what=f"backbone {backbone}")
    rescale_mlm_head(tr.auto_model, float(k))
    model = SparseEncoder(modules=[tr, SpladePooling(pooling_strategy="max")], device=device)
    return check_engine(model, engine, what=f"backbone {backbone}")


def check_engine(model, engine: str, *, what: str = "model"):
    """Put ``model`` (a SPLADE SparseEncoder) on ``engine`` and check it: with ``"fused"``, the vectors of
    :data:`PROBE_TEXTS` must equal the dense path's to ``max(1e-4, 16 eps)`` relative to their largest entry (``eps``
    of the weights' dtype), in the model's own dtype, without gradients. Returns ``model``.

    Raises:
        ValueError: unknown ``engine``; a model the fused head does not compute
            (:func:`initlab.mlmhead.splade_encoder.use_engine`); fused vectors that differ (naming the difference and
            the fix, ``engine="dense"``: ``--set head_engine=dense`` for training, ``--head-engine dense`` for
            evaluation).
    """
    from initlab.mlmhead.splade_encoder import ENGINES, use_engine

    if engine not in ENGINES:
        raise ValueError(f"engine: expected one of {list(ENGINES)}, got {engine!r}")
    if engine == "dense":
        return use_engine(model, "dense")
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            use_engine(model, "dense")
            ref = model.encode_document(list(PROBE_TEXTS), convert_to_tensor=True, show_progress_bar=False)
            use_engine(model, "fused")
            got = model.encode_document(list(PROBE_TEXTS), convert_to_tensor=True, show_progress_bar=False)
    except (AttributeError, TypeError, KeyError) as err:  # a head transform the fused engine cannot call
        use_engine(model, "dense")
        raise ValueError(f"{what}: the fused SPLADE head cannot run this model's MLM head ({type(err).__name__}: {err}); "
                         "use the dense engine (training: --set head_engine=dense; evaluation: --head-engine dense)") from None
    finally:
        model.train(was)
    ref, got = ref.to_dense().double() if ref.is_sparse else ref.double(), got.to_dense().double() if got.is_sparse else got.double()
    dtype = next(model.parameters()).dtype
    tol = max(1e-4, 16 * torch.finfo(dtype).eps)
    scale = float(ref.abs().max())
    diff = float((got - ref).abs().max())
    if diff > tol * max(scale, 1e-12):
        use_engine(model, "dense")
        raise ValueError(f"{what}: the fused SPLADE head's vectors differ from the dense path's on the probe texts "
                         f"(max |difference| {diff:.3g}, largest entry {scale:.3g}, tolerance {tol:g} relative); use the "
                         "dense engine (training: --set head_engine=dense; evaluation: --head-engine dense)")
    return model


def fit_vocab_to_tokenizer(model, tokenizer, *, what: str = "model") -> dict[str, int]:
    """Check ``model``'s vocabulary against ``tokenizer`` and cut rows past every token id.

    Returns :func:`initlab.mlmhead.heads.check_vocab`'s counts (before the cut). When the reached rows are the
    first ``n`` (padding at the end, as ModernBERT's), ``model.resize_token_embeddings(n)`` drops the others from
    the input embeddings, the MLM head and its bias together; unreached rows elsewhere are refused.

    Raises:
        ValueError: a token id without a row, a bias of the wrong size, or unreached rows that are not at the end.
    """
    from initlab.mlmhead.heads import check_vocab, head_projection, reachable_rows

    try:
        counts = check_vocab(model, tokenizer)
    except ValueError as err:
        raise ValueError(f"{what}: {err}") from None
    if counts["unreached_rows"]:
        rows = reachable_rows(tokenizer, counts["rows"])
        n = counts["reached_rows"]
        if not bool(rows[:n].all()):
            raise ValueError(f"{what}: {counts['unreached_rows']} vocabulary rows no token id reaches lie between token "
                             "ids; expected them at the end of the vocabulary (padding); fix the tokenizer's ids")
        model.resize_token_embeddings(n)
        if int(head_projection(model).shape[0]) != n:  # pragma: no cover - a family whose head does not follow
            raise ValueError(f"{what}: could not cut the vocabulary to the tokenizer's {n} rows")
    return counts


def text_module(model):
    """``(tokenizer, query length, document length)`` of a SparseEncoder's first (Transformer) module, or
    ``None`` for an encoder without one (a stand-in with only ``encode_query``/``encode_document``)."""
    try:
        tr = model[0]
        tok = tr.tokenizer
    except (TypeError, IndexError, KeyError, AttributeError):
        return None
    longest = getattr(tr, "max_seq_length", None)
    q = getattr(tr, "query_length", None) or longest
    d = getattr(tr, "document_length", None) or longest
    return (tok, int(q), int(d)) if tok is not None and q and d else None


def vocab_rows(model):
    """``(V,)`` bool of the vocabulary rows some token id reaches (:func:`initlab.mlmhead.heads.reachable_rows`), or
    ``None`` when every row is reached or the encoder has no Transformer module.

    Raises:
        ValueError: one line naming both sizes and the fix, when a token id has no row (a token added to the
            tokenizer without ``resize_token_embeddings``), or the MLM-head bias has the wrong size.
    """
    from initlab.mlmhead.heads import check_vocab, head_projection, reachable_rows

    try:
        tr = model[0]
        auto, tok = tr.auto_model, tr.tokenizer
    except (TypeError, IndexError, KeyError, AttributeError):
        return None
    check_vocab(auto, tok)
    rows = reachable_rows(tok, int(head_projection(auto).shape[0]))
    return None if bool(rows.all()) else rows


def checkpoint_is_safetensors(folder: str | Path) -> bool:
    """True when ``folder`` holds safetensors weights and no pickle weights (``*.bin``/``*.pt``)."""
    folder = Path(folder)
    st = list(folder.rglob("*.safetensors"))
    pickles = [p for p in folder.rglob("*") if p.suffix in (".bin", ".pt", ".pth", ".pkl") and "checkpoint-" not in str(p)]
    return bool(st) and not pickles


def load_splade(folder: str | Path, *, device: str | None = None, trust_remote_code: bool = False, engine: str = "fused"):
    """Load a SPLADE checkpoint saved by ``initlab splade train`` (``<cell>/model``) from safetensors only, on the
    SPLADE head ``engine`` (``"fused"`` by default, or ``"dense"``; :func:`check_engine`).

    The masked LM is checked first to load completely (:func:`initlab.mlmhead.checkpoint.check_checkpoint_weights`).

    Raises:
        FileNotFoundError: ``folder`` does not exist or has no ``model.safetensors``.
        ValueError: ``folder`` holds pickle weights (``*.bin``/``*.pt``), which are refused; a tensor missing or
            without a place in the model (one line naming it); an ``engine`` the model cannot run
            (:func:`check_engine`).
    """
    from sentence_transformers.sparse_encoder import SparseEncoder

    from initlab.mlmhead.checkpoint import check_checkpoint_weights
    from initlab.mlmhead.heads import check_pad_token

    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: checkpoint folder not found (expected a folder written by 'initlab splade train', with model.safetensors)")
    if not list(folder.rglob("*.safetensors")):
        raise FileNotFoundError(f"{folder}: no *.safetensors weights (expected model.safetensors)")
    if not checkpoint_is_safetensors(folder):
        raise ValueError(f"{folder}: holds pickle weights (*.bin/*.pt); only safetensors checkpoints are loaded")
    check_checkpoint_weights(_transformer_folder(folder), trust_remote_code=trust_remote_code,
                             what=f"checkpoint {folder}")  # sentence-transformers loads without a word on missing tensors
    model = SparseEncoder(str(folder), device=device, local_files_only=True, trust_remote_code=trust_remote_code,
                          model_kwargs={"use_safetensors": True})
    mod = text_module(model)
    if mod is not None:
        check_pad_token(mod[0], f"checkpoint {folder}", config=model[0].auto_model.config, folder=folder)
    return check_engine(model, engine, what=f"checkpoint {folder}")


def _transformer_folder(folder: Path) -> Path:
    """The folder of a saved SparseEncoder's Transformer module (``modules.json``; the folder itself by default)."""
    from initlab.textio import read_json

    try:
        modules = read_json(folder / "modules.json")
    except (OSError, ValueError):
        return folder
    for m in modules if isinstance(modules, list) else []:
        if isinstance(m, dict) and str(m.get("type", "")).endswith("Transformer"):
            return folder / str(m.get("path", ""))
    return folder


def check_backbone_checkpoint(backbone: str, *, trust_remote_code: bool = False) -> None:
    """Before a training run writes anything: the masked-LM ``backbone`` (folder or hub id) loads completely, with
    no tensor initialised at random (:func:`initlab.mlmhead.checkpoint.check_checkpoint_weights`: loaded once on
    the CPU in its stored dtype; sentence-transformers' ``Transformer`` module, which loads it for training, gives
    no word when tensors are missing), and its tokenizer can pad (:func:`initlab.mlmhead.heads.check_pad_token`).

    Raises:
        ValueError: one line naming the backbone, the tensors and the cause (a stale shard index, a tied checkpoint
            under an untied config, a config that does not describe the weights, no MLM head), or a tokenizer
            without a pad token and the fix.
    """
    from transformers import AutoTokenizer

    from initlab.mlmhead.checkpoint import check_checkpoint_weights
    from initlab.mlmhead.heads import check_pad_token

    what = f"backbone {backbone}"
    check_checkpoint_weights(backbone, trust_remote_code=trust_remote_code, what=what)
    try:
        tok = AutoTokenizer.from_pretrained(str(backbone), trust_remote_code=trust_remote_code)
    except (OSError, ValueError, TypeError) as err:
        raise ValueError(f"{what}: no tokenizer could be loaded ({str(err).splitlines()[0] if str(err) else err!r})") from None
    from transformers import AutoConfig

    check_pad_token(tok, what, config=AutoConfig.from_pretrained(str(backbone), trust_remote_code=trust_remote_code),
                    folder=backbone if Path(str(backbone)).is_dir() else None)
