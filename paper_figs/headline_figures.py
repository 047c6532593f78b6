"""The README's headline figures, drawn from the saved results in ``docs/results`` (the files behind the claims
table), never from a new run::

    python -m initlab.paper_figs.headline_figures docs/results --out docs/figures/headline          # redraw
    python -m initlab.paper_figs.headline_figures docs/results --out docs/figures/headline --check  # exit 1 if stale

* ``spt_proximity.png`` -- first-layer attention after SPT against scratch: the proximity mass (attention
  within the task's window) at the start and the end of fine-tuning, one dot per seed, the uniform-attention
  level as a line (``synthetic_spt_full/summary.json``, its ``per_seed`` ``prox_start`` / ``prox_end``);
* ``spt_accuracy.png`` -- test accuracy by condition, one dot per seed and the seed mean as a bar (the same file,
  ``per_seed`` ``test_acc``);
* ``spt_causal.png`` -- the causal round's interventions, the same chart over the preregistered ``causal`` run's
  conditions (``synthetic_spt_causal/summary.json``): scratch, SPT, label-only training with a fixed proximity
  (ALiBi) prior, SPT without position codes, a non-uniform start, last-token pooling;
* ``splade_ndcg_vs_k.png`` -- nDCG@10 against the rescaling factor k per backbone family (tied heads, each
  family's own head norm), the seed mean as a line and every seed as a faint dot
  (``synthetic_splade_full/phase.json``, its ``rows``).

The numbers behind each figure are written to ``data.json`` beside the PNGs, and each PNG carries the SHA-256 of
its numbers in a PNG text chunk (:data:`HASH_KEY`). A staleness check therefore recomputes the numbers from
``docs/results`` (plain Python arithmetic on saved JSON: the same on every CPU, no training) and compares them
and the hashes, never pixels (they move with the matplotlib version).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import struct
import sys
from pathlib import Path
from typing import Any, Sequence

from initlab.paper_figs.common import family_color, legend_below, pyplot, save
from initlab.runs import atomic_write_text, check_input_path
from initlab.textio import read_json

__all__ = ["SPT", "SPLADE", "FIGURES", "HASH_KEY", "headline_data", "data_hash", "draw_all", "png_text", "stale", "main"]

SPT = "synthetic_spt_full/summary.json"
SPT_CAUSAL = "synthetic_spt_causal/summary.json"
SPLADE = "synthetic_splade_full/phase.json"
#: figure name -> the result file it reads (relative to the results folder)
FIGURES = {"spt_proximity": SPT, "spt_accuracy": SPT, "spt_causal": SPT_CAUSAL, "splade_ndcg_vs_k": SPLADE}
#: the PNG text-chunk keyword holding the SHA-256 of a figure's numbers
HASH_KEY = "initlab-data-sha256"

#: the depth-1 conditions of the accuracy figure, in reading order, with their labels
ACCURACY_CONDITIONS = (
    ("scratch", "scratch"), ("scratch_matched", "scratch,\ncompute-\nmatched"), ("frozen_attn", "attention\nfrozen\nat init"),
    ("spt", "SPT"), ("hybrid_qkvo", "SPT\nW_Q,K,V,O\nonly"), ("hybrid_qk", "SPT\nW_Q, W_K\nonly"),
    ("hybrid_ffn", "SPT\nFFN only"), ("spt_e10", "SPT,\n10 epochs"), ("cross_count", "SPT on\ncount-task\ninputs"),
    ("cross_iid", "SPT on\ni.i.d.\ntokens"),
)
#: the conditions of the causal figure (docs/synthetic_spt.md, section 9), in reading order, with their labels
CAUSAL_CONDITIONS = (
    ("scratch", "scratch"), ("spt", "SPT"), ("alibi_scratch", "scratch with\na fixed\nproximity\nprior"),
    ("spt_nopos", "SPT without\nposition\ncodes"), ("qkscale_scratch", "scratch,\nW_Q, W_K x4\nat init"),
    ("lastpool_scratch", "scratch,\nlast-token\npooling"),
)


# ------------------------------------------------------------------------------------------------
# the numbers (plain arithmetic on the saved JSON)
# ------------------------------------------------------------------------------------------------
def _seeds_label(seeds: Sequence[int]) -> str:
    s = sorted(seeds)
    return f"seeds {s[0]}-{s[-1]}" if s == list(range(s[0], s[-1] + 1)) else "seeds " + ", ".join(map(str, s))


def proximity_data(s: dict[str, Any]) -> dict[str, Any]:
    """Per seed, the first-layer proximity mass at fine-tuning start and end of ``scratch`` and ``spt``."""
    per = s["summary"]["per_seed"]
    out = {"run": f"synthetic SPT, preset full, {_seeds_label(s['config']['seeds'])}",
           "uniform": s["summary"]["uniform_proximity"], "conditions": {}}
    for cond in ("scratch", "spt"):
        rows = sorted(per[cond], key=lambda r: r["seed"])
        out["conditions"][cond] = {"seeds": [r["seed"] for r in rows], "start": [r["prox_start"] for r in rows],
                                   "end": [r["prox_end"] for r in rows]}
    return out


def accuracy_data(s: dict[str, Any], conditions: Sequence[tuple[str, str]] = ACCURACY_CONDITIONS,
                  preset: str = "full") -> dict[str, Any]:
    """Per condition of ``conditions`` (name, label) present, every seed's test accuracy and their mean, and whether
    it is label-only (its saved condition row names no SPT checkpoint: ``spt`` is ``"-"``; grey in the charts)."""
    per = s["summary"]["per_seed"]
    label_only = {r["condition"]: r["spt"] == "-" for r in s["summary"]["conditions"]}
    conds = []
    for name, label in conditions:
        if name in per:
            rows = sorted(per[name], key=lambda r: r["seed"])
            acc = [r["test_acc"] for r in rows]
            conds.append({"condition": name, "label": label, "seeds": [r["seed"] for r in rows], "test_acc": acc,
                          "mean": statistics.fmean(acc), "label_only": label_only[name]})
    return {"run": f"synthetic SPT, preset {preset}, {_seeds_label(s['config']['seeds'])}", "conditions": conds}


def causal_data(s: dict[str, Any]) -> dict[str, Any]:
    """:func:`accuracy_data` over :data:`CAUSAL_CONDITIONS` of the ``causal`` run."""
    return accuracy_data(s, CAUSAL_CONDITIONS, preset="causal")


def ndcg_data(phase: dict[str, Any]) -> dict[str, Any]:
    """Per family: k, every seed's nDCG@10 (tied heads, s = 1) and the seed mean at each k; the family's mean
    W_head Frobenius norm."""
    rows = [r for r in phase["rows"] if r["mode"] == "tied" and r["s"] == 1.0 and not r.get("failed")]
    fams = {}
    for f in phase["config"]["families"]:
        mine = [r for r in rows if r["family"] == f]
        ks = sorted({r["k"] for r in mine})
        seeds = sorted({r["seed"] for r in mine})
        by = {(r["k"], r["seed"]): r["ndcg@10"] for r in mine}
        norms = [n["head_frobenius"] for n in phase["natural_scale"].values() if n["family"] == f]
        fams[f] = {"k": ks, "seeds": seeds, "ndcg": [[by.get((k, sd)) for sd in seeds] for k in ks],
                   "mean": [statistics.fmean([by[(k, sd)] for sd in seeds if (k, sd) in by]) for k in ks],
                   "head_norm": statistics.fmean(norms) if norms else None}
    return {"run": f"synthetic SPLADE, preset full, {_seeds_label(phase['config']['seeds'])}", "families": fams}


def headline_data(results_dir: str | Path) -> dict[str, Any]:
    """Figure name -> its numbers, from the saved files in ``results_dir``.

    Raises:
        FileNotFoundError: a result file is missing (names it).
        ValueError: a file lacks a field a figure needs (names it).
    """
    root = Path(results_dir)
    loaded = {}
    for name in sorted(set(FIGURES.values())):
        path = root / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: saved result file not found; docs/results/README.md names the command that writes it")
        loaded[name] = read_json(path)
    makers = {"spt_proximity": proximity_data, "spt_accuracy": accuracy_data, "spt_causal": causal_data,
              "splade_ndcg_vs_k": ndcg_data}
    out = {}
    for fig, name in FIGURES.items():
        try:
            out[fig] = makers[fig](loaded[name])
        except (KeyError, TypeError, IndexError, statistics.StatisticsError) as err:
            raise ValueError(f"{root / name}: missing or malformed field for the figure {fig}: {type(err).__name__}: {err}") from err
    return out


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


def _with_hash(paths: list[Path], digest: str) -> list[Path]:
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


def draw_all(results_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Draw every headline figure from ``results_dir`` into ``out_dir`` and write ``out_dir/data.json``."""
    data = headline_data(results_dir)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    drawers = {"spt_proximity": draw_proximity, "spt_accuracy": draw_accuracy, "spt_causal": draw_accuracy,
               "splade_ndcg_vs_k": draw_ndcg}
    paths = []
    for fig, numbers in data.items():
        paths += _with_hash(drawers[fig](numbers, out / f"{fig}.png"), data_hash(numbers))
    paths.append(atomic_write_text(out / "data.json", json.dumps(data, indent=1, sort_keys=True) + "\n"))
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


