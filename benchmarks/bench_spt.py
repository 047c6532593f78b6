"""Benchmarks of the synthetic SPT training code, each a ratio measured side by side in one run.

1. ``--what overhead``: why stacking seeds into one vectorized ensemble step does not pay at these sizes (the
   ensemble fine-tuning path was removed on this measurement, docs/benchmarks.md). Times one fine-tuning step
   of one default-size model at batch sizes 1, 2, 4, 8, 16, 32, 64 (median of ``--repeats``) and fits
   ``t(B) = a + b * B`` by least squares: ``a`` is the fixed per-step cost (Python, dispatch, optimizer),
   the only part that stacking E seeds into one step saves. An ensemble's speed-up over E sequential
   steps of batch B is then at most ``E (a + b B) / (a + E b B)`` (it still does E times the arithmetic),
   printed for the default batch 64 and E = ``--seeds``.

    python benchmarks/bench_spt.py --what overhead [--seeds 5] [--repeats 20] [--threads 1]

2. ``--what step`` (default): one training step of initlab's SequenceTransformer vs torch.nn.TransformerEncoderLayer.

Same sizes (batch 64, T = 100, d = 64, 1 head, d_ff = 128, pre-norm, no dropout, one layer, embedding +
mean pooling + linear classifier, AdamW step), measured side by side in one run, interleaved, median of
``--repeats`` per-round ratios. Prints both times and the ratio (target: ours / torch <= 1.15).

    python benchmarks/bench_spt.py --what step [--repeats 30] [--batch 64] [--T 100] [--d 64] [--threads N]

The step comparison uses the shared interleaved timing of ``benchmarks/_timing.py``
(rounds of one call per side, order rotated each round, ratio per round).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import interleaved, load_average  # noqa: E402

from initlab.nn.encoder import ModelConfig, SequenceTransformer, sinusoidal_table


class TorchReference(nn.Module):
    """Embedding + sinusoidal positions + nn.TransformerEncoderLayer + mean pool + linear head."""

    def __init__(self, vocab: int, T: int, d: int, d_ff: int, heads: int):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d)
        self.register_buffer("pos", sinusoidal_table(T, d), persistent=False)
        self.layer = nn.TransformerEncoderLayer(d, heads, d_ff, dropout=0.0, activation="gelu", batch_first=True, norm_first=True)
        self.ln_f = nn.LayerNorm(d)
        self.cls_head = nn.Linear(d, 2)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.tok_emb(tokens) + self.pos[: tokens.shape[1]]
        return self.cls_head(self.ln_f(self.layer(x)).mean(dim=1))


def _step_fn(model: nn.Module, fwd):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step(tokens, labels):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(fwd(tokens), labels)
        loss.backward()
        opt.step()

    return step


def bench_overhead(n_seeds: int, repeats: int) -> None:
    V, T = 18, 100
    torch.manual_seed(0)
    model = SequenceTransformer(ModelConfig(vocab_size=V, max_len=T, d_model=32, d_ff=64))
    step = _step_fn(model, model.classify)
    sizes = (1, 2, 4, 8, 16, 32, 64)
    data = {B: (torch.randint(0, V, (B, T)), torch.randint(0, 2, (B,))) for B in sizes}
    for B in sizes:  # warm-up
        for _ in range(3):
            step(*data[B])
    times: dict[int, list[float]] = {B: [] for B in sizes}
    load_start = load_average()
    for _ in range(repeats):  # interleaved, so load changes hit every size alike
        for B in sizes:
            t0 = time.perf_counter()
            step(*data[B])
            times[B].append(time.perf_counter() - t0)
    med = {B: statistics.median(v) for B, v in times.items()}
    xs, ys = torch.tensor(sizes, dtype=torch.float64), torch.tensor([med[B] for B in sizes], dtype=torch.float64)
    b = float(((xs - xs.mean()) * (ys - ys.mean())).sum() / ((xs - xs.mean()) ** 2).sum())
    a = float(ys.mean() - b * xs.mean())
    print(f"one fine-tuning step (T={T}, d=32, d_ff=64), threads {torch.get_num_threads()}, median of {repeats}, "
          f"load average {load_start} -> {load_average()}")
    for B in sizes:
        print(f"  batch {B:>3}: {1e3 * med[B]:8.2f} ms   (fit {1e3 * (a + b * B):8.2f} ms)")
    print(f"  fit t(B) = a + b*B: a = {1e3 * a:.2f} ms per step, b = {1e3 * b:.3f} ms per sequence")
    B = 64
    print(f"  fixed cost share at batch {B}: {a / (a + b * B):.3f}")
    print(f"  ceiling on a vectorized ensemble's speed-up, E={n_seeds}, batch {B}: "
          f"{n_seeds * (a + b * B) / (a + n_seeds * b * B):.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--what", choices=("overhead", "step"), default="step")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--d-ff", type=int, default=128)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = ap.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.what == "overhead":
        bench_overhead(args.seeds, args.repeats if args.repeats != 30 else 20)
        return 0
    torch.manual_seed(0)
    V = 20
    ours = SequenceTransformer(ModelConfig(vocab_size=V, max_len=args.T, d_model=args.d, d_ff=args.d_ff))
    ref = TorchReference(V, args.T, args.d, args.d_ff, 1)
    steps = {"initlab SequenceTransformer": _step_fn(ours, ours.classify), "nn.TransformerEncoderLayer": _step_fn(ref, ref)}
    tokens = torch.randint(0, V, (args.batch, args.T))
    labels = torch.randint(0, 2, (args.batch,))
    cmp = interleaved({name: (lambda s=s: s(tokens, labels)) for name, s in steps.items()},
                      baseline="nn.TransformerEncoderLayer", repeats=args.repeats, warmup=3)
    r = cmp.summary()["initlab SequenceTransformer"]["ratio_to_nn.TransformerEncoderLayer"]
    print(f"one training step, batch {args.batch}, T={args.T}, d={args.d}, d_ff={args.d_ff}, threads {torch.get_num_threads()}, "
          f"{args.repeats} interleaved rounds, load average {cmp.load_start} -> {cmp.load_end}")
    for k, v in cmp.seconds.items():
        print(f"  {k:<28} {1e3 * statistics.median(v):8.2f} ms")
    print(f"  ratio ours / torch: {r['median']:.3f} (per-round IQR {r['q1']:.3f}-{r['q3']:.3f})  (target <= 1.15)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
