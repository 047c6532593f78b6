"""``initlab mlmhead inspect|rescale``: thin argparse layers over :mod:`initlab.mlmhead`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

import torch

from initlab.experiment.options import int_at_least
from initlab.mlmhead.checkpoint import check_out_folder, load_masked_lm, save_rescaled
from initlab.mlmhead.heads import K_ATTR, check_k, check_pad_token, family_of, head_projection, is_tied, rescale_mlm_head
from initlab.mlmhead.lengths import fitting_default
from initlab.mlmhead.report import format_inspect, inspect_model
from initlab.mlmhead.splade_encoder import ENGINES
from initlab.mlmhead.tiny import parse_texts, count_comments
from initlab.nn.collapse import detect_collapse
from initlab.runs import RunExistsError, check_input_path, check_output_path
from initlab.textio import read_text

#: ``mlmhead inspect``'s default tokens per text (used when it fits the model; else the model's usable length)
DEFAULT_MAX_LENGTH = 64

__all__ = ["inspect_main", "rescale_main"]


def inspect_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``initlab mlmhead inspect MODEL [--texts FILE] [--json PATH] [--head-engine fused|dense] [--trust-remote-code]``."""
    parser = argparse.ArgumentParser(prog=prog or "initlab mlmhead inspect",
                                     description="MLM-head scale report of a masked-LM checkpoint, against k.")
    parser.add_argument("model", metavar="MODEL", help="local checkpoint folder or hub id")
    parser.add_argument("--texts", type=Path, default=None,
                        help="sample texts, one per line; every non-blank line is a text (default: packaged set of 40)")
    parser.add_argument("--skip-comments", action="store_true",
                        help="--texts: skip lines starting with '#' (they are counted in a note)")
    parser.add_argument("--json", type=Path, default=None, help="also write the report as JSON")
    parser.add_argument("--max-length", type=int_at_least(2), default=None,
                        help=f"tokens per text, an integer >= 2 (default {DEFAULT_MAX_LENGTH}, or the model's usable "
                        "length when that is shorter)")
    parser.add_argument("--batch", type=int_at_least(2), default=32,
                        help="training batch size B for the recommendation rule, an integer >= 2 (default 32)")
    parser.add_argument("--head-engine", choices=ENGINES, default="dense",
                        help="how the SPLADE vectors are pooled: dense (from the model's (texts, tokens, V) logits, "
                        "which inspect needs for its logit statistics anyway; default) or fused (the head's input "
                        "through the fused SPLADE head, as training pools them; slower here); the same vectors")
    parser.add_argument("--trust-remote-code", action="store_true", help="allow hub code (needed for GTE-MLM)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    args = parser.parse_args(argv)
    try:
        check_output_path(args.json, flag="--json", kind="file", overwrite=args.overwrite)
        texts, skipped = None, 0
        if args.texts is not None:
            check_input_path(args.texts, flag="--texts", kind="file", what="sample texts, one per line")
            raw = read_text(args.texts)
            texts = parse_texts(raw, f"--texts {args.texts}", skip_comments=args.skip_comments)
            skipped = count_comments(raw) if args.skip_comments else 0
        model, tokenizer = load_masked_lm(args.model, trust_remote_code=args.trust_remote_code)
        check_pad_token(tokenizer, f"MODEL {args.model}", config=model.config,
                        folder=args.model if Path(args.model).is_dir() else None)
        max_length = args.max_length or fitting_default(DEFAULT_MAX_LENGTH, model, tokenizer)
        rep = inspect_model(model, tokenizer, texts, max_length=max_length, batch=args.batch,
                            collapse=detect_collapse, engine=args.head_engine)
    except (ValueError, TypeError, FileNotFoundError, RunExistsError) as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    rep["model"] = str(args.model)
    print(format_inspect(rep))
    if skipped:
        print(f"note: {skipped} line{'s' if skipped > 1 else ''} starting with '#' skipped (--skip-comments); "
              f"{len(texts)} texts read from {args.texts}")
    if args.json is not None:
        from initlab.runs import atomic_write_json

        atomic_write_json(args.json, rep)
        print(f"wrote {args.json}")
    return 0


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
        check_k(args.k)
        check_out_folder(args.out, args.overwrite)
        model, tokenizer = load_masked_lm(args.model, trust_remote_code=args.trust_remote_code)
        tied_before = is_tied(model)
        norm_before = head_projection(model).detach().double().norm().item()
        H_before = _last_hidden(model)
        rescale_mlm_head(model, args.k, untie=args.untie)  # in float32 (load_masked_lm's default)
        norm_after = head_projection(model).detach().double().norm().item()
        H_after = _last_hidden(model)
        stored = getattr(model, "initlab_stored_dtype", None)
        if stored is not None and stored != model.dtype:
            model.to(stored)  # saved in the checkpoint's own dtype: W_head / k rounded once, same size and format
        info = save_rescaled(model, tokenizer, args.out, overwrite=args.overwrite)
    except (ValueError, TypeError, FileNotFoundError, FileExistsError, RuntimeError) as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    print(
        f"{family_of(model)} head {'tied' if tied_before else 'untied'} -> {'tied' if info['tied'] else 'untied'}; "
        f"||W_head||_F {norm_before:.4g} -> {norm_after:.4g} (k = {args.k:g}, recorded "
        f"{K_ATTR} = {info['k']:g}); saved to {info['out']} (reload check: max |logit diff| "
        f"{info['max_abs_logit_diff']:.2g})"
        + (f"; computed in float32, saved in {_dtype_name(model.dtype)} as stored" if model.dtype != torch.float32 else "")
    )
    if "moved_aside" in info:
        print(f"the previous contents of {info['out']} were moved aside to {info['moved_aside']}")
    change = float((H_after - H_before).norm() / H_before.norm().clamp_min(1e-30))
    if info["tied"] and change > 1e-3:
        print(f"note: the head is tied to the input embeddings, so they were divided by k too; in {family_of(model)} "
              f"they are summed with position embeddings before a LayerNorm, so the encoder's hidden states changed "
              f"(||H_k - H_1|| / ||H_1|| = {change:.2g} on a fixed 8-token input). To rescale the head only, rerun "
              "with --untie.")
    return 0


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _last_hidden(model):
    """Last hidden states ``(1, 8, d)`` (float64) of a fixed 8-token input: measures what a tied rescale changes."""
    import torch

    g = torch.Generator().manual_seed(0)
    low = 5 if model.config.vocab_size > 10 else 0
    ids = torch.randint(low, model.config.vocab_size, (1, 8), generator=g)
    with torch.no_grad():
        return model(input_ids=ids, output_hidden_states=True).hidden_states[-1].double()
