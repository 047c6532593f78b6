"""Load masked-LM checkpoints (local folder or hub id) and save rescaled copies atomically, checked after reload."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from initlab.mlmhead.heads import FAMILIES, K_ATTR, REMOTE_CODE_FAMILIES, RESIZE_FIX, check_vocab, family_of, is_tied
from initlab.mlmhead.precision import dtype_kwargs, stored_dtype
from initlab.runs import (check_finite_tensors, file_where_folder_expected, holds_run_folder, unreadable_file,
                          write_error)

#: what loading a corrupt weights file raises: safetensors' own error; torch's unpickling, zip and EOF errors;
#: transformers' OSError ("Unable to load weights from pytorch checkpoint file")
_UNREADABLE_WEIGHTS = {"SafetensorError", "UnpicklingError", "EOFError", "BadZipFile", "OSError"}


def is_unreadable_weights(err: BaseException) -> bool:
    """Whether ``err`` (raised while loading a checkpoint) says its weights file is corrupt or not a weights
    file (rather than a bug): the callers turn it into one line naming the checkpoint."""
    return type(err).__name__ in _UNREADABLE_WEIGHTS


# ------------------------------------------------------------------------------------------------
# loading and saving checkpoints
# ------------------------------------------------------------------------------------------------
def quiet_transformers() -> None:
    """Silence transformers' logging below errors and its download progress bars (for the whole process)."""
    import transformers

    transformers.logging.set_verbosity_error()
    try:
        transformers.utils.logging.disable_progress_bar()
    except AttributeError:  # pragma: no cover
        pass


def load_masked_lm(name_or_path: str | Path, *, trust_remote_code: bool = False, with_tokenizer: bool = True,
                   dtype: torch.dtype | None = torch.float32):
    """Load a masked-LM checkpoint (local folder or hub id) as ``(model, tokenizer)`` in eval mode.

    The family is checked from the config before any weights load; remote-code families (GTE-MLM)
    load only with ``trust_remote_code=True``. A checkpoint whose MLM head weights are missing (e.g.
    a saved ``BertModel``) is refused instead of silently getting a random head.

    The weights are loaded in ``dtype`` (default float32, whatever the checkpoint stores; ``None``: the
    stored dtype), so measurements do not depend on how a checkpoint was saved
    (:mod:`initlab.mlmhead.precision`). The dtype the checkpoint records is kept as
    ``model.initlab_stored_dtype`` (None if it records none).

    Raises:
        FileNotFoundError: a local folder without ``config.json``; a name that is neither a local
            folder nor a resolvable hub id; no tokenizer when ``with_tokenizer``.
        ValueError: unknown family; remote-code family without ``trust_remote_code``; no MLM head; a tensor holding
            NaN or infinity (:class:`initlab.runs.NonFiniteCheckpointError`, naming the tensors).
    """
    import transformers

    quiet_transformers()
    src = str(name_or_path)
    p = Path(src)
    if p.exists() and not p.is_dir():
        raise FileNotFoundError(file_where_folder_expected(src, "MODEL") + " (a model folder holding config.json, or a hub id)")
    if p.exists() and not (p / "config.json").is_file():
        raise FileNotFoundError(f"MODEL {src}: no config.json in this folder (expected a Hugging Face model folder)")
    if not p.exists() and (src.startswith((".", "/", "~")) or src.count("/") > 1):
        raise FileNotFoundError(f"MODEL {src}: no such folder (and not a hub id of the form owner/name)")
    try:
        config = transformers.AutoConfig.from_pretrained(src, trust_remote_code=trust_remote_code)
    except OSError as err:  # neither a local folder nor a reachable hub id
        if p.is_dir():  # a local folder whose config.json is not valid JSON
            raise unreadable_file(f"MODEL {src}", err, "model folder (its config.json could not be read)") from None
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
    stored = stored_dtype(config)
    try:
        model, info = transformers.AutoModelForMaskedLM.from_pretrained(
            src, config=config, trust_remote_code=trust_remote_code, output_loading_info=True,
            **dtype_kwargs(dtype if dtype is not None else (stored or torch.float32)),
        )
    except Exception as err:  # a truncated or foreign weights file: safetensors/torch errors of many types
        if "ignore_mismatched_sizes" in str(err):  # transformers: "... look at the above report!"
            raise _mismatch_error(src, config, trust_remote_code) from None
        if not is_unreadable_weights(err):
            raise
        raise unreadable_file(f"MODEL {src}", err, "checkpoint (its weights file could not be read)") from None
    if dtype is not None and model.dtype != dtype:  # remote code may ignore the keyword
        model.to(dtype)
    model.initlab_stored_dtype = stored
    check_loaded_keys(f"MODEL {src}", model, info)
    check_finite_tensors(f"MODEL {src}", model)  # a NaN weight would give NaN statistics, not an error
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
        try:
            check_vocab(model, tokenizer)
        except ValueError as err:
            raise ValueError(f"MODEL {src}: {err}") from None
    return model, tokenizer


