"""GPU check: training throughput, peak memory and model FLOP utilisation for ListOps and Image.

``python -m initlab.realdata.lra.gpu_check`` (about 1-3 minutes on one modern GPU; budget: 8 minutes)
times fine-tuning steps (classification) and SPT steps (masked reconstruction) of the Amos et al.
2024 Transformer sizes (the run files of :data:`initlab.realdata.lra.config.TASKS`) on random tokens at the full
task length (ListOps T = 2000, Image T = 1024), with bf16 autocast, and prints per case

    tokens/s, peak memory (GiB), achieved TFLOP/s, MFU = achieved / assumed bf16 dense peak.

FLOPs are counted analytically (:func:`initlab.realdata.lra.model.flops_per_sequence`, training =
3 x forward). The assumed peaks (dense bf16, no sparsity, vendor data sheets) are in
:data:`PEAK_BF16_TFLOPS`, matched by substring of ``torch.cuda.get_device_name()``; an unknown device
prints MFU as n/a unless ``--peak-tflops`` is given. ``--dry-run`` runs tiny sizes on CPU (fp32) so the
script is tested without a GPU; its MFU is not meaningful.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F

from initlab.experiment.options import int_at_least, positive_float
from initlab.realdata.timing import time_steps

__all__ = ["PEAK_BF16_TFLOPS", "assumed_peak", "measure", "main"]

# dense bf16 tensor-core peak, TFLOP/s (NVIDIA data sheets; SXM parts unless named)
PEAK_BF16_TFLOPS = {
    "H200": 989.0, "H100 SXM": 989.0, "H100 PCIe": 756.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "L4": 121.0,
}


def assumed_peak(device_name: str) -> tuple[str, float] | None:
    """(key, TFLOP/s) of the first :data:`PEAK_BF16_TFLOPS` key contained in ``device_name`` (longest first)."""
    for key in sorted(PEAK_BF16_TFLOPS, key=len, reverse=True):
        if key.lower() in device_name.lower():
            return key, PEAK_BF16_TFLOPS[key]
    return None


def measure(task: str, mode: str, *, steps: int, warmup: int, batch_size: int | None, seq_len: int | None,
            device: str, bf16: bool, tiny: bool = False) -> dict:
    """Time ``steps`` optimizer steps of ``mode`` (``classify`` or ``masked``) on random tokens.

    Returns tokens/s, sequences/s, peak memory (GiB, CUDA only), achieved TFLOP/s, seconds.
    """
    from initlab.realdata.lra.config import task_preset
    from initlab.realdata.lra.tokens import MASK_ID, N_SPECIAL
    from initlab.realdata.lra.masking import masked_pixel_l1
    from initlab.realdata.lra.model import flops_per_sequence
    from initlab.realdata.lra.train import build_model

    cfg = task_preset(task)
    if tiny:
        cfg = replace(cfg, n_layers=1, d_model=16, n_heads=2, d_ff=32)
    T = seq_len or (cfg.max_len or {"listops": 2000, "image": 1024}[task])
    B = batch_size or cfg.batch_size
    cfg = replace(cfg, max_len=max(T, cfg.max_len or 0) if tiny else cfg.max_len, seed=0)
    model = build_model(cfg).to(device)
    model.set_stage("finetune" if mode == "classify" else "spt")
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    V = model.backbone.cfg.vocab_size
    g = torch.Generator().manual_seed(0)
    tok = torch.randint(N_SPECIAL, V, (B, T), generator=g).to(device)
    mask = torch.ones(B, T, dtype=torch.bool, device=device)
    y = torch.randint(0, model.backbone.cfg.n_classes, (B,), generator=g).to(device)
    masked = (torch.rand(B, T, generator=g) < 0.15).to(device)
    corrupted = tok.masked_fill(masked, MASK_ID)
    use_cuda = device.startswith("cuda")
    ctx = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if (use_cuda and bf16) else (lambda: torch.autocast("cpu", enabled=False))

    def step():
        with ctx():
            if mode == "classify":
                loss = F.cross_entropy(model(tok, mask, mode="classify").float(), y)
            elif cfg.spt_loss == "l1":  # Image preset: masked-pixel L1 through the d -> 1 pixel head
                loss = masked_pixel_l1(model(corrupted, mask, mode="pixel"), tok, masked)[0]
            else:
                logits = model(corrupted, mask, mode="masked")
                loss = F.cross_entropy(logits[masked].float(), tok[masked])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    timed = time_steps(step, steps, warmup=warmup, use_cuda=use_cuda)
    dt = timed.seconds
    head = "classify" if (mode == "masked" and cfg.spt_loss == "l1") else mode  # pixel head: 2d per token, not 2dV
    flops = flops_per_sequence(model.backbone.cfg, T, head=head, training=True) * B * steps
    return {"task": task, "mode": mode, "batch_size": B, "T": T, "n_layers": cfg.n_layers, "d_model": cfg.d_model,
            "steps": steps, "seconds": dt, "tokens_per_s": B * T * steps / dt, "sequences_per_s": B * steps / dt,
            "peak_mem_gib": timed.peak_mem_gib,
            "achieved_tflops": flops / dt / 1e12}


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    p = argparse.ArgumentParser(prog=prog or "python -m initlab.realdata.lra.gpu_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--dry-run", action="store_true", help="tiny sizes on CPU (for tests); MFU meaningless")
    p.add_argument("--steps", type=int_at_least(1), default=None,
                   help="timed steps per case, an integer >= 1 (default 20; dry run 2)")
    p.add_argument("--peak-tflops", type=positive_float, default=None, help="override the assumed bf16 peak (TFLOP/s > 0)")
    p.add_argument("--json", type=Path, default=None, help="also write the measurements here")
    args = p.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        p.error("no CUDA device; use --dry-run for the CPU smoke test")
    device = "cpu" if args.dry_run else "cuda"
    name = "cpu (dry run)" if args.dry_run else torch.cuda.get_device_name()
    if args.peak_tflops is not None:
        peak = ("--peak-tflops", args.peak_tflops)
    else:
        peak = None if args.dry_run else assumed_peak(name)
    print(f"device: {name}; assumed bf16 peak: " + (f"{peak[1]:.0f} TFLOP/s ({peak[0]})" if peak else "n/a"), flush=True)
    steps = args.steps or (2 if args.dry_run else 20)
    rows = []
    for task in ("listops", "image"):
        for mode in ("classify", "masked"):
            r = measure(task, mode, steps=steps, warmup=1 if args.dry_run else 3, batch_size=2 if args.dry_run else None,
                        seq_len=64 if args.dry_run else None, device=device, bf16=not args.dry_run, tiny=args.dry_run)
            r["mfu"] = r["achieved_tflops"] / peak[1] if peak else None
            rows.append(r)
            mem = f"{r['peak_mem_gib']:.2f} GiB" if r["peak_mem_gib"] is not None else "n/a"
            mfu = f"{100 * r['mfu']:.1f} %" if r["mfu"] is not None else "n/a"
            print(f"{task:<8} {mode:<8} B={r['batch_size']:<3} T={r['T']:<5} {r['tokens_per_s']:>12,.0f} tokens/s  "
                  f"peak mem {mem:>10}  {r['achieved_tflops']:.3f} TFLOP/s  MFU {mfu}", flush=True)
            if device == "cuda":
                torch.cuda.empty_cache()
    if args.json:
        from initlab.runs import atomic_write_json

        atomic_write_json(args.json, {"device": name, "peak": peak, "rows": rows})
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
