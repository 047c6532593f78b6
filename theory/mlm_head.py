"""MLM-head scale of Hugging Face masked-LM checkpoints: find W_head, rescale it, inspect it.

SPLADE (Formal et al., SIGIR 2021; SPLADE v2, arXiv:2109.10086) turns the masked-LM logits of every
token into term weights,

    z = H W_head^T / k + b          (T, V)      H: (T, d) input of the vocabulary projection
    a_j = max_t log(1 + ReLU(z_tj))  (V,)

so the scale of the vocabulary projection ``W_head`` (shape ``(V, d)``) sets the scale of every term
weight, score and FLOPS value at initialisation. Dividing ``W_head`` by a constant ``k`` before
training ("MLM-head rescaling", seed summary ``shared/seeds/000_*``) fixes backbones whose head norm
is large. For tied models (the head shares its tensor with the input embeddings) the one shared
tensor is divided, so the input embeddings are divided too; whether that changes the encoder's
hidden states depends on where the family's embedding LayerNorm sits, which :func:`inspect_model`
measures.

Public API:

* :func:`head_projection` -- the ``W_head`` parameter ``(V, d)`` of a masked-LM model;
* :func:`rescale_mlm_head` -- divide it by ``k`` in place (tied stays tied unless ``untie=True``);
* :func:`load_masked_lm` / :func:`save_rescaled` -- load a checkpoint (local folder or hub id) and
  save a rescaled copy atomically, checked after reload;
* :func:`inspect_model` -- every scale quantity of the issue, measured on sample texts, against k;
* ``inspect_main`` / ``rescale_main`` -- ``initlab mlmhead inspect|rescale``.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

import torch

__all__ = [
    "FAMILIES",
    "K_GRID",
    "family_of",
    "head_projection",
    "head_bias",
    "is_tied",
    "rescale_mlm_head",
    "load_masked_lm",
    "save_rescaled",
    "default_texts",
    "tiny_tokenizer",
    "tiny_masked_lm",
    "splade_from_logits",
    "inspect_model",
    "recommend_k",
    "format_inspect",
    "inspect_main",
    "rescale_main",
]

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


def is_tied(model: Any) -> bool:
    """Whether ``W_head`` shares storage with the input embeddings (one tensor)."""
    w = head_projection(model)
    emb = model.get_input_embeddings()
    return emb is not None and emb.weight.data_ptr() == w.data_ptr() and emb.weight.shape == w.shape


def _check_k(k: Any) -> float:
    if isinstance(k, bool) or not isinstance(k, (int, float)):
        raise TypeError(f"k: expected a positive finite float, got {type(k).__name__} {k!r}")
    k = float(k)
    if not math.isfinite(k) or k <= 0:
        raise ValueError(f"k: expected a positive finite float, got {k!r}")
    return k


def rescale_mlm_head(model: Any, k: float, *, untie: bool = False) -> Any:
    """Divide the MLM head's vocabulary projection ``W_head`` by ``k``, in place; return ``model``.

    ``W_head <- W_head / k`` (MLM-head rescaling, seed summary ``shared/seeds/000_*``); the bias ``b``
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
            family; model without an MLM head.
        TypeError: ``k`` not a number, or ``model`` not a transformers model.
    """
    k = _check_k(k)
    out = _output_module(model)  # validates family and head before anything changes
    with torch.no_grad():  # a k so small (large) that W_head / k overflows (underflows) is refused up front
        w = out.weight.detach()
        q = w / k
        if not bool(torch.isfinite(q).all()) or int(torch.count_nonzero(q)) != int(torch.count_nonzero(w)):
            raise ValueError(f"k: {k!r} makes W_head / k overflow or underflow in {w.dtype}; expected a moderate "
                             "positive factor (e.g. 1 to 64)")
        del q
    if untie and is_tied(model):
        out.weight = torch.nn.Parameter(out.weight.detach().clone(), requires_grad=out.weight.requires_grad)
        if getattr(out, "bias", None) is not None:
            out.bias = torch.nn.Parameter(out.bias.detach().clone(), requires_grad=out.bias.requires_grad)
        model.config.tie_word_embeddings = False
    with torch.no_grad():
        out.weight.div_(k)
    previous = float(getattr(model.config, K_ATTR, None) or 1.0)
    setattr(model.config, K_ATTR, previous * k)
    return model


# ------------------------------------------------------------------------------------------------
# loading and saving checkpoints
# ------------------------------------------------------------------------------------------------
def _quiet_transformers() -> None:
    import transformers

    transformers.logging.set_verbosity_error()
    try:
        transformers.utils.logging.disable_progress_bar()
    except AttributeError:  # pragma: no cover
        pass


def load_masked_lm(name_or_path: str | Path, *, trust_remote_code: bool = False, with_tokenizer: bool = True):
    """Load a masked-LM checkpoint (local folder or hub id) as ``(model, tokenizer)`` in eval mode.

    The family is checked from the config before any weights load; remote-code families (GTE-MLM)
    load only with ``trust_remote_code=True``. A checkpoint whose MLM head weights are missing (e.g.
    a saved ``BertModel``) is refused instead of silently getting a random head.

    Raises:
        FileNotFoundError: a local folder without ``config.json``; a name that is neither a local
            folder nor a resolvable hub id; no tokenizer when ``with_tokenizer``.
        ValueError: unknown family; remote-code family without ``trust_remote_code``; no MLM head.
    """
    import transformers

    _quiet_transformers()
    src = str(name_or_path)
    p = Path(src)
    if p.exists() and not (p / "config.json").is_file():
        raise FileNotFoundError(f"MODEL {src}: a local path must be a folder holding config.json")
    if not p.exists() and (src.startswith((".", "/", "~")) or src.count("/") > 1):
        raise FileNotFoundError(f"MODEL {src}: no such folder (and not a hub id of the form owner/name)")
    try:
        config = transformers.AutoConfig.from_pretrained(src, trust_remote_code=trust_remote_code)
    except OSError as err:  # neither a local folder nor a reachable hub id
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise FileNotFoundError(
            f"MODEL {src}: no such local folder, and it could not be loaded as a hub id ({first})"
        ) from None
    except ValueError as err:
        if not trust_remote_code and ("trust_remote_code" in str(err) or "model_type" in str(err)):
            raise ValueError(
                f"MODEL {src}: its config needs remote code (e.g. GTE-MLM); pass --trust-remote-code "
                "if you trust that repository's code"
            ) from None
        raise
    family_of(config)
    if config.model_type in REMOTE_CODE_FAMILIES and not trust_remote_code:
        raise ValueError(f"MODEL {src}: family {FAMILIES[config.model_type]} runs code from the hub; pass --trust-remote-code")
    model, info = transformers.AutoModelForMaskedLM.from_pretrained(
        src, config=config, trust_remote_code=trust_remote_code, output_loading_info=True
    )
    prefix = getattr(model, "base_model_prefix", "") + "."
    missing_head = sorted(key for key in info.get("missing_keys", ()) if not key.startswith(prefix))
    if missing_head:
        raise ValueError(
            f"MODEL {src}: checkpoint has no MLM head (missing {', '.join(missing_head[:4])}"
            f"{' ...' if len(missing_head) > 4 else ''}); use a masked-LM checkpoint"
        )
    model.eval()
    tokenizer = None
    if with_tokenizer:
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(src, trust_remote_code=trust_remote_code)
        except (OSError, ValueError, TypeError) as err:
            raise FileNotFoundError(f"MODEL {src}: no tokenizer could be loaded ({err})") from None
        # transformers may build an empty tokenizer (special tokens only) for a folder without one
        if len(tokenizer) < 0.5 * config.vocab_size:
            raise FileNotFoundError(
                f"MODEL {src}: tokenizer has {len(tokenizer)} tokens but the model's vocabulary has "
                f"{config.vocab_size}; the checkpoint's tokenizer files are missing or do not match"
            )
    return model, tokenizer


def _check_out(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"--out {out}: exists and is not a folder")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"--out {out}: folder exists and is not empty; choose another --out or pass --overwrite")


def save_rescaled(model: Any, tokenizer: Any, out: str | Path, *, overwrite: bool = False) -> dict[str, Any]:
    """Save ``model`` and ``tokenizer`` to ``out`` atomically and check the saved copy.

    Writes into a temporary sibling folder, reloads it with ``AutoModelForMaskedLM`` and checks (1)
    the reloaded logits equal the in-memory ones on a fixed input, (2) tying is as in memory (one
    shared tensor: same ``data_ptr`` for head and input embeddings), (3) the recorded k; only then
    renames it to ``out``. With ``overwrite`` an existing non-empty ``out`` is moved aside to
    ``<out>.old-<timestamp>`` (kept, not deleted: it may be the input checkpoint itself).

    Returns:
        ``{"out", "tied", "k", "max_abs_logit_diff"}`` (plus ``"moved_aside"`` when an old ``out`` was kept).
    Raises:
        FileExistsError: ``out`` is non-empty (or a file) and not ``overwrite``.
        RuntimeError: the reload check failed (nothing is left at ``out``).
    """
    import transformers

    _quiet_transformers()
    out = Path(out)
    _check_out(out, overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        model.save_pretrained(tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        trust = model.config.model_type in REMOTE_CODE_FAMILIES
        reloaded = transformers.AutoModelForMaskedLM.from_pretrained(tmp, trust_remote_code=trust).eval()
        g = torch.Generator().manual_seed(0)
        low = 5 if model.config.vocab_size > 10 else 0
        ids = torch.randint(low, model.config.vocab_size, (1, 8), generator=g)
        was_training = model.training
        model.eval()
        with torch.no_grad():
            diff = (model(input_ids=ids).logits - reloaded(input_ids=ids).logits).abs().max().item()
        model.train(was_training)
        tied_mem, tied_new = is_tied(model), is_tied(reloaded)
        k_new = getattr(reloaded.config, K_ATTR, None)
        scale = model(input_ids=ids).logits.abs().max().item() if diff > 0 else 1.0
        if not (diff <= 1e-5 * max(1.0, scale)) or tied_mem != tied_new or k_new != getattr(model.config, K_ATTR, None):
            raise RuntimeError(
                f"saved checkpoint does not reload identically (max |logit diff| {diff:.3g}, tied "
                f"{tied_mem}->{tied_new}, k {getattr(model.config, K_ATTR, None)}->{k_new}); nothing written"
            )
        if out.exists():
            if out.is_dir() and not any(out.iterdir()):
                out.rmdir()
            else:
                # the replaced folder is moved aside, never deleted (it may be the only copy of the input)
                aside = out.with_name(f"{out.name}.old-{time.strftime('%Y%m%d-%H%M%S')}")
                os.replace(out, aside)
                os.replace(tmp, out)
                return {"out": str(out), "tied": tied_new, "k": k_new, "max_abs_logit_diff": diff,
                        "moved_aside": str(aside)}
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"out": str(out), "tied": tied_new, "k": k_new, "max_abs_logit_diff": diff}


def rescale_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``initlab mlmhead rescale MODEL --k K --out DIR [--untie] [--overwrite] [--trust-remote-code]``."""
    parser = argparse.ArgumentParser(
        prog=prog or "initlab mlmhead rescale",
        description="Divide a masked-LM checkpoint's MLM-head projection W_head by k and save model + tokenizer.",
    )
    parser.add_argument("model", metavar="MODEL", help="local checkpoint folder or hub id")
    parser.add_argument("--k", type=float, required=True, help="rescaling factor k > 0 (W_head <- W_head / k)")
    parser.add_argument("--out", type=Path, required=True, help="output folder (must not exist or be empty)")
    parser.add_argument("--untie", action="store_true", help="untie the head from the input embeddings first")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing non-empty --out (the old folder is moved aside to <out>.old-<timestamp>)")
    parser.add_argument("--trust-remote-code", action="store_true", help="allow hub code (needed for GTE-MLM)")
    args = parser.parse_args(argv)
    try:
        _check_k(args.k)
        _check_out(args.out, args.overwrite)
        model, tokenizer = load_masked_lm(args.model, trust_remote_code=args.trust_remote_code)
        tied_before = is_tied(model)
        norm_before = head_projection(model).detach().double().norm().item()
        rescale_mlm_head(model, args.k, untie=args.untie)
        norm_after = head_projection(model).detach().double().norm().item()
        info = save_rescaled(model, tokenizer, args.out, overwrite=args.overwrite)
    except (ValueError, TypeError, FileNotFoundError, FileExistsError, RuntimeError) as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    print(
        f"{family_of(model)} head {'tied' if tied_before else 'untied'} -> {'tied' if info['tied'] else 'untied'}; "
        f"||W_head||_F {norm_before:.4g} -> {norm_after:.4g} (k = {args.k:g}, recorded "
        f"{K_ATTR} = {info['k']:g}); saved to {info['out']} (reload check: max |logit diff| "
        f"{info['max_abs_logit_diff']:.2g})"
    )
    if "moved_aside" in info:
        print(f"the previous contents of {info['out']} were moved aside to {info['moved_aside']}")
    return 0


