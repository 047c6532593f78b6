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

3. ``--what paths``: the attention paths at the synthetic SPT experiments' own model (``model_config`` of
   the default ``SPTConfig``: d = 32, d_ff = 64, T = 100, batch 64, pre-norm, ``--layers`` layers), one
   training step each, interleaved in one run: the training path (``torch.nn.functional.scaled_dot_product_attention``,
   ``sdpa``), the explicit-softmax reference path that returns attention maps (``explicit``), both again with
   the ALiBi arm's distance bias (``alibi_slope`` of the config, passed to SDPA as ``attn_mask``), torch's
   ``nn.TransformerEncoderLayer`` of the same size, and a square float32 matmul of side ``--matmul-n`` whose
   speed (``2 n^3`` FLOP per call) is the arithmetic limit of the same run. Each step's FLOP are the
   matmul FLOP of forward and backward (:func:`step_flops`, 3 x the forward's); the fraction of the
   limit is ``step_flops / (step time x matmul FLOP/s)``.

    python benchmarks/bench_spt.py --what paths [--repeats 30] [--layers 1] [--matmul-n 1024] [--threads 1]

4. ``--what batched``: the training loops of the synthetic SPT cells, one seed after another (the reference,
   :func:`initlab.synthetic.spt.training.pretrain` and :func:`~initlab.synthetic.spt.training.finetune`) against the
   same ``--seeds`` seeds trained as one batched model (:mod:`initlab.synthetic.spt.batched`), at the ``default``
   preset's sizes (``--preset``), ``--epochs`` epochs of each (everything the loop does: batches, masks, guard,
   optimiser, validation; fine-tuning also its test-set passes at the start and end), interleaved in rounds. Prints
   each side's training steps per second (model-steps: seeds x epochs x steps per epoch over the time) and the
   per-round speed-up (one-at-a-time time / batched time). Run it with ``OMP_NUM_THREADS=1``, as the workers run.

    OMP_NUM_THREADS=1 python benchmarks/bench_spt.py --what batched [--seeds 5] [--epochs 2] [--repeats 5] [--threads 1]

The comparisons use the shared interleaved timing of ``benchmarks/_timing.py``
(rounds of one call per side, order rotated each round, ratio per round).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import quantiles, interleaved, load_average  # noqa: E402

from initlab.nn.encoder import ModelConfig, SequenceTransformer, sinusoidal_table
from initlab.synthetic.spt.config import SPTConfig, model_config


class TorchReference(nn.Module):
    """Embedding + sinusoidal positions + ``n_layers`` x nn.TransformerEncoderLayer + mean pool + linear head."""

    def __init__(self, vocab: int, T: int, d: int, d_ff: int, heads: int, n_layers: int = 1):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d)
        self.register_buffer("pos", sinusoidal_table(T, d), persistent=False)
        make = lambda: nn.TransformerEncoderLayer(d, heads, d_ff, dropout=0.0, activation="gelu", batch_first=True,  # noqa: E731
                                                  norm_first=True)
        self.layer = make() if n_layers == 1 else nn.Sequential(*(make() for _ in range(n_layers)))
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


def step_flops(B: int, T: int, d: int, d_ff: int, n_layers: int = 1, n_classes: int = 2, use_ffn: bool = True) -> int:
    """Matmul FLOP of one training step (forward + backward) of :class:`SequenceTransformer` on ``(B, T)`` tokens.

    Forward, per layer: ``W_Q, W_K, W_V, W_O`` ``4 * 2 B T d^2``; scores ``Q K^T`` and ``A V`` ``2 * 2 B T^2 d``;
    FFN ``2 * 2 B T d d_ff``; then the classifier ``2 B d n_classes``. Backward costs two matmuls per forward
    matmul (gradient to the input and to the weight), so the step is 3 x the forward. The explicit path's
    count by ``torch.utils.flop_counter.FlopCounterMode`` equals this (tests/benchmarks/test_bench_spt.py);
    additions, softmax, LayerNorm and the optimizer are not counted.
    """
    layer = 4 * 2 * B * T * d * d + 2 * 2 * B * T * T * d + (2 * 2 * B * T * d * d_ff if use_ffn else 0)
    return 3 * (n_layers * layer + 2 * B * d * n_classes)


