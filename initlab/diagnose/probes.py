"""The two probes of ``initlab diagnose`` beside the gradient measurements.

* :func:`bag_of_tokens_probe` -- can a linear classifier on token counts predict the labels? (5-fold
  cross-validated ridge regression on standardised counts of the most frequent tokens, one-vs-rest.) If it can,
  label training needs no query-dependent attention (mean pooling of token identities suffices).
* :func:`spt_probe` -- a short masked-reconstruction run (``--spt-probe STEPS``) and the first-layer proximity mass
  and relative-position score (:func:`initlab.nn.attention_metrics.relative_position_score_fast`) it reaches.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from initlab.diagnose.data import Batch
from initlab.diagnose.measure import MASK_RATE, proximity
from initlab.diagnose.models import Backend
from initlab.nn.attention_metrics import relative_position_score_fast
from initlab.nn.masking import mask_tokens

__all__ = ["bag_of_tokens_probe", "spt_probe"]


def bag_of_tokens_probe(ids: Sequence[np.ndarray], labels: Sequence[str], *, folds: int = 5, ridge: float = 1.0,
                        max_features: int = 4096, seed: int = 0) -> dict[str, float]:
    """Cross-validated accuracy of a ridge classifier on token counts.

    Features: counts of the ``max_features`` most frequent ids, standardised on each training fold; targets
    one-hot classes; prediction the argmax. Returns ``{"accuracy", "majority", "normalised"}`` with ``normalised =
    (accuracy − majority) / (1 − majority)`` clipped to [0, 1] (1: the labels are a linear function of the counts).

    Raises:
        ValueError: fewer sequences than folds, or lengths of ``ids`` and ``labels`` differ.
    """
    n = len(ids)
    if n != len(labels):
        raise ValueError(f"labels: expected one per sequence ({n}), got {len(labels)}")
    if n < folds:
        raise ValueError(f"bag-of-tokens probe: expected at least {folds} labelled sequences, got {n}")
    vocab, counts = np.unique(np.concatenate(list(ids)), return_counts=True)
    keep = vocab[np.argsort(-counts, kind="stable")[:max_features]]
    col = {int(t): i for i, t in enumerate(keep)}
    X = np.zeros((n, len(keep)))
    for r, s in enumerate(ids):
        for t in s:
            c = col.get(int(t))
            if c is not None:
                X[r, c] += 1.0
    classes = sorted(set(labels))
    y = np.array([classes.index(v) for v in labels])
    Y = np.eye(len(classes))[y]
    order = np.random.default_rng(seed).permutation(n)
    correct = 0
    for k in range(folds):
        te = order[k::folds]
        tr = np.setdiff1d(order, te)
        mu, sd = X[tr].mean(0), X[tr].std(0) + 1e-9
        A, Bm = (X[tr] - mu) / sd, (X[te] - mu) / sd
        A = np.hstack([A, np.ones((len(tr), 1))])
        Bm = np.hstack([Bm, np.ones((len(te), 1))])
        # dual form (n_train x n_train): cheap when features outnumber sequences
        K = A @ A.T
        alpha = np.linalg.solve(K + ridge * np.eye(len(tr)), Y[tr])
        pred = (Bm @ (A.T @ alpha)).argmax(1)
        correct += int((pred == y[te]).sum())
    acc = correct / n
    maj = float(np.bincount(y).max() / n)
    norm = 0.0 if maj >= 1 else min(max((acc - maj) / (1 - maj), 0.0), 1.0)
    return {"accuracy": acc, "majority": maj, "normalised": norm}


def spt_probe(backend: Backend, batch: Batch, steps: int, *, lr: float = 1e-3, batch_size: int = 16, seed: int = 0,
              w: int = 2) -> dict[str, Any]:
    """``steps`` AdamW steps of masked reconstruction on ``batch`` (mini-batches of ``batch_size``, fresh masks per
    step), then the first layer's proximity mass (eval mode) and relative-position score on the batch, before and
    after. The model's weights are restored afterwards (the probe leaves the model as it found it).

    Returns ``{"steps", "loss_start", "loss_end", "proximity_before", "proximity_after", "proximity_uniform",
    "relpos_before", "relpos_after"}``.
    """
    model = backend.model
    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    was = model.training

    @torch.no_grad()
    def first_layer() -> tuple[float, float, float]:
        model.eval()
        sl = slice(0, min(batch_size, batch.ids.shape[0]))
        r = batch.real[sl]
        T = int(r.sum(1).max())
        r = r[:, :T]
        with torch.enable_grad():
            _, scores, maps = backend.hidden_and_scores(batch.ids[sl, :T], r)
        S = scores[0].detach()
        full = r.all(1)  # the relative-position score needs whole rows: unpadded sequences only
        rel = relative_position_score_fast(S[full]) if bool(full.any()) else float("nan")
        pm, pu = proximity(maps[0], r, w)
        return pm, pu, rel

    before = first_layer()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    g = torch.Generator().manual_seed(seed)
    model.train()
    losses = []
    B = batch.ids.shape[0]
    for step in range(steps):
        idx = torch.randperm(B, generator=g)[:batch_size]
        r = batch.real[idx]
        T = int(r.sum(1).max())
        x, r = batch.ids[idx, :T], r[:, :T]
        inp, m = mask_tokens(x, MASK_RATE, g, pad_mask=r, mask_id=backend.mask_id, at_least_one=True)
        H, _, _ = backend.hidden_and_scores(inp, r)
        loss = F.cross_entropy(backend.mlm_logits(H)[m].float(), x[m])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    after = first_layer()
    model.load_state_dict(saved)
    model.zero_grad(set_to_none=True)
    model.train(was)
    return {"steps": steps, "loss_start": losses[0] if losses else float("nan"),
            "loss_end": losses[-1] if losses else float("nan"), "proximity_before": before[0], "proximity_after": after[0],
            "proximity_uniform": before[1], "relpos_before": before[2], "relpos_after": after[2]}
