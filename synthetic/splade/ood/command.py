"""``initlab synthetic splade-ood``: a thin argparse layer over :mod:`initlab.synthetic.splade.ood`."""

from __future__ import annotations

from typing import Sequence

from initlab.experiment.options import preset_config, preset_parser, sweep_main

__all__ = ["splade_ood_main"]


def splade_ood_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``initlab synthetic splade-ood``: the out-of-domain synthetic SPLADE (a generated multi-domain corpus with a
    real-sized vocabulary, BM25, SPLADE to a dev-loss plateau); exploratory presets."""
    from initlab.synthetic.splade.ood import config as ood_config
    from initlab.synthetic.splade.ood import runner as ood

    parser = preset_parser(prog or "initlab synthetic splade-ood", ood.__doc__.split("\n\n")[0], ood_config.PRESETS, "tiny",
                            "the run (tiny: smoke test; default, full: confirm-v2k's recipe on fresh seeds, what "
                            "initlab reproduce runs; confirm-v2k, confirm-v2k-cap100, confirm-v8k-imposed: the "
                            "preregistered confirmations; the exploratory map and regime runs are in docs/runs.md)",
                            "output folder (default: results/synthetic_splade_ood/PRESET)")
    return sweep_main(parser, argv, "results/synthetic_splade_ood", lambda args, out: ood.run_ood(
        out, preset_config(parser, ood_config.PRESETS, args.preset), workers=args.workers, scheduler=args.scheduler,
        progress=not args.no_progress, overwrite=args.overwrite),
        report_partial=lambda args, out: ood.report_partial(out, preset_config(parser, ood_config.PRESETS, args.preset)))
