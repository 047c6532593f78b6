"""Checks that a drawn figure reads on its own, without eyes: colour bars, legends, labels, overlaps, fonts.

Each check takes a matplotlib Figure (drawn, not yet closed) and returns a list of problems (empty: fine),
so a test can show every problem of a figure at once.
"""

from __future__ import annotations

import itertools

import numpy as np
from matplotlib.collections import PathCollection
from matplotlib.legend import Legend
from matplotlib.patches import Rectangle
from matplotlib.text import Text

MIN_FONT_PT = 6.0


def _is_colorbar(ax) -> bool:
    return getattr(ax, "_colorbar", None) is not None


def _data_axes(fig):
    return [ax for ax in fig.axes if ax.get_visible() and ax.axison and not _is_colorbar(ax) and _has_data(ax)]


def _has_data(ax) -> bool:
    return bool(ax.images or ax.collections or ax.patches or any(len(l.get_xdata()) > 2 for l in ax.lines))


def _mapped(ax):
    """Artists of ``ax`` whose colour encodes a value (images; scatters with a colour array)."""
    out = list(ax.images)
    out += [c for c in ax.collections if isinstance(c, PathCollection) and c.get_array() is not None]
    return out


def colorbar_problems(fig) -> list[str]:
    """Every image and value-coloured scatter has a labelled colour bar (its own, or one of the same cmap and limits)."""
    bars = [ax._colorbar for ax in fig.axes if _is_colorbar(ax)]
    keys = {(cb.mappable.get_cmap().name, *np.round(cb.mappable.get_clim(), 12)) for cb in bars}
    out = []
    for i, ax in enumerate(_data_axes(fig)):
        for m in _mapped(ax):
            if m.colorbar is None and (m.get_cmap().name, *np.round(m.get_clim(), 12)) not in keys:
                out.append(f"axes {i} ({ax.get_title()!r}): colour-mapped {type(m).__name__} without a colour bar")
    for cb in bars:
        if not (cb.ax.get_ylabel() or cb.ax.get_xlabel()):
            out.append("a colour bar has no label")
    return out


def _points_px(ax) -> np.ndarray:
    """Display coordinates of every plotted data point of ``ax`` that lies inside the axes."""
    pts = []
    for line in ax.lines:
        xy = np.asarray(line.get_xydata(), dtype=float)
        if len(xy):
            pts.append(line.get_transform().transform(xy))
    for col in ax.collections:
        off = np.asarray(col.get_offsets(), dtype=float)
        if len(off):
            pts.append(col.get_offset_transform().transform(off))
    for p in ax.patches:  # bars: their corners and the middle of the top edge
        if isinstance(p, Rectangle) and p.get_visible() and p.get_width() and p.get_height():
            bb = p.get_window_extent()
            pts.append(np.array([[bb.x0, bb.y0], [bb.x1, bb.y1], [(bb.x0 + bb.x1) / 2, bb.y1]]))
    if not pts:
        return np.zeros((0, 2))
    pts = np.concatenate(pts)
    pts = pts[np.isfinite(pts).all(1)]
    box = ax.get_window_extent()
    inside = (pts[:, 0] >= box.x0) & (pts[:, 0] <= box.x1) & (pts[:, 1] >= box.y0) & (pts[:, 1] <= box.y1)
    return pts[inside]


def legend_problems(fig) -> list[str]:
    """No legend box covers a plotted data point (of any axes) or an image."""
    renderer = fig.canvas.get_renderer()
    legends = [a for a in fig.findobj(Legend) if a.get_visible()]
    out = []
    for leg in legends:
        box = leg.get_window_extent(renderer)
        for i, ax in enumerate(_data_axes(fig)):
            pts = _points_px(ax)
            hit = (pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1)
            if hit.any():
                out.append(f"legend covers {int(hit.sum())} data point(s) of axes {i} ({ax.get_title()!r})")
            for im in ax.images:
                if im.get_window_extent(renderer).overlaps(box):
                    out.append(f"legend covers the image of axes {i}")
    return out


def _boxes(texts, renderer):
    return [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_visible() and t.get_text().strip()]


def _overlaps(boxes, what: str) -> list[str]:
    out = []
    for (ta, a), (tb, b) in itertools.combinations(boxes, 2):
        if a.x0 < b.x1 - 1 and b.x0 < a.x1 - 1 and a.y0 < b.y1 - 1 and b.y0 < a.y1 - 1:  # 1 px tolerance
            out.append(f"{what}: {ta!r} overlaps {tb!r}")
    return out


def _rotated_overlaps(labels, fig, what: str) -> list[str]:
    """Rotated tick labels are parallel strips: neighbours overlap when the distance between their strips,
    (tick spacing) x sin(rotation), is below the text height."""
    labels = [t for t in labels if t.get_visible() and t.get_text().strip()]
    out = []
    for a, b in zip(labels, labels[1:]):
        xa, xb = (t.get_transform().transform(t.get_position())[0] for t in (a, b))
        gap = abs(xb - xa) * abs(np.sin(np.radians(a.get_rotation())))
        height = max(t.get_fontsize() * fig.dpi / 72 * 1.2 * (t.get_text().count("\n") + 1) for t in (a, b))
        if gap < height:
            out.append(f"{what}: {a.get_text()!r} overlaps {b.get_text()!r} (rotated)")
    return out


def overlap_problems(fig) -> list[str]:
    """No two tick labels of one axis overlap; no two texts or annotations inside one axes overlap."""
    renderer = fig.canvas.get_renderer()
    out = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        xt = ax.get_xticklabels()
        if any(t.get_rotation() % 180 for t in xt):
            out += _rotated_overlaps(xt, fig, f"axes {i} x tick labels")
        else:
            out += _overlaps(_boxes(xt, renderer), f"axes {i} x tick labels")
        out += _overlaps(_boxes(ax.get_yticklabels(), renderer), f"axes {i} y tick labels")
        out += _overlaps(_boxes(ax.texts, renderer), f"axes {i} texts")
    return out


def _same_row(a, b) -> bool:
    pa, pb = a.get_position(), b.get_position()
    return abs(pa.y0 - pb.y0) < 0.02 and abs(pa.y1 - pb.y1) < 0.02


def _same_col(a, b) -> bool:
    pa, pb = a.get_position(), b.get_position()
    return abs(pa.x0 - pb.x0) < 0.02 and abs(pa.x1 - pb.x1) < 0.02


def label_problems(fig) -> list[str]:
    """Every data axes has an x label (or one below it in its column) and a y label (or one in its row)."""
    axes = _data_axes(fig)
    out = []
    for i, ax in enumerate(axes):
        if not any(a.get_xlabel() for a in axes if a is ax or _same_col(a, ax)):
            out.append(f"axes {i} ({ax.get_title()!r}): no x label")
        if not any(a.get_ylabel() for a in axes if a is ax or _same_row(a, ax)):
            out.append(f"axes {i} ({ax.get_title()!r}): no y label")
    return out


def font_problems(fig) -> list[str]:
    """Every visible text is at least :data:`MIN_FONT_PT` points."""
    out = []
    for t in fig.findobj(Text):
        if t.get_visible() and t.get_text().strip() and t.get_fontsize() < MIN_FONT_PT:
            out.append(f"text {t.get_text()[:30]!r} at {t.get_fontsize():.1f} pt")
    return out


def all_problems(fig) -> list[str]:
    fig.canvas.draw()
    return (colorbar_problems(fig) + legend_problems(fig) + overlap_problems(fig) + label_problems(fig)
            + font_problems(fig))
