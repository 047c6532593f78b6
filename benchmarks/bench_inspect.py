"""Benchmark: ``initlab mlmhead inspect`` on a base-size (110M-parameter) BERT checkpoint, 2 CPU threads.

Builds a randomly initialised ``BertForMaskedLM`` with the bert-base-uncased shape (V = 30522,
d = 768, 12 layers; no download), saves it with a 30522-entry WordPiece tokenizer to a temporary
folder, then times, interleaved in the same run (``--repeats`` rounds of one call each, the order
rotated each round; :func:`_timing.interleaved`):

* ``inspect``   -- the full command (load from disk, 40 default texts, 6 rescaled forward passes and
                   all statistics), the quantity with the 30 s target;
* ``reference`` -- loading the same checkpoint and one plain forward pass on the same texts (the
                   least any inspection must do), for the ratio;
* ``inspect --head-engine fused`` (with ``--heads``) -- the same command pooling the SPLADE vectors through the
                   fused head instead of from the logits (the default), for what the fused path costs here.

The ratio inspect / reference is taken round by round (both sides seconds apart, under nearly the same
load) and reported as its median with quartiles and range; the 30 s target applies to the median
inspect time.

Usage: ``python benchmarks/bench_inspect.py [--threads 2] [--repeats 3] [--heads] [--out results.json]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import interleaved  # noqa: E402


def build_checkpoint(folder: Path) -> int:
    """Save a random bert-base-shaped masked LM and a 30522-token tokenizer into ``folder``; return #params."""
    from initlab.mlmhead import default_texts, tiny_masked_lm, tiny_tokenizer
    import re

    words = sorted(set(re.findall(r"[a-z]+", " ".join(default_texts()).lower())))
    filler = [f"w{i}" for i in range(30522)]
    tok = tiny_tokenizer(folder / "_tok", words + filler)
    vocab = tok.get_vocab()
    if len(vocab) > 30522:  # keep exactly bert-base's vocabulary size
        keep = sorted(vocab, key=vocab.get)[:30522]
        from transformers import BertTokenizerFast

        tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(keep)}, do_lower_case=True)
    model = tiny_masked_lm("bert", tok.vocab_size, base_size=True, seed=0)
    model.save_pretrained(folder / "bert-base-random")
    tok.save_pretrained(folder / "bert-base-random")
    return sum(p.numel() for p in model.parameters())


def run_inspect(path: Path, *extra: str) -> None:
    """The full ``initlab mlmhead inspect PATH [extra...]`` command, output discarded."""
    from initlab.app.commands.mlmhead import inspect_main

    with contextlib.redirect_stdout(io.StringIO()):
        rc = inspect_main([str(path), *extra])
    if rc != 0:
        raise RuntimeError("inspect failed")


def run_reference(path: Path) -> None:
    """Load the checkpoint and run one forward pass over the default texts."""
    from initlab.mlmhead import default_texts, load_masked_lm

    model, tok = load_masked_lm(path)
    enc = tok(default_texts(), padding=True, truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved timed rounds (default 3)")
    parser.add_argument("--warmup", type=int, default=0, help="untimed rounds first (default 0: a first, cold "
                        "load is part of what a user waits for)")
    parser.add_argument("--heads", action="store_true", help="also time inspect --head-engine fused (the default is dense)")
    parser.add_argument("--out", default=None, help="write the measurements as JSON here")
    args = parser.parse_args()
    if args.repeats < 1 or args.warmup < 0 or args.threads < 1:
        parser.error("--repeats and --threads must be >= 1, --warmup >= 0")
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        n_params = build_checkpoint(tmp)
        print(f"built random bert-base masked LM: {n_params / 1e6:.1f}M parameters in {time.perf_counter() - t0:.1f} s")
        path = tmp / "bert-base-random"
        import initlab.app.commands.mlmhead  # noqa: F401  (imports outside the timing, for both sides alike)

        cases = {"inspect": lambda: run_inspect(path), "reference": lambda: run_reference(path)}
        if args.heads:
            cases["inspect --head-engine fused"] = lambda: run_inspect(path, "--head-engine", "fused")
        cmp = interleaved(cases, baseline="reference", repeats=args.repeats, warmup=args.warmup)
    t_ins = statistics.median(cmp.seconds["inspect"])
    print(f"threads {args.threads}, {args.repeats} interleaved rounds, load average {cmp.load_start} at the start, "
          f"{cmp.load_end} at the end")
    print(cmp.table())
    print(f"inspect median {t_ins:.2f} s   target 30 s   {'PASS' if t_ins <= 30 else 'FAIL'}")
    if args.out:
        from initlab.runs import atomic_write_json

        atomic_write_json(args.out, {"command": "python benchmarks/bench_inspect.py " + " ".join(sys.argv[1:]),
                                     "date": time.strftime("%Y-%m-%d"), "threads": args.threads,
                                     "n_params": n_params, **cmp.to_json()})
    return 0 if t_ins <= 30 else 1


if __name__ == "__main__":
    raise SystemExit(main())
