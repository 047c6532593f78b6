"""``initlab synthetic splade``: a thin argparse layer over :mod:`initlab.synthetic.splade.phase`."""

from __future__ import annotations

from typing import Sequence

from initlab.experiment.options import preset_config, preset_parser, sweep_main
from initlab.paper_figs import synthetic_splade_phase_figures
from initlab.synthetic.splade.phase import runner as splade_phase

__all__ = ["splade_main"]


def splade_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``initlab synthetic splade``: the per-family phase diagram (head scale s x rescaling k), its tables and figures."""
    parser = preset_parser(prog or "initlab synthetic splade", splade_phase.__doc__.split("\n\n")[0], splade_phase.PRESETS,
                            "default",
                            "the run (quick: smoke test; default: what initlab reproduce runs, bert and modernbert, seeds "
                            "9101-9102, tied k in 1, 4, 16, 64, output-only k = 64; full: the preregistered confirmatory "
                            "run, 4 families, seeds 9101-9105)",
                            "output folder (default: results/synthetic_splade/PRESET)")
    return sweep_main(parser, argv, "results/synthetic_splade", lambda args, out: splade_phase.run_phase(
        out, preset_config(parser, splade_phase.PRESETS, args.preset), overwrite=args.overwrite, progress=not args.no_progress,
        draw=synthetic_splade_phase_figures.draw_phase, workers=args.workers, scheduler=args.scheduler))
