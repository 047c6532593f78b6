"""Attention and gradient measurements for the synthetic SPT experiments.

Letters: B batch, H heads, T length (queries i = rows, keys j = columns). The attention-map metrics (proximity
mass, Toeplitz part, relative-position score, entropy) are in :mod:`initlab.nn.attention_metrics`.

* :func:`score_gradients_at_init` -- for the label loss and the masked-reconstruction loss, the
  gradient with respect to the first layer's scores S and its blind-subspace component
  (:func:`initlab.theory.subspace.blind_component`): the experiment's link to the theorem;
* :func:`count_classifier_accuracy` -- a linear classifier on token counts (the bag-of-tokens baseline).
"""

from __future__ import annotations


import numpy as np
import torch
import torch.nn.functional as F

from initlab.theory.subspace import blind_component

__all__ = [
    "score_gradients_at_init",
    "count_classifier_accuracy",
    "token_counts",
]


def score_gradients_at_init(
    model, tokens: torch.Tensor, labels: torch.Tensor, mlm_inputs: torch.Tensor, masked: torch.Tensor
) -> dict[str, float]:
    """Gradients of each loss with respect to the first layer's attention scores S, and their blind parts.

    Runs the reference path (explicit scores, ``retain_grad``) twice on the same batch: once with the label
    loss (cross entropy of ``model.classify``), once with the masked-reconstruction loss (cross entropy of
    ``model.reconstruct`` on the ``masked`` positions only). For each, ``G = dL/dS (B, H, T, T)``:

    * ``<loss>_grad_norm``   = ``||G||_F`` (over the whole batch);
    * ``<loss>_blind_norm``  = ``||P_B(G)||_F`` with ``P_B`` = :func:`initlab.theory.subspace.blind_component`;
    * ``<loss>_blind_frac``  = their ratio.

    ``<loss>`` is ``label`` or ``mlm``. The model's parameters' ``.grad`` are left untouched (zeroed after).

    Args:
        model: a :class:`initlab.nn.encoder.SequenceTransformer`.
        tokens: ``(B, T)`` clean inputs; labels ``(B,)``; mlm_inputs ``(B, T)`` with mask tokens;
        masked: ``(B, T)`` bool, positions of the reconstruction loss.
    """
    out: dict[str, float] = {}
    attn0 = model.blocks[0].attn
    for loss_name in ("label", "mlm"):
        model.zero_grad(set_to_none=True)
        if loss_name == "label":
            H, _ = model.encode(tokens, return_attn=True)
            S = attn0.last_scores
            S.retain_grad()
            loss = F.cross_entropy(model.cls_head(model.pool(H)), labels)
        else:
            H, _ = model.encode(mlm_inputs, return_attn=True)
            S = attn0.last_scores
            S.retain_grad()
            logits = model.mlm_head(H)
            loss = F.cross_entropy(logits[masked], tokens[masked])
        loss.backward()
        G = S.grad.detach().double()
        gn = float(G.norm())
        bn = float(blind_component(G).norm())
        out[f"{loss_name}_grad_norm"] = gn
        out[f"{loss_name}_blind_norm"] = bn
        out[f"{loss_name}_blind_frac"] = bn / gn if gn > 0 else 0.0
    model.zero_grad(set_to_none=True)
    attn0.last_scores = None
    return out


def token_counts(tokens: torch.Tensor, vocab: int) -> np.ndarray:
    """Bag of tokens: ``(n, vocab)`` float counts of each id per sequence."""
    t = tokens.numpy()
    out = np.zeros((t.shape[0], vocab))
    np.add.at(out, (np.repeat(np.arange(t.shape[0]), t.shape[1]), t.reshape(-1)), 1.0)
    return out


def count_classifier_accuracy(
    train_tokens: torch.Tensor, train_labels: torch.Tensor, test_tokens: torch.Tensor, test_labels: torch.Tensor,
    vocab: int, ridge: float = 1.0,
) -> float:
    """Test accuracy of a linear (ridge least-squares) classifier on token counts.

    The bag-of-tokens baseline: it solves a task decidable from counts and must be at chance on a task
    whose count distribution is the same in both classes.
    """
    Xtr = token_counts(train_tokens, vocab)
    Xte = token_counts(test_tokens, vocab)
    mu, sd = Xtr.mean(0), Xtr.std(0) + 1e-9
    Xtr, Xte = (Xtr - mu) / sd, (Xte - mu) / sd
    Xtr = np.hstack([Xtr, np.ones((len(Xtr), 1))])
    Xte = np.hstack([Xte, np.ones((len(Xte), 1))])
    y = 2.0 * train_labels.numpy() - 1.0
    w = np.linalg.solve(Xtr.T @ Xtr + ridge * np.eye(Xtr.shape[1]), Xtr.T @ y)
    pred = (Xte @ w > 0).astype(np.int64)
    return float((pred == test_labels.numpy()).mean())
