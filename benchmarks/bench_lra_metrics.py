"""Benchmark: end-of-run attention metrics vs the toy run they measure (target: metrics / training <= 0.10).

A toy pixel-task run at full length (T = 1024: generated CIFAR-layout images, 1 layer, d = 16, 2 heads,
the size at which the metrics used to cost 233 s for 6 sequences against 28 s of training) is
fine-tuned with metrics off; then the metrics a fine-tune computes (at fine-tuning start and on the
best checkpoint, ``--sequences`` validation sequences each) are timed on the same run. Also prints the
fast relative-position score beside the reference (pseudo-inverse) one on one ``(H, T_ref, T_ref)`` map.

    python benchmarks/bench_lra_metrics.py [--sequences 6] [--epochs 3] [--train 200] [--t-ref 128]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from initlab.realdata.lra.config import task_preset
from initlab.realdata.lra.metrics import attention_metrics, relative_position_score_fast
from initlab.realdata.lra.pixel_fixture import write_cifar_like
from initlab.realdata.lra.evaluation import attention_metrics_on
from initlab.realdata.lra.train import build_model, finetune, load_data, single_inputs
from initlab.nn.attention_metrics import relative_position_score


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sequences", type=int, default=6)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--train", type=int, default=200, help="training images (before the 10 %% validation holdout)")
    p.add_argument("--t-ref", type=int, default=128, help="length of the map timed with the reference score")
    args = p.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        data = write_cifar_like(Path(tmp) / "cifar", n_per_batch=max(1, args.train // 5), n_test=40)
        cfg = replace(task_preset("image"), data_dir=str(data), n_layers=1, d_model=16, n_heads=2, d_ff=32,
                      batch_size=16, warmup_steps=10, epochs=args.epochs, init="scratch", bf16=False, cpu_threads=1,
                      device="cpu", metrics_examples=0, spt_loss="ce")
        t0 = time.perf_counter()
        finetune(cfg, Path(tmp) / "ft", progress=False)
        train_s = time.perf_counter() - t0
        cfg = replace(cfg, metrics_examples=args.sequences)
        val = load_data(cfg).val
        t0 = time.perf_counter()
        attention_metrics(build_model(cfg), single_inputs(val), args.sequences)  # at fine-tuning start
        res = attention_metrics_on(Path(tmp) / "ft" / "best.safetensors", cfg, val)  # on the best checkpoint
        metrics_s = time.perf_counter() - t0
    g = torch.Generator().manual_seed(0)
    S = torch.randn(2, args.t_ref, args.t_ref, generator=g, dtype=torch.float64)
    t0 = time.perf_counter()
    ref = relative_position_score(S)
    ref_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    fast = relative_position_score_fast(S)
    fast_s = time.perf_counter() - t0
    ratio = metrics_s / train_s
    print(f"toy image run, T = 1024, 1 layer, d = 16: training {train_s:.1f} s ({args.epochs} epochs); metrics "
          f"{metrics_s:.2f} s (2 x {res['n_sequences']} sequences, {len(res['layers'])} layer)")
    print(f"ratio metrics / training = {ratio:.3f} (target <= 0.10): {'PASS' if ratio <= 0.10 else 'FAIL'}")
    print(f"relative-position score on (2, {args.t_ref}, {args.t_ref}): reference {ref_s:.3f} s, fast {fast_s:.4f} s "
          f"(first call, includes the factorisation); |difference| = {abs(ref - fast):.1e}")
    return 0 if ratio <= 0.10 else 1


if __name__ == "__main__":
    raise SystemExit(main())
