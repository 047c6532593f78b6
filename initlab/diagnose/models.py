"""The models ``initlab diagnose`` measures, behind one small interface, and the capture of attention scores.

A :class:`Backend` wraps either

* a Hugging Face masked-LM encoder (BERT, RoBERTa, ModernBERT, ALBERT, DistilBERT, ...), built from its config
  with fresh weights (``AutoModelForMaskedLM.from_config``) or, with ``pretrained``, with its weights
  (:func:`initlab.mlmhead.checkpoint.load_masked_lm`); always with ``attn_implementation="eager"`` so that the
  attention softmax is an explicit call whose input (the scores S, padding mask added) can be captured; or
* an initlab :class:`initlab.nn.encoder.SequenceTransformer` (``initlab:NAME`` presets or a JSON file of
  :class:`initlab.nn.encoder.ModelConfig` fields), whose reference path keeps the scores itself.

:func:`capture_scores` records every square ``(B, H, T, T)`` input of ``torch.nn.functional.softmax`` during a
forward pass (``retain_grad`` on it): in HF eager attention that is ``S + mask`` for every layer, in order. The
gradient with respect to ``S + mask`` equals the gradient with respect to ``S`` (an additive constant).
A test compares it with the initlab encoder's own ``last_scores`` gradient in float64.

Built-in base-size configs (``builtin:bert-base``, ``builtin:roberta-base``, ``builtin:modernbert-base``,
``builtin:albert-base``, ``builtin:distilbert-base``): the published base configs' sizes, written as small JSON
files in ``initlab/diagnose/configs/`` (no download; no tokenizer, so data must be token ids in ``.npy``).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

import torch
import torch.nn.functional as F

from initlab.nn.encoder import ModelConfig, SequenceTransformer
from initlab.textio import decode_text

__all__ = ["Backend", "load_backend", "backend_from_model", "choose_mask_id", "capture_scores", "INITLAB_PRESETS", "BUILTIN_CONFIGS", "builtin_config"]

#: initlab's own encoders by name: the synthetic SPT experiment's model (d 32, 1 head, d_ff 64, pre-norm with
#: residual, FFN, LayerNorm) at depth 1, 2, 4, and its attention-only variant (the theorem's setting + residual)
INITLAB_PRESETS: dict[str, dict[str, Any]] = {
    "spt": dict(d_model=32, n_heads=1, d_ff=64, n_layers=1),
    "spt-depth2": dict(d_model=32, n_heads=1, d_ff=64, n_layers=2),
    "spt-depth4": dict(d_model=32, n_heads=1, d_ff=64, n_layers=4),
    "spt-attn-only": dict(d_model=32, n_heads=1, d_ff=64, n_layers=1, use_ffn=False, use_layernorm=False),
}
BUILTIN_CONFIGS = ("bert-base", "roberta-base", "modernbert-base", "albert-base", "distilbert-base")


def builtin_config(name: str) -> dict[str, Any]:
    """The config dict of a built-in base-size architecture (``initlab/diagnose/configs/<name>.json``).

    Raises:
        ValueError: unknown name.
    """
    if name not in BUILTIN_CONFIGS:
        raise ValueError(f"MODEL builtin:{name}: unknown; expected one of {', '.join('builtin:' + n for n in BUILTIN_CONFIGS)}")
    return json.loads(decode_text(resources.files("initlab.diagnose").joinpath(f"configs/{name}.json").read_bytes(),
                                  f"initlab.diagnose configs/{name}.json"))


@contextlib.contextmanager
def capture_scores() -> Iterator[list[tuple[torch.Tensor, torch.Tensor]]]:
    """Within the block, every call ``F.softmax(x, dim=-1)`` with ``x (B, H, T, T)`` (square last two dims) appends
    ``(x, softmax(x))`` to the yielded list, after ``x.retain_grad()`` when ``x`` is in the autograd graph.

    ``torch.nn.functional.softmax`` is replaced for the duration of the block only (restored on exit, also
    after an exception). Calls with other shapes pass through untouched.
    """
    got: list[tuple[torch.Tensor, torch.Tensor]] = []
    original = F.softmax

    def softmax(x, dim=None, _stacklevel=3, dtype=None):
        out = original(x, dim=dim, _stacklevel=_stacklevel, dtype=dtype)
        if isinstance(x, torch.Tensor) and x.dim() == 4 and x.shape[-1] == x.shape[-2] and dim in (-1, 3):
            if x.requires_grad:
                x.retain_grad()
            got.append((x, out))
        return out

    F.softmax = softmax
    torch.nn.functional.softmax = softmax
    try:
        yield got
    finally:
        F.softmax = original
        torch.nn.functional.softmax = original


@dataclass
class Backend:
    """A model under diagnosis. ``kind`` is ``"hf"`` or ``"initlab"``; ``model`` the torch module (an HF
    ``*ForMaskedLM`` or a :class:`SequenceTransformer`); ``tokenizer`` or None; ids of pad / mask / CLS;
    ``max_len`` the longest input; ``name`` what the user passed; ``family`` (HF ``model_type`` or ``initlab``)."""

    kind: str
    model: torch.nn.Module
    name: str
    family: str
    vocab_size: int
    pad_id: int
    mask_id: int | None
    max_len: int
    n_layers: int
    n_heads: int
    d_model: int
    tokenizer: Any = None
    cls_id: int | None = None
    notes: list[str] = field(default_factory=list)

    def hidden_and_scores(self, ids: torch.Tensor, real: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """One forward pass: last hidden states ``(B, T, d)``, and per layer the scores ``S (B, H, T, T)`` (with
        ``retain_grad``) and the attention ``A (B, H, T, T)``.

        Args:
            ids: ``(B, T)`` long token ids; real: ``(B, T)`` bool, True = real token.
        Raises:
            RuntimeError: the number of captured score tensors is not the number of layers.
        """
        if self.kind == "initlab":
            pad = None if bool(real.all()) else real
            H, maps = self.model.encode(ids, pad, return_attn=True)
            scores = []
            for blk in self.model.blocks:
                S = blk.attn.last_scores
                S.retain_grad()
                scores.append(S)
                blk.attn.last_scores = None
            return H, scores, list(maps)
        with capture_scores() as got:
            out = self.base(ids, attention_mask=real.long())
        H = out[0] if isinstance(out, tuple) else out.last_hidden_state
        if len(got) != self.n_layers:
            raise RuntimeError(f"MODEL {self.name}: captured {len(got)} attention softmax calls for {self.n_layers} layers "
                               "(the architecture does not run eager attention through torch.nn.functional.softmax)")
        return H, [s for s, _ in got], [a for _, a in got]

    @property
    def base(self) -> torch.nn.Module:
        """The encoder without its MLM head (HF ``base_model``)."""
        return self.model.base_model if self.kind == "hf" else self.model

    def mlm_logits(self, H: torch.Tensor) -> torch.Tensor:
        """Masked-reconstruction logits ``(B, T, V)`` from the last hidden states (the model's own MLM head)."""
        if self.kind == "initlab":
            return self.model.mlm_head(H)
        return self._hf_head(H)

    def _hf_head(self, H: torch.Tensor) -> torch.Tensor:
        m = self.model
        for attr in ("cls", "lm_head", "predictions", "head"):  # BERT: cls; RoBERTa: lm_head; ALBERT: predictions
            if hasattr(m, attr) and attr != "head":
                out = getattr(m, attr)(H)
                return out
        if self.family == "distilbert":
            x = m.vocab_layer_norm(m.activation(m.vocab_transform(H)))
            return m.vocab_projector(x)
        if self.family == "modernbert":
            return m.decoder(m.head(H))
        raise ValueError(f"MODEL {self.name}: no known MLM head for family {self.family!r}")


def _quiet() -> None:
    from initlab.mlmhead.checkpoint import quiet_transformers

    quiet_transformers()


def _hf_backend(model, tokenizer, name: str, notes: list[str]) -> Backend:
    cfg = model.config
    family = cfg.model_type
    get = lambda *keys, default=None: next((getattr(cfg, k) for k in keys if getattr(cfg, k, None) is not None), default)  # noqa: E731
    pad = get("pad_token_id", default=0)
    mask = getattr(tokenizer, "mask_token_id", None) if tokenizer is not None else None
    if mask is None:
        mask = get("mask_token_id", default=None)
    # no mask token: left None; the diagnosis masks with an id no sequence of the data uses (fresh weights) or
    # refuses (pretrained weights: every id is a word), :func:`choose_mask_id`; never an ordinary word's id
    cls = getattr(tokenizer, "cls_token_id", None) if tokenizer is not None else get("cls_token_id", "bos_token_id")
    max_len = get("max_position_embeddings", default=512)
    if family == "roberta":
        max_len -= 2  # positions start after the padding index
    layers = get("num_hidden_layers", "n_layers")
    heads = get("num_attention_heads", "n_heads")
    d = get("hidden_size", "dim")
    model.config._attn_implementation = "eager"
    return Backend("hf", model, name, family, int(cfg.vocab_size), int(pad), None if mask is None else int(mask),
                   int(max_len), int(layers),
                   int(heads), int(d), tokenizer, cls, notes)


def _hf_from_config(config, name: str, tokenizer, seed: int, notes: list[str]) -> Backend:
    import transformers

    torch.manual_seed(seed)
    try:
        model = transformers.AutoModelForMaskedLM.from_config(config, attn_implementation="eager")
    except ValueError as err:
        raise ValueError(f"MODEL {name}: {str(err).splitlines()[0]} (expected a masked-LM encoder config)") from None
    return _hf_backend(model.float(), tokenizer, name, notes)


def load_backend(spec: str, *, pretrained: bool = False, seed: int = 0, vocab_hint: int | None = None) -> Backend:
    """The model named by ``spec``, on CPU, float32, fresh weights from ``torch.manual_seed(seed)`` unless
    ``pretrained``.

    ``spec``: a local Hugging Face model folder (``config.json``; its tokenizer if present), a hub id (needs the
    network), ``builtin:<arch>-base`` (:data:`BUILTIN_CONFIGS`), ``initlab:<preset>`` (:data:`INITLAB_PRESETS`)
    or a ``.json`` file of :class:`ModelConfig` fields. ``vocab_hint``: the largest token id + 1 of the data,
    the vocabulary of an initlab preset (at least 3: pad 0, mask 1).

    Raises:
        FileNotFoundError: a missing local path, a folder without ``config.json``, an unreachable hub id.
        ValueError: an unknown preset or builtin, a config file that does not parse, ``pretrained`` for a
            model without weights.
    """
    notes: list[str] = []
    if spec.startswith("initlab:") or spec.endswith(".json"):
        if pretrained:
            raise ValueError(f"MODEL {spec}: --pretrained needs a Hugging Face checkpoint folder; initlab configs have no weights")
        if spec.startswith("initlab:"):
            key = spec.split(":", 1)[1]
            if key not in INITLAB_PRESETS:
                raise ValueError(f"MODEL {spec}: unknown initlab config; expected one of "
                                 f"{', '.join('initlab:' + k for k in INITLAB_PRESETS)}, or a JSON file of ModelConfig fields")
            fields = dict(INITLAB_PRESETS[key], vocab_size=max(3, vocab_hint or 3), max_len=4096)
        else:
            p = Path(spec)
            if not p.is_file():
                raise FileNotFoundError(f"MODEL {spec}: no such file (expected a JSON file of initlab ModelConfig fields)")
            from initlab.config import from_dict
            from initlab.runs import unreadable_file
            from initlab.textio import read_text

            try:
                raw = json.loads(read_text(p))
            except json.JSONDecodeError as err:
                raise unreadable_file(f"MODEL {spec}", err, "JSON file of ModelConfig fields") from None
            if not isinstance(raw, dict):
                raise ValueError(f"MODEL {spec}: expected a JSON object of ModelConfig fields, got {type(raw).__name__}")
            if "model_type" in raw:
                return load_backend(str(p.parent), pretrained=pretrained, seed=seed) if p.name == "config.json" else \
                    _from_hf_dict(raw, spec, seed, notes)
            try:
                cfg = from_dict(ModelConfig, raw)
            except (TypeError, ValueError) as err:
                raise ValueError(f"MODEL {spec}: {err}") from None
            fields = None
        cfg = ModelConfig(**fields) if fields is not None else cfg
        torch.manual_seed(seed)
        model = SequenceTransformer(cfg)
        return Backend("initlab", model, spec, "initlab", cfg.vocab_size, cfg.pad_id, 1, cfg.max_len, cfg.n_layers,
                       cfg.n_heads, cfg.d_model, None, None, notes)
    if spec.startswith("builtin:"):
        if pretrained:
            raise ValueError(f"MODEL {spec}: --pretrained needs a checkpoint; builtin configs have no weights")
        return _from_hf_dict(builtin_config(spec.split(":", 1)[1]), spec, seed, notes)
    import transformers

    _quiet()
    p = Path(spec)
    if p.exists() and not p.is_dir():
        raise FileNotFoundError(f"MODEL {spec}: is a file; expected a model folder holding config.json, a hub id, "
                                "builtin:NAME, initlab:NAME or a ModelConfig .json file")
    if p.is_dir() and not (p / "config.json").is_file():
        raise FileNotFoundError(f"MODEL {spec}: no config.json in this folder (expected a Hugging Face model folder)")
    if not p.exists() and (spec.startswith((".", "/", "~")) or spec.count("/") > 1):
        raise FileNotFoundError(f"MODEL {spec}: no such folder (and not a hub id of the form owner/name)")
    if not p.exists():
        _check_hub_reachable(spec)
    if pretrained:
        from initlab.mlmhead.checkpoint import load_masked_lm

        model, tok = load_masked_lm(spec, with_tokenizer=p.is_dir() and _has_tokenizer(p))
        return _hf_backend(_eager(model), tok, spec, notes)
    try:
        config = transformers.AutoConfig.from_pretrained(spec, local_files_only=p.is_dir())
    except OSError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if p.is_dir():
            raise ValueError(f"MODEL {spec}: config.json could not be read ({first})") from None
        raise FileNotFoundError(f"MODEL {spec}: no such local folder, and the hub id could not be loaded "
                                f"(offline? {first[:160]}); pass a local folder holding config.json") from None
    except ValueError as err:
        raise ValueError(f"MODEL {spec}: {str(err).splitlines()[0]}") from None
    tok = None
    if p.is_dir() and _has_tokenizer(p) or not p.exists():
        try:
            tok = transformers.AutoTokenizer.from_pretrained(spec, local_files_only=p.is_dir())
        except (OSError, ValueError, TypeError):
            tok = None
    if tok is None:
        notes.append("no tokenizer found: data must be token ids (.npy)")
    return _hf_from_config(config, spec, tok, seed, notes)


def _check_hub_reachable(spec: str) -> None:
    """Fail at once, in one line, when a hub id cannot be fetched (offline mode, or no DNS for the hub's host),
    instead of huggingface_hub's retries and warnings."""
    import os
    import socket

    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    host = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").split("//", 1)[-1].split("/", 1)[0].split(":")[0]
    if not offline:
        try:
            socket.getaddrinfo(host, 443)
            return
        except OSError:
            pass
    from transformers.utils import cached_file  # a hub id already in the local cache still works offline

    try:
        cached_file(spec, "config.json", local_files_only=True)
        return
    except Exception:  # noqa: BLE001 -- not cached: the error below says what to do
        pass
    why = "HF_HUB_OFFLINE is set" if offline else f"{host} cannot be reached"
    raise FileNotFoundError(f"MODEL {spec}: no such local folder, and it is not in the local cache while {why}; "
                            "pass a local folder holding config.json, builtin:NAME or initlab:NAME")


def _eager(model):
    model.config._attn_implementation = "eager"
    for m in model.modules():
        if hasattr(m, "config") and hasattr(m.config, "_attn_implementation"):
            m.config._attn_implementation = "eager"
    return model


def _has_tokenizer(p: Path) -> bool:
    return any((p / f).is_file() for f in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "spiece.model",
                                          "vocab.json"))


