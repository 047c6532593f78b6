"""How well the predicted active dimensions of ``mlmhead inspect`` fit MLM-pretrained backbones (a model check).

For each family's MLM-pretrained synthetic backbone (the phase diagram's ``pretrain_family``, natural head
scale s = 1), tied as pretrained and untied (its head copied, so dividing it leaves the hidden states alone),
:func:`initlab.mlmhead.report.inspect_model` measures the active dimensions per text at every k on the first
corpus documents; beside them stand the per-entry Gaussian model's value (also where ``inspect`` does not show
it), the i.i.d. Gaussian model's value that ``inspect`` printed until 2026-12-01 (:func:`iid_prediction`), an
exploratory variant of the per-entry model with a text-level component (:func:`text_effect_prediction`), and at
k = 1 two checks of the model's assumptions (:func:`independence_checks`: the prediction with each entry's
empirical logit distribution instead of a Gaussian, and the active dims measured after shuffling the text tokens
across texts) and the share of active entries whose maximum sits at a special token ([CLS], [SEP]).
Run by ``python -m initlab.app.docgen.prediction_check``; numbers in docs/mlmhead.md.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from pathlib import Path
from typing import Any, Sequence

import torch

from initlab.mlmhead import head_bias, inspect_model, untie_head
from initlab.mlmhead.heads import K_GRID
from initlab.runs import torch_threads
from initlab.synthetic.splade.data import make_corpus
from initlab.synthetic.splade.families import load_family_backbone
from initlab.synthetic.splade.phase.cell import pretrain_family
from initlab.synthetic.splade.phase.config import PRESETS, PhaseConfig
from initlab.theory.score_scale import closed_form as ss

__all__ = ["iid_prediction", "text_effect_prediction", "independence_checks", "special_token_share", "prediction_rows",
           "format_rows"]


def iid_prediction(rep: dict[str, Any], bias: torch.Tensor | None, k: float) -> float:
    """The i.i.d. Gaussian model's active dims per text at ``k`` as ``inspect`` computed them until 2026-12-01:
    ``V (1 - (1 - Phi(mu_k / s_k))^L)`` with the k = 1 logit mean mu and sd sigma over all entries, ``mu_k =
    b_mean + (mu - b_mean) / k``, ``s_k = sigma / k``, L the mean text length rounded (:mod:`.closed_form`)."""
    row1 = next(r for r in rep["table"] if r["k"] == 1.0)
    b_mean = 0.0 if bias is None else float(bias.detach().double().mean())
    mu, sigma = row1["logit_mean"], max(row1["logit_std"], 1e-12)
    L = max(int(round(rep["mean_tokens"])), 1)
    return rep["vocab"] * ss.pooled_active_fraction(b_mean + (mu - b_mean) / k, sigma / k, L)


@torch.no_grad()
def text_effect_prediction(model: Any, tokenizer: Any, texts: Sequence[str], max_length: int,
                           ks: Sequence[float]) -> dict[float, float]:
    """Exploratory: mean active dims per text at each k when the text tokens of a text share a component.

    The per-entry model (:mod:`initlab.theory.score_scale.per_entry`) with, for the text-token class, ``y_tij =
    mu_j + u_ij + e_tij``: ``u_ij ~ N(0, omega_j^2)`` shared by the tokens of text i, ``e_tij ~ N(0, s_j^2)``
    independent (one-way random effects, moments by ANOVA: ``s_j^2`` the pooled within-text variance, ``omega_j^2 =
    Var_i(mean_t y_tij) - mean_i s_j^2 / n_i``, floored at 0); special-token classes as in the per-entry model.
    ``P(a_ij = 0) = P(specials <= 0) E_u[Phi(-(k b_j + mu_j + u) / s_j)^{n_i}]``, the expectation by 32-point
    Gauss-Hermite quadrature. Fitted on the hidden states of k = 1 (as for an untied head). Not part of
    ``inspect``: it reduces the per-entry model's excess on the trained backbones but does not remove it."""
    import numpy as np

    from initlab.theory.score_scale import per_entry as pe

    enc = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    z = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits.double()
    V = z.shape[-1]
    bias = head_bias(model)
    b = torch.zeros(V, dtype=torch.float64) if bias is None else bias.detach().double()
    m = enc["attention_mask"].bool()
    cls = pe.token_classes(enc["input_ids"], tokenizer.all_special_ids)
    y = z - b
    text = m & (cls == pe.TEXT_CLASS)
    n_i = text.sum(1).double().clamp_min(1.0)  # (n,)
    ybar = (y * text[..., None]).sum(1) / n_i[:, None]  # (n, V)
    mu = ybar.mul(n_i[:, None]).sum(0) / n_i.sum()
    sw2 = (((y - ybar[:, None, :]) ** 2) * text[..., None]).sum((0, 1)) / max(float(n_i.sum()) - len(texts), 1.0)
    om = (ybar.var(0) - (sw2[None] / n_i[:, None]).mean(0)).clamp_min(0.0).sqrt()
    sw = sw2.sqrt().clamp_min(1e-12)
    special = sorted({int(c) for c in cls[m].tolist()} - {pe.TEXT_CLASS})
    gx, gw = (torch.tensor(v, dtype=torch.float64) for v in np.polynomial.hermite_e.hermegauss(32))
    gw = gw / math.sqrt(2 * math.pi)
    out = {}
    for k in ks:
        log_sp = torch.zeros(len(texts), V, dtype=torch.float64)
        for c in special:
            sel = y[m & (cls == c)]
            mu_c, tau_c = sel.mean(0), (sel.std(0) if sel.shape[0] > 1 else torch.zeros(V, dtype=torch.float64))
            cnt = (m & (cls == c)).sum(1).double()[:, None]
            lp = torch.where(tau_c > 0, torch.special.log_ndtr(-(k * b + mu_c) / tau_c.clamp_min(1e-300)),
                             torch.where(k * b + mu_c <= 0, torch.zeros_like(mu_c), torch.full_like(mu_c, -math.inf)))
            log_sp = log_sp + torch.where(cnt > 0, cnt * lp[None], torch.zeros(1, dtype=torch.float64))
        p0 = torch.zeros(len(texts), V, dtype=torch.float64)
        for x, w in zip(gx, gw):
            p0 += w * torch.exp(n_i[:, None] * torch.special.log_ndtr(-(k * b + mu + om * x) / sw)[None] + log_sp)
        out[float(k)] = float((1 - p0).sum(1).mean())
    return out


