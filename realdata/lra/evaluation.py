"""Evaluation of LRA models during and after training: SPT validation loss, accuracy, attention metrics.

Role: everything the training loops of :mod:`initlab.realdata.lra.train` measure without updating
weights. :func:`spt_val_loss` and :func:`evaluate_accuracy` are sharded over DDP ranks (counts summed)
and run the unwrapped module; :func:`initial_attention_metrics` and :func:`attention_metrics_on` give the
attention metrics of :mod:`initlab.realdata.lra.metrics` (proximity mass and the others, Amos et al.,
"Never Train from Scratch", arXiv:2310.02980) of the starting and of a saved model.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from initlab.realdata.lra.config import LRAConfig
from initlab.realdata.lra.masking import spt_loss
from initlab.realdata.lra.model import LRAModel
from initlab.realdata.lra.runtime import batch_tensors, build_model, load_weights, single_inputs
from initlab.realdata.lra.splits import Split
from initlab.runs import RunDir
from initlab.textio import read_json

__all__ = ["spt_val_loss", "evaluate_accuracy", "initial_attention_metrics", "attention_metrics_on"]


@torch.no_grad()
def spt_val_loss(model, split: Split, cfg: LRAConfig, ratio: float, accelerator, max_len: int) -> float:
    """Mean SPT loss on ``split`` with masks fixed by ``cfg.seed`` (same masks every epoch); sharded over ranks.
    Runs the unwrapped module: ranks may have unequal batch counts, and a DDP forward is a collective."""
    model = accelerator.unwrap_model(model)
    model.eval()
    gen = torch.Generator().manual_seed(cfg.seed + 7919)
    tot = torch.zeros(2, dtype=torch.float64, device=accelerator.device)
    order = torch.arange(len(split))
    for i in range(0, len(order), cfg.batch_size):
        if (i // cfg.batch_size) % accelerator.num_processes != accelerator.process_index:
            continue  # batches are dealt round-robin over ranks
        idx = order[i : i + cfg.batch_size]
        tok, mask, _ = batch_tensors(split, idx, accelerator.device, max_len)
        gb = torch.Generator().manual_seed(int(gen.initial_seed()) + i)  # batch-local masks: independent of sharding
        with accelerator.autocast():
            loss, n = spt_loss(model, tok, mask, cfg, ratio, gb)
        tot += torch.tensor([float(loss) * n, n], dtype=torch.float64, device=accelerator.device)
    tot = accelerator.reduce(tot, "sum")
    model.train()
    return float(tot[0] / tot[1]) if tot[1] > 0 else float("nan")


@torch.no_grad()
def evaluate_accuracy(model, split: Split, batch_size: int, accelerator, max_len: int) -> float:
    """Classification accuracy on ``split`` (sharded over ranks, counts summed; unwrapped module, see
    :func:`spt_val_loss`)."""
    model = accelerator.unwrap_model(model)
    model.eval()
    tot = torch.zeros(2, dtype=torch.float64, device=accelerator.device)
    idx_all = torch.arange(len(split))[accelerator.process_index :: accelerator.num_processes]
    for i in range(0, len(idx_all), batch_size):
        tok, mask, y = batch_tensors(split, idx_all[i : i + batch_size], accelerator.device, max_len)
        with accelerator.autocast():
            pred = model(tok, mask, mode="classify").argmax(-1)
        tot += torch.tensor([float((pred == y).sum()), len(y)], dtype=torch.float64, device=accelerator.device)
    tot = accelerator.reduce(tot, "sum")
    model.train()
    return float(tot[0] / tot[1])


def initial_attention_metrics(run: RunDir, model: LRAModel, cfg: LRAConfig, split: Split) -> dict | None:
    """Attention metrics of the model as fine-tuning starts (SPT or random init), computed once per run
    folder (``metrics_init.json``), before any label step."""
    from initlab.realdata.lra.metrics import attention_metrics

    if not cfg.metrics_examples:
        return None
    path = run.root / "metrics_init.json"
    if not path.exists():
        run.write_json(path.name, attention_metrics(model, single_inputs(split), cfg.metrics_examples))
    return read_json(path)


def attention_metrics_on(weights: Path, cfg: LRAConfig, split: Split) -> dict:
    """Attention metrics of a saved model on the first ``cfg.metrics_examples`` rows of ``split`` (CPU)."""
    from initlab.realdata.lra.metrics import attention_metrics

    model = build_model(replace(cfg, dropout=0.0))
    model.load_state_dict(load_weights(weights))
    return attention_metrics(model, single_inputs(split), cfg.metrics_examples)
