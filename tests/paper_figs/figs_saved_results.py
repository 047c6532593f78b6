"""Small hand-written result folders shaped like what each experiment saves (the figures only read them)."""

from __future__ import annotations

import csv
import json

import numpy as np


def _attn(T: int, width: float, rng) -> np.ndarray:
    i = np.arange(T)
    logits = -np.abs(i[:, None] - i[None, :]) / width + 0.1 * rng.standard_normal((T, T))
    A = np.exp(logits)
    return A / A.sum(1, keepdims=True)


SPT_CONDITIONS = ("scratch", "spt", "frozen_attn", "hybrid_qk", "hybrid_ffn", "spt_e1", "spt_e2", "cross_count",
                  "attn_scratch", "attn_spt")
_SPT_CACHE: dict[tuple, str] = {}


def write_spt_run(root, seeds=(7301, 7302, 7303), T: int = 16):
    """A finished ``initlab synthetic spt`` run folder (metrics.json, verdicts.json, history.csv, maps/, cells/):
    a real run of a tiny config (T = ``T``, 8-wide model, a few epochs), made once per test process and copied,
    so the figures read exactly what the experiment writes."""
    import shutil
    import tempfile
    from pathlib import Path

    from initlab.config import derive
    from initlab.synthetic import spt
    from initlab.synthetic.spt.tasks import TaskConfig

    key = (tuple(seeds), T)
    if key not in _SPT_CACHE:
        cfg = derive(spt.BASE, seeds=tuple(seeds), task=TaskConfig(T=T), n_train=32, n_val=16, n_test=32, d_model=8,
                     d_ff=8, batch_size=16, finetune_max_epochs=3, finetune_patience=2, spt_max_epochs=4, spt_window=2,
                     spt_sweep_epochs=(1, 2), depths=(1,), probe_size=4, conditions=SPT_CONDITIONS)
        out = Path(tempfile.mkdtemp(prefix="figs_spt_")) / "run"
        spt.run(cfg, out, progress=False, workers=1)
        _SPT_CACHE[key] = str(out)
    shutil.copytree(_SPT_CACHE[key], root)
    return root


def write_theory(root):
    """t2/t4/t6/t7 JSON of the theory stage."""
    root.mkdir(parents=True, exist_ok=True)
    t2 = [{"T": T, "w": w, "mean_ratio": 0.5 * w / T ** 0.5, "max_ratio": 0.9 * w / T ** 0.5, "bound": w / T ** 0.5}
          for w in (1, 2, 4) for T in (8, 32, 128, 512)]
    t4 = [{"p": p, "closed_form": p * 0.3, "mc_linear": p * 0.3 + 0.01, "mc_linear_se": 0.01, "mc_ce": p * 0.28,
           "mc_ce_se": 0.01} for p in (0.0, 0.2, 0.4, 0.6, 0.8)]
    t6 = [{"n": n, "blind_fraction": 0.3 / n ** 0.5, "per_mask_median": 0.28} for n in (1, 4, 16, 64, 256)]
    t7 = [{"label": lab, "min": 0.1, "median": 0.4, "max": 0.7} for lab in
          ("depth 1", "depth 2, residual", "depth 2, residual, FFN", "depth 4, residual, FFN, LayerNorm")]
    for name, rows in (("t2_curve", t2), ("t4_curve", t4), ("t6_dropout", t6), ("t7_table", t7)):
        (root / f"{name}.json").write_text(json.dumps(rows))
    return root


def score_scale_rows():
    from initlab.paper_figs.score_scale_figures import PANELS

    return [{"sigma": s, "k": k, **{f"{p}_{key}": (s / k) ** 2 + 0.1 for p in ("th", "mc") for key, _, _ in PANELS},
             **{f"mc_{key}_se": 0.01 for key, _, _ in PANELS}} for s in (1.0, 4.0, 16.0) for k in (1, 2, 4, 8, 16, 32)]


FAMILIES = ("bert", "roberta", "albert", "modernbert")