def _names(keys: list[str], n: int = 4) -> str:
    return ", ".join(keys[:n]) + (f" ... ({len(keys) - n} more)" if len(keys) > n else "")


def _param_name(model: Any, tensor: Any) -> str | None:
    for name, p in model.named_parameters(remove_duplicate=False):
        if p is tensor:
            return name
    return None


def check_loaded_keys(what: str, model: Any, info: dict) -> None:
    """Refuse a masked-LM checkpoint that transformers loaded with tensors initialised at random.

    ``info`` is ``from_pretrained(..., output_loading_info=True)``'s loading report (``missing_keys``,
    ``unexpected_keys``: the model's parameter names the checkpoint lacks, the checkpoint's tensors the model has
    no place for, after transformers' own renaming and ignore rules). transformers only logs these (and initlab
    silences its logs), so without this check a checkpoint missing layers runs with random layers, exit 0. Causes,
    in the order they are checked:

    * the checkpoint was saved with tied weights (no MLM decoder weight in the file: it is the input embedding
      matrix) but ``config.json`` says ``tie_word_embeddings: false``: the decoder would be random. The fix is
      ``"tie_word_embeddings": true`` in ``config.json`` (transformers PR#43429);
    * backbone tensors missing (a stale ``model.safetensors.index.json`` listing fewer tensors than the weights
      hold, a deleted shard; sglang PR#32279);
    * backbone tensors the model built from ``config.json`` has no place for (the config does not describe the
      weights, e.g. fewer layers); tensors of other heads (BERT's next-sentence head) are not the backbone's and
      are accepted;
    * MLM-head tensors missing (a saved base model, not a masked LM).

    Args:
        what: names the checkpoint in the error (``"MODEL PATH"``, ``"backbone PATH"``).
    Raises:
        ValueError: one line naming the tensors (the first four and a count) and the cause.
    """
    prefix = getattr(model, "base_model_prefix", "") + "."
    missing = sorted(info.get("missing_keys", ()) or ())
    unexpected = sorted(info.get("unexpected_keys", ()) or ())
    head = _param_name(model, model.get_output_embeddings().weight) if model.get_output_embeddings() is not None else None
    emb = model.get_input_embeddings()
    emb_name = _param_name(model, emb.weight) if emb is not None else None
    untied = not bool(getattr(model.config, "tie_word_embeddings", True))
    if untied and head in missing and emb_name not in missing:
        raise ValueError(
            f"{what}: its config.json says tie_word_embeddings: false, but the checkpoint holds no MLM decoder weight "
            f"({head}): it was saved with tied weights (the decoder is the input embedding matrix), so the decoder "
            "would be initialised at random; set \"tie_word_embeddings\": true in its config.json")
    lost = [k for k in missing if k.startswith(prefix)]
    if lost:
        raise ValueError(
            f"{what}: the checkpoint lacks {len(lost)} backbone tensor(s) the model needs ({_names(lost)}); "
            "transformers would initialise them at random. Its weights files are incomplete: check that every shard "
            "is present and that model.safetensors.index.json lists every tensor (a stale index?)")
    extra = [k for k in unexpected if k.startswith(prefix)]
    if extra:
        raise ValueError(
            f"{what}: the checkpoint holds {len(extra)} backbone tensor(s) the model built from its config.json has no "
            f"place for ({_names(extra)}); config.json does not describe these weights (e.g. fewer layers), so they "
            "would be dropped: use the config.json saved with them")
    missing_head = [k for k in missing if not k.startswith(prefix)]
    if missing_head:
        raise ValueError(f"{what}: checkpoint has no MLM head (missing {_names(missing_head)}); use a masked-LM "
                         "checkpoint")


