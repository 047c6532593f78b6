"""The SPLADE training loss: ranking loss plus FLOPS regularisers on the global batch, with the weight warm-up.

Role: loss construction for :func:`initlab.realdata.splade.train.train_splade`.

    L = L_rank + lambda_q(t) FLOPS(Q) + lambda_d(t) FLOPS(D),    FLOPS(X) = sum_j ( mean_{i in batch} x_ij )^2

(SPLADE, Formal et al. SIGIR 2021, eq. 4-5; SPLADE v2 arXiv:2109.10086 §3):

* ``L_rank``: SparseMultipleNegativesRankingLoss (in-batch negatives + the hard negative, dot product,
  gathered across processes), or SparseMarginMSELoss (SPLADE++ distillation, SIGIR 2022) with teacher
  margins;
* FLOPS regulariser (Paria et al., ICLR 2020, eq. 4) on queries and on documents (positives and
  negatives), the mean taken over the GLOBAL batch: :func:`GlobalFlopsLoss` all-gathers the batch
  activations (with gradient) before averaging, so the regulariser - hence sparsity - is the same for
  1 or 8 GPUs. (sentence-transformers' own FlopsLoss averages over the per-process batch only.)
* ``lambda(t)`` grows quadratically from 0 to its final value over the first ``regularizer_warmup_ratio``
  of training (SpladeRegularizerWeightSchedulerCallback).
"""

from __future__ import annotations

import torch

from .config import SpladeTrainConfig

__all__ = ["GlobalFlopsLoss", "make_loss", "regularizer_weight"]


def _flops_loss_cls():
    from sentence_transformers.sparse_encoder.losses import FlopsLoss

    return FlopsLoss


class _GlobalFlopsMixin:
    """FLOPS regulariser on the global batch (see module docstring)."""

    def compute_loss_from_embeddings(self, embeddings: torch.Tensor) -> torch.Tensor:
        """``embeddings (B_local, V)`` -> scalar ``sum_j (mean over the global batch of x_j)^2``.

        The all-gather keeps the gradient path to every process's activations
        (``torch.distributed.nn.all_gather``); with DDP's gradient averaging this gives exactly the
        gradient of the global-batch FLOPS term.
        """
        from sentence_transformers.util.distributed import all_gather_with_grad, is_dist_initialized

        if is_dist_initialized():
            embeddings = all_gather_with_grad(embeddings.contiguous())
        if self.threshold is not None:
            l0 = (embeddings != 0).sum(dim=1)
            embeddings = embeddings * (l0 > self.threshold).float().unsqueeze(1)
        value = torch.sum(torch.mean(embeddings, dim=0) ** 2)
        if torch.is_grad_enabled():
            self.history.append(float(value.detach()))
        return value


def GlobalFlopsLoss(model, threshold: float | None = None):
    """Build a FLOPS regulariser (a FlopsLoss subclass) averaged over the global batch; ``.history`` holds
    the unweighted value of every training call."""
    base = _flops_loss_cls()
    cls = type("GlobalFlopsLoss", (_GlobalFlopsMixin, base), {})
    obj = cls(model, threshold=threshold)
    obj.history = []
    return obj


def make_loss(model, cfg: SpladeTrainConfig, world: int = 1):
    """SpladeLoss(ranking loss, FLOPS on queries and documents) and its quadratic-warm-up callback; with
    ``world > 1`` processes the in-batch negatives are gathered across them."""
    from sentence_transformers.sparse_encoder.callbacks.splade_callbacks import SpladeRegularizerWeightSchedulerCallback
    from sentence_transformers.sparse_encoder.losses import SparseMarginMSELoss, SparseMultipleNegativesRankingLoss, SpladeLoss

    if cfg.loss == "mnrl":
        base = SparseMultipleNegativesRankingLoss(model, gather_across_devices=world > 1)
    else:
        base = SparseMarginMSELoss(model)
    q_reg = GlobalFlopsLoss(model) if cfg.global_flops else None
    d_reg = GlobalFlopsLoss(model) if cfg.global_flops else None
    loss = SpladeLoss(model, base, document_regularizer_weight=cfg.lambda_d, query_regularizer_weight=cfg.lambda_q,
                      document_regularizer=d_reg, query_regularizer=q_reg)
    cb = SpladeRegularizerWeightSchedulerCallback(loss, scheduler_type="quadratic", warmup_ratio=cfg.regularizer_warmup_ratio)
    return loss, cb


def regularizer_weight(cb, step: int, final: float) -> float:
    """lambda used in optimizer step ``step`` (1-based) by SpladeRegularizerWeightSchedulerCallback:
    ``final * min(1, ((step - 1) / warmup_steps) ** 2)`` (quadratic)."""
    warm = getattr(cb, "warmup_steps", None) or 1
    return float(final * min(1.0, ((step - 1) / warm) ** 2))
