"""How well the predicted active dimensions of ``mlmhead inspect`` fit MLM-pretrained backbones (a model check).

For each family's MLM-pretrained synthetic backbone (the phase diagram's ``pretrain_family``, natural head
scale s = 1), tied as pretrained and untied (its head copied, so dividing it leaves the hidden states alone),
:func:`initlab.mlmhead.report.inspect_model` measures the active dimensions per text at every k on the first
corpus documents; beside them stand the per-entry Gaussian model's value (also where ``inspect`` does not show
it), the i.i.d. Gaussian model's value that ``inspect`` printed until 2026-12-01 (:func:`iid_prediction`), and
at k = 1 the share of active entries whose maximum over the tokens sits at a special token ([CLS], [SEP]).
Run by ``python -m initlab.commands.prediction_check``; numbers in docs/mlmhead.md.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from pathlib import Path
from typing import Any, Sequence

import torch

from initlab.mlmhead import head_bias, inspect_model, rescale_mlm_head
from initlab.mlmhead.heads import K_ATTR, K_GRID
from initlab.runs import torch_threads
from initlab.synthetic.splade.data import make_corpus
from initlab.synthetic.splade.families import load_family_backbone
from initlab.synthetic.splade.phase.cell import pretrain_family
from initlab.synthetic.splade.phase.config import PRESETS, PhaseConfig
from initlab.theory.score_scale import closed_form as ss

__all__ = ["iid_prediction", "special_token_share", "prediction_rows", "format_rows"]


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
                    rescale_mlm_head(model, 1.0, untie=True)
                    setattr(model.config, K_ATTR, None)
                rep = inspect_model(model, tok, texts, ks=ks, max_length=cfg.doc_max_len)
                share = special_token_share(model, tok, texts, cfg.doc_max_len)
                for r in rep["table"]:
                    rows.append({"family": family, "head": head, "k": r["k"], "measured": r["active_dims_per_text"],
                                 "per_entry": rep["prediction"]["model_by_k"][f"{r['k']:g}"],
                                 "shown": r["predicted_active_dims_per_text"] is not None,
                                 "iid": iid_prediction(rep, head_bias(model), r["k"]), "dH/H": r["hidden_rel_change"],
                                 "special_share": share if r["k"] == 1.0 else None, "vocab": rep["vocab"]})
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    """A markdown table of :func:`prediction_rows` (per-entry and i.i.d. as predicted / measured - 1)."""
    out = ["| family | head | k | measured | per-entry (error) | shown by inspect | i.i.d. (error) | dH/H | special-token share |",
           "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for r in rows:
        e1 = r["per_entry"] / r["measured"] - 1 if r["measured"] else math.nan
        e2 = r["iid"] / r["measured"] - 1 if r["measured"] else math.nan
        share = "" if r["special_share"] is None else f"{r['special_share']:.2f}"
        out.append(f"| {r['family']} | {r['head']} | {r['k']:g} | {r['measured']:.1f} | {r['per_entry']:.1f} ({e1:+.0%}) | "
                   f"{'yes' if r['shown'] else 'no'} | {r['iid']:.1f} ({e2:+.0%}) | {r['dH/H']:.2g} | {share} |")
    return "\n".join(out)
