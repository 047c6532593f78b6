"""``initlab theory score-scale``: a thin argparse layer over :mod:`initlab.theory.score_scale`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from initlab.config import derive, to_dict
from initlab.experiment.options import fail, finite_float, int_at_least, positive_float
from initlab.runs import RunExistsError, atomic_write_json, check_output_path
from initlab.theory.score_scale import closed_form as score_scale
from initlab.theorycheck.score_scale import table as score_scale_table

__all__ = ["score_scale_main"]


def score_scale_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``initlab theory score-scale [--json PATH] [--sigma S ...] [--mu-b M] [--mc]``: the table vs k."""
    parser = argparse.ArgumentParser(prog=prog or "initlab theory score-scale",
                                     description="Expected SPLADE score-scale quantities at initialisation vs the rescaling factor k.")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows (and mechanism thresholds) as JSON")
    parser.add_argument("--sigma", type=positive_float, nargs="+", default=None, help="logit std(s) at k = 1 (default 1 4 16)")
    parser.add_argument("--mu-b", type=finite_float, default=score_scale.BASE.mu_b, help="logit mean (bias part, not divided by k)")
    parser.add_argument("--batch", type=int_at_least(2), default=score_scale.BASE.batch,
                        help="in-batch size B, an integer >= 2 (InfoNCE needs a negative)")
    parser.add_argument("--mc", action="store_true", help="also run the Monte Carlo check (fields named mc_... in --json; slower)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    args = parser.parse_args(argv)
    try:
        check_output_path(args.json, flag="--json", kind="file", overwrite=args.overwrite)
        cfg = derive(score_scale.BASE, mu_b=args.mu_b, batch=args.batch, **({"sigmas": tuple(args.sigma)} if args.sigma else {}))
        rows = score_scale_table.score_scale_table(cfg, with_mc=args.mc)
        mech = score_scale.mechanism(cfg)
    except (ValueError, TypeError, RunExistsError) as err:
        fail(parser, err)
    print(score_scale_table.format_table(rows))
    print("\n" + score_scale.describe_mechanism(mech))
    if args.json is not None:
        atomic_write_json(args.json, {"config": to_dict(cfg), "rows": rows, "mechanism": mech})
        print(f"wrote {args.json}")
    return 0
