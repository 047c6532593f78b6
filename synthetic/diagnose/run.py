"""Both arms of every validation setting, seed-major, resumable: ``python -m initlab.synthetic.diagnose.run --out DIR``.

For each seed (in :data:`initlab.synthetic.diagnose.settings.SEEDS` order), for each setting: the label-only arm
(``scratch``: fresh model, fine-tuning at the setting's label-only learning rate) and the SPT arm (the same fresh
model, ``spt_epochs`` epochs of masked reconstruction on the training inputs, then fine-tuning at
``finetune_lr``). Fine-tuning stops early on validation accuracy (``finetune_patience``), at most
``finetune_max_epochs``; the reported test accuracy is that of the best validation epoch. Every finished arm is
a JSON record ``cells/<setting>__seed<s>__<arm>.json`` (written atomically); the SPT weights after
pretraining are kept in ``ckpt/`` so that a restart never repeats them; the loops save a resume file after
every epoch (:class:`initlab.synthetic.spt.training.Checkpoint`). Rerunning the same command resumes.
Seed-major order: when time runs out, the finished seeds cover every setting.
"""

from __future__ import annotations

import argparse
import io
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

import torch

from initlab.nn.attention_metrics import proximity_mass, relative_position_score
from initlab.runs import RunDir, atomic_write_bytes, atomic_write_json, check_finite_tensors, holds_run_folder
from initlab.synthetic.diagnose.settings import BUDGET, SEEDS, SETTINGS, Budget, Setting, setting_data, setting_model
from initlab.synthetic.spt.tasks import MASK_ID
from initlab.synthetic.spt.training import Checkpoint, finetune, pretrain
from initlab.textio import read_json

__all__ = ["run_arm", "run_all", "cell_name", "main"]


def cell_name(setting: str, seed: int, arm: str) -> str:
    return f"{setting}__seed{seed}__{arm}"


@torch.no_grad()
def _probe(model, x: torch.Tensor, w: int) -> dict[str, float]:
    was = model.training
    model.eval()
    _, maps = model.encode(x, return_attn=True)
    S = model.blocks[0].attn.last_scores
    model.blocks[0].attn.last_scores = None
    model.train(was)
    return {"prox": proximity_mass(maps[0], w), "relpos": relative_position_score(S)}


def run_arm(root: Path, s: Setting, seed: int, arm: str, b: Budget = BUDGET, log=print) -> dict[str, Any]:
    """Run (or resume) one arm of one setting and seed; returns and saves its record."""
    out = root / "cells" / f"{cell_name(s.name, seed, arm)}.json"
    if out.exists():
        return read_json(out)
    data = setting_data(s, seed, b)
    model = setting_model(s, seed, b)
    t0 = time.time()
    rec: dict[str, Any] = {"setting": s.name, "seed": seed, "arm": arm}
    probe_x = data["xte"][:64]
    rec["probe_init"] = _probe(model, probe_x, b.proximity_w)
    if arm == "spt":
        ck = root / "ckpt" / f"{s.name}__seed{seed}__spt.pt"
        if ck.exists():
            saved = torch.load(ck, weights_only=True)  # a state dict and numbers: no code runs on load
            check_finite_tensors(f"SPT checkpoint {ck}", saved["state"])
            model.load_state_dict(saved["state"])
            spt = saved["info"]
        else:
            r = pretrain(model, data["xtr"], data["xva"], torch.Generator().manual_seed(7919 * seed + 17 + s.depth), seed + 5,
                         lr=b.spt_lr, weight_decay=b.weight_decay, batch_size=b.batch_size, mask_rate=b.mask_rate,
                         mask_id=MASK_ID, window=b.spt_epochs + 1, min_rel=0.0, max_epochs=b.spt_epochs,
                         checkpoint=Checkpoint(root / "resume" / f"{s.name}__seed{seed}__pretrain.pt"),
                         where=f"diagnose validation SPT ({s.name}, seed {seed})")
            spt = {"val_loss": r["val_loss"], "epochs": r["epochs_run"], "steps": r["steps"]}
            buf = io.BytesIO()
            torch.save({"state": model.state_dict(), "info": spt}, buf)
            atomic_write_bytes(ck, buf.getvalue())
        rec["spt"] = spt
        rec["probe_after_spt"] = _probe(model, probe_x, b.proximity_w)
        lr = b.finetune_lr
    else:
        lr = s.scratch_lr
    r, final = finetune(model, data, torch.Generator().manual_seed(7919 * seed + 3), lr=lr, weight_decay=b.weight_decay,
                        batch_size=b.batch_size, max_epochs=b.finetune_max_epochs, patience=b.finetune_patience,
                        checkpoint=Checkpoint(root / "resume" / f"{cell_name(s.name, seed, arm)}.pt"),
                        where=f"diagnose validation fine-tune ({s.name}, {arm}, seed {seed})")
    rec.update(lr=lr, test_acc=r["test_acc"], val_acc=r["val_acc"], best_epoch=r["best_epoch"], epochs_run=r["epochs_run"],
               capped=r["epochs_run"] >= b.finetune_max_epochs, final_test_acc=r["final_test_acc"],
               train_acc_last=r["history"][-1]["train_acc"], probe_end=_probe(final, probe_x, b.proximity_w),
               seconds=time.time() - t0)
    atomic_write_json(out, rec)
    log(f"{time.strftime('%H:%M:%S')} {cell_name(s.name, seed, arm)}: test {rec['test_acc']:.3f} "
        f"(best epoch {r['best_epoch']} of {r['epochs_run']}, {rec['seconds']:.0f} s)")
    return rec


@holds_run_folder("root")
def run_all(root: str | Path, seeds: Sequence[int] = SEEDS, settings: Sequence[str] | None = None,
            b: Budget = BUDGET, log=print) -> list[dict[str, Any]]:
    """Every arm of every setting, seed-major; resumes a folder that holds the same configuration."""
    names = list(SETTINGS) if settings is None else list(settings)
    rd = RunDir(root, resume=True, config={"budget": asdict(b), "seeds": list(seeds), "settings": names,
                                           "definitions": {n: repr(SETTINGS[n]) for n in names}})
    torch.set_num_threads(1)
    out = []
    for seed in seeds:
        for n in names:
            for arm in ("scratch", "spt"):
                out.append(run_arm(rd.root, SETTINGS[n], seed, arm, b, log))
    atomic_write_json(rd.root / "DONE", {"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m initlab.synthetic.diagnose.run",
                                     description="Run both arms (scratch, SPT) of every diagnose validation setting "
                                                 "(docs/diagnose.md), resumable.")
    parser.add_argument("--out", type=Path, required=True, help="run folder (rerun the same command to resume)")
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)),
                        help="comma-separated seeds, run in this order (default: the preregistered seeds)")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="comma-separated setting names (default: all)")
    args = parser.parse_args(argv)
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    settings = [x for x in args.settings.split(",") if x.strip()]
    bad = [x for x in settings if x not in SETTINGS]
    if bad:
        parser.error(f"argument --settings: unknown {bad}; expected names from {list(SETTINGS)}")
    run_all(args.out, seeds, settings, log=lambda m: print(m, flush=True))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
