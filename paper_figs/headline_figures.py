"""Drawing the README's headline figures (the numbers come from :mod:`initlab.app.docgen.headline_figures`, which
reads them from the saved results in ``docs/results`` and is the command that draws them)::

    python -m initlab.app.docgen.headline_figures docs/results --out docs/figures/headline

Each drawing function takes one figure's numbers (a JSON-able dict) and a PNG path; :func:`with_hash` writes the
SHA-256 of those numbers (:func:`data_hash`) into each PNG as a text chunk (:data:`HASH_KEY`), and
:func:`png_text` reads it back, so a staleness check compares numbers, never pixels (they move with the
matplotlib version).
"""

from __future__ import annotations

import hashlib
import json
import statistics
import struct
from pathlib import Path
from typing import Any

from initlab.paper_figs.common import family_color, legend_below, pyplot, save

__all__ = ["HASH_KEY", "data_hash", "draw_proximity", "draw_accuracy", "draw_ndcg", "with_hash", "png_text"]

#: the PNG text-chunk keyword holding the SHA-256 of a figure's numbers
HASH_KEY = "initlab-data-sha256"


def data_hash(numbers: Any) -> str:
    """SHA-256 of ``numbers`` as canonical JSON (sorted keys)."""
    return hashlib.sha256(json.dumps(numbers, sort_keys=True).encode()).hexdigest()


# ------------------------------------------------------------------------------------------------
# drawing
# ------------------------------------------------------------------------------------------------
def _jitter(n: int, width: float = 0.18) -> list[float]:
    """Fixed horizontal offsets for n dots (deterministic; no random numbers)."""
    return [0.0] if n == 1 else [-width + 2 * width * i / (n - 1) for i in range(n)]


def draw_proximity(d: dict[str, Any], path: Path) -> list[Path]:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    colors = {"scratch": "tab:gray", "spt": "tab:blue"}
    names = {"scratch": "from scratch", "spt": "after SPT"}
    xs = {("scratch", "start"): 0, ("spt", "start"): 1, ("scratch", "end"): 2.6, ("spt", "end"): 3.6}
    for (cond, when), x in xs.items():
        vals = d["conditions"][cond][when]
        ax.scatter([x + j for j in _jitter(len(vals))], vals, s=18, color=colors[cond], zorder=3,
                   label=names[cond] if when == "start" else None)
        ax.hlines(statistics.fmean(vals), x - 0.3, x + 0.3, color=colors[cond], lw=2)
    ax.axhline(d["uniform"], color="k", ls=":", lw=1, label="uniform attention")
    ax.set_xticks([0.5, 3.1], ["fine-tuning start", "fine-tuning end"])
    ax.set_ylabel("first-layer proximity mass")
    ax.set_title(f"First-layer attention: SPT vs scratch\n({d['run']}; one dot per seed)", fontsize=9)
    legend_below(ax, ncol=3, offset=-0.14)
    return save(fig, path)


def draw_accuracy(d: dict[str, Any], path: Path) -> list[Path]:
    plt = pyplot()
    conds = d["conditions"]
    fig, ax = plt.subplots(figsize=(8.0, 3.6))
    for i, c in enumerate(conds):
        color = "tab:gray" if c["label_only"] else "tab:blue"
        ax.bar(i, 100 * c["mean"], width=0.6, color=color, alpha=0.35)
        ax.scatter([i + j for j in _jitter(len(c["test_acc"]))], [100 * a for a in c["test_acc"]], s=12, color=color, zorder=3)
    ax.set_xticks(range(len(conds)), [c["label"] for c in conds], fontsize=7)
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"Accuracy by condition ({d['run']}; bars: seed mean, dots: seeds; grey: label-only)", fontsize=9)
    return save(fig, path)


def draw_ndcg(d: dict[str, Any], path: Path) -> list[Path]:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.4, 3.6))
    for f, v in d["families"].items():
        color = family_color(f, "k")
        for k, per_seed in zip(v["k"], v["ndcg"]):
            ax.scatter([k] * len(per_seed), [x for x in per_seed], s=8, color=color, alpha=0.35, zorder=2)
        norm = f", ||W_head|| {v['head_norm']:.1f}" if v["head_norm"] is not None else ""
        ax.plot(v["k"], v["mean"], marker="o", ms=3, color=color, label=f"{f}{norm}", zorder=3)
    ax.set_xscale("log", base=2)
    ks = sorted({k for v in d["families"].values() for k in v["k"]})
    ax.set_xticks(ks, [f"{k:g}" for k in ks])
    ax.minorticks_off()
    ax.set_xlabel("k (W_head divided by k before training)")
    ax.set_ylabel("nDCG@10 (dev queries)")
    ax.set_title(f"nDCG@10 against k per family\n({d['run']}; line: seed mean, dots: seeds)", fontsize=9)
    legend_below(ax, ncol=2, offset=-0.2)
    return save(fig, path)


def with_hash(paths: list[Path], digest: str) -> list[Path]:
    """Rewrite each PNG with a text chunk ``HASH_KEY: digest`` after its header (atomically)."""
    from initlab.runs import atomic_write_bytes

    for p in paths:
        raw = p.read_bytes()
        body = HASH_KEY.encode("latin-1") + b"\0" + digest.encode("latin-1")
        chunk = struct.pack(">I", len(body)) + b"tEXt" + body
        chunk += struct.pack(">I", __import__("zlib").crc32(b"tEXt" + body) & 0xFFFFFFFF)
        ihdr_end = 8 + 4 + 4 + 13 + 4  # signature, IHDR length, type, data, CRC
        atomic_write_bytes(p, raw[:ihdr_end] + chunk + raw[ihdr_end:])
    return paths


def png_text(path: str | Path) -> dict[str, str]:
    """The ``tEXt`` chunks of a PNG file: keyword -> text."""
    raw = Path(path).read_bytes()
    if raw[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    out, i = {}, 8
    while i + 8 <= len(raw):
        n, kind = struct.unpack(">I", raw[i:i + 4])[0], raw[i + 4:i + 8]
        if kind == b"tEXt":
            key, _, value = raw[i + 8:i + 8 + n].partition(b"\0")
            out[key.decode("latin-1")] = value.decode("latin-1")
        if kind == b"IEND":
            break
        i += 12 + n
    return out
