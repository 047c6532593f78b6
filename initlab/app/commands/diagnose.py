"""``initlab diagnose MODEL --data FILE``: a thin argparse layer over :mod:`initlab.diagnose`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from initlab.experiment.options import int_at_least

__all__ = ["main"]


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``initlab diagnose MODEL --data FILE [--pooling mean|cls|last] [--labels COLUMN] [--spt-probe STEPS] [--json OUT]``."""
    parser = argparse.ArgumentParser(
        prog=prog or "initlab diagnose",
        description="Before training: is label-only training of MODEL on your data blind to query-dependent attention, "
                    "and is self-pretraining predicted to help? Measured at initialisation (docs/diagnose.md).")
    parser.add_argument("model", metavar="MODEL",
                        help="a local Hugging Face model folder (config.json; fresh weights unless --pretrained), a hub id "
                             "(needs the network), builtin:NAME (bert-base, roberta-base, modernbert-base, albert-base, "
                             "distilbert-base: configs shipped with initlab), initlab:NAME (spt, spt-depth2, spt-depth4, "
                             "spt-attn-only) or a JSON file of initlab ModelConfig fields")
    parser.add_argument("--data", type=Path, required=True, metavar="FILE",
                        help="your sequences: text lines (.txt), JSONL with a text field (.jsonl), LRA-style TSV with a header "
                             "(.tsv), or token ids (.npy, (N, T) int, negative = padding)")
    parser.add_argument("--pooling", choices=("mean", "cls", "last"), default="mean",
                        help="how your classifier pools the encoder's states (default mean)")
    parser.add_argument("--labels", default=None, metavar="COLUMN",
                        help="the label field (.jsonl) or column (.tsv); without it a random-label probe head is used, "
                             "the bag-of-tokens check is skipped, and blind shares that pass R1 and R2 give no "
                             "prediction (it needs the labels)")
    parser.add_argument("--text-field", default=None, metavar="NAME",
                        help="the text field (.jsonl, default text) or column (.tsv, default the first of text, Source, "
                             "source, input, sentence)")
    parser.add_argument("--spt-probe", type=int_at_least(1), default=0, metavar="STEPS",
                        help="also run STEPS steps of masked reconstruction and report the proximity mass and "
                             "relative-position score reached (an integer >= 1; default: no probe)")
    parser.add_argument("--skip-comments", action="store_true",
                        help="text-line files (.txt): skip lines starting with '#' (they are counted in a note); by "
                             "default every non-blank line is a sequence")
    parser.add_argument("--pretrained", action="store_true", help="load MODEL's weights instead of a fresh initialisation")
    parser.add_argument("--batch", type=int_at_least(2), default=None,
                        help="sequences measured, the first ones of the file: an integer >= 2, at most the file's "
                             "sequences (default 64, or every sequence when the file holds fewer)")
    parser.add_argument("--max-length", type=int_at_least(2), default=None,
                        help="tokens per sequence at most, an integer >= 2 within the model's usable length (default "
                             "512, or the model's usable length when shorter); longer sequences are cut and counted")
    parser.add_argument("--seed", type=int_at_least(0), default=0, help="initialisation, dropout and mask seed (default 0)")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the diagnosis as JSON")
    parser.add_argument("--figure", type=Path, default=None, metavar="PNG",
                        help="write the blind-share figure (default with --json: OUT with the suffix .png)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing --json / --figure files")
    args = parser.parse_args(argv)

    from initlab.diagnose import diagnose, format_report, save_figure
    from initlab.runs import RunExistsError, atomic_write_json, check_input_path, check_output_path

    figure = args.figure if args.figure is not None or args.json is None else args.json.with_suffix(".png")
    try:
        check_output_path(args.json, flag="--json", kind="file", overwrite=args.overwrite)
        check_output_path(figure, flag="--figure", kind="file", overwrite=args.overwrite)
        if args.json is not None and figure is not None and args.json.resolve() == figure.resolve():
            raise ValueError(f"--figure {figure}: the same path as --json; choose another")
        check_input_path(args.data, flag="--data", kind="file", what="text lines, .jsonl, .tsv or .npy token ids")
        r = diagnose(args.model, args.data, pooling=args.pooling, labels=args.labels, text_field=args.text_field,
                     spt_steps=args.spt_probe, pretrained=args.pretrained, batch_size=args.batch,
                     max_length=args.max_length, seed=args.seed, skip_comments=args.skip_comments)
    except (ValueError, TypeError, FileNotFoundError, RunExistsError) as err:
        print(f"{parser.prog}: error: {str(err).splitlines()[0] if str(err) else type(err).__name__}", file=sys.stderr)
        return 2
    print(format_report(r))
    if figure is not None:
        save_figure(r, figure)
        print(f"wrote {figure}")
    if args.json is not None:
        atomic_write_json(args.json, r)
        print(f"wrote {args.json}")
    return 0
