"""The diagnosis of every validation setting, the outcome records, and the analysis (docs/diagnose.md section 4).

* :func:`setting_diagnosis` -- ``initlab diagnose``'s library (:func:`initlab.diagnose.diagnose_loaded`) on the
  setting's initial model of the first seed (the one both arms start from) and its first 64 training sequences
  with their real labels (bag-of-tokens probe: the 1024 training sequences);
* :func:`collect` -- the raw per-setting records: prediction, predicted blind share, per-seed test accuracies of
  both arms (``records.json``, what :mod:`initlab.synthetic.diagnose.claims` judges);
* ``python -m initlab.synthetic.diagnose.report --run DIR --out FILE`` writes them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Sequence

from initlab.diagnose import diagnose_loaded
from initlab.diagnose.models import backend_from_model
from initlab.runs import atomic_write_json
from initlab.synthetic.diagnose.settings import BUDGET, SEEDS, SETTINGS, setting_data, setting_model
from initlab.synthetic.spt.tasks import MASK_ID
from initlab.textio import read_json

__all__ = ["setting_diagnosis", "collect", "results_markdown", "main"]


def setting_diagnosis(name: str, seed: int = SEEDS[0]) -> dict[str, Any]:
    """The diagnosis of setting ``name`` at initialisation (seed ``seed``), as ``initlab diagnose`` reports it."""
    s = SETTINGS[name]
    data = setting_data(s, seed, BUDGET)
    backend = backend_from_model(setting_model(s, seed, BUDGET), f"validation:{name}", mask_id=MASK_ID)
    ids = [row.numpy() for row in data["xtr"]]
    labels = [str(int(v)) for v in data["ytr"]]
    return diagnose_loaded(backend, ids, labels, pooling=s.pooling, batch_size=64, seed=0)


def collect(run: str | Path | None, diagnoses: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``{"settings": {name: {"what", "predicted_helps", "blind_share", "entropy_gap", "bag", "mlm_share",
    "seeds": {seed: {"scratch", "spt"}}}}}`` from the run folder's finished cells (seeds with both arms only)."""
    out: dict[str, Any] = {"settings": {}, "seeds_planned": list(SEEDS)}
    for name, d in diagnoses.items():
        first = d["measure"]["layers"][0]
        rec = {"what": SETTINGS[name].what, "predicted_helps": d["prediction"]["spt_helps"],
               "blind_share": first["label_share"], "mlm_share": first["mlm_share"], "entropy_gap": first["entropy_gap"],
               "bag_normalised": d["bag"]["normalised"] if d["bag"] else None, "checks": d["prediction"]["checks"],
               "seeds": {}}
        if run is not None:
            for seed in SEEDS:
                arms = {}
                for arm in ("scratch", "spt"):
                    p = Path(run) / "cells" / f"{name}__seed{seed}__{arm}.json"
                    if p.exists():
                        c = read_json(p)
                        arms[arm] = c["test_acc"]
                        arms[f"{arm}_epochs"] = c["epochs_run"]
                        if arm == "spt":
                            arms["prox_after_spt"] = c["probe_after_spt"]["prox"]
                            arms["relpos_after_spt"] = c["probe_after_spt"]["relpos"]
                if "scratch" in arms and "spt" in arms:
                    rec["seeds"][str(seed)] = arms
        out["settings"][name] = rec
    return out