@torch.no_grad()
def independence_checks(model: Any, tokenizer: Any, texts: Sequence[str], max_length: int, seed: int = 0) -> dict[str, float]:
    """Which assumption of the per-entry model fails, at k = 1 (mean active dims per text):

    * ``empirical``: the per-entry prediction with each class's and entry's *empirical* distribution of the logits
      over all texts in place of the Gaussian, tokens still independent: ``1 - prod_c q_cj^{n_ic}`` with ``q_cj``
      the fraction of class-c tokens whose logit j is <= 0 (no Gaussian assumption);
    * ``shuffled``: measured after permuting the text tokens' logit rows across all texts (a seeded permutation;
      special tokens stay), which keeps every entry's distribution and removes the dependence between the tokens
      of one text.

    If both sit at the per-entry prediction and away from the measured value, the misfit is the dependence of a
    text's tokens, not the Gaussian tails."""
    from initlab.theory.score_scale import per_entry as pe

    enc = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    z = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits.double()
    m = enc["attention_mask"].bool()
    cls = pe.token_classes(enc["input_ids"], tokenizer.all_special_ids)
    log_p0 = torch.zeros(len(texts), z.shape[-1], dtype=torch.float64)
    for c in torch.unique(cls[m]).tolist():
        q = (z[m & (cls == c)] <= 0).double().mean(0)
        cnt = (m & (cls == c)).sum(1).double()[:, None]
        log_p0 = log_p0 + torch.where(cnt > 0, cnt * q.clamp_min(1e-300).log()[None], torch.zeros(1, dtype=torch.float64))
    text = m & (cls == pe.TEXT_CLASS)
    shuffled = z.clone()
    rows = z[text]
    shuffled[text] = rows[torch.randperm(rows.shape[0], generator=torch.Generator().manual_seed(seed))]
    active = (shuffled.masked_fill(~m[..., None], -math.inf).amax(1) > 0).double().sum(1)
    return {"empirical": float((1 - log_p0.exp()).sum(1).mean()), "shuffled": float(active.mean())}


