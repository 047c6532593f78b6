"""``python -m initlab.app.docgen.prediction_check``: the model check of ``mlmhead inspect``'s predicted active dims.

Prints (and with ``--json`` writes) :func:`initlab.synthetic.splade.phase.prediction.prediction_rows` as a
markdown table: measured active dimensions per text against the per-entry Gaussian model and the former i.i.d.
model, on the four MLM-pretrained synthetic SPLADE backbones (default preset), tied and untied, k = 1 ... 32.
About a minute on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from initlab.runs import RunExistsError, atomic_write_json, check_output_path

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m initlab.app.docgen.prediction_check [--json PATH] [--overwrite] [--work-dir DIR]``."""
    ap = argparse.ArgumentParser(prog="python -m initlab.app.docgen.prediction_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    ap.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    ap.add_argument("--work-dir", type=Path, default=None, help="keep the pretrained backbones here (default: a temporary folder)")
    args = ap.parse_args(argv)
    try:
        check_output_path(args.json, flag="--json", kind="file", overwrite=args.overwrite)
        check_output_path(args.work_dir, flag="--work-dir", kind="folder", overwrite=True)
    except (ValueError, RunExistsError) as err:
        print(f"{ap.prog}: error: {err}", file=sys.stderr)
        return 2
    from initlab.synthetic.splade.phase.prediction import format_rows, prediction_rows

    rows = prediction_rows(args.work_dir)
    print(format_rows(rows))
    if args.json is not None:
        atomic_write_json(args.json, rows)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
