"""One GPU smoke test for the real-data pipelines: ``python -m initlab.realdata.gpu_smoke``.

Needs nothing from the network: every model is randomly initialised from a config and every input is
generated. In order, within ``--budget-s`` (default 420 s, inside an 8-minute slot on one GPU):

1. ``listops-data``: LRA-size ListOps with LRA's generator (lengths 500-2000, depth <= 10, <= 10
   arguments; ``--listops-train`` training trees) written as ``basic_*.tsv`` on the machine;
2. ``lra-check``: the LRA GPU check (:func:`initlab.realdata.lra.gpu_check.measure`): fine-tuning and
   masked-SPT steps of the Amos et al. ListOps (T = 2000) and Image (T = 1024) Transformers: tokens/s,
   peak memory, achieved TFLOP/s, MFU;
3. ``splade-check``: SPLADE-max training steps (MLM logits -> ``max_t log(1 + ReLU(z))``, in-batch
   cross-entropy over query-document scores plus the FLOPS regulariser; SPLADE v2, arXiv:2109.10086,
   eqs. 6-8) on a bert-base-shaped ``BertForMaskedLM`` built from ``BertConfig()`` with random weights
   and random token ids (queries 32, documents 256 tokens): the same measurements;
   The same steps again with the fused head (``splade-check fused``: the encoder's last hidden states through
   the family's head transform, :func:`initlab.mlmhead.heads.head_input`, into
   :func:`initlab.mlmhead.fused.splade_max_pool`, which never builds the ``(B, T, V)`` logits);
4. ``splade-head``: the SPLADE head alone, forward and backward, dense (logits ``H W^T + b`` ``(B, T, V)``, then
   :func:`initlab.nn.pooling.splade_pool`) and fused, at a bert-base document batch (B = 32, T = 256, d = 768,
   V = 30522, float32, a quarter of the tokens padding): time of each, the fused/dense time ratio and
   peak-memory ratio (memory above what the inputs hold), and the largest relative difference of the vectors
   and of the gradients to H, W and b between the two;
5. ``listops-spt`` and ``listops-finetune``: one epoch each of masked SPT and of fine-tuning from that
   checkpoint at the LRA ListOps size (6 layers, d = 512, T <= 2000) on the generated data, through
   :func:`initlab.realdata.lra.train.pretrain` / ``finetune``.

Prints one table and writes it as JSON (``--json``, default ``gpu_smoke.json`` in ``--out``). A stage
that raises is reported as ``failed`` with its error and the script exits 1; stages past the budget
are ``skipped``. MFU uses the dense bf16 peak of :data:`initlab.realdata.lra.gpu_check.PEAK_BF16_TFLOPS`.
``--dry-run`` runs every stage at tiny sizes on CPU (for CI; its numbers mean nothing). Without a
CUDA device and without ``--dry-run`` it exits with status 2 and says so.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from initlab.experiment.options import int_at_least, positive_float
from initlab.realdata.timing import time_steps

__all__ = ["splade_flops_per_sequence", "splade_check", "splade_head_check", "run_smoke", "format_table", "main"]

COLUMNS = ("stage", "status", "seconds", "tokens_per_s", "peak_mem_gib", "tflops", "mfu", "note")


def splade_flops_per_sequence(cfg, T: int, training: bool = True) -> float:
    """Matmul FLOPs of one length-``T`` sequence through a BERT masked LM (``transformers.BertConfig``).

    Per layer and token ``8 d^2`` (W_Q, W_K, W_V, W_O) + ``4 T d`` (scores and A V) + ``4 d d_ff`` (FFN);
    MLM head per token ``2 d^2 + 2 d V`` (transform + decoder). Training = 3 x forward (Kaplan et al.
    2020, arXiv:2001.08361, §2.1). Embeddings, softmax and norms are ignored.
    """
    d, f, L, V = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.vocab_size
    per_tok = L * (8 * d * d + 4 * T * d + 4 * d * f) + 2 * d * d + 2 * d * V
    return float(T * per_tok * (3 if training else 1))


def splade_check(*, device: str, dry_run: bool, steps: int, peak: float | None, head: str = "dense") -> dict:
    """Time SPLADE-max training steps of a random bert-base-shaped model; returns a table row.

    ``head``: ``"dense"`` pools the model's masked-LM logits ``(B, T, V)``; ``"fused"`` sends the head transform's
    output to :func:`initlab.mlmhead.fused.splade_max_pool` (same vectors, no ``(B, T, V)`` tensor).
    Raises:
        ValueError: ``head`` is neither.
    """
    from transformers import BertConfig, BertForMaskedLM

    from initlab.mlmhead.fused import splade_max_pool
    from initlab.mlmhead.heads import head_bias, head_input, head_projection

    if head not in ("dense", "fused"):
        raise ValueError(f"head: expected 'dense' or 'fused', got {head!r}")

    cfg = (BertConfig(vocab_size=500, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                      max_position_embeddings=64) if dry_run else BertConfig())
    B, Tq, Td = (4, 8, 16) if dry_run else (32, 32, 256)
    torch.manual_seed(0)
    model = BertForMaskedLM(cfg).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    g = torch.Generator().manual_seed(0)
    q = torch.randint(5, cfg.vocab_size, (B, Tq), generator=g).to(device)
    docs = torch.randint(5, cfg.vocab_size, (2 * B, Td), generator=g).to(device)  # positives then hard negatives
    use_cuda = device.startswith("cuda")

    def term_weights(ids: torch.Tensor) -> torch.Tensor:  # (N, T) -> (N, V)
        mask = torch.ones_like(ids)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_cuda):
            if head == "dense":
                logits = model(input_ids=ids, attention_mask=mask).logits
                return torch.log1p(torch.relu(logits.float())).amax(dim=1)
            h = head_input(model, model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state)
            return splade_max_pool(h, head_projection(model), head_bias(model), mask).float()  # bf16 under autocast

    def step() -> float:
        wq, wd = term_weights(q), term_weights(docs)
        scores = wq @ wd.T  # (B, 2B): in-batch and hard negatives
        flops_reg = (wq.mean(0) ** 2).sum() * 5e-4 + (wd.mean(0) ** 2).sum() * 3e-4
        loss = F.cross_entropy(scores, torch.arange(B, device=device)) + flops_reg
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return float(loss.detach())

    return _timed(step, steps, warmup=1 if dry_run else 2, use_cuda=use_cuda,
                  tokens=B * Tq + 2 * B * Td, flops=B * splade_flops_per_sequence(cfg, Tq) + 2 * B * splade_flops_per_sequence(cfg, Td),
                  peak=peak, note=f"{head} head; L={cfg.num_hidden_layers} d={cfg.hidden_size} V={cfg.vocab_size} B={B} Tq={Tq} Td={Td}")


def splade_head_check(*, device: str, dry_run: bool, steps: int) -> list[dict]:
    """The SPLADE head alone, dense against fused, forward + backward (module docstring, stage 4); two table rows.

    Both sides get the same float32 inputs ``H (B, T, d)``, ``W (V, d)``, ``b (V,)`` and mask ``(B, T)`` and the
    same upstream gradient ``(B, V)``. The fused row's note holds the fused/dense time ratio, the ratio of the
    peak memory above the inputs' (CUDA only; ``None`` on CPU) and the largest relative differences
    ``max |fused - dense| / max |dense|`` of the vectors and of each gradient.
    """
    from initlab.mlmhead.fused import splade_max_pool
    from initlab.nn.pooling import splade_pool

    B, T, d, V = (4, 16, 32, 500) if dry_run else (32, 256, 768, 30522)
    g = torch.Generator().manual_seed(0)
    H = torch.randn(B, T, d, generator=g).to(device).requires_grad_()
    W = (torch.randn(V, d, generator=g) / d ** 0.5).to(device).requires_grad_()
    b = (torch.randn(V, generator=g) - 1.0).to(device).requires_grad_()  # some entries active, most not
    lengths = torch.randint(T // 2, T + 1, (B,), generator=g)
    lengths[0] = T
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(device)  # about a quarter padding
    up = torch.randn(B, V, generator=g).to(device)
    use_cuda = device.startswith("cuda")
    paths = {"dense": lambda: splade_pool(F.linear(H, W, b), mask), "fused": lambda: splade_max_pool(H, W, b, mask)}
    rows, got = [], {}
    for name, pool in paths.items():
        def step(pool=pool):
            H.grad = W.grad = b.grad = None
            a = pool()
            (a * up).sum().backward()
            return a.detach()

        H.grad = W.grad = b.grad = None
        base = torch.cuda.memory_allocated() / 2**30 if use_cuda else None
        r = time_steps(step, steps, warmup=1 if dry_run else 2, use_cuda=use_cuda)
        got[name] = (r.last, H.grad.clone(), W.grad.clone(), b.grad.clone())
        rows.append({"stage": f"splade-head {name}", "seconds": r.seconds, "tokens_per_s": B * T * steps / r.seconds,
                     "peak_mem_gib": r.peak_mem_gib, "extra_mem_gib": None if base is None else r.peak_mem_gib - base,
                     "note": f"B={B} T={T} d={d} V={V} float32, {int(mask.sum())} real tokens"})
        if use_cuda:
            torch.cuda.empty_cache()
    dense, fused = rows
    time_ratio = fused["seconds"] / dense["seconds"]
    mem_ratio = (fused["extra_mem_gib"] / dense["extra_mem_gib"]) if use_cuda and dense["extra_mem_gib"] else None
    diffs = [float((f - r).abs().max() / r.abs().max().clamp_min(1e-30)) for f, r in zip(got["fused"], got["dense"])]
    fused.update({"time_ratio": time_ratio, "mem_ratio": mem_ratio, "max_rel_diff": dict(zip(("a", "H", "W", "b"), diffs))})
    fused["note"] += (f"; fused/dense time {time_ratio:.3g}, peak memory above inputs "
                      + ("n/a (no CUDA)" if mem_ratio is None else f"{mem_ratio:.3g}")
                      + "; max rel diff a {:.1e}, dH {:.1e}, dW {:.1e}, db {:.1e}".format(*diffs))
    return rows


def _timed(step: Callable[[], float], steps: int, *, warmup: int, use_cuda: bool, tokens: int, flops: float,
           peak: float | None, note: str) -> dict:
    r = time_steps(step, steps, warmup=warmup, use_cuda=use_cuda)
    loss = float("nan") if r.last is None else r.last
    tflops = flops * steps / r.seconds / 1e12
    return {"seconds": r.seconds, "tokens_per_s": tokens * steps / r.seconds, "tflops": tflops,
            "mfu": tflops / peak if peak else None, "peak_mem_gib": r.peak_mem_gib, "last_loss": loss,
            "note": f"{note}; last loss {loss:.3f}"}


def _listops_data(out: Path, dry_run: bool, n_train: int) -> dict:
    from initlab.realdata.lra.listops import ListOpsGenConfig, write_listops_tsv

    gen = (ListOpsGenConfig(n_train=64, n_val=16, n_test=16, max_depth=3, max_args=4, min_length=6, max_length=30)
           if dry_run else ListOpsGenConfig(n_train=n_train, n_val=max(64, n_train // 8), n_test=max(64, n_train // 8)))
    write_listops_tsv(out / "listops", gen, overwrite=True)
    return {"note": f"{gen.n_train}/{gen.n_val}/{gen.n_test} trees, lengths {gen.min_length}-{gen.max_length}"}


def _lra_checks(device: str, dry_run: bool, steps: int, peak: float | None) -> list[dict]:
    from initlab.realdata.lra.gpu_check import measure

    rows = []
    for task in ("listops", "image"):
        for mode in ("classify", "masked"):
            r = measure(task, mode, steps=steps, warmup=1 if dry_run else 3, batch_size=2 if dry_run else None,
                        seq_len=64 if dry_run else None, device=device, bf16=not dry_run, tiny=dry_run)
            rows.append({"stage": f"lra-check {task} {mode}", "seconds": r["seconds"], "tokens_per_s": r["tokens_per_s"],
                         "peak_mem_gib": r["peak_mem_gib"], "tflops": r["achieved_tflops"],
                         "mfu": r["achieved_tflops"] / peak if peak else None,
                         "note": f"L={r['n_layers']} d={r['d_model']} B={r['batch_size']} T={r['T']}"})
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
    return rows


def _listops_train(out: Path, device: str, dry_run: bool) -> list[dict]:
    from initlab.realdata.lra.config import PRESETS
    from initlab.realdata.lra.train import finetune, pretrain

    base = PRESETS["toy" if dry_run else "listops"]
    cfg = replace(base, data_dir=str(out / "listops"), listops_gen=None, spt_epochs=1, epochs=1, metrics_examples=4,
                  device="cpu" if dry_run else "cuda", init="spt", seed=0)
    t0 = time.perf_counter()
    pt = pretrain(cfg, out / "spt", overwrite=True, progress=False)
    t1 = time.perf_counter()
    ft = finetune(cfg, out / "finetune", out / "spt" / "spt_best.safetensors", overwrite=True, progress=False)
    t2 = time.perf_counter()
    size = f"L={cfg.n_layers} d={cfg.d_model}"
    return [{"stage": "listops-spt", "seconds": t1 - t0, "note": f"{size}; 1 epoch, val masked loss {pt['best_val_loss']:.3f}"},
            {"stage": "listops-finetune", "seconds": t2 - t1,
             "note": f"{size}; 1 epoch from SPT, test acc {ft['test_acc']:.3f}, "
                     f"first-layer proximity mass at start {ft['attention_metrics_init']['layers'][0]['proximity_mass']:.3f}"}]


def run_smoke(out: Path, *, dry_run: bool, budget_s: float = 420.0, steps: int | None = None,
              listops_train: int = 1024, peak_tflops: float | None = None) -> dict:
    """Run every stage (see module doc) into ``out``; returns ``{"device", "peak_tflops", "rows", "seconds"}``."""
    from initlab.realdata.lra.gpu_check import assumed_peak

    device = "cpu" if dry_run else "cuda"
    name = "cpu (dry run)" if dry_run else torch.cuda.get_device_name()
    found = None if dry_run else assumed_peak(name)
    peak = peak_tflops or (found[1] if found else None)
    steps = steps or (2 if dry_run else 10)
    stages: list[tuple[str, Callable[[], dict | list[dict]]]] = [
        ("listops-data", lambda: _listops_data(out, dry_run, listops_train)),
        ("lra-check", lambda: _lra_checks(device, dry_run, steps, peak)),
        ("splade-check", lambda: splade_check(device=device, dry_run=dry_run, steps=steps, peak=peak)),
        ("splade-check fused", lambda: splade_check(device=device, dry_run=dry_run, steps=steps, peak=peak, head="fused")),
        ("splade-head", lambda: splade_head_check(device=device, dry_run=dry_run, steps=steps)),
        ("listops-train", lambda: _listops_train(out, device, dry_run)),
    ]
    rows, t_start = [], time.perf_counter()
    for stage, fn in stages:
        if time.perf_counter() - t_start > budget_s:
            rows.append({"stage": stage, "status": "skipped", "note": f"past the {budget_s:.0f} s budget"})
            continue
        t0 = time.perf_counter()
        try:
            got = fn()
        except Exception as err:  # noqa: BLE001 - a smoke test reports every stage, then exits non-zero
            rows.append({"stage": stage, "status": "failed", "seconds": time.perf_counter() - t0,
                         "note": f"{type(err).__name__}: {err}"})
            continue
        for r in got if isinstance(got, list) else [dict(got, seconds=got.get("seconds", time.perf_counter() - t0))]:
            rows.append({"stage": r.pop("stage", stage), "status": "ok", **r})
        if device == "cuda":
            torch.cuda.empty_cache()
    return {"device": name, "peak_tflops": peak, "dry_run": dry_run, "rows": rows, "seconds": time.perf_counter() - t_start}


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    return str(v)


def format_table(report: dict) -> str:
    """The report as one fixed-width table (MFU in %)."""
    head = ["stage", "status", "seconds", "tokens/s", "peak GiB", "TFLOP/s", "MFU %", "note"]
    body = [[r.get("stage"), r.get("status"), r.get("seconds"), r.get("tokens_per_s"), r.get("peak_mem_gib"),
             r.get("tflops"), None if r.get("mfu") is None else 100 * r["mfu"], r.get("note", "")] for r in report["rows"]]
    cells = [head] + [[_fmt(v) for v in row] for row in body]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head) - 1)]
    lines = [f"device: {report['device']}; assumed bf16 peak: {_fmt(report['peak_tflops'])} TFLOP/s; "
             f"total {report['seconds']:.0f} s"]
    lines += ["  ".join(c[i].ljust(widths[i]) for i in range(len(widths))) + "  " + c[-1] for c in cells]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    p = argparse.ArgumentParser(prog=prog or "python -m initlab.realdata.gpu_smoke", description=__doc__.split("\n\n")[0])
    p.add_argument("--dry-run", action="store_true", help="every stage at tiny sizes on CPU (CI); numbers meaningless")
    p.add_argument("--out", type=Path, default=None, help="working folder (default: a new temporary folder)")
    p.add_argument("--json", type=Path, default=None, help="write the table here (default: OUT/gpu_smoke.json)")
    p.add_argument("--budget-s", type=positive_float, default=420.0,
                   help="skip the remaining stages after this many seconds (a number > 0)")
    p.add_argument("--steps", type=int_at_least(1), default=None,
                   help="timed steps per throughput case, an integer >= 1 (default 10; dry run 2)")
    p.add_argument("--listops-train", type=int_at_least(64), default=1024,
                   help="generated LRA-size ListOps training trees, an integer >= 64")
    p.add_argument("--peak-tflops", type=positive_float, default=None,
                   help="override the assumed bf16 peak (MFU; TFLOP/s > 0)")
    args = p.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        p.exit(2, f"{p.prog}: no CUDA device (torch.cuda.is_available() is False). This smoke test needs one GPU; "
                  "run with --dry-run to check the pipeline on CPU.\n")
    out = args.out or Path(tempfile.mkdtemp(prefix="initlab_gpu_smoke_"))
    if not args.dry_run:
        torch.backends.cuda.matmul.allow_tf32 = True
    report = run_smoke(out, dry_run=args.dry_run, budget_s=args.budget_s, steps=args.steps,
                       listops_train=args.listops_train, peak_tflops=args.peak_tflops)
    from initlab.runs import atomic_write_json

    path = atomic_write_json(args.json or out / "gpu_smoke.json", report)
    print(format_table(report))
    print(f"table written to {path}")
    return 1 if any(r["status"] == "failed" for r in report["rows"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