@torch.no_grad()
def special_token_share(model: Any, tokenizer: Any, texts: Sequence[str], max_length: int) -> float:
    """Of the entries active in a text's SPLADE vector (``max_t z_tj > 0``), the share whose maximum is at a special
    token, over ``texts``."""
    enc = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    z = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits.float()
    z = z.masked_fill(~enc["attention_mask"].bool()[..., None], -math.inf)
    top, where = z.max(dim=1)  # (n, V)
    special = torch.isin(enc["input_ids"], torch.tensor(tokenizer.all_special_ids))  # (n, T)
    at_special = torch.gather(special, 1, where)  # (n, V)
    active = top > 0
    return float((active & at_special).sum()) / max(int(active.sum()), 1)


def prediction_rows(work_dir: str | Path | None = None, cfg: PhaseConfig = PRESETS["default"], *, n_texts: int = 40,
                    ks: Sequence[float] = K_GRID, seed: int = 0) -> list[dict[str, Any]]:
    """One row per (family, head tied/untied, k): ``measured``, ``per_entry`` (and ``shown``: whether ``inspect``
    shows it), ``iid``, ``dH/H``; ``special_share`` at k = 1. Backbones are pretrained into ``work_dir`` (a
    temporary folder if None; reused if already there)."""
    corpus = make_corpus(cfg.corpus)
    texts = list(corpus.docs.values())[:n_texts]
    rows = []
    with tempfile.TemporaryDirectory() as tmp, torch_threads(cfg.torch_threads), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        root = Path(work_dir) if work_dir is not None else Path(tmp)
        for family in cfg.families:
            folder = pretrain_family(str(root / f"{family}_seed={seed}"), family, cfg, seed)
            for head in ("tied", "untied"):
                model, tok = load_family_backbone(Path(folder))
                if head == "untied":
                    untie_head(model)
                rep = inspect_model(model, tok, texts, ks=ks, max_length=cfg.doc_max_len)
                share = special_token_share(model, tok, texts, cfg.doc_max_len)
                effect = text_effect_prediction(model, tok, texts, cfg.doc_max_len, ks)
                checks = independence_checks(model, tok, texts, cfg.doc_max_len, seed)
                for r in rep["table"]:
                    rows.append({"family": family, "head": head, "k": r["k"], "measured": r["active_dims_per_text"],
                                 "per_entry": rep["prediction"]["model_by_k"][f"{r['k']:g}"],
                                 "shown": r["predicted_active_dims_per_text"] is not None,
                                 "text_effect": effect[float(r["k"])],
                                 "iid": iid_prediction(rep, head_bias(model), r["k"]), "dH/H": r["hidden_rel_change"],
                                 "special_share": share if r["k"] == 1.0 else None, "vocab": rep["vocab"],
                                 **{key: (v if r["k"] == 1.0 else None) for key, v in checks.items()}})
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    """A markdown table of :func:`prediction_rows` (per-entry and i.i.d. as predicted / measured - 1)."""
    out = ["| family | head | k | measured | per-entry (error) | shown by inspect | + text effect, exploratory (error) | "
           "i.i.d. (error) | dH/H | special-token share | empirical CDF, independent tokens | measured, tokens shuffled |",
           "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def err(x: float, r: dict[str, Any]) -> str:
        return f"{x:.1f} ({x / r['measured'] - 1:+.0%})" if r["measured"] else f"{x:.1f}"

    for r in rows:
        share = "" if r["special_share"] is None else f"{r['special_share']:.2f}"
        checks = " | ".join("" if r.get(key) is None else err(r[key], r) for key in ("empirical", "shuffled"))
        out.append(f"| {r['family']} | {r['head']} | {r['k']:g} | {r['measured']:.1f} | {err(r['per_entry'], r)} | "
                   f"{'yes' if r['shown'] else 'no'} | {err(r['text_effect'], r)} | {err(r['iid'], r)} | {r['dH/H']:.2g} | "
                   f"{share} | {checks} |")
    return "\n".join(out)