def write_phase(root):
    """phase.json and theory.json of ``initlab synthetic splade``."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    rows, theory = [], []
    for fam in FAMILIES:
        for mode, ks in (("tied", (1.0, 2.0, 4.0, 16.0, 64.0)), ("k_output", (1.0, 4.0, 16.0))):
            for s in (0.25, 1.0, 16.0):
                for k in ks:
                    collapsed = s / k < 0.01
                    cell = f"{fam}_{mode}_s={s:g}_k={k:g}"
                    init = 3.5 * (1 + s / k)
                    rows.append({"family": fam, "mode": mode, "seed": 0, "s": s, "k": k, "cell": cell, "h": s / k,
                                 "ndcg@10": 0.0 if collapsed else float(0.6 + 0.3 * rng.random()), "failed": False,
                                 "collapsed": collapsed, "init_infonce": init, "final_infonce": 0.5 + init / 10})
                    theory.append({"family": fam, **{f"predicted_{q}": v for q, v in
                                                     (("infonce", init), ("active_fraction", 1.0), ("flops", 290.0))},
                                   **{f"measured_{q}": v * (0.5 + 0.4 * rng.random()) for q, v in
                                      (("infonce", init), ("active_fraction", 1.0), ("flops", 290.0))}})
    # recommended_k.csv rows of the natural-norm runs: per (family, s, seed) the best k and each rule's k and regret
    rec = [{"family": f, "s": s, "seed": 0, "best_k": b, **{f"k_{rule}": k for rule, k in zip(("inspect", "bert", "edge"), ks_)},
            **{f"regret_{rule}": reg for rule, reg in zip(("inspect", "bert", "edge"), (0.01, 0.03, 0.0))}}
           for f in FAMILIES for s, b, ks_ in ((0.25, 1.0, (1.0, 1.0, 1.0)), (1.0, 2.0, (4.0, 2.0, 2.0)),
                                                (16.0, 64.0, (64.0, 16.0, 16.0)))]
    cfg = {"seeds": [0], "modes": ["tied", "k_output"], "families": list(FAMILIES), "init_batch": 32, "steps": 150,
           "ks": [1.0, 2.0, 4.0, 16.0, 64.0]}
    (root / "phase.json").write_text(json.dumps({"config": cfg, "rows": rows, "recommended": rec,
                                                 "regret": {"hit_rate": 0.5, "mean_regret": 0.01},
                                                 "regret_edge": {"hit_rate": 0.33, "mean_regret": 0.02}}))
    (root / "theory.json").write_text(json.dumps({"rows": theory}))
    return root


def write_lra(root):
    """results.json of ``initlab lra sweep`` and the summary.json of the CPU ListOps plateau experiment."""
    root.mkdir(parents=True, exist_ok=True)
    rows = [{"condition": c, "seed": s, "init": i, "init_groups": g, "task": "listops", "spt_task": t,
             "test_acc": a + 0.01 * s, "failed": False}
            for c, i, g, t, a in (("init-all", "spt", "all", "listops", 0.38), ("init-qk", "spt", "qk", "listops", 0.37),
                                  ("other-task-data", "spt", "all", "image", 0.36), ("scratch", "scratch", "all", "", 0.36))
            for s in range(3)]
    rows.append({"condition": "init-qk", "seed": 3, "init": "spt", "test_acc": float("nan"), "failed": True})
    (root / "results.json").write_text(json.dumps({"ablation": "hybrid", "rows": rows}))
    per_seed = [{"seed": s, "spt_test_acc": a, "scratch_test_acc": b, "prox_init_spt": p, "prox_init_scratch": 0.274,
                 "uniform_proximity": 0.2737} for s, a, b, p in ((10, 0.39, 0.37, 0.29), (11, 0.351, 0.365, 0.31),
                                                                 (12, 0.386, 0.353, 0.33))]
    (root / "summary.json").write_text(json.dumps({"per_seed": per_seed, "verdict": "no difference detected",
                                                   "proximity_verdict": "no proximity bias at fine-tuning start"}))
    return root


def write_splade_scale(root):
    """summary.json of ``initlab splade sweep`` and one cell's loss_curve.csv."""
    root.mkdir(parents=True, exist_ok=True)
    rows = [{"backbone": bb, "k": k, "nanobeir_flops": 30.0 / k + 3 * i + 1, "nanobeir_nDCG@10": 0.3 + 0.01 * k ** 0.5 + 0.1 * i}
            for i, bb in enumerate(["bert-base-uncased", "answerdotai/ModernBERT-base", "FacebookAI/roberta-base"])
            for k in (1, 2, 4, 8, 16, 32)]
    (root / "summary.json").write_text(json.dumps(rows))
    cell = root / "bert__k1"
    cell.mkdir()
    with open(cell / "loss_curve.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["step", "loss", "base_loss", "query_regularizer_loss", "document_regularizer_loss"])
        for s in range(0, 100, 10):
            w.writerow([s, 3.0 - s / 50 + 0.2, 3.0 - s / 50, 0.05, 0.15])
    return root