def check_checkpoint_weights(name_or_path: str | Path, *, trust_remote_code: bool = False, what: str | None = None,
                             config: Any = None) -> None:
    """Load the masked-LM checkpoint ``name_or_path`` once on the CPU (in its stored dtype) and refuse it as
    :func:`check_loaded_keys` does; for loaders that do not see transformers' loading report themselves
    (sentence-transformers' ``Transformer`` module: ``splade train``'s backbone, ``splade eval``'s checkpoint).

    Raises:
        ValueError: see :func:`check_loaded_keys`; an unreadable weights file (:func:`unreadable_file`); a tensor
            holding NaN or infinity (:class:`initlab.runs.NonFiniteCheckpointError`, naming the tensors).
    """
    import transformers

    quiet_transformers()
    what = what or f"MODEL {name_or_path}"
    try:
        model, info = transformers.AutoModelForMaskedLM.from_pretrained(
            str(name_or_path), config=config, trust_remote_code=trust_remote_code, output_loading_info=True,
            **dtype_kwargs("auto"))  # the stored dtype: the check needs no float32 copy
    except Exception as err:
        if not is_unreadable_weights(err):
            raise
        raise unreadable_file(what, err, "checkpoint (its weights file could not be read)") from None
    try:
        check_loaded_keys(what, model, info)
        check_finite_tensors(what, model)
    finally:
        del model


def _mismatch_error(src: str, config: Any, trust_remote_code: bool) -> ValueError:
    """The one-line error for a checkpoint whose tensors do not have the shapes its config gives (e.g. an MLM-head
    bias left at the old vocabulary size): each parameter with both shapes, and the fix."""
    import transformers

    quiet_transformers()
    try:
        _, info = transformers.AutoModelForMaskedLM.from_pretrained(
            src, config=config, trust_remote_code=trust_remote_code, output_loading_info=True,
            ignore_mismatched_sizes=True)
        found = sorted(info.get("mismatched_keys", ()))
    except Exception:  # pragma: no cover - the first error already said the checkpoint cannot load
        found = []
    shown = "; ".join(f"{key} has shape {tuple(ckpt)} in the checkpoint but {tuple(want)} in the model its config "
                      f"builds (vocab_size {config.vocab_size})" for key, ckpt, want in found[:3]) or \
        "a tensor's shape differs from what the config gives"
    return ValueError(f"MODEL {src}: {shown}; {RESIZE_FIX}")


def check_out_folder(out: Path, overwrite: bool) -> None:
    """Refuse an ``--out`` folder that is a file, is not empty (unless ``overwrite``) or cannot be written, before
    anything is loaded.

    Raises:
        FileExistsError: ``out`` is a file, or a non-empty folder without ``overwrite``.
        initlab.runs.WriteError: the folder cannot be written (:func:`initlab.runs.check_writable`).
    """
    from initlab.runs import check_writable

    if out.exists() and not out.is_dir():
        raise FileExistsError(file_where_folder_expected(out, "--out"))
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"--out {out}: folder exists and is not empty; choose another --out or pass --overwrite")
    check_writable(out, flag="--out", kind="folder")  # a read-only or full disk: refused before loading anything


@holds_run_folder("out")
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
        initlab.runs.WriteError: the disk refused a write (full, read-only): nothing is left at ``out``.
    """
    import transformers

    quiet_transformers()
    out = Path(out)
    check_out_folder(out, overwrite)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    except OSError as err:
        raise (write_error(err, f"--out {out}") or err) from err
    try:
        from initlab.runs import current_umask

        os.chmod(tmp, 0o777 & ~current_umask())  # the mode a plain mkdir gives, not mkdtemp's private 0700
        model.save_pretrained(tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        trust = model.config.model_type in REMOTE_CODE_FAMILIES
        reloaded, info = transformers.AutoModelForMaskedLM.from_pretrained(
            tmp, trust_remote_code=trust, output_loading_info=True, **dtype_kwargs(model.dtype))
        reloaded.eval()
        check_loaded_keys(f"the saved copy {tmp}", reloaded, info)
        check_finite_tensors(f"the saved copy {tmp}", reloaded)
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
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        wrapped = write_error(err, f"--out {out}") if isinstance(err, Exception) else None
        if wrapped is None:
            raise
        raise wrapped from err
    return {"out": str(out), "tied": tied_new, "k": k_new, "max_abs_logit_diff": diff}