def results_markdown(records: dict[str, Any]) -> str:
    """The results tables of docs/diagnose.md from the records: per setting, the confusion table, the claim, the
    correlation; every verdict recomputed by :mod:`initlab.synthetic.diagnose.claims`."""
    from initlab.synthetic.diagnose import claims as dc
    from initlab.experiment import text

    lines = ["| setting | b₁ (label) | MLM share | entropy gap | bag probe | predicted | seeds | scratch % | SPT % | "
             "SPT − scratch (points, 95 % t) | outcome | rule |", "|" + " --- |" * 12]
    for name, r in records["settings"].items():
        seeds = sorted(r["seeds"], key=int)
        o = dc.outcome(r)
        p = dc.part(name, r)
        sc = [100 * r["seeds"][s]["scratch"] for s in seeds]
        sp = [100 * r["seeds"][s]["spt"] for s in seeds]
        mean = lambda xs: f"{sum(xs) / len(xs):.1f}" if xs else "-"  # noqa: E731
        iv = text.describe(o, "points", with_word=False) if o.word != "not run" else "-"
        out_word = {True: "helps", False: "does not help", None: o.word}[dc.helps(o)] if o.word != "not run" else "not run"
        rule = {"reproduced": "right", "not reproduced": "**wrong**", "inconclusive": "undecided", "not run": "-"}[p.word]
        bag = "-" if r["bag_normalised"] is None else f"{r['bag_normalised']:.2f}"
        lines.append(f"| `{name}` | {r['blind_share']:.3f} | {r['mlm_share']:.3f} | {r['entropy_gap']:.3f} | {bag} | "
                     f"{'helps' if r['predicted_helps'] else 'does not help'} | {len(seeds)} | {mean(sc)} | {mean(sp)} | "
                     f"{iv} | {out_word} | {rule} |")
    c = dc.confusion(records)
    t = c["table"]
    lines += ["", "| predicted \\ measured | helps | does not help |", "| --- | --- | --- |"]
    for pred in ("helps", "does not help"):
        cells = [", ".join(f"`{n}`" for n in t[(pred, m)]) or "-" for m in ("helps", "does not help")]
        lines.append(f"| {pred} | {cells[0]} ({len(t[(pred, 'helps')])}) | {cells[1]} ({len(t[(pred, 'does not help')])}) |")
    if c["undecided"] or c["not_run"]:
        lines += ["", f"Undecided outcome: {', '.join(c['undecided']) or 'none'}; not run (fewer than "
                      f"{dc.MIN_SEEDS} seeds): {', '.join(c['not_run']) or 'none'}."]
    v = dc.predicts_gain(records)
    k = dc.correlation(records)
    lines += ["", f"Claim (all-of over the settings with an outcome): **{v.word}**"
                  + (f"; {v.seeds_to_decide} seeds would decide it" if v.seeds_to_decide else "") + ".",
              "", f"Predicted blind share b₁ vs mean SPT gain over {k['n']} settings: Pearson r = {k['pearson']:.2f} "
                  f"[{k['pearson_lo']:.2f}, {k['pearson_hi']:.2f}] (Fisher z, 95 %); Spearman ρ = {k['spearman']:.2f} "
                  f"[{k['spearman_lo']:.2f}, {k['spearman_hi']:.2f}] (percentile bootstrap, 9999 resamples, 95 %)."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m initlab.synthetic.diagnose.report",
                                     description="Diagnose every validation setting and collect the finished outcomes "
                                                 "into one records file (docs/diagnose.md).")
    parser.add_argument("--run", type=Path, default=None, help="the run folder of initlab.synthetic.diagnose.run "
                        "(omit: predictions only)")
    parser.add_argument("--out", type=Path, required=True, help="records JSON to write")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the results tables (markdown)")
    args = parser.parse_args(argv)
    diagnoses = {n: setting_diagnosis(n) for n in SETTINGS}
    records = collect(args.run, diagnoses)
    atomic_write_json(args.out, records)
    if args.markdown is not None:
        from initlab.runs import atomic_write_text

        atomic_write_text(args.markdown, results_markdown(records) + "\n")
    for n, d in diagnoses.items():
        print(f"{n:10s} b1 {d['measure']['layers'][0]['label_share']:.3f}  gap {d['measure']['layers'][0]['entropy_gap']:.3f}"
              f"  bag {d['bag']['normalised']:.2f}  -> {'helps' if d['prediction']['spt_helps'] else 'not'}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
