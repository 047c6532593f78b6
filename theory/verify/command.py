"""``initlab theory verify|score-scale``: thin argparse layers over :mod:`initlab.theory`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from initlab.app.commands import fail, finite_float, int_at_least, positive_float
from initlab.config import derive, to_dict
from initlab.runs import RunExistsError, atomic_write_json, check_output_path
from initlab.theory.score_scale import closed_form as score_scale
from initlab.theory.score_scale import table as score_scale_table
from initlab.theory.verify import runner as verify

__all__ = ["verify_main", "score_scale_main"]


def verify_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``initlab theory verify [--json PATH] [--seed N] [--cases N] [--t-max N] [--mc-samples N] [--symbolic]``."""
    parser = argparse.ArgumentParser(prog=prog or "initlab theory verify", description="Check the attention-gradient statements T1, T1', T2, T3, T3', T4, T5, T6, T7 on fresh random cases.")
    parser.add_argument("--json", type=Path, default=None, help="also write the full report as JSON to PATH")
    parser.add_argument("--seed", type=int_at_least(0, 2**40, bound_text="in [0, 2^40)"), default=verify.BASE.seed,
                        help="base seed, an integer in [0, 2^40) (default 0)")
    parser.add_argument("--cases", type=int_at_least(1), default=verify.BASE.cases, help="random cases per statement (default 20)")
    parser.add_argument("--t-max", type=int_at_least(2), default=verify.BASE.t_max, help="largest sequence length T of the random cases (default 128; T4's Monte Carlo uses T in 4..24)")
    parser.add_argument("--mc-samples", type=int_at_least(2), default=verify.BASE.mc_samples, help="Monte Carlo sequences per T4 run (default 20000)")
    parser.add_argument("--symbolic", action="store_true", help="also run the sympy derivations of all nine statements (1 to 2 minutes)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    args = parser.parse_args(argv)
    try:
        check_output_path(args.json, flag="--json", kind="file", overwrite=args.overwrite)
    except (ValueError, RunExistsError) as err:
        fail(parser, err)
    try:
        cfg = derive(verify.BASE, seed=args.seed, cases=args.cases, t_max=args.t_max, mc_samples=args.mc_samples, symbolic=args.symbolic)
        report = verify.run_verify(cfg, progress=True)
    except ValueError as err:
        fail(parser, err)
    print(verify.format_table(report))
    print(f"\n{'all statements PASS' if report['passed'] else 'SOME STATEMENTS FAIL'} ({report['seconds']:.1f} s)")
    if args.json is not None:
        atomic_write_json(args.json, report)
        print(f"wrote {args.json}")
    return 0 if report["passed"] else 1


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
