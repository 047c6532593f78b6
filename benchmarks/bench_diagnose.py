"""Benchmark: ``initlab diagnose`` on a base-size encoder, 64 sequences of length 512, without the SPT probe.

Builds the model from its built-in config with fresh weights (default ``builtin:bert-base``: the bert-base shape,
V = 30522, d = 768, 12 layers, 110M parameters; no download) and 64 random token-id sequences of length 512
(ids 1000-29999, seed 0; saved as ``.npy``, the format a model without a tokenizer reads), then times, interleaved
in the same run (:func:`_timing.interleaved`, ``--repeats`` rounds, order rotated each round):

* ``diagnose``  -- the library call behind the command (:func:`initlab.diagnose.diagnose`: read the file, build
                   the model, label-loss and masked-reconstruction passes with eager attention and captured score
                   gradients, all statistics), the quantity with the 60 s target;
* ``fwd_bwd``   -- one forward and backward pass of the same architecture (same weights, the library's default
                   attention kernel, masked-LM loss on the same 64 x 512 batch), the least one training step costs.
                   Both sides run the batch in micro-batches of ``--micro`` sequences (the full batch's eager
                   attention maps would not fit in memory: 12 layers x 64 x 12 x 512² floats each).

The figure is the per-round ratio diagnose / fwd_bwd (median, quartiles, range).

Usage: ``python benchmarks/bench_diagnose.py [--model builtin:bert-base] [--threads 2] [--batch 64] [--length 512]
[--micro 8] [--repeats 1] [--out results.json]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import interleaved, load_average  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="builtin:bert-base")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--length", type=int, default=512)
    ap.add_argument("--micro", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    import torch.nn.functional as F

    from initlab.diagnose import diagnose
    from initlab.diagnose.models import load_backend

    ids = np.random.default_rng(0).integers(1000, 30000, size=(args.batch, args.length))
    ref = load_backend(args.model, seed=0).model
    ref.config._attn_implementation = "sdpa"  # the default kernel a training step would use
    ref.train()
    x = torch.from_numpy(ids)
    g = torch.Generator().manual_seed(0)
    masked = torch.rand(x.shape, generator=g) < 0.15

    def fwd_bwd() -> None:
        for s in range(0, args.batch, args.micro):
            out = ref(input_ids=x[s: s + args.micro]).logits
            m = masked[s: s + args.micro]
            loss = F.cross_entropy(out[m], x[s: s + args.micro][m], reduction="sum") / int(masked.sum())
            loss.backward()
        ref.zero_grad(set_to_none=True)

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "ids.npy"
        np.save(data, ids)

        def run_diagnose():
            return diagnose(args.model, data, batch_size=args.batch, max_length=args.length, micro=args.micro)

        cmp = interleaved({"fwd_bwd": fwd_bwd, "diagnose": run_diagnose}, baseline="fwd_bwd", repeats=args.repeats,
                          warmup=args.warmup)
    r = cmp.results["diagnose"]
    print(f"{args.model}, {args.batch} x {args.length} tokens, {args.threads} threads, micro-batches of {args.micro}, "
          f"load average {cmp.load_start} -> {cmp.load_end}")
    print(cmp.table())
    print(f"verdict of the diagnosis: {r['prediction']['verdict']}")
    if args.out is not None:
        rec = cmp.to_json()
        rec.update(model=args.model, batch=args.batch, length=args.length, threads=args.threads, micro=args.micro,
                   first_layer_label_share=r["measure"]["layers"][0]["label_share"], load_now=load_average())
        args.out.write_text(json.dumps(rec, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
