"""Pieces every figure script shares: print resolution, atomic saving, condition colours, the command line.

Figures only read saved results and draw; nothing here computes an experiment.

* :data:`DPI` -- the resolution of every PNG (dots per inch; 200 is enough for a two-column paper at the
  saved size);
* :func:`pyplot` -- ``matplotlib.pyplot`` on the non-interactive Agg backend;
* :func:`save` -- write a figure atomically as PNG (and optionally PDF), then close it;
* :func:`condition_color` / :data:`FAMILY_COLORS` -- one colour per experimental condition or backbone
  family, the same in every figure;
* :func:`legend_below` -- a legend under the axes (never over the data);
* :func:`run_figure_cli` -- the ``python -m initlab.paper_figs.<module> RESULTS_DIR`` command line.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

__all__ = ["DPI", "FAMILY_COLORS", "pyplot", "save", "condition_color", "legend_below", "run_figure_cli"]

#: dots per inch of every saved PNG
DPI = 200

#: backbone family -> colour (synthetic SPLADE figures)
FAMILY_COLORS: dict[str, str] = {"bert": "tab:blue", "roberta": "tab:orange", "albert": "tab:green",
                                 "modernbert": "tab:red"}


def pyplot():
    """``matplotlib.pyplot`` with the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: str | Path, pdf: bool = False) -> list[Path]:
    """Write ``fig`` to ``path`` (PNG at :data:`DPI`, tight bounding box), and beside it a vector PDF when
    ``pdf``; each file is written atomically. The figure is closed. Returns the written paths."""
    from initlab.runs import atomic_write_bytes

    path = Path(path)
    paths = []
    for fmt, target in [("png", path.with_suffix(".png"))] + ([("pdf", path.with_suffix(".pdf"))] if pdf else []):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=DPI, bbox_inches="tight")
        paths.append(atomic_write_bytes(target, buf.getvalue()))
    pyplot().close(fig)
    return paths


def condition_color(name: str) -> str:
    """The colour of an SPT condition (synthetic and LRA figures alike).

    grey: from scratch (``scratch``, ``*_scratch``, ``frozen_attn``); blue: self-pretraining (``spt``,
    ``spt_e*``, ``depth2_spt``); orange: hybrids; green: cross-data SPT; purple: the attention-only model
    (``attn_*``); black: uniform attention (a reference, not a trained model).
    """
    name = name.lower()
    if name.startswith("attn_"):
        return "tab:purple"
    if name == "uniform":
        return "black"
    if "scratch" in name or name == "frozen_attn":
        return "tab:gray"
    if name.startswith("hybrid"):
        return "tab:orange"
    if name.startswith("cross"):
        return "tab:green"
    return "tab:blue"


def legend_below(target: Any, handles: Sequence[Any] | None = None, ncol: int = 3, offset: float = -0.16,
                 **kw: Any) -> Any:
    """A legend centred under the axes ``target`` (outside the data area); returns it."""
    kw.setdefault("fontsize", 8)
    kw.setdefault("frameon", False)
    if handles is not None:
        kw["handles"] = list(handles)
    return target.legend(loc="upper center", bbox_to_anchor=(0.5, offset), ncol=ncol, **kw)


def run_figure_cli(module: str, doc: str, draw: Callable[[argparse.Namespace], Iterable[Path]],
                   argv: Sequence[str] | None = None, prog: str | None = None, *, results_help: str,
                   metavar: str | None = None, options: Callable[[argparse.ArgumentParser], None] | None = None,
                   raise_on_error: bool = True) -> int:
    """The command line of a figure module: ``python -m MODULE [options] RESULTS_DIR``.

    Args:
        module: the module's import name (the default ``prog`` is ``python -m MODULE``).
        doc: the module docstring; its first paragraph is the ``--help`` description.
        draw: called with the parsed arguments (``args.results_dir`` a Path); returns the written paths,
            printed one a line. A ``FileNotFoundError`` or ``ValueError`` it raises is bad input.
        options: adds the module's own options to the parser.
        raise_on_error: on bad input, exit through ``parser.error`` (``SystemExit(2)``) when true, else print
            the same message to stderr and return 2.
    Returns:
        0 on success (2 on bad input when ``raise_on_error`` is false).
    """
    parser = argparse.ArgumentParser(prog=prog or f"python -m {module}", description=doc.strip().split("\n\n")[0])
    parser.add_argument("results_dir", type=Path, metavar=metavar, help=results_help)
    if options is not None:
        options(parser)
    args = parser.parse_args(argv)
    try:
        paths = list(draw(args))
    except (FileNotFoundError, ValueError) as err:
        if raise_on_error:
            parser.error(str(err))
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0
