"""What ``initlab diagnose`` measures at initialisation, per layer and head, on one batch.

Letters: B batch, H heads, T length (queries i = rows, keys j = columns), L a sequence's real length.

* :func:`blind_share` -- ``sqrt(Σ_b ‖P_Q G_b‖² / Σ_b ‖G_b‖²)`` per head, with ``P_Q`` the projection onto the
  query-independent matrices ``{1 vᵀ : v ⟂ 1}`` on each sequence's valid block
  (:func:`initlab.theory.subspace.query_independent_component`): the share of a score gradient that is the same
  for every query (T1's ``1 gᵀ``). 1 exactly under T1; ``share² + f² = 1`` with ``f`` the theory's blind
  fraction (:func:`initlab.theory.subspace.blind_fraction`). :func:`blind_share_reference` is the slow, obvious
  version (a loop over sequences and heads, column means written out), compared in float64 in the tests.
* :func:`entropy_gap` -- ``1 − mean_rows H(A_i·) / log n_i`` per head (``n_i`` the keys row i may attend to): 0 for
  uniform attention.
* :func:`proximity` -- attention within ``|i − j| <= w`` over real query rows, and the same for uniform attention.
* :func:`score_gradients` -- ``dL/dS`` per layer for the label loss (cross entropy of a fresh linear head on the
  pooled states) or the masked-reconstruction loss (cross entropy of the model's MLM head on masked positions),
  over micro-batches whose losses add up to the full batch's loss exactly (sums divided by the batch's counts),
  so the per-sequence gradients do not depend on the micro-batch size (dropout masks do).
* :func:`measure` -- all of the above for one model and batch.

Source: theorem T1 (:mod:`initlab.theory.attention.gradient`), T5-T7 for where blindness is partial; Amos et al.,
"Never Train from Scratch", arXiv:2310.02980 (the phenomenon).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from initlab.diagnose.data import Batch
from initlab.diagnose.models import Backend
from initlab.nn.masking import mask_tokens
from initlab.theory.subspace import query_independent_component

__all__ = ["blind_share", "blind_share_reference", "share_sums", "entropy_gap", "proximity", "pool", "score_gradients",
           "measure", "POOLINGS", "MASK_RATE"]

POOLINGS = ("mean", "cls", "last")
MASK_RATE = 0.15


def _kpm(real: torch.Tensor, G: torch.Tensor) -> torch.Tensor:
    """``(B, H, T)`` key-padding mask (True = padding) for ``G (B, H, T, T)`` from ``real (B, T)``."""
    return (~real)[:, None, :].expand(G.shape[:-1])


def share_sums(G: torch.Tensor, real: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(Σ_b ‖P_Q G_b‖², Σ_b ‖G_b‖²)`` per head, each ``(H,)`` float64, on the valid blocks.

    Args:
        G: ``(B, H, T, T)`` score gradients; real: ``(B, T)`` bool, True = real token (each row >= 2 real).
    """
    G = G.double()
    Q = query_independent_component(G, key_padding_mask=_kpm(real, G))
    v = real.to(G.dtype)
    blk = (v[:, :, None] * v[:, None, :])[:, None]  # (B, 1, T, T)
    return Q.pow(2).sum((0, 2, 3)), (G * blk).pow(2).sum((0, 2, 3))


