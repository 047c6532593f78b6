"""Benchmark: ``initlab mlmhead inspect`` on a base-size (110M-parameter) BERT checkpoint, 2 CPU threads.

Builds a randomly initialised ``BertForMaskedLM`` with the bert-base-uncased shape (V = 30522,
d = 768, 12 layers; no download), saves it with a 30522-entry WordPiece tokenizer to a temporary
folder, then times, in the same run:

* ``inspect``   -- the full command (load from disk, 40 default texts, 6 rescaled forward passes and
                   all statistics), the quantity with the 30 s target;
* ``reference`` -- loading the same checkpoint and one plain forward pass on the same texts (the
                   least any inspection must do), for the ratio.

Usage: ``python benchmarks/bench_inspect.py [--threads 2] [--repeats 1]``. Prints seconds and the ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import tempfile
import time
from pathlib import Path

import torch


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


def time_inspect(path: Path) -> float:
    from initlab.commands.mlmhead import inspect_main

    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        rc = inspect_main([str(path)])
    dt = time.perf_counter() - t0
    if rc != 0:
        raise RuntimeError("inspect failed")
    return dt


def time_reference(path: Path) -> float:
    from initlab.mlmhead import default_texts, load_masked_lm

    t0 = time.perf_counter()
    model, tok = load_masked_lm(path)
    enc = tok(default_texts(), padding=True, truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"])
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    parser.add_argument("--repeats", type=int, default=1, help="timed repetitions (median reported)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        n_params = build_checkpoint(tmp)
        print(f"built random bert-base masked LM: {n_params / 1e6:.1f}M parameters in {time.perf_counter() - t0:.1f} s")
        path = tmp / "bert-base-random"
        ins = [time_inspect(path) for _ in range(args.repeats)]
        ref = [time_reference(path) for _ in range(args.repeats)]
    t_ins, t_ref = statistics.median(ins), statistics.median(ref)
    print(f"threads {args.threads}, repeats {args.repeats}")
    print(f"inspect (load + 40 texts x 6 k): {t_ins:.2f} s   target 30 s   {'PASS' if t_ins <= 30 else 'FAIL'}")
    print(f"reference (load + 1 forward):    {t_ref:.2f} s")
    print(f"ratio inspect / reference:       {t_ins / t_ref:.2f}")
    return 0 if t_ins <= 30 else 1


if __name__ == "__main__":
    raise SystemExit(main())
