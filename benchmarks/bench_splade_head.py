"""Benchmark: the fused SPLADE head against sentence-transformers' path, interleaved in one run, with the matmul floor.

For each shape ``(B, T, d, V)``: ``H`` ``(B, T, d)`` (the head transform's output), ``W`` ``(V, d)`` and ``b``
``(V,)``, float32, an attention mask with the last quarter of the tokens of every other text padded. Three cases,
timed with :func:`_timing.interleaved` (rounds, the order rotated each round, CPU seconds of this process with
one torch thread), ratios taken within each round:

* ``fused``   -- :func:`initlab.mlmhead.fused.splade_max_pool` forward and backward (gradients on H, W and b);
* ``st``      -- sentence-transformers' path: the logits ``torch.nn.functional.linear(H, W, b)`` (what the
  decoder ``nn.Linear`` computes), its ``SpladePooling`` module (max, relu, training mode), backward;
* ``matmul``  -- ``H @ W^T`` alone, forward, no bias: the arithmetic floor of the head.

Peak memory of ``fused`` and ``st`` (one extra call each, outside the timing): torch's profiler with
``profile_memory=True`` records every CPU allocation and free made while the case runs; the peak is the
largest running sum of those, i.e. the most bytes the case held at once above the inputs it was given
(its outputs and gradients included). tracemalloc cannot see torch's allocator, so it is not used. Both
sides must end holding the pooled ``(B, V)`` vector and the gradients of H, W and b (``V d`` floats for W alone,
which dominates at d = 768); the ratio of the peaks above those bytes is printed too.

The fused values are checked against the st path's in every shape (largest absolute difference printed).

Default shapes: the out-of-domain synthetic SPLADE (documents B 32, T 104; queries B 32, T 16; d 64, the
synthetic families' width) at V = 2048, 8192 and 30522, and real-data SPLADE at d 768, V 30522 with a smaller
batch than training's 128 (documents B 8, T 256; queries B 8, T 64).

Usage::

    python benchmarks/bench_splade_head.py [--shapes 32x104x64x2048,...] [--repeats 5] [--out results.json]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import interleaved, load_average  # noqa: E402

from initlab.mlmhead.fused import splade_max_pool  # noqa: E402

#: (label, B, T, d, V)
DEFAULT_SHAPES: list[tuple[str, int, int, int, int]] = [
    *[(f"synthetic docs V={V}", 32, 104, 64, V) for V in (2048, 8192, 30522)],
    *[(f"synthetic queries V={V}", 32, 16, 64, V) for V in (2048, 8192, 30522)],
    ("realdata docs", 8, 256, 768, 30522),
    ("realdata queries", 8, 64, 768, 30522),
]


def _parse_shapes(text: str) -> list[tuple[str, int, int, int, int]]:
    out = []
    for item in text.split(","):
        try:
            B, T, d, V = (int(x) for x in item.lower().split("x"))
        except ValueError:
            raise SystemExit(f"--shapes: expected BxTxdxV items separated by commas (e.g. 32x104x64x2048), "
                             f"got {item!r}")
        out.append((item, B, T, d, V))
    return out


def _inputs(B: int, T: int, d: int, V: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(B, T, d, generator=g).requires_grad_()
    w = (torch.randn(V, d, generator=g) / d ** 0.5).requires_grad_()
    b = (0.1 * torch.randn(V, generator=g)).requires_grad_()
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1::2, T - T // 4:] = 0
    return h, w, b, mask


def _cases(h, w, b, mask):
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    pool = SpladePooling(pooling_strategy="max", activation_function="relu").train()
    go = torch.ones(h.shape[0], w.shape[0])

    def fused():
        out = splade_max_pool(h, w, b, mask)
        torch.autograd.grad(out, (h, w, b), go)
        return out.detach()

    def st():
        logits = torch.nn.functional.linear(h, w, b)
        out = pool({"token_embeddings": logits, "attention_mask": mask})["sentence_embedding"]
        torch.autograd.grad(out, (h, w, b), go)
        return out.detach()

    def matmul():
        with torch.no_grad():
            return h @ w.t()

    return {"fused": fused, "st": st, "matmul": matmul}


def peak_bytes(fn) -> int:
    """The largest number of bytes ``fn`` held at once (CPU allocations minus frees, in time order, through torch's
    profiler), above what existed before it ran."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]")
    cur = peak = 0
    for _, n in events:
        cur += n
        peak = max(peak, cur)
    return peak


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", type=_parse_shapes, default=DEFAULT_SHAPES, help="BxTxdxV items, comma-separated")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", type=Path, default=None, help="write the results as JSON here (refuses to overwrite)")
    a = p.parse_args()
    if a.out is not None and a.out.exists():
        raise SystemExit(f"--out: {a.out} exists; choose a new name (results are never overwritten)")
    torch.set_num_threads(1)
    import time

    res = {"date": datetime.date.today().isoformat(), "torch": torch.__version__, "threads": 1,
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
           "clock": "CPU seconds (time.process_time)",
           "memory": "torch profiler, profile_memory=True (peak running sum)",
           "command": " ".join(["python"] + sys.argv), "shapes": []}
    print(f"load average {load_average()}; torch {torch.__version__}, 1 thread; CPU seconds; {a.repeats} rounds",
          flush=True)
    for label, B, T, d, V in a.shapes:
        h, w, b, mask = _inputs(B, T, d, V)
        cases = _cases(h, w, b, mask)
        cmp = interleaved(cases, baseline="fused", repeats=a.repeats, warmup=1, clock=time.process_time)
        diff = (cmp.results["fused"] - cmp.results["st"]).abs().max().item()
        mem = {n: peak_bytes(cases[n]) for n in ("fused", "st")}
        # what both sides must hold at the end: the pooled (B, V) vector and the gradients of H, W and b
        floor = 4 * (B * V + B * T * d + V * d + V)
        work = {n: mem[n] - floor for n in mem}
        summ = cmp.summary()
        st_over_fused = summ["st"]["ratio_to_fused"]
        fused_over_mm = sorted(f / m for f, m in zip(cmp.seconds["fused"], cmp.seconds["matmul"]))
        fmm = fused_over_mm[len(fused_over_mm) // 2]
        row = {"label": label, "B": B, "T": T, "d": d, "V": V, **cmp.to_json(),
               "fused_over_matmul_median": fmm, "fused_over_matmul": fused_over_mm,
               "peak_bytes": mem, "memory_ratio_st_over_fused": mem["st"] / mem["fused"],
               "output_and_gradient_bytes": floor, "peak_above_outputs_bytes": work,
               "memory_ratio_above_outputs": work["st"] / work["fused"] if work["fused"] > 0 else None,
               "max_abs_diff_fused_vs_st": diff,
               "targets": {"fused_within_3x_matmul": fmm <= 3.0, "memory_10x_lower": mem["st"] >= 10 * mem["fused"]}}
        res["shapes"].append(row)
        print(f"{label:<26} B={B:<3} T={T:<4} d={d:<4} V={V:<6} fused {summ['fused']['seconds']['median']:.4f} s, "
              f"st {summ['st']['seconds']['median']:.4f} s, matmul {summ['matmul']['seconds']['median']:.4f} s | "
              f"st/fused {st_over_fused['median']:.2f} [IQR {st_over_fused['q1']:.2f}-{st_over_fused['q3']:.2f}], "
              f"fused/matmul {fmm:.2f} | peak MiB fused {mem['fused'] / 2**20:.1f}, st {mem['st'] / 2**20:.1f} "
              f"(st/fused {mem['st'] / mem['fused']:.1f}; above the outputs' {floor / 2**20:.1f}: "
              f"{row['memory_ratio_above_outputs'] or float('nan'):.1f}) | max |diff| {diff:.1e} | "
              f"load {cmp.load_end[0]}",
              flush=True)
    res["loadavg_end"] = load_average()
    if a.out is not None:
        from initlab.runs import atomic_write_json

        atomic_write_json(a.out, res)
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
