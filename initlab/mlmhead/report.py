"""The MLM-head scale report: every scale quantity of a masked-LM checkpoint measured on sample texts, against k.

The term weights follow SPLADE v2 (arXiv:2109.10086, eq. 1, max pooling), computed by
:func:`initlab.theory.score_scale.splade_terms.splade_term_weights`. The predicted active dimensions come from
the per-entry Gaussian logit model with position classes (:mod:`initlab.theory.score_scale.per_entry`), fitted
on the k = 1 pass and shown only where it holds (:data:`PREDICTION_TOLERANCE`, :data:`MAX_HIDDEN_CHANGE`)."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch

from initlab.mlmhead.fused import splade_max_pool
from initlab.mlmhead.heads import (K_ATTR, K_GRID, check_k, check_pad_token, check_vocab, family_of, head_bias, head_input,
                                   head_projection, is_tied, reachable_rows)
from initlab.mlmhead.lengths import check_length, truncation_counts, warn_truncation
from initlab.mlmhead.splade_encoder import ENGINES
from initlab.mlmhead.tiny import default_texts
from initlab.theory.score_scale import per_entry
from initlab.theory.score_scale.splade_terms import splade_term_weights as splade_from_logits

#: the per-entry model's prediction is shown only if, at the fit point k = 1, it is within this relative error of
#: the measured active dimensions (a check of its Gaussian-tail and token-independence assumptions on these texts)
PREDICTION_TOLERANCE = 0.25
#: ... and only at the k where the encoder's last hidden states moved by at most this much (dH/H): the model holds
#: them at their k = 1 values, which a tied head (the input embeddings are divided too) does not
MAX_HIDDEN_CHANGE = 0.05


# ------------------------------------------------------------------------------------------------
# inspect
# ------------------------------------------------------------------------------------------------
def _stats(x: torch.Tensor) -> dict[str, float]:
    x = x.double()
    return {"mean": x.mean().item(), "std": x.std().item() if x.numel() > 1 else 0.0,
            "min": x.min().item(), "max": x.max().item()}


def _wide(x: torch.Tensor) -> torch.Tensor:
    """float32, or float64 for a float64 model (whose statistics are then exact to float64)."""
    return x if x.dtype == torch.float64 else x.float()


def _forward(model: Any, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The dense path: logits ``(b, T, V)`` and last hidden states ``(b, T, hidden)`` of the whole model."""
    with torch.inference_mode():
        out = model(**batch, output_hidden_states=True)
    return _wide(out.logits), _wide(out.hidden_states[-1])


