"""Pieces every figure script shares: print resolution, atomic saving, condition colours, the command line.

Figures only read saved results and draw; nothing here computes an experiment.

* :data:`DPI` -- the resolution of every PNG (dots per inch; 200 is enough for a two-column paper at the
  saved size);
* :func:`pyplot` -- ``matplotlib.pyplot`` on the non-interactive Agg backend;
* :func:`save` -- write a figure atomically as PNG (and optionally PDF), then close it;
* :func:`condition_color` / :func:`family_color` -- one colour per experimental condition or backbone
  family, the same in every figure;
* :func:`legend_below` -- a legend under the axes (never over the data);
* :func:`label_points` -- short labels beside markers, placed so that they overlap neither each other nor
  the markers;
* :func:`plain_log_ticks` / :func:`plain_number` -- log-axis tick labels as plain numbers (``20``, not
  ``2 x 10^1``; ``10^-6``, not ``1e-06``);
* :func:`run_figure_cli` -- the ``python -m initlab.paper_figs.<module> RESULTS_DIR`` command line.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from initlab.runs import check_input_path

__all__ = ["DPI", "FAMILY_COLORS", "pyplot", "save", "family_color", "condition_color", "legend_below", "label_points",
           "plain_log_ticks", "plain_number", "run_figure_cli"]

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


def family_color(name: str, default: str | None = None) -> str | None:
    """The colour of a backbone family, from a family name (``bert``) or a model name
    (``answerdotai/ModernBERT-base``); ``default`` when the name holds no known family."""
    low = name.lower().split("/")[-1]
    for fam in ("modernbert", "roberta", "albert", "bert"):  # longest first: "roberta" contains "bert"
        if fam in low:
            return FAMILY_COLORS[fam]
    return default


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
    """A legend centred under the axes ``target`` (outside the data area); returns it, or None when nothing is
    labelled."""
    kw.setdefault("fontsize", 8)
    kw.setdefault("frameon", False)
    if handles is not None:
        kw["handles"] = list(handles)
    elif not has_labelled_artists(target):  # nothing to name: no empty legend, no matplotlib warning
        return None
    return target.legend(loc="upper center", bbox_to_anchor=(0.5, offset), ncol=ncol, **kw)


def has_labelled_artists(target: Any) -> bool:
    """Whether ``target`` (axes or figure) holds an artist with a legend label, i.e. whether a legend would show
    anything (matplotlib warns "No artists with labels found to put in legend" otherwise)."""
    axes = getattr(target, "axes", None)
    axes = axes if isinstance(axes, list) else [target]
    return any(h for ax in axes for h in [ax.get_legend_handles_labels()[0]])


def plain_log_ticks(ax: Any, which: str = "both") -> None:
    """Label the log axes ``which`` (``"x"``, ``"y"`` or ``"both"``) of ``ax`` with plain numbers at 1, 2, 5
    times powers of ten (more multiples on short ranges, fewer on long ones); no minor labels. Call it after
    the data are drawn (it reads the axis limits)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for name in ("x", "y") if which == "both" else (which,):
        axis = ax.xaxis if name == "x" else ax.yaxis
        if axis.get_scale() != "log":
            continue
        lo, hi = sorted(ax.get_xlim() if name == "x" else ax.get_ylim())
        span = np.log10(hi / lo) if lo > 0 else 10.0
        subs = (tuple(float(m) for m in range(1, 10)) if span <= 0.7 else (1.0, 2.0, 3.0, 5.0) if span <= 1.5
                else (1.0, 2.0, 5.0) if span <= 3 else (1.0,))
        axis.set_major_locator(LogLocator(base=10, subs=subs))
        axis.set_major_formatter(FuncFormatter(plain_number))
        axis.set_minor_formatter(NullFormatter())


def plain_number(v: float, _pos: Any = None) -> str:
    """``20``, ``0.05``; powers of ten outside [1e-3, 1e5) as ``10^n`` (mathtext), never ``1e-06``."""
    if v > 0 and not 1e-3 <= v < 1e5:
        n = np.log10(v)
        if abs(n - round(n)) < 1e-9:
            return f"$10^{{{int(round(n))}}}$"
    return f"{v:g}"


#: candidate label offsets from the marker (points), tried in order
_OFFSETS = ((5, 5), (5, -12), (-8, 7), (-8, -14), (8, -3), (-10, -3), (0, 12), (0, -18), (12, 10), (12, -18))


def label_points(ax: Any, points: Sequence[tuple[float, float]], texts: Sequence[str], pad: float = 1.0,
                 avoid: Sequence[tuple[float, float]] = (), **text_kw: Any) -> list[Any]:
    """Write ``texts[i]`` next to the marker at ``points[i]`` (data coordinates) of ``ax``.

    Each label takes the first offset of a fixed list at which its box overlaps no label placed before it
    (in this call or earlier ones on ``ax``) and no marker of ``points``, of ``avoid`` (more markers, data
    coordinates) or of earlier calls; when no offset is free it keeps the first. The axes must have their final limits and scales set. Returns the
    text artists.
    """
    from matplotlib.transforms import Bbox

    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    placed: list[Any] = getattr(ax, "_initlab_label_boxes", [])
    marks: list[Any] = getattr(ax, "_initlab_marker_boxes", [])
    r = 3.5 * fig.dpi / 72  # marker half-size in pixels
    for x, y in ax.transData.transform(list(points) + list(avoid)):
        marks.append(Bbox.from_extents(x - r, y - r, x + r, y + r))
    text_kw.setdefault("fontsize", 7)
    out = []
    for (x, y), text in zip(points, texts):
        art = None
        for dx, dy in _OFFSETS:
            if art is not None:
                art.remove()
            art = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", **text_kw)
            box = art.get_window_extent(renderer).expanded(1.0 + 0.02 * pad, 1.0 + 0.1 * pad)
            if not any(box.overlaps(b) for b in placed + marks):
                break
        else:  # no free place: keep the first offset
            art.remove()
            art = ax.annotate(text, (x, y), xytext=_OFFSETS[0], textcoords="offset points", **text_kw)
            box = art.get_window_extent(renderer)
        placed.append(box)
        out.append(art)
    ax._initlab_label_boxes, ax._initlab_marker_boxes = placed, marks
    return out


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
        raise_on_error: on bad input (a results folder that is missing or a file, or what ``draw`` refuses),
            print ``PROG: error: MESSAGE`` on one line and raise ``SystemExit(2)`` when true, else return 2.
    Returns:
        0 on success (2 on bad input when ``raise_on_error`` is false).
    """
    parser = argparse.ArgumentParser(prog=prog or f"python -m {module}", description=doc.strip().split("\n\n")[0])
    parser.add_argument("results_dir", type=Path, metavar=metavar, help=results_help)
    if options is not None:
        options(parser)
    args = parser.parse_args(argv)
    try:
        check_input_path(args.results_dir, flag=metavar or "results_dir", kind="folder")
        paths = list(draw(args))
    except (FileNotFoundError, ValueError) as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)  # one line (docs/conventions.md), exit 2
        if raise_on_error:
            raise SystemExit(2) from None
        return 2
    for p in paths:
        print(p)
    return 0
