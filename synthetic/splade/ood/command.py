"""``initlab synthetic splade-ood``: a thin argparse layer over :mod:`initlab.synthetic.splade.ood`."""

from __future__ import annotations

from typing import Sequence

from initlab.experiment.options import preset_parser, sweep_main

__all__ = ["splade_ood_main"]


def splade_ood_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``initlab synthetic splade-ood``: the out-of-domain synthetic SPLADE (a generated multi-domain corpus with a
    real-sized vocabulary, BM25, SPLADE to a dev-loss plateau); exploratory presets."""
    from initlab.synthetic.splade.ood import runner as ood

    parser = preset_parser(prog or "initlab synthetic splade-ood", ood.__doc__.split("\n\n")[0], ood.PRESETS, "tiny",
                            "tiny (smoke test); map-v2k, map-v8k (the exploratory map at 2048 and 8192 ids); v30k (the "
                            "30000-id vocabulary, costed in docs/synthetic_splade_ood.md)",
                            "output folder (default: results/synthetic_splade_ood/PRESET)")
    return sweep_main(parser, argv, "results/synthetic_splade_ood", lambda args, out: ood.run_ood(
        out, ood.PRESETS[args.preset], workers=args.workers, scheduler=args.scheduler, progress=not args.no_progress,
        overwrite=args.overwrite))