def bench_paths(repeats: int, n_layers: int, matmul_n: int) -> dict:
    """The ``--what paths`` comparison (module docstring); prints a table and returns the numbers."""
    cfg = SPTConfig()
    B, T, d, d_ff = cfg.batch_size, cfg.task.T, cfg.d_model, cfg.d_ff
    torch.manual_seed(0)
    plain = model_config(cfg, n_layers)
    alibi = model_config(cfg, n_layers, proximity_bias=cfg.alibi_slope)
    V = plain.vocab_size
    models = {"sdpa": SequenceTransformer(plain), "explicit": SequenceTransformer(plain),
              "sdpa alibi": SequenceTransformer(alibi), "explicit alibi": SequenceTransformer(alibi)}
    ref = TorchReference(V, T, d, d_ff, cfg.n_heads, n_layers)

    def explicit(m):
        def fwd(tokens):
            H, _ = m.encode(tokens, return_attn=True)
            return m.cls_head(m.pooled(H))
        return fwd

    steps = {name: _step_fn(m, explicit(m) if name.startswith("explicit") else m.classify) for name, m in models.items()}
    steps["nn.TransformerEncoderLayer"] = _step_fn(ref, ref)
    tokens = torch.randint(0, V, (B, T))
    labels = torch.randint(0, 2, (B,))
    cases = {name: (lambda s=s: s(tokens, labels)) for name, s in steps.items()}
    a, b = torch.randn(matmul_n, matmul_n), torch.randn(matmul_n, matmul_n)
    cases["matmul"] = lambda: torch.mm(a, b)
    cmp = interleaved(cases, baseline="sdpa", repeats=repeats, warmup=3)
    med = {k: statistics.median(v) for k, v in cmp.seconds.items()}
    peak = 2 * matmul_n ** 3 / med["matmul"]
    flops = step_flops(B, T, d, d_ff, n_layers, plain.n_classes)
    summ = cmp.summary()
    print(f"one training step of the synthetic SPT model, batch {B}, T={T}, d={d}, d_ff={d_ff}, {n_layers} layer(s), "
          f"threads {torch.get_num_threads()}, {repeats} interleaved rounds, load average {cmp.load_start} -> {cmp.load_end}")
    print(f"  arithmetic limit: {matmul_n}x{matmul_n} float32 matmul {peak / 1e9:.1f} GFLOP/s; "
          f"step {flops / 1e9:.3f} GFLOP -> {1e3 * flops / peak:.2f} ms at that speed")
    rows = {}
    for k in steps:
        r = summ[k]["ratio_to_sdpa"]
        rows[k] = {"ms": 1e3 * med[k], "ratio_to_sdpa": r["median"], "q1": r["q1"], "q3": r["q3"],
                   "share_of_peak": flops / (med[k] * peak)}
        print(f"  {k:<28} {1e3 * med[k]:8.2f} ms   {100 * rows[k]['share_of_peak']:5.1f} % of the limit   "
              f"time / sdpa's: {r['median']:.3f} [IQR {r['q1']:.3f}-{r['q3']:.3f}]")
    return {"gflops_per_s": peak / 1e9, "step_gflop": flops / 1e9, "rows": rows}


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


