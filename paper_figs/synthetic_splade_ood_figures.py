"""Figure of the OOD synthetic SPLADE's exploratory map, drawn from its saved map.json only (no training here).

``python -m initlab.paper_figs.synthetic_splade_ood_figures MAP_DIR [--out DIR]`` reads ``MAP_DIR/map.json``
(written by ``python -m initlab.synthetic.splade.ood.map``) and writes ``splade_ood_map.png``: one column per
vocabulary size (and training cap, when the map holds several); top, the loss of k = 1 (nDCG@10 of the best k
minus k = 1, test half of the queries, best k chosen on the select half) against training length, one colour per family, solid out of domain and dashed in domain, the
0.05 line of the region; bottom, nDCG@10 out of domain at k = 1 (open markers) and at the best k (filled), with
BM25 out of domain as a grey line (the mean over the seeds). With several seeds (the map's ``across_seeds``) the
lines are the means over the seeds with ± 1 sample sd bars, and each seed's loss is a faint dot. Descriptive, no
verdict.

When the map holds query-shift points (runs with ``query_shift``), also ``splade_ood_shift.png``: one column per
such vocabulary and cap; x the synonym rate of the evaluation queries (the corpus's own rate, at which SPLADE was
trained, and the shifted rates), at the longest training length; top, the loss of k = 1 per family, solid out of domain and
dashed in domain; bottom, nDCG@10 out of domain at the best k (filled) and k = 1 (open), with BM25 (grey).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from initlab.paper_figs.common import family_color, legend_below, pyplot, run_figure_cli, save
from initlab.textio import read_json

__all__ = ["load_map", "draw_map", "draw_shift", "main"]


def load_map(folder: str | Path) -> dict[str, Any]:
    """The ``map.json`` of ``folder``.

    Raises:
        FileNotFoundError: no ``map.json`` there.
    """
    path = Path(folder) / "map.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: not found; expected the output of python -m initlab.synthetic.splade.ood.map")
    return read_json(path)


def draw_map(folder: str | Path, out: str | Path | None = None) -> list[Path]:
    """Draw ``splade_ood_map.png`` (module docstring) into ``out`` (default ``folder``); returns the written paths."""
    m = load_map(folder)
    plt = pyplot()
    settings = sorted({(p["vocab"], p["cap"]) for p in m["points"]})
    if not settings:
        raise ValueError(f"{folder}/map.json: no map points")
    several_caps = len({c for _, c in settings}) > 1
    fig, axes = plt.subplots(2, len(settings), figsize=(5.0 * len(settings) + 0.8, 6.4), squeeze=False, sharex="col")
    for j, (V, cap) in enumerate(settings):
        top, bot = axes[0][j], axes[1][j]
        pts = [p for p in m["points"] if p["vocab"] == V and p["cap"] == cap]
        n_seeds = len({p["seed"] for p in pts})
        acr = [x for x in (m.get("across_seeds") or {}).get("families", []) if x["vocab"] == V and x["cap"] == cap]
        for fam in sorted({p["family"] for p in pts}):
            col = family_color(fam, "black")
            for dom, ls in (("ood", "-"), ("id", "--")):
                label = f"{fam}, {'out of domain' if dom == 'ood' else 'in domain'}"
                q = sorted((x for x in acr if x["family"] == fam and x["domain"] == dom), key=lambda x: x["length"])
                if q:  # the mean over the seeds, ± 1 sd, each seed a faint dot
                    top.errorbar([x["length"] for x in q], [x["loss_mean"] for x in q],
                                 yerr=[x["loss_sd"] or 0.0 for x in q], fmt=ls, marker="o", color=col, ms=4, capsize=2,
                                 label=label)
                    d = [p for p in pts if p["family"] == fam and p["domain"] == dom]
                    top.plot([p["length"] for p in d], [p["loss"] for p in d], ".", color=col, alpha=0.3, ms=3)
                    continue
                q = sorted((p for p in pts if p["family"] == fam and p["domain"] == dom), key=lambda p: (p["seed"], p["length"]))
                if q:
                    top.plot([p["length"] for p in q], [p["loss"] for p in q], ls, marker="o", color=col, ms=4, label=label)
            q = sorted((x for x in acr if x["family"] == fam and x["domain"] == "ood"), key=lambda x: x["length"])
            best, k1 = (("best_mean", "k1_mean") if q else ("best", "k1"))
            q = q or sorted((p for p in pts if p["family"] == fam and p["domain"] == "ood"), key=lambda p: p["length"])
            if q:
                bot.plot([p["length"] for p in q], [p[best] for p in q], "-", marker="o", color=col, ms=4,
                         label=f"{fam}, best k")
                bot.plot([p["length"] for p in q], [p[k1] for p in q], ":", marker="o", mfc="white", color=col, ms=4,
                         label=f"{fam}, k = 1")
        top.axhline(m.get("min_gain", 0.05), color="grey", lw=0.8, ls=":")
        top.axhline(0.0, color="black", lw=0.5)
        top.set_title(f"vocabulary {V}" + (f", cap {cap}" if several_caps else "")
                      + (f" ({n_seeds} seeds)" if n_seeds > 1 else " (one seed)"), fontsize=10)
        top.set_ylabel("nDCG@10 best k − k = 1")
        bm = [b["ood"] for b in m.get("bm25", []) if b["vocab"] == V]
        if bm:
            bot.axhline(sum(bm) / len(bm), color="grey", lw=1.0, label="BM25")
        bot.set_xlabel("SPLADE training steps")
        bot.set_ylabel("nDCG@10 out of domain")
    legend_below(axes[1][0], ncol=3, offset=-0.25)
    h, lab = axes[0][0].get_legend_handles_labels()
    fig.legend(h, lab, loc="upper center", bbox_to_anchor=(0.5, 1.04), ncol=2, fontsize=8, frameon=False)
    n = len({p["seed"] for p in m["points"]})
    seeds = "one seed" if n == 1 else "over several seeds: mean ± sd"
    fig.suptitle(f"map: loss of k = 1 (top), nDCG@10 (bottom); {seeds}", fontsize=10, y=1.09)
    fig.subplots_adjust(wspace=0.35)
    target = Path(out or folder) / "splade_ood_map.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    return save(fig, target)


def _rate(dom: str, base: float) -> tuple[str, float]:
    kind, _, p = dom.partition("@p")
    return kind, float(p) if p else base


def _seed_means(pts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (family, domain): the mean of ``loss``, ``best`` and ``k1`` over the seeds."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for p in pts:
        by.setdefault((p["family"], p["domain"]), []).append(p)
    return [{"family": f, "domain": d, **{k: sum(p[k] for p in ps) / len(ps) for k in ("loss", "best", "k1")}}
            for (f, d), ps in by.items()]


def draw_shift(folder: str | Path, out: str | Path | None = None) -> list[Path]:
    """Draw ``splade_ood_shift.png`` (module docstring) into ``out`` (default ``folder``); returns the written paths
    (none when the map has no query-shift points)."""
    m = load_map(folder)
    shifted = {(p["vocab"], p["cap"]) for p in m["points"] if "@p" in p["domain"]}
    if not shifted:
        return []
    plt = pyplot()
    settings = sorted(shifted)
    base = {r["vocab"]: r.get("p_synonym") for r in m["runs"] if r.get("query_shift")}
    runs = {p.get("run") for p in m["points"] if "@p" in p["domain"]}  # only the runs with shifted queries
    fig, axes = plt.subplots(2, len(settings), figsize=(5.0 * len(settings) + 0.8, 6.4), squeeze=False, sharex="col")
    for j, (V, cap) in enumerate(settings):
        top, bot = axes[0][j], axes[1][j]
        pts = [p for p in m["points"] if p["vocab"] == V and p["cap"] == cap and p.get("run") in runs]
        L = max(p["length"] for p in pts)
        pts = _seed_means([p for p in pts if p["length"] == L])
        for fam in sorted({p["family"] for p in pts}):
            col = family_color(fam, "black")
            for kind, ls in (("ood", "-"), ("id", "--")):
                q = sorted(((_rate(p["domain"], base[V])[1], p) for p in pts if p["family"] == fam
                            and _rate(p["domain"], base[V])[0] == kind), key=lambda x: x[0])
                if not q:
                    continue
                top.plot([r for r, _ in q], [p["loss"] for _, p in q], ls, marker="o", color=col, ms=4,
                         label=f"{fam}, {'out of domain' if kind == 'ood' else 'in domain'}")
                if kind == "ood":
                    bot.plot([r for r, _ in q], [p["best"] for _, p in q], "-", marker="o", color=col, ms=4,
                             label=f"{fam}, best k")
                    bot.plot([r for r, _ in q], [p["k1"] for _, p in q], ":", marker="o", mfc="white", color=col, ms=4,
                             label=f"{fam}, k = 1")
        by_rate: dict[float, dict[int, float]] = {}  # BM25 out of domain per rate, each seed once, of these runs
        for b in m.get("bm25", []):
            if b["vocab"] == V and b["cap"] == cap and b.get("run") in runs and b.get("shift"):
                by_rate.setdefault(base[V], {})[b["seed"]] = b["ood"]
                for g, v in b["shift"].items():
                    if g.startswith("ood"):
                        by_rate.setdefault(_rate(g, base[V])[1], {})[b["seed"]] = v
        if by_rate:
            xs = sorted(by_rate)
            bot.plot(xs, [sum(by_rate[r].values()) / len(by_rate[r]) for r in xs], "-", color="grey", lw=1.0,
                     marker="s", ms=3, label="BM25")
        top.axhline(m.get("min_gain", 0.05), color="grey", lw=0.8, ls=":")
        top.axhline(0.0, color="black", lw=0.5)
        top.set_title(f"vocabulary {V}, {L} steps", fontsize=10)
        top.set_ylabel("nDCG@10 best k − k = 1")
        bot.set_xlabel("synonym rate of the evaluation queries")
        bot.set_ylabel("nDCG@10 out of domain")
    legend_below(axes[1][0], ncol=3, offset=-0.25)
    h, lab = axes[0][0].get_legend_handles_labels()
    fig.legend(h, lab, loc="upper center", bbox_to_anchor=(0.5, 1.04), ncol=2, fontsize=8, frameon=False)
    n = len({p["seed"] for p in m["points"] if "@p" in p["domain"]})
    rates = ", ".join(sorted({f"{v:g}" for v in base.values() if v is not None}))
    fig.suptitle("shift: loss of k = 1 (top), nDCG@10 out of domain (bottom); "
                 + ("one seed" if n == 1 else f"mean over {n} seeds") + f"; training queries at synonym rate {rates}",
                 fontsize=10, y=1.09)
    fig.subplots_adjust(wspace=0.35)
    target = Path(out or folder) / "splade_ood_shift.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    return save(fig, target)


def _draw_all(folder: str | Path, out: str | Path | None = None) -> list[Path]:
    return draw_map(folder, out) + draw_shift(folder, out)


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    return run_figure_cli(
        "initlab.paper_figs.synthetic_splade_ood_figures", __doc__, lambda a: _draw_all(a.results_dir, a.out), argv, prog,
        results_help="folder holding map.json (python -m initlab.synthetic.splade.ood.map)",
        options=lambda p: p.add_argument("--out", type=Path, default=None, help="where to write the PNG (default: the folder)"))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
