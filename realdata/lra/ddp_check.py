"""Multi-process (DDP) check on CPU: run under ``torchrun --nproc_per_node 2`` (gloo backend).

``python -m torch.distributed.run --nproc_per_node 2 -m initlab.realdata.lra.ddp_check OUT_DIR``

1. A few SPT steps through the same pieces as :func:`initlab.realdata.lra.train.pretrain`
   (``accelerate.Accelerator``, :class:`LRAModel`, rank-sharded batches): after each backward the
   gradients must be identical on every rank (DDP all-reduce) although each rank saw different
   data, and after each step the parameters must be identical too.
2. A one-epoch :func:`pretrain` on the toy ListOps preset, checking that the real loop finishes with
   ``world_size == 2``.
3. A :func:`pretrain` whose SPT loss is made NaN on rank 1 only, at step :data:`NAN_STEP` (the value is
   injected, so the check does not depend on how a CPU rounds a diverging run): every rank must stop with
   :class:`~initlab.runs.NonFiniteError` at that step (none left waiting in a collective).
4. Dropout: two :func:`pretrain` runs with dropout 0.3 into two folders. At the first training-mode
   dropout call each rank draws a probe mask of :data:`PROBE` entries from its current random state
   (inside ``torch.random.fork_rng``, so the run itself is unchanged). The probes must differ across ranks
   (per-rank dropout seeds, :func:`initlab.realdata.lra.loop.dropout_seed`) and the two runs must agree
   (same probes, byte-identical checkpoints): deterministic.

Rank 0 writes ``OUT_DIR/ddp_check.json`` with the largest gradient and parameter differences across ranks.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import torch


NAN_STEP = 3  # the SPT step whose loss is replaced by NaN on rank 1
PROBE = 256  # entries of the probe dropout mask


def _flat(tensors) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1).float() for t in tensors])


def _nan_on_rank1(train, rank: int):
    """A stand-in for ``train.spt_loss`` that returns NaN at step :data:`NAN_STEP` on rank 1 (and is
    the real loss otherwise); returns the real function, to be put back."""
    real, calls = train.spt_loss, {"n": 0}

    def spt_loss(*a, **k):
        loss, n = real(*a, **k)
        step, calls["n"] = calls["n"], calls["n"] + 1
        return (loss * float("nan") if (rank == 1 and step == NAN_STEP) else loss), n

    train.spt_loss = spt_loss
    return real


def _probe_dropout(train, probes: list):
    """Wrap ``train.build_model`` so the first training-mode ``nn.Dropout`` call of each model appends a
    probe mask drawn from the current random state (without consuming it) to ``probes``."""
    real = train.build_model

    def build_model(cfg):
        model = real(cfg)
        drop = next(m for m in model.modules() if isinstance(m, torch.nn.Dropout))
        seen = {"done": False}

        def hook(module, args):
            if module.training and not seen["done"]:
                seen["done"] = True
                with torch.random.fork_rng(devices=[]):
                    probes.append(torch.bernoulli(torch.full((PROBE,), 1 - module.p)))

        drop.register_forward_pre_hook(hook)
        return model

    train.build_model = build_model
    return real


def main(argv: list[str] | None = None) -> int:
    from initlab.realdata.lra.config import PRESETS
    from initlab.realdata.lra.splits import iter_batches
    from initlab.realdata.lra.masking import mask_tokens, masked_loss
    from initlab.realdata.lra.train import batch_tensors, build_model, load_data, make_accelerator, pretrain
    from initlab.runs import atomic_write_json

    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0])
    cfg = replace(PRESETS["toy"], device="cpu", spt_epochs=1, metrics_examples=0)
    acc = make_accelerator(cfg)
    rank, world = acc.process_index, acc.num_processes
    data = load_data(cfg)  # generated in memory, identical on every rank (seeded)
    model = build_model(cfg)
    model.set_stage("spt")
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-2)
    model, opt = acc.prepare(model, opt)
    gen = torch.Generator().manual_seed(100 + rank)
    grad_diff, param_diff, data_differs = 0.0, 0.0, False
    for step, idx in enumerate(iter_batches(data.train, 8, shuffle=True, seed=0, rank=rank, world=world)):
        if step == 3:
            break
        tok, mask, _ = batch_tensors(data.train, idx, acc.device)
        corrupted, masked = mask_tokens(tok, mask, 0.3, gen)
        loss, _ = masked_loss(model(corrupted, mask, mode="masked"), tok, masked)
        opt.zero_grad()
        acc.backward(loss)
        first = acc.gather(idx[:1].to(acc.device))
        data_differs = data_differs or bool((first != first[0]).any())
        g = acc.gather(_flat(p.grad for p in params)[None])
        grad_diff = max(grad_diff, float((g - g[0]).abs().max()))
        opt.step()
        w = acc.gather(_flat(params)[None])
        param_diff = max(param_diff, float((w - w[0]).abs().max()))
    acc.wait_for_everyone()
    res = pretrain(cfg, out / "pretrain", progress=False)
    from initlab.realdata.lra import train
    from initlab.runs import NonFiniteError

    nan_step = -1
    real = _nan_on_rank1(train, rank)
    try:
        pretrain(replace(cfg, spt_epochs=2), out / "pretrain_nan", progress=False)
    except NonFiniteError as err:
        nan_step = err.step
    finally:
        train.spt_loss = real
    steps = acc.gather(torch.tensor([nan_step], device=acc.device)).tolist()
    probes: list[torch.Tensor] = []
    real = _probe_dropout(train, probes)
    try:
        for name in ("dropout_a", "dropout_b"):
            pretrain(replace(cfg, dropout=0.3), out / name, progress=False)
    finally:
        train.build_model = real
    got = acc.gather(torch.stack(probes)[None].to(acc.device))  # (world, runs, PROBE)
    same_file = ((out / "dropout_a" / "spt_best.safetensors").read_bytes()  # byte-identical, header included
                 == (out / "dropout_b" / "spt_best.safetensors").read_bytes()) if acc.is_main_process else None
    if acc.is_main_process:
        atomic_write_json(out / "ddp_check.json", {"world_size": world, "max_grad_diff": grad_diff, "max_param_diff": param_diff,
                                                   "ranks_saw_different_data": data_differs,
                                                   "pretrain_world_size": res["world_size"],
                                                   "nan_injected_at_step_on_rank_1": NAN_STEP,
                                                   "nan_stop_step_per_rank": steps,
                                                   "dropout_probe_masks_differ_across_ranks": bool((got[0] != got[1]).any()),
                                                   "dropout_probe_share_equal_across_ranks": float((got[0] == got[1]).float().mean()),
                                                   "dropout_probes_equal_across_runs": bool(torch.equal(got[:, 0], got[:, 1])),
                                                   "dropout_checkpoints_identical_across_runs": same_file,
                                                   "backend": str(torch.distributed.get_backend()) if torch.distributed.is_initialized() else None})
    acc.wait_for_everyone()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