def bench_batched(n_seeds: int, epochs: int, repeats: int, preset: str = "default", cfg=None) -> dict:
    """The ``--what batched`` comparison (module docstring); prints a table and returns the numbers (``cfg``: an
    :class:`SPTConfig` instead of the preset, for tests)."""
    from initlab.synthetic.spt import batched, training
    from initlab.synthetic.spt.cells import fresh_model, seed_data, spt_inputs
    from initlab.synthetic.spt.config import PRESETS
    from initlab.synthetic.spt.tasks import MASK_ID

    cfg = PRESETS[preset] if cfg is None else cfg
    seeds = list(range(1000, 1000 + n_seeds))
    spt_data = [spt_inputs(cfg, "local", s) for s in seeds]
    ft_data = [{k: v for k, v in seed_data(cfg, s).items() if k != "probe"} for s in seeds]
    spt_kw = dict(weight_decay=cfg.weight_decay, batch_size=cfg.batch_size, mask_rate=cfg.mask_rate, mask_id=MASK_ID,
                  window=epochs + 1, min_rel=0.0, max_epochs=epochs)
    lr = 1e-2

    def spt_one():
        for s, (x, xv) in zip(seeds, spt_data):
            training.pretrain(fresh_model(cfg, 1, "full", s), x, xv, torch.Generator().manual_seed(s), s, lr=lr, **spt_kw)

    def spt_batched():
        batched.pretrain_batched([fresh_model(cfg, 1, "full", s) for s in seeds], [d[0] for d in spt_data],
                                 [d[1] for d in spt_data], [torch.Generator().manual_seed(s) for s in seeds], seeds,
                                 lrs=[lr] * n_seeds, **spt_kw)

    def ft_one():
        for s, d in zip(seeds, ft_data):
            training.finetune(fresh_model(cfg, 1, "full", s), d, torch.Generator().manual_seed(s), lr=lr,
                              weight_decay=cfg.weight_decay, batch_size=cfg.batch_size, max_epochs=epochs, patience=0)

    def ft_batched():
        batched.finetune_batched([fresh_model(cfg, 1, "full", s) for s in seeds], ft_data,
                                 [torch.Generator().manual_seed(s) for s in seeds], lrs=[lr] * n_seeds,
                                 weight_decay=cfg.weight_decay, batch_size=cfg.batch_size, max_epochs=[epochs] * n_seeds,
                                 patience=[0] * n_seeds)

    steps = n_seeds * epochs * -(-cfg.n_train // cfg.batch_size)
    cmp = interleaved({"spt one at a time": spt_one, "spt batched": spt_batched, "fine-tune one at a time": ft_one,
                       "fine-tune batched": ft_batched}, baseline="spt one at a time", repeats=repeats, warmup=1)
    print(f"synthetic SPT training loops, {n_seeds} seeds x {epochs} epochs x {steps // (n_seeds * epochs)} steps "
          f"(batch {cfg.batch_size}, T={cfg.task.T}, d={cfg.d_model}, d_ff={cfg.d_ff}), threads {torch.get_num_threads()}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, {repeats} interleaved rounds, "
          f"load average {cmp.load_start} -> {cmp.load_end}")
    rows = {}
    for kind in ("spt", "fine-tune"):
        one, bat = cmp.seconds[f"{kind} one at a time"], cmp.seconds[f"{kind} batched"]
        speedups = [a / b for a, b in zip(one, bat)]
        q = quantiles(speedups)
        rows[kind] = {"one_steps_per_s": steps / statistics.median(one), "batched_steps_per_s": steps / statistics.median(bat),
                      "speedup": q}
        print(f"  {kind:<10} one at a time {rows[kind]['one_steps_per_s']:7.1f} steps/s, batched "
              f"{rows[kind]['batched_steps_per_s']:7.1f} steps/s; speed-up {q['median']:.2f} "
              f"[IQR {q['q1']:.2f}-{q['q3']:.2f}, range {q['min']:.2f}-{q['max']:.2f}]")
    return {"rows": rows, "comparison": cmp.to_json()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--what", choices=("overhead", "step", "paths", "batched"), default="step")
    ap.add_argument("--epochs", type=int, default=2, help="--what batched: epochs of each loop")
    ap.add_argument("--preset", default="default", help="--what batched: the synthetic SPT preset whose sizes are timed")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--T", type=int, default=100)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--d-ff", type=int, default=128)
    ap.add_argument("--layers", type=int, default=1, help="--what paths: encoder depth")
    ap.add_argument("--matmul-n", type=int, default=1024, help="--what paths: side of the square matmul timed as the limit")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    args = ap.parse_args(argv)
    for name in ("repeats", "layers", "matmul_n", "batch", "T", "d", "d_ff", "seeds", "epochs"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')}: expected an int >= 1, got {getattr(args, name)}")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.what == "overhead":
        bench_overhead(args.seeds, args.repeats if args.repeats != 30 else 20)
        return 0
    if args.what == "paths":
        bench_paths(args.repeats, args.layers, args.matmul_n)
        return 0
    if args.what == "batched":
        from initlab.synthetic.spt.config import PRESETS

        if args.preset not in PRESETS:
            ap.error(f"--preset: expected one of {sorted(PRESETS)}, got {args.preset!r}")
        bench_batched(args.seeds, args.epochs, args.repeats if args.repeats != 30 else 5, args.preset)
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