def _from_hf_dict(raw: dict[str, Any], name: str, seed: int, notes: list[str]) -> Backend:
    import transformers

    _quiet()
    raw = dict(raw)
    kind = raw.pop("model_type", None)
    try:
        config = transformers.AutoConfig.for_model(kind, **raw)
    except (ValueError, KeyError) as err:
        raise ValueError(f"MODEL {name}: not a known Hugging Face model_type {kind!r} ({err})") from None
    notes.append("no tokenizer: data must be token ids (.npy)")
    return _hf_from_config(config, name, None, seed, notes)


def choose_mask_id(backend: Backend, ids: list, *, pretrained: bool) -> None:
    """Set ``backend.mask_id`` when the model has no mask token (``None``): the largest id below the vocabulary size
    that no sequence of ``ids`` uses (and that is not the pad or CLS id), noted in ``backend.notes``. With fresh
    weights such an id is a dedicated mask token (its embedding is as random as ``[MASK]``'s); a pretrained model has
    none (every id is a learned word), so masked reconstruction is refused there rather than done with a word.

    Raises:
        ValueError: ``pretrained`` and no mask token (naming the model and the fix), or every id used.
    """
    if backend.mask_id is not None:
        return
    if pretrained:
        raise ValueError(f"MODEL {backend.name}: its tokenizer has no mask token (and its config no mask_token_id), so "
                         "masked reconstruction would replace tokens with an ordinary word of a pretrained model; give the "
                         "tokenizer its mask token (tokenizer.mask_token = '[MASK]', then save it), or diagnose fresh "
                         "weights (without --pretrained)")
    used = {int(t) for s in ids for t in s} | {backend.pad_id} | ({backend.cls_id} if backend.cls_id is not None else set())
    free = next((i for i in range(backend.vocab_size - 1, -1, -1) if i not in used), None)
    if free is None:
        raise ValueError(f"MODEL {backend.name}: no mask token, and the data uses every id of its {backend.vocab_size}-id "
                         "vocabulary, so none is free to mask with; use a tokenizer with a mask token")
    backend.mask_id = free
    backend.notes.append(f"no mask token: masked positions use id {free}, which no sequence of the data uses (with fresh "
                         "weights an unused id is a dedicated mask token)")


def backend_from_model(model: SequenceTransformer, name: str, mask_id: int = 1) -> Backend:
    """A :class:`Backend` around an existing initlab encoder (its weights as they are)."""
    cfg = model.cfg
    return Backend("initlab", model, name, "initlab", cfg.vocab_size, cfg.pad_id, mask_id, cfg.max_len, cfg.n_layers,
                   cfg.n_heads, cfg.d_model, None, None, [])