# ------------------------------------------------------------------------------------------------
# tiny in-process checkpoints (tests, README sample, benchmark): no downloads
# ------------------------------------------------------------------------------------------------
_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def default_texts() -> list[str]:
    """The packaged sample texts (``theory/data/default_texts.txt``): 40 unrelated English sentences."""
    text = resources.files("initlab.theory").joinpath("data/default_texts.txt").read_text(encoding="utf-8")
    return _parse_texts(text, "default_texts.txt")


def _parse_texts(text: str, name: str) -> list[str]:
    lines = [ln.strip() for ln in text.splitlines()]
    texts = [ln for ln in lines if ln and not ln.startswith("#")]
    if len(texts) < 2:
        raise ValueError(f"{name}: expected at least 2 non-empty text lines (one text per line), got {len(texts)}")
    return texts


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


# ------------------------------------------------------------------------------------------------
# inspect
# ------------------------------------------------------------------------------------------------
def splade_from_logits(z: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """SPLADE term weights ``a_j = max_t log(1 + ReLU(z_tj))`` over the non-padding tokens.

    Formal et al., SPLADE v2 (arXiv:2109.10086), eq. 1 with max pooling.

    Args:
        z: logits ``(B, T, V)``.
        mask: attention mask ``(B, T)`` (1 = token, 0 = padding).
    Returns:
        ``(B, V)``, non-negative.
    """
    if z.dim() != 3 or mask.shape != z.shape[:2]:
        raise ValueError(f"z, mask: expected shapes (B, T, V) and (B, T), got {tuple(z.shape)} and {tuple(mask.shape)}")
    # log(1 + ReLU(.)) is non-decreasing, so it commutes with the max: pool the logits first (cheap)
    M = z.masked_fill(~mask.bool()[..., None], float("-inf")).amax(dim=1)
    return torch.log1p(torch.relu(M))


def _stats(x: torch.Tensor) -> dict[str, float]:
    x = x.double()
    return {"mean": x.mean().item(), "std": x.std().item() if x.numel() > 1 else 0.0,
            "min": x.min().item(), "max": x.max().item()}


def _forward(model: Any, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.inference_mode():
        out = model(**batch, output_hidden_states=True)
    return out.logits.float(), out.hidden_states[-1].float()


def recommend_k(table: Sequence[dict[str, Any]], batch: int = 32) -> dict[str, Any]:
    """The recommended rescaling factor (a heuristic from :mod:`initlab.theory.score_scale`, not a law).

    Rule: the smallest k of the table whose measured per-query score spread over unrelated texts
    (``score_sd``) is at most ``sqrt(2 ln B)``, the point where an InfoNCE softmax over B in-batch
    candidates starts to saturate; k = 1 if it already is (rescaling then only risks the opposite
    failure, query vectors with no active terms, where the FLOPS gradient dominates); the largest k
    with a warning if none is.
    """
    thr = math.sqrt(2 * math.log(batch))
    ok = [r for r in table if r["score_sd"] <= thr]
    if ok:
        best = min(ok, key=lambda r: r["k"])
        note = "smallest k with score sd <= sqrt(2 ln B)"
    else:
        best = max(table, key=lambda r: r["k"])
        note = "no k in the table brings score sd below sqrt(2 ln B); largest k given"
    warn = best["active_dims_per_text"] < 1.0
    if warn:
        note += "; WARNING: texts have < 1 active dimension at this k (ranking gradient may vanish)"
    return {"k": best["k"], "threshold_score_sd": thr, "batch": batch, "rule": note}


def inspect_model(model: Any, tokenizer: Any, texts: Sequence[str] | None = None, *,
                  ks: Sequence[float] = K_GRID, max_length: int = 64, batch: int = 32) -> dict[str, Any]:
    """Measure every MLM-head scale quantity of ``model`` on ``texts`` (default :func:`default_texts`).

    For each k the model is actually rescaled as :func:`rescale_mlm_head` would do (tied: the shared
    tensor, so the encoder input changes too) and run on the texts; the original weights are restored
    afterwards (bit-exact copy). Per k: logit statistics over all (non-padding token, vocabulary)
    entries, active fraction of logits, SPLADE active dimensions per text, FLOPS regulariser of the
    text batch ``sum_j (mean_i a_ij)^2``, FLOPS cost (mean active-dimension overlap of two texts),
    mean pairwise cosine of SPLADE vectors, score mean and per-query score sd over the other texts,
    and the relative change of the encoder's last hidden states ``||H_k - H_1||_F / ||H_1||_F``.
    A Gaussian fit of the k = 1 logits (mu, sigma) gives the theory's predicted active dimensions.

    Returns:
        A JSON-ready dict: ``family``, ``tied``, ``head`` (Frobenius norm, row norms), ``bias``,
        ``table`` (one row per k), ``gaussian_fit``, ``recommended``.
    Raises:
        ValueError: fewer than 2 texts, unknown family or no MLM head.
    """
    from initlab.theory import score_scale as ss

    texts = default_texts() if texts is None else list(texts)
    if len(texts) < 2 or not all(isinstance(t, str) and t.strip() for t in texts):
        raise ValueError("texts: expected at least 2 non-empty strings")
    ks = [_check_k(k) for k in ks]
    W = head_projection(model)
    tied = is_tied(model)
    bias = head_bias(model)
    Wd = W.detach().double()
    rows = Wd.norm(dim=1)
    report: dict[str, Any] = {
        "family": family_of(model),
        "model_type": model.config.model_type,
        "tied": tied,
        "vocab": int(W.shape[0]),
        "head_dim": int(W.shape[1]),
        "recorded_k": getattr(model.config, K_ATTR, None),
        "head": {"frobenius": Wd.norm().item(), "row_norm_mean": rows.mean().item(), "row_norm_max": rows.max().item()},
        "bias": None if bias is None else _stats(bias.detach()),
        "n_texts": len(texts),
    }
    # length-sorted buckets of up to 20 texts: little padding, bounded memory (logits are (b, T, V)),
    # few large matrix products (small ones cost more thread synchronisation on a busy CPU)
    lengths = [len(tokenizer(t, truncation=True, max_length=max_length)["input_ids"]) for t in texts]
    order = sorted(range(len(texts)), key=lambda i: lengths[i])
    buckets = []
    for j in range(0, len(order), 20):
        idx = order[j:j + 20]
        enc = tokenizer([texts[i] for i in idx], padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        buckets.append({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]})
    n_tokens = sum(int(bk["attention_mask"].sum()) for bk in buckets)
    W0 = W.detach().clone()
    model.eval()
    table = []
    H_ref: list[torch.Tensor] | None = None
    try:
        for k in [1.0] + [k for k in ks if k != 1.0]:  # k = 1 first: the hidden-state reference
            with torch.no_grad():
                W.copy_(W0 / k)
            acc = {"sum": 0.0, "sumsq": 0.0, "max": -math.inf, "pos": 0, "dH2": 0.0, "H2": 0.0}
            a_parts, H_parts = [], []
            for bk in buckets:
                z, H = _forward(model, bk)
                m = bk["attention_mask"].bool()
                zt = z[m]  # (N_tokens, V)
                acc["sum"] += zt.sum(dtype=torch.float64).item()
                acc["sumsq"] += zt.double().pow(2).sum().item()
                acc["max"] = max(acc["max"], zt.max().item())
                acc["pos"] += int(torch.count_nonzero(zt > 0))
                a_parts.append(splade_from_logits(z, m))  # (b, V)
                H_parts.append(H[m])  # (N_tokens, d)
                del z, zt
            if H_ref is None:
                H_ref = H_parts
            Hk, H1 = torch.cat(H_parts), torch.cat(H_ref)
            if k not in ks:  # the reference pass only
                continue
            n_entries = n_tokens * W.shape[0]
            z_mean = acc["sum"] / n_entries
            z_std = math.sqrt(max(acc["sumsq"] / n_entries - z_mean ** 2, 0.0) * n_entries / max(n_entries - 1, 1))
            a = torch.cat(a_parts).double()  # (n_texts, V), length-sorted order
            act = (a > 0).double()
            n = a.shape[0]
            off = ~torch.eye(n, dtype=torch.bool)
            S = a @ a.T  # scores s(q, d) between all texts
            an = torch.nn.functional.normalize(a, dim=1)
            cos = an @ an.T
            per_q_sd = torch.stack([S[i][off[i]].std() for i in range(n)]).mean().item()
            table.append({
                "k": k,
                "logit_mean": z_mean,
                "logit_std": z_std,
                "logit_max": acc["max"],
                "active_fraction_logits": acc["pos"] / n_entries,
                "active_dims_per_text": act.sum(1).mean().item(),
                "active_fraction_text": act.mean().item(),
                "mean_term_weight": a.mean().item(),
                "flops_reg": (a.mean(0) ** 2).sum().item(),
                "flops_cost": (act @ act.T)[off].mean().item(),
                "mean_pairwise_cosine": cos[off].mean().item(),
                "score_mean": S[off].mean().item(),
                "score_sd": per_q_sd,
                "hidden_rel_change": ((Hk - H1).double().norm() / H1.double().norm()).item(),
            })
    finally:
        with torch.no_grad():
            W.copy_(W0)
    table.sort(key=lambda r: r["k"])
    mask_lengths = torch.tensor(lengths, dtype=torch.float64)
    # Gaussian fit at k = 1 (theory prediction of active dims, max pooling over the mean text length)
    row1 = next((r for r in table if r["k"] == 1.0), table[0])
    L_mean = int(round(mask_lengths.mean().item()))
    mu, sigma = row1["logit_mean"], max(row1["logit_std"], 1e-12)
    fit = {"mu": mu, "sigma": sigma, "mean_tokens": L_mean, "fit_at_k": row1["k"]}
    b_mean = 0.0 if bias is None else bias.detach().double().mean().item()
    for r in table:
        # bias part not divided by k, head part (mu - b_mean) and sigma divided by k / row1's k
        scale = row1["k"] / r["k"]
        mu_k, s_k = b_mean + (mu - b_mean) * scale, sigma * scale
        r["predicted_active_dims_per_text"] = report["vocab"] * ss.pooled_active_fraction(mu_k, s_k, max(L_mean, 1))
    report["gaussian_fit"] = fit
    report["table"] = table
    report["recommended"] = recommend_k(table, batch)
    return report


_TABLE_FMT = [
    ("k", "k", "{:g}"),
    ("logit_mean", "logit mean", "{:.3g}"),
    ("logit_std", "logit std", "{:.3g}"),
    ("active_fraction_logits", "active z>0", "{:.3g}"),
    ("active_dims_per_text", "active dims", "{:.1f}"),
    ("predicted_active_dims_per_text", "pred. dims", "{:.1f}"),
    ("flops_reg", "FLOPS reg", "{:.4g}"),
    ("flops_cost", "FLOPS cost", "{:.4g}"),
    ("mean_pairwise_cosine", "mean cos", "{:.3f}"),
    ("score_mean", "score mean", "{:.4g}"),
    ("score_sd", "score sd", "{:.4g}"),
    ("hidden_rel_change", "dH/H", "{:.2g}"),
]


def format_inspect(rep: dict[str, Any]) -> str:
    """Human-readable report of :func:`inspect_model`."""
    h, b = rep["head"], rep["bias"]
    lines = [
        f"family: {rep['family']} (model_type {rep['model_type']}); head {'tied to' if rep['tied'] else 'separate from'} "
        f"the input embeddings; W_head {rep['vocab']} x {rep['head_dim']}"
        + (f"; already rescaled, recorded k = {rep['recorded_k']:g}" if rep.get("recorded_k") else ""),
        f"W_head: Frobenius norm {h['frobenius']:.4g}, row norm mean {h['row_norm_mean']:.4g}, max {h['row_norm_max']:.4g}",
        "bias: none" if b is None else
        f"bias: mean {b['mean']:.4g}, std {b['std']:.4g}, min {b['min']:.4g}, max {b['max']:.4g}",
        f"texts: {rep['n_texts']} (mean {rep['gaussian_fit']['mean_tokens']} tokens); Gaussian fit of k=1 logits: "
        f"mu {rep['gaussian_fit']['mu']:.4g}, sigma {rep['gaussian_fit']['sigma']:.4g}",
        "",
        " | ".join(f"{title:>10}" for _, title, _ in _TABLE_FMT),
    ]
    for r in rep["table"]:
        lines.append(" | ".join(f"{fmt.format(r[key]):>10}" for key, _, fmt in _TABLE_FMT))
    rec = rep["recommended"]
    lines += ["", f"recommended k: {rec['k']:g}  ({rec['rule']}; sqrt(2 ln {rec['batch']}) = "
                  f"{rec['threshold_score_sd']:.3g}; a heuristic, see README)"]
    return "\n".join(lines)


def inspect_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``initlab mlmhead inspect MODEL [--texts FILE] [--json PATH] [--trust-remote-code]``."""
    parser = argparse.ArgumentParser(prog=prog or "initlab mlmhead inspect",
                                     description="MLM-head scale report of a masked-LM checkpoint, against k.")
    parser.add_argument("model", metavar="MODEL", help="local checkpoint folder or hub id")
    parser.add_argument("--texts", type=Path, default=None, help="sample texts, one per line (default: packaged set of 40)")
    parser.add_argument("--json", type=Path, default=None, help="also write the report as JSON")
    parser.add_argument("--max-length", type=int, default=64, help="tokens per text (default 64)")
    parser.add_argument("--batch", type=int, default=32, help="training batch size B for the recommendation rule")
    parser.add_argument("--trust-remote-code", action="store_true", help="allow hub code (needed for GTE-MLM)")
    args = parser.parse_args(argv)
    try:
        texts = None
        if args.texts is not None:
            if not args.texts.is_file():
                raise FileNotFoundError(f"--texts {args.texts}: no such file")
            texts = _parse_texts(args.texts.read_text(encoding="utf-8"), str(args.texts))
        if args.max_length < 2 or args.batch < 2:
            raise ValueError("--max-length and --batch: expected integers >= 2")
        model, tokenizer = load_masked_lm(args.model, trust_remote_code=args.trust_remote_code)
        rep = inspect_model(model, tokenizer, texts, max_length=args.max_length, batch=args.batch)
    except (ValueError, TypeError, FileNotFoundError) as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    rep["model"] = str(args.model)
    print(format_inspect(rep))
    if args.json is not None:
        from initlab.runs import atomic_write_json

        atomic_write_json(args.json, rep)
        print(f"wrote {args.json}")
    return 0
