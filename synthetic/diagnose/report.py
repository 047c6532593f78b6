"""The diagnosis of every validation setting, the outcome records, and the analysis (docs/diagnose.md section 4).

* :func:`setting_diagnosis` -- ``initlab diagnose``'s library (:func:`initlab.diagnose.diagnose_loaded`) on the
  setting's initial model of the first seed (the one both arms start from) and its first 64 training sequences
  with their real labels (bag-of-tokens probe: the 1024 training sequences);
* :func:`collect` -- the raw per-setting records: prediction, predicted blind share, per-seed test accuracies of
  both arms (``records.json``, what :mod:`initlab.evidence.diagnose_claims` judges);
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

__all__ = ["setting_diagnosis", "collect", "main"]


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
                        c = json.loads(p.read_text())
                        arms[arm] = c["test_acc"]
                        arms[f"{arm}_epochs"] = c["epochs_run"]
                        if arm == "spt":
                            arms["prox_after_spt"] = c["probe_after_spt"]["prox"]
                            arms["relpos_after_spt"] = c["probe_after_spt"]["relpos"]
                if "scratch" in arms and "spt" in arms:
                    rec["seeds"][str(seed)] = arms
        out["settings"][name] = rec
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m initlab.synthetic.diagnose.report",
                                     description="Diagnose every validation setting and collect the finished outcomes "
                                                 "into one records file (docs/diagnose.md).")
    parser.add_argument("--run", type=Path, default=None, help="the run folder of initlab.synthetic.diagnose.run "
                        "(omit: predictions only)")
    parser.add_argument("--out", type=Path, required=True, help="records JSON to write")
    args = parser.parse_args(argv)
    diagnoses = {n: setting_diagnosis(n) for n in SETTINGS}
    atomic_write_json(args.out, collect(args.run, diagnoses))
    for n, d in diagnoses.items():
        print(f"{n:10s} b1 {d['measure']['layers'][0]['label_share']:.3f}  gap {d['measure']['layers'][0]['entropy_gap']:.3f}"
              f"  bag {d['bag']['normalised']:.2f}  -> {'helps' if d['prediction']['spt_helps'] else 'not'}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
