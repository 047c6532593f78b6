"""``initlab theory verify``: a thin argparse layer over :mod:`initlab.theorycheck.verify.runner`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from initlab.experiment.options import fail, int_at_least
from initlab.config import derive
from initlab.runs import RunExistsError, atomic_write_json, check_output_path
from initlab.theorycheck.verify import runner as verify

__all__ = ["verify_main"]


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
