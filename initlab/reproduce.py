"""``initlab reproduce``: the CPU reproduction of both phenomena, one report.

Stages (each a library function ``reproduce_stage(out_dir, preset, overwrite) -> markdown``):

1. ``theory``      -- attention-gradient theorems T1-T5 checked on fresh random cases
                      (:mod:`initlab.theory.verify`);
2. ``spt``         -- synthetic length-100 self-pretraining experiments (:mod:`initlab.synthetic.spt`);
3. ``score_scale`` -- SPLADE score-scale analysis against k, theory vs Monte Carlo
                      (:mod:`initlab.theory.score_scale`);
4. ``splade``      -- synthetic SPLADE collapse and recovery under MLM-head rescaling
                      (:mod:`initlab.synthetic.splade`).

Optional stage, run only when named in ``--only``:

* ``lra_listops``  -- generated ListOps on CPU, self-pretraining vs from scratch
                      (:mod:`initlab.realdata.lra.sweep`).

Each stage writes into ``OUT/<stage>/``; a finished stage (its folder holds ``DONE``) is not redone,
so an interrupted ``initlab reproduce`` resumes where it stopped. ``OUT/report.md`` collects the
stages' summaries.
"""

from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path
from typing import Sequence

from initlab.runs import atomic_write_text

STAGES: dict[str, str] = {
    "theory": "initlab.theory.verify:reproduce_stage",
    "spt": "initlab.synthetic.spt:reproduce_stage",
    "score_scale": "initlab.theory.score_scale:reproduce_stage",
    "splade": "initlab.synthetic.splade:reproduce_stage",
}
OPTIONAL_STAGES: dict[str, str] = {
    "lra_listops": "initlab.realdata.lra.sweep:reproduce_stage",
}
PRESETS = ("quick", "default", "full")


def run_reproduce(out: Path, preset: str = "default", stages: Sequence[str] | None = None, overwrite: bool = False) -> Path:
    """Run the selected stages into ``out`` and write ``out/report.md``; returns the report path.

    Raises:
        ValueError: unknown ``preset`` or stage name.
    """
    if preset not in PRESETS:
        raise ValueError(f"preset: expected one of {PRESETS}, got {preset!r}")
    stages = list(STAGES) if stages is None else list(stages)
    known = {**STAGES, **OPTIONAL_STAGES}
    unknown = [s for s in stages if s not in known]
    if unknown:
        raise ValueError(f"--only: unknown stage(s) {unknown}; expected names from {list(known)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sections = [
        "# initlab reproduce report",
        "",
        f"preset `{preset}`, stages {', '.join(stages)}; started {time.strftime('%Y-%m-%d %H:%M:%S')}.",
        "",
    ]
    for name in stages:
        module_name, func_name = known[name].split(":")
        print(f"\n=== initlab reproduce: stage {name} ===", flush=True)
        t0 = time.perf_counter()
        func = getattr(importlib.import_module(module_name), func_name)
        md = func(out / name, preset=preset, overwrite=overwrite)
        dt = time.perf_counter() - t0
        sections += [md.rstrip(), "", f"_stage `{name}` took {dt:.1f} s (0 s if it was already finished)_", ""]
        atomic_write_text(out / "report.md", "\n".join(sections) + "\n")
    report = out / "report.md"
    print(f"\nreport: {report}")
    return report


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog=prog or "initlab reproduce", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("results/reproduce"), help="output folder (default: results/reproduce)")
    parser.add_argument("--preset", choices=PRESETS, default="default", help="experiment size (default: default, the CPU reproduction)")
    parser.add_argument("--only", default=None, help=f"comma-separated stages (default: {','.join(STAGES)}; optional: {','.join(OPTIONAL_STAGES)})")
    parser.add_argument("--overwrite", action="store_true", help="redo finished stages (old folders are moved aside)")
    args = parser.parse_args(argv)
    stages = None if args.only is None else [s.strip() for s in args.only.split(",") if s.strip()]
    try:
        run_reproduce(args.out, args.preset, stages, args.overwrite)
    except ValueError as err:
        parser.error(str(err))
    return 0