def blind_share(G: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Blind share per head ``(H,)`` (module docstring); 0 for a head whose gradient is 0."""
    q, g = share_sums(G, real)
    return torch.where(g > 0, (q / g.clamp_min(1e-300)).sqrt(), torch.zeros_like(g))


def blind_share_reference(G: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Slow reference of :func:`blind_share`: per sequence and head, ``G_v`` the ``L x L`` valid block,
    ``m_j = mean_i G_v[i, j]``, ``Q = 1 (m − mean(m))ᵀ``; float64 Python loops."""
    B, H = G.shape[:2]
    q = [0.0] * H
    g = [0.0] * H
    for b in range(B):
        idx = torch.nonzero(real[b]).flatten()
        for h in range(H):
            Gv = G[b, h].double()[idx][:, idx]
            m = Gv.mean(0)
            m = m - m.mean()
            Qm = torch.ones(len(idx), 1, dtype=torch.float64) @ m[None, :]
            q[h] += float((Qm ** 2).sum())
            g[h] += float((Gv ** 2).sum())
    return torch.tensor([math.sqrt(a / c) if c > 0 else 0.0 for a, c in zip(q, g)], dtype=torch.float64)


def entropy_gap(A: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """``1 − mean over real query rows of H(A_i·) / log n_i`` per head ``(H,)``; ``n_i`` = keys with ``A_ij > 0``.

    Rows with fewer than 2 allowed keys are skipped. Args: ``A (B, H, T, T)``, ``real (B, T)``.
    """
    A = A.detach().double()
    n = (A > 0).sum(-1).double()  # (B, H, T)
    ent = -(A * A.clamp_min(1e-300).log()).sum(-1)
    ok = real[:, None, :].expand_as(n) & (n >= 2)
    ratio = torch.where(ok, ent / n.clamp_min(2).log(), torch.zeros_like(ent))
    return 1.0 - ratio.sum((0, 2)) / ok.sum((0, 2)).clamp_min(1)


def proximity(A: torch.Tensor, real: torch.Tensor, w: int = 2) -> tuple[float, float]:
    """``(mass, uniform)``: mean over real query rows (all heads) of ``Σ_{|i-j|<=w} A_ij``, and the same for
    uniform attention over each sequence's real keys."""
    A = A.detach().double()
    T = A.shape[-1]
    idx = torch.arange(T)
    band = ((idx[:, None] - idx[None, :]).abs() <= w).double()
    v = real.double()
    mass = (A * band).sum(-1)  # (B, H, T)
    L = v.sum(-1)  # (B,)
    unif = (band[None] * v[:, None, :]).sum(-1) / L[:, None]  # (B, T)
    rows = v[:, None, :].expand_as(mass)
    return float((mass * rows).sum() / rows.sum()), float((unif * v).sum() / v.sum())


def pool(H: torch.Tensor, real: torch.Tensor, how: str) -> torch.Tensor:
    """``(B, d)`` from ``H (B, T, d)``: mean over real tokens, the first position (``cls``), or the last real token."""
    if how == "mean":
        w = real.to(H.dtype)[..., None]
        return (H * w).sum(1) / w.sum(1).clamp_min(1.0)
    if how == "cls":
        return H[:, 0]
    if how == "last":
        last = real.long().sum(1) - 1
        return H[torch.arange(H.shape[0]), last]
    raise ValueError(f"--pooling: expected one of {POOLINGS}, got {how!r}")


def score_gradients(backend: Backend, batch: Batch, loss: str, *, pooling: str = "mean", seed: int = 0,
                    micro: int = 8, train: bool = True, keep: bool = False) -> dict[str, Any]:
    """Per layer: the blind-share sums of ``dL/dS`` (and, with ``keep``, the gradients ``(B, H, T, T)`` and attention
    maps themselves), for ``loss`` = ``"label"`` or ``"mlm"``.

    The label loss is ``Σ_b CE(head(pool(H_b)), y_b) / B`` with ``head`` a fresh ``nn.Linear(d, n_classes)``
    (``torch.manual_seed(seed)``); the masked-reconstruction loss ``Σ masked CE / (masked count of the batch)`` with
    ``MASK_RATE`` masking drawn once for the whole batch from ``seed``. Parameters' ``.grad`` are cleared after.

    Returns:
        ``{"q": [(H,)]*layers, "g": [(H,)]*layers, "entropy": ..., "attn_first": first layer A of the first
        micro-batch or None, "G": [...] if keep, "A": [...] if keep, "masked": count}``.
    Raises:
        ValueError: unknown ``loss`` or ``pooling``.
    """
    if loss not in ("label", "mlm"):
        raise ValueError(f"loss: expected 'label' or 'mlm', got {loss!r}")
    if pooling not in POOLINGS:
        raise ValueError(f"--pooling: expected one of {POOLINGS}, got {pooling!r}")
    model = backend.model
    dtype = next(model.parameters()).dtype  # the head follows the model (float64 in the tests)
    was = model.training
    model.train(train)
    B = batch.ids.shape[0]
    ids, real, y = batch.ids, batch.real, batch.y
    if loss == "mlm":
        ids, masked = mask_tokens(batch.ids, MASK_RATE, torch.Generator().manual_seed(seed), pad_mask=batch.real,
                                  mask_id=backend.mask_id, at_least_one=True)
        n_masked = int(masked.sum())
    torch.manual_seed(seed)
    head = torch.nn.Linear(backend.d_model, batch.n_classes).to(dtype)
    out: dict[str, Any] = {"q": None, "g": None, "ent": None, "rows": None, "prox": [0.0, 0.0, 0.0], "G": [], "A": [],
                           "masked": n_masked if loss == "mlm" else 0}
    for start in range(0, B, micro):
        sl = slice(start, min(B, start + micro))
        r = real[sl]
        T = int(r.sum(1).max())  # drop columns that are padding in the whole micro-batch
        r = r[:, :T]
        torch.manual_seed(seed + start)
        H, scores, maps = backend.hidden_and_scores(ids[sl, :T], r)
        if loss == "label":
            L = F.cross_entropy(head(pool(H, r, pooling)), y[sl], reduction="sum") / B
        else:
            m = masked[sl, :T]
            logits = backend.mlm_logits(H)
            L = F.cross_entropy(logits[m].to(dtype), batch.ids[sl, :T][m], reduction="sum") / n_masked if m.any() else H.sum() * 0
        model.zero_grad(set_to_none=True)
        L.backward()
        qs, gs = zip(*(share_sums(S.grad, r) for S in scores))
        out["q"] = list(qs) if out["q"] is None else [a + b for a, b in zip(out["q"], qs)]
        out["g"] = list(gs) if out["g"] is None else [a + b for a, b in zip(out["g"], gs)]
        nrows = r.sum()
        ents = [entropy_gap(A, r) * nrows for A in maps]
        out["ent"] = ents if out["ent"] is None else [a + b for a, b in zip(out["ent"], ents)]
        out["rows"] = float(nrows) + (out["rows"] or 0.0)
        pm, pu = proximity(maps[0], r)
        out["prox"] = [out["prox"][0] + pm * float(nrows), out["prox"][1] + pu * float(nrows), out["prox"][2] + float(nrows)]
        if keep:
            out["G"].append([S.grad.detach().double().clone() for S in scores])
            out["A"].append([A.detach().double().clone() for A in maps])
        del H, scores, maps, L
    model.zero_grad(set_to_none=True)
    model.train(was)
    out["ent"] = [e / out["rows"] for e in out["ent"]]
    out["prox"] = (out["prox"][0] / out["prox"][2], out["prox"][1] / out["prox"][2])
    return out


def _shares(q: torch.Tensor, g: torch.Tensor) -> tuple[list[float], float]:
    per = [math.sqrt(float(a) / float(c)) if float(c) > 0 else 0.0 for a, c in zip(q, g)]
    allh = math.sqrt(float(q.sum()) / float(g.sum())) if float(g.sum()) > 0 else 0.0
    return per, allh


def measure(backend: Backend, batch: Batch, *, pooling: str = "mean", seed: int = 0, micro: int = 8,
            train: bool = True) -> dict[str, Any]:
    """Every per-layer, per-head measurement of the module docstring on ``batch``.

    Returns ``{"layers": [{"layer", "label_share", "label_share_heads", "mlm_share", "mlm_share_heads",
    "entropy_gap", "entropy_gap_heads"}], "proximity_first": float, "proximity_uniform": float, "batch": B,
    "length": T, "masked": count}``; shares pool the heads as ``sqrt(Σ_h q_h / Σ_h g_h)``, the entropy gap is the
    mean over heads.
    """
    lab = score_gradients(backend, batch, "label", pooling=pooling, seed=seed, micro=micro, train=train)
    mlm = score_gradients(backend, batch, "mlm", pooling=pooling, seed=seed, micro=micro, train=train)
    layers = []
    for l, (ql, gl, qm, gm, e) in enumerate(zip(lab["q"], lab["g"], mlm["q"], mlm["g"], lab["ent"])):
        lh, la = _shares(ql, gl)
        mh, ma = _shares(qm, gm)
        layers.append({"layer": l + 1, "label_share": la, "label_share_heads": lh, "mlm_share": ma, "mlm_share_heads": mh,
                       "entropy_gap": float(e.mean()), "entropy_gap_heads": [float(v) for v in e]})
    return {"layers": layers, "proximity_first": lab["prox"][0], "proximity_uniform": lab["prox"][1],
            "batch": int(batch.ids.shape[0]), "length": int(batch.ids.shape[1]), "masked": mlm["masked"]}