def stale(results_dir: str | Path, out_dir: str | Path) -> list[str]:
    """What is out of date in ``out_dir`` against ``results_dir`` (empty: current): ``data.json`` differing from
    the recomputed numbers, a missing figure, or a figure whose embedded hash is not that of its numbers."""
    data, out = headline_data(results_dir), Path(out_dir)
    problems = []
    saved = read_json(out / "data.json") if (out / "data.json").is_file() else None
    if saved != json.loads(json.dumps(data)):
        problems.append(f"{out / 'data.json'}: differs from the numbers in {results_dir}")
    for fig, numbers in data.items():
        png = out / f"{fig}.png"
        if not png.is_file():
            problems.append(f"{png}: missing")
        elif png_text(png).get(HASH_KEY) != data_hash(numbers):
            problems.append(f"{png}: drawn from other numbers than {results_dir} holds")
    return problems


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``python -m initlab.paper_figs.headline_figures RESULTS_DIR [--out DIR] [--check]``."""
    parser = argparse.ArgumentParser(prog=prog or "python -m initlab.paper_figs.headline_figures",
                                     description="draw the README's headline figures from the saved results in docs/results")
    parser.add_argument("results_dir", type=Path, help="folder of the saved result files (docs/results)")
    parser.add_argument("--out", type=Path, default=Path("docs/figures/headline"),
                        help="folder of the figures and their data.json (default: docs/figures/headline)")
    parser.add_argument("--check", action="store_true", help="draw nothing; exit 1 if the committed figures are stale")
    args = parser.parse_args(argv)
    try:
        check_input_path(args.results_dir, flag="results_dir", kind="folder", what="the saved result files, docs/results")
        if args.check:
            problems = stale(args.results_dir, args.out)
            for p in problems:
                print(f"{parser.prog}: stale: {p}", file=sys.stderr)
            return 1 if problems else 0
        paths = draw_all(args.results_dir, args.out)
    except (FileNotFoundError, ValueError) as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