def _forward_fused(model: Any, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The fused path's pass: logits ``(b, T, V)`` (for the logit statistics only), last hidden states
    ``(b, T, hidden)`` and the head's input ``h (b, T, d)`` (:func:`initlab.mlmhead.heads.head_input`), from one pass
    of the encoder; ``h W_head^T + b`` are the logits of the dense path."""
    with torch.inference_mode():
        out = model.base_model(**batch, output_hidden_states=True)
        h = head_input(model, out.last_hidden_state)
        z = torch.nn.functional.linear(h, head_projection(model), head_bias(model))
    return _wide(z), _wide(out.hidden_states[-1]), h


def recommend_k(table: Sequence[dict[str, Any]], batch: int = 32) -> dict[str, Any]:
    """The recommended rescaling factor (a heuristic from :mod:`initlab.theory.score_scale.closed_form`, not a law).

    Rule: the smallest k of the table whose measured per-query score spread over unrelated texts
    (``score_sd``) is at most ``sqrt(2 ln B)``, the point where an InfoNCE softmax over B in-batch
    candidates starts to saturate; k = 1 if it already is (rescaling then only risks the opposite
    failure, query vectors with no active terms, where the FLOPS gradient dominates); the largest k
    with a warning if none is.
    """
    thr = math.sqrt(2 * math.log(batch))
    ok = [r for r in table if r["score_sd"] <= thr]
    if ok:
        best = min(ok, key=lambda r: r["k"])
        note = "smallest k with score sd <= sqrt(2 ln B)"
    else:
        best = max(table, key=lambda r: r["k"])
        note = "no k in the table brings score sd below sqrt(2 ln B); largest k given"
    warn = best["active_dims_per_text"] < 1.0
    if warn:
        note += "; WARNING: texts have < 1 active dimension at this k (ranking gradient may vanish)"
    if best.get("collapsed"):
        note += "; WARNING: representations collapse at this k (" + "; ".join(best.get("collapse_reasons", [])) + ")"
    return {"k": best["k"], "threshold_score_sd": thr, "batch": batch, "rule": note}


def inspect_model(model: Any, tokenizer: Any, texts: Sequence[str] | None = None, *,
                  ks: Sequence[float] = K_GRID, max_length: int = 64, batch: int = 32,
                  collapse: Callable[..., Any] | None = None, engine: str = "dense") -> dict[str, Any]:
    """Measure every MLM-head scale quantity of ``model`` on ``texts`` (default :func:`default_texts`).

    For each k the model is actually rescaled as :func:`rescale_mlm_head` would do (tied: the shared
    tensor, so the encoder input changes too) and run on the texts; the original weights are restored
    afterwards (bit-exact copy). Per k: logit statistics over all (non-padding token, vocabulary)
    entries, active fraction of logits, SPLADE active dimensions per text, FLOPS regulariser of the
    text batch ``sum_j (mean_i a_ij)^2``, FLOPS cost (mean active-dimension overlap of two texts),
    mean pairwise cosine of SPLADE vectors, score mean and per-query score sd over the other texts,
    and the relative change of the encoder's last hidden states ``||H_k - H_1||_F / ||H_1||_F``.

    Predicted active dimensions (``predicted_active_dims_per_text``): the per-entry Gaussian logit model with
    position classes (:mod:`initlab.theory.score_scale.per_entry`; special tokens are classes of their own),
    fitted on the k = 1 pass: per class c and entry j the mean and sd of the head part ``z - b`` of the logits;
    the bias b is not divided by k, the head part is; each text's own class counts. ``None`` where the model
    does not hold: everywhere if at k = 1 it misses the measured value by more than :data:`PREDICTION_TOLERANCE`,
    and at every k whose ``hidden_rel_change`` exceeds :data:`MAX_HIDDEN_CHANGE`. ``prediction`` says which.
    (The i.i.d. Gaussian model of :mod:`initlab.theory.score_scale.closed_form`, one ``N(mu, sigma^2)`` for every
    logit, is not used here: it predicts nearly every entry active for any trained head, docs/mlmhead.md.)

    With ``collapse`` (the one detector, :func:`initlab.nn.collapse.detect_collapse`, passed in by the caller
    since this layer does not import :mod:`initlab.nn`; ``initlab mlmhead inspect`` does) each row also
    carries its verdict at that k (empty or dense vectors, and near-constant ones: mean pairwise cosine of the
    text vectors, or one top-10 ranking shared by the queries when the first half of the texts queries the
    second half): ``collapsed`` and ``collapse_reasons``.

    ``engine`` (one of :data:`initlab.mlmhead.splade_encoder.ENGINES`) says how the SPLADE vectors ``(n_texts, V)`` are pooled: ``"fused"``
    by :func:`initlab.mlmhead.fused.splade_max_pool` on the head's input, as training pools them; ``"dense"`` (default) from
    the model's logits by :func:`initlab.theory.score_scale.splade_terms.splade_term_weights`. Both give the same
    vectors (a float64 test); the logit statistics need the logits on either path, so here the fused head only adds
    work (``benchmarks/bench_inspect.py --heads``: 1.7 times the dense path's time on a bert-base model), hence the
    dense default.

    Returns:
        A JSON-ready dict: ``family``, ``tied``, ``head`` (Frobenius norm, row norms), ``bias``, ``dtype``
        (of the weights as measured, and as the checkpoint stores them when loaded by
        :func:`initlab.mlmhead.checkpoint.load_masked_lm`), ``mean_tokens``, ``table`` (one row per k),
        ``prediction``, ``recommended``, ``max_length``.
    Raises:
        ValueError: fewer than 2 texts, unknown family or no MLM head, ``max_length`` beyond the model's
            usable length (:mod:`initlab.mlmhead.lengths`), a tokenizer without a pad token.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine: expected one of {list(ENGINES)}, got {engine!r}")
    check_length(max_length, model, flag="--max-length", tokenizer=tokenizer)
    texts = default_texts() if texts is None else list(texts)
    if len(texts) < 2 or not all(isinstance(t, str) and t.strip() for t in texts):
        raise ValueError("texts: expected at least 2 non-empty strings")
    ks = [check_k(k) for k in ks]
    check_pad_token(tokenizer, "tokenizer", config=model.config)  # texts are batched with padding
    vocab = check_vocab(model, tokenizer)  # one-line errors for a vocabulary or bias of the wrong size
    W = head_projection(model)
    bias = head_bias(model)
    reached = reachable_rows(tokenizer, int(W.shape[0]))
    rows = None if bool(reached.all()) else reached  # None: every row is a token (no slicing, the common case)
    report = _head_summary(model, W, bias, len(texts))
    report.update({"vocab_reached": vocab["reached_rows"], "unreached_rows": vocab["unreached_rows"]})
    lengths, buckets = _length_buckets(tokenizer, texts, max_length)
    report["mean_tokens"] = sum(lengths) / len(lengths)
    report["truncation"] = truncation_counts(tokenizer, texts, max_length)
    warn_truncation("mlmhead inspect texts", report["truncation"])
    n_entries = sum(int(bk["attention_mask"].sum()) for bk in buckets) * vocab["reached_rows"]
    moments = per_entry.EntryMoments(bias if rows is None or bias is None else bias[rows], vocab["reached_rows"])
    W0 = W.detach().clone()
    model.eval()
    table = []
    H_ref: list[torch.Tensor] | None = None
    try:
        for k in [1.0] + [k for k in ks if k != 1.0]:  # k = 1 first: the hidden-state reference
            with torch.no_grad():
                W.copy_(W0 / k)
            acc, a_parts, H_parts = _logit_pass(model, buckets, moments if H_ref is None else None, rows, engine)
            if H_ref is None:
                H_ref = H_parts
            if k not in ks:  # the reference pass only
                continue
            a = torch.cat(a_parts).double()  # (n_texts, V), length-sorted order
            S = a @ a.T  # scores s(q, d) between all texts
            table.append(_table_row(k, acc, n_entries, a, S, torch.cat(H_parts), torch.cat(H_ref)))
            table[-1]["unreached_active_dims_per_text"] = acc["unreached_active"] / a.shape[0]
            if collapse is not None:
                h = a.shape[0] // 2  # first half of the texts as queries against the second half as documents
                verdict = collapse(q_active=table[-1]["active_dims_per_text"], d_active=table[-1]["active_dims_per_text"],
                                   vocab_size=vocab["reached_rows"], doc_vectors=a, scores=S[:h, h:] if h >= 2 else None)
                table[-1].update({"collapsed": verdict.collapsed, "collapse_reasons": list(verdict.reasons)})
    finally:
        with torch.no_grad():
            W.copy_(W0)
    table.sort(key=lambda r: r["k"])
    report["prediction"] = predict_active_dims(table, moments, buckets, moments.bias)
    report["max_length"] = int(max_length)
    report["head_engine"] = engine
    report["table"] = table
    report["recommended"] = recommend_k(table, batch)
    return report


def _head_summary(model: Any, W: torch.Tensor, bias: torch.Tensor | None, n_texts: int) -> dict[str, Any]:
    """The report's header: family, tie, vocabulary V and width of ``W : (V, d)``, recorded k, head and bias norms."""
    Wd = W.detach().double()
    rows = Wd.norm(dim=1)
    return {
        "family": family_of(model),
        "model_type": model.config.model_type,
        "tied": is_tied(model),
        "vocab": int(W.shape[0]),
        "head_dim": int(W.shape[1]),
        "recorded_k": getattr(model.config, K_ATTR, None),
        "dtype": {"measured": str(W.dtype).replace("torch.", ""),
                  "stored": str(getattr(model, "initlab_stored_dtype", None) or W.dtype).replace("torch.", "")},
        "head": {"frobenius": Wd.norm().item(), "row_norm_mean": rows.mean().item(), "row_norm_max": rows.max().item()},
        "bias": None if bias is None else _stats(bias.detach()),
        "n_texts": n_texts,
    }


def _length_buckets(tokenizer: Any, texts: Sequence[str], max_length: int) -> tuple[list[int], list[dict[str, torch.Tensor]]]:
    """Token lengths of ``texts`` and length-sorted buckets of up to 20 tokenised texts: little padding, bounded
    memory (logits are ``(b, T, V)``), few large matrix products (small ones cost more thread synchronisation on
    a busy CPU)."""
    lengths = [len(tokenizer(t, truncation=True, max_length=max_length)["input_ids"]) for t in texts]
    order = sorted(range(len(texts)), key=lambda i: lengths[i])
    buckets = []
    for j in range(0, len(order), 20):
        idx = order[j:j + 20]
        enc = tokenizer([texts[i] for i in idx], padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        buckets.append({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                        "classes": per_entry.token_classes(enc["input_ids"], tokenizer.all_special_ids)})
    return lengths, buckets


def _logit_pass(model: Any, buckets: list[dict[str, torch.Tensor]], moments: per_entry.EntryMoments | None = None,
                rows: torch.Tensor | None = None, engine: str = "fused") -> tuple[dict[str, float], list[torch.Tensor], list[torch.Tensor]]:
    """One pass over the buckets at the current head scale: running sums of the logits over (non-padding token,
    vocabulary) entries, the SPLADE term weights ``(b, V)`` per bucket and the last hidden states ``(N_tokens, d)``;
    with ``moments``, the per-class, per-entry moments of the logits are accumulated too. ``rows (V,)`` bool: the
    vocabulary rows some token id reaches (None: all); the others are left out of everything but
    ``acc["unreached_active"]``, their SPLADE active dimensions summed over texts (reported apart). ``engine``: how the
    term weights are pooled (``"fused"`` or ``"dense"``)."""
    acc = {"sum": 0.0, "sumsq": 0.0, "max": -math.inf, "pos": 0, "unreached_active": 0}
    a_parts, H_parts = [], []
    for bk in buckets:
        batch = {"input_ids": bk["input_ids"], "attention_mask": bk["attention_mask"]}
        m = bk["attention_mask"].bool()
        if engine == "fused":
            z, H, h = _forward_fused(model, batch)
            W, b = head_projection(model), head_bias(model)
            with torch.inference_mode():
                if rows is None:
                    a = splade_max_pool(h, W, b, m)
                else:
                    a = splade_max_pool(h, W[rows], None if b is None else b[rows], m)
                    out = splade_max_pool(h, W[~rows], None if b is None else b[~rows], m)
                    acc["unreached_active"] += int((out > 0).sum())
            a = _wide(a)
        else:
            z, H = _forward(model, batch)
            if rows is not None:
                acc["unreached_active"] += int((splade_from_logits(z[..., ~rows], m) > 0).sum())
        if rows is not None:
            z = z[..., rows]
        if moments is not None:
            moments.add(z, bk["classes"], m)
        zt = z[m]  # (N_tokens, V)
        acc["sum"] += zt.sum(dtype=torch.float64).item()
        acc["sumsq"] += zt.double().pow(2).sum().item()
        acc["max"] = max(acc["max"], zt.max().item())
        acc["pos"] += int(torch.count_nonzero(zt > 0))
        a_parts.append(splade_from_logits(z, m) if engine == "dense" else a)  # (b, V)
        H_parts.append(H[m])  # (N_tokens, d)
        del z, zt
    return acc, a_parts, H_parts


def _table_row(k: float, acc: dict[str, float], n_entries: int, a: torch.Tensor, S: torch.Tensor, Hk: torch.Tensor,
               H1: torch.Tensor) -> dict[str, Any]:
    """The scale quantities at ``k`` from the logit sums ``acc`` over ``n_entries`` entries, the term weights
    ``a : (n_texts, V)``, their scores ``S = a a^T`` and the last hidden states at k and at k = 1 ``(N_tokens, d)``."""
    z_mean = acc["sum"] / n_entries
    z_std = math.sqrt(max(acc["sumsq"] / n_entries - z_mean ** 2, 0.0) * n_entries / max(n_entries - 1, 1))
    act = (a > 0).double()
    n = a.shape[0]
    off = ~torch.eye(n, dtype=torch.bool)
    an = torch.nn.functional.normalize(a, dim=1)
    cos = an @ an.T
    per_q_sd = torch.stack([S[i][off[i]].std() for i in range(n)]).mean().item()
    return {
        "k": k,
        "logit_mean": z_mean,
        "logit_std": z_std,
        "logit_max": acc["max"],
        "active_fraction_logits": acc["pos"] / n_entries,
        "active_dims_per_text": act.sum(1).mean().item(),
        "active_fraction_text": act.mean().item(),
        "mean_term_weight": a.mean().item(),
        "flops_reg": (a.mean(0) ** 2).sum().item(),
        "flops_cost": (act @ act.T)[off].mean().item(),
        "mean_pairwise_cosine": cos[off].mean().item(),
        "score_mean": S[off].mean().item(),
        "score_sd": per_q_sd,
        "hidden_rel_change": ((Hk - H1).double().norm() / H1.double().norm()).item(),
    }


def predict_active_dims(table: list[dict[str, Any]], moments: per_entry.EntryMoments,
                         buckets: list[dict[str, torch.Tensor]], bias: torch.Tensor | None) -> dict[str, Any]:
    """Set every row's ``predicted_active_dims_per_text`` from the per-entry model fitted at k = 1 (``None`` where it
    does not hold, see :func:`inspect_model`); return the ``prediction`` summary."""
    classes, mu, tau = moments.fit()
    index = {c: i for i, c in enumerate(classes)}
    counts = []
    for bk in buckets:  # tokens of each class in each text (n_texts, C), the texts in the buckets' order
        m = bk["attention_mask"].bool()
        cnt = torch.zeros(m.shape[0], len(classes), dtype=torch.float64)
        for c in torch.unique(bk["classes"][m]).tolist():
            cnt[:, index[c]] = ((bk["classes"] == c) & m).sum(1).double()
        counts.append(cnt)
    counts = torch.cat(counts)
    b = moments.bias
    model = {r["k"]: float(per_entry.expected_active_dims(b, mu, tau, counts, r["k"]).mean()) for r in table}
    fit = next((r for r in table if r["k"] == 1.0), None)
    measured = fit["active_dims_per_text"] if fit is not None else None
    if fit is None:  # no k = 1 row to check the model against
        holds, err = False, None
    else:
        err = (model[1.0] - measured) / max(measured, 1.0)
        holds = abs(err) <= PREDICTION_TOLERANCE
    shown = []
    for r in table:
        ok = holds and r["hidden_rel_change"] <= MAX_HIDDEN_CHANGE
        r["predicted_active_dims_per_text"] = model[r["k"]] if ok else None
        if ok:
            shown.append(r["k"])
    if fit is None:
        note = "not shown: the model is checked at k = 1, which is not in the table"
    elif not holds:
        note = (f"not shown: the per-entry Gaussian model gives {model[1.0]:.4g} active dims at k = 1 where "
                f"{measured:.4g} are measured ({_pct(err)}, more than {PREDICTION_TOLERANCE:.0%}); these logits are "
                "not Gaussian per entry with independent tokens")
    else:
        note = f"per-entry Gaussian model, {_pct(err)} from the measured value at k = 1"
        hidden = [r["k"] for r in table if r["k"] not in shown]
        if hidden:
            note += (f"; not shown at k = {', '.join(f'{k:g}' for k in hidden)}, where the hidden states change "
                     f"(dH/H > {MAX_HIDDEN_CHANGE:g}: the head is tied, so the input embeddings are divided too; "
                     "the model keeps the hidden states of k = 1)")
    return {"model": "per-entry Gaussian logits with position classes (initlab.theory.score_scale.per_entry)",
            "fit_at_k": 1.0, "classes": len(classes), "model_at_fit": model.get(1.0), "measured_at_fit": measured,
            "model_by_k": {f"{k:g}": v for k, v in model.items()},  # also where not shown, for checks of the model
            "relative_error_at_fit": err, "tolerance": PREDICTION_TOLERANCE, "max_hidden_change": MAX_HIDDEN_CHANGE,
            "holds": holds, "shown_at_k": shown, "note": note}


_TABLE_FMT = [
    ("k", "k", "{:g}"),
    ("logit_mean", "logit mean", "{:.3g}"),
    ("logit_std", "logit std", "{:.3g}"),
    ("active_fraction_logits", "active z>0", "{:.3g}"),
    ("active_dims_per_text", "active dims", "{:.1f}"),
    ("predicted_active_dims_per_text", "pred. dims", "{:.1f}"),
    ("flops_reg", "FLOPS reg", "{:.4g}"),
    ("flops_cost", "FLOPS cost", "{:.4g}"),
    ("mean_pairwise_cosine", "mean cos", "{:.3f}"),
    ("score_mean", "score mean", "{:.4g}"),
    ("score_sd", "score sd", "{:.4g}"),
    ("hidden_rel_change", "dH/H", "{:.2g}"),
]


def _pct(x: float) -> str:
    """A signed percentage with one decimal, ``0.0 %`` for a magnitude below 0.05 %."""
    return "0.0 %" if abs(x) < 5e-4 else f"{x * 100:+.1f} %"


def _cell(value: Any, fmt: str) -> str:
    return "n/a" if value is None else fmt.format(value)


def format_inspect(rep: dict[str, Any]) -> str:
    """Human-readable report of :func:`inspect_model`."""
    h, b = rep["head"], rep["bias"]
    dt = rep["dtype"]
    lines = [
        f"family: {rep['family']} (model_type {rep['model_type']}); head {'tied to' if rep['tied'] else 'separate from'} "
        f"the input embeddings; W_head {rep['vocab']} x {rep['head_dim']}"
        + (f"; already rescaled, recorded k = {rep['recorded_k']:g}" if rep.get("recorded_k") else ""),
        f"W_head: Frobenius norm {h['frobenius']:.4g}, row norm mean {h['row_norm_mean']:.4g}, max {h['row_norm_max']:.4g}"
        f"; weights {dt['measured']}" + (f" (stored {dt['stored']})" if dt["stored"] != dt["measured"] else ""),
        "bias: none" if b is None else
        f"bias: mean {b['mean']:.4g}, std {b['std']:.4g}, min {b['min']:.4g}, max {b['max']:.4g}",
        f"texts: {rep['n_texts']} (mean {rep['mean_tokens']:.1f} tokens)",
    ]
    if rep.get("unreached_rows"):
        un = ", ".join(f"{r['unreached_active_dims_per_text']:.1f}" for r in rep["table"])
        lines.append(f"vocabulary: {rep['vocab']} rows, {rep['vocab_reached']} reached by a token id; the other "
                     f"{rep['unreached_rows']} (padding) are left out of every number below (active dims per text "
                     f"there, by k: {un})")
    tr = rep.get("truncation")
    if tr and tr["truncated_texts"]:
        lines.append(f"truncation: {tr['truncated_texts']} of {rep['n_texts']} texts cut at --max-length {rep['max_length']} "
                     f"({tr['tokens_cut_share']:.1%} of their tokens)")
    lines += [
        f"pred. dims: {rep['prediction']['note']}",
        "",
        " | ".join(f"{title:>10}" for _, title, _ in _TABLE_FMT),
    ]
    for r in rep["table"]:
        lines.append(" | ".join(f"{_cell(r[key], fmt):>10}" for key, _, fmt in _TABLE_FMT))
    flagged = [r for r in rep["table"] if r.get("collapsed")]
    for r in flagged:
        lines.append(f"COLLAPSED at k = {r['k']:g}: " + "; ".join(r["collapse_reasons"]))
    rec = rep["recommended"]
    lines += ["", f"recommended k: {rec['k']:g}  ({rec['rule']}; sqrt(2 ln {rec['batch']}) = "
                  f"{rec['threshold_score_sd']:.3g}; a heuristic, see docs/mlmhead.md)"]
    return "\n".join(lines)
