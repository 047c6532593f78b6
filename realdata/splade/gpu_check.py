"""GPU check: a short real SPLADE training + evaluation, with throughput and peak memory.

``python -m initlab.realdata.splade.gpu_check`` on a machine with a GPU and the backbone, the MS MARCO
training triples (ir_datasets cache) and NanoBEIR (Hugging Face cache) already downloaded. It trains
``--steps`` steps of the paper recipe (global batch 128 by default) on ``--backbone`` at ``--k``,
evaluates on two NanoBEIR sets, and prints samples/s, tokens/s and peak GPU memory. Default sizes are
chosen to finish within 8 minutes on one recent GPU; a wall-clock guard stops after ``--budget-s``.

``--tiny`` is a dry run on CPU: the tiny in-process BERT and the fixture files (``--data-root``), for tests.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Sequence

import torch

from initlab.config import derive
from initlab.experiment.options import int_at_least, positive_float

from .config import RECIPE, cell_config

__all__ = ["run_gpu_check", "main"]

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "realdata" / "fixtures" / "splade"


def run_gpu_check(*, backbone: str = "bert", k: float = 1.0, steps: int = 300, batch: int = 128, tiny: bool = False,
                  data_root: str = "", out: Path | None = None, budget_s: float = 480.0,
                  nano_sets: Sequence[str] = ("NanoSciFact", "NanoNFCorpus")) -> dict:
    """Run the check and return its measurements (see module docstring)."""

    from .data import load_eval_set
    from .evaluate import evaluate_set
    from .modeling import load_splade
    from .train import train_splade

    t_start = time.perf_counter()
    if tiny:
        root = Path(data_root) if data_root else FIXTURES
        base = derive(RECIPE, tiny_model="bert", max_steps=steps, global_batch_size=batch, warmup_steps=0,
                      logging_steps=1, save_steps=10_000, bf16=False, query_max_length=16, doc_max_length=32,
                      train_source=str(root / "msmarco" / "triples.train.small.tsv"), data_root=str(root),
                      eval_sets=(), beir=False, nanobeir=False, top_k=10)
        sets = ["nano:NanoSciFact"]
    else:
        if not torch.cuda.is_available():
            raise RuntimeError("gpu_check: no CUDA device (use --tiny for a CPU dry run)")
        base = derive(RECIPE, max_steps=steps, global_batch_size=batch, warmup_steps=min(100, steps // 10),
                      logging_steps=max(1, steps // 20), save_steps=10_000, train_limit=steps * batch,
                      data_root=data_root, eval_sets=(), beir=False, nanobeir=False, top_k=100)
        sets = [f"nano:{n}" for n in nano_sets]
    cfg = cell_config(base, backbone, k)
    out = Path(out) if out else Path(tempfile.mkdtemp(prefix="splade_gpu_check_"))
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    res = train_splade(cfg, out, overwrite=True, progress=True)
    train_s = res.get("train_runtime_s") or float("nan")
    samples_s = res.get("train_samples_per_second") or float("nan")
    # Tokens per triple (query + positive + negative, truncated as in training), measured on the training texts.
    from .train import load_training_triples

    cols = load_training_triples(cfg)
    model = load_splade(out / "model", device="cuda" if torch.cuda.is_available() else "cpu")
    tok = model[0].tokenizer
    n = min(len(cols["query"]), 512)
    lens = [len(tok(cols["query"][i], truncation=True, max_length=cfg.query_max_length)["input_ids"]) +
            len(tok(cols["positive"][i], truncation=True, max_length=cfg.doc_max_length)["input_ids"]) +
            len(tok(cols["negative"][i], truncation=True, max_length=cfg.doc_max_length)["input_ids"]) for i in range(n)]
    tokens_per_triple = sum(lens) / max(n, 1)
    evals = []
    for s in sets:
        if time.perf_counter() - t_start > budget_s:
            print(f"budget of {budget_s:.0f} s reached: skipping evaluation of {s}")
            continue
        ds = load_eval_set(s, data_root=cfg.data_root or None)
        evals.append(evaluate_set(model, ds, top_k=cfg.top_k, batch_size=cfg.eval_batch_size))
    peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else float("nan")
    report = {
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "backbone": cfg.backbone if not tiny else "tiny-bert", "k": cfg.k, "steps": res.get("steps"),
        "global_batch": cfg.global_batch_size, "train_s": train_s, "samples_per_s": samples_s,
        "tokens_per_s": samples_s * tokens_per_triple, "tokens_per_triple": tokens_per_triple,
        "peak_memory_GiB": peak, "final_loss": res.get("final_loss"),
        "eval": [{k: r[k] for k in ("set", "nDCG@10", "flops", "q_active", "d_active", "collapsed", "encode_s")} for r in evals],
        "total_s": time.perf_counter() - t_start, "out": str(out),
    }
    return report


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    p = argparse.ArgumentParser(prog=prog or "python -m initlab.realdata.splade.gpu_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--backbone", default="bert")
    p.add_argument("--k", type=positive_float, default=1.0, help="MLM-head rescaling factor, a number > 0 (default 1)")
    p.add_argument("--steps", type=int_at_least(1), default=300, help="training steps, an integer >= 1 (default 300)")
    p.add_argument("--batch", type=int_at_least(1), default=128, help="global batch (triples per step), an integer >= 1")
    p.add_argument("--data-root", default="", help="local data folder (else ir_datasets / hub caches)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--budget-s", type=positive_float, default=480.0,
                   help="skip remaining evaluation after this many seconds (a number > 0)")
    p.add_argument("--tiny", action="store_true", help="CPU dry run: tiny in-process model on the fixture files")
    args = p.parse_args(argv)
    if not args.tiny and not torch.cuda.is_available():
        p.error("no CUDA device (torch.cuda.is_available() is False); use --tiny for the CPU dry run")
    rep = run_gpu_check(backbone=args.backbone, k=args.k, steps=args.steps, batch=args.batch, tiny=args.tiny,
                        data_root=args.data_root, out=args.out, budget_s=args.budget_s)
    print(f"samples/s {rep['samples_per_s']:.1f}  tokens/s {rep['tokens_per_s']:.0f}  peak memory {rep['peak_memory_GiB']:.2f} GiB  "
          f"total {rep['total_s']:.0f} s")
    print(json.dumps(rep, indent=2, default=str))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
