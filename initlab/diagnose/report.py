"""The diagnosis as a whole (:func:`diagnose`), and its three outputs: text (verdict + per-layer table), a figure
of the blind shares, JSON."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import torch

from initlab.diagnose.data import encode_all, make_batch, read_sequences, word_ids
from initlab.diagnose.measure import measure
from initlab.diagnose.models import choose_mask_id, load_backend
from initlab.diagnose.probes import bag_of_tokens_probe, spt_probe
from initlab.diagnose.verdict import MAX_ENTROPY_GAP, MIN_BLIND_SHARE, predict
from initlab.runs import atomic_write_bytes

__all__ = ["diagnose", "diagnose_loaded", "format_report", "save_figure", "BAG_MAX_SEQUENCES", "DEFAULT_MAX_LENGTH",
           "DEFAULT_BATCH"]

BAG_MAX_SEQUENCES = 2048
#: ``diagnose``'s defaults: tokens per sequence (or the model's usable length when shorter) and sequences measured
#: (or every sequence of a file that holds fewer)
DEFAULT_MAX_LENGTH = 512
DEFAULT_BATCH = 64


def diagnose_loaded(backend, ids: list, labels: list[str] | None, *, pooling: str = "mean", batch_size: int = 64,
                    spt_steps: int = 0, seed: int = 0, micro: int = 8) -> dict[str, Any]:
    """The diagnosis of an already-loaded model on token-id sequences ``ids`` (list of 1-D int arrays).

    Returns the JSON-ready result: ``model``, ``family``, ``pooling``, ``labels`` ("user" | "random probe"),
    ``measure`` (:func:`initlab.diagnose.measure.measure`), ``bag`` (or None), ``prediction``
    (:func:`initlab.diagnose.verdict.predict`), ``spt_probe`` (or None), ``notes``, ``seconds``.
    """
    if backend.mask_id is None:
        raise ValueError(f"MODEL {backend.name}: no mask id to mask with; set backend.mask_id, or call "
                         "initlab.diagnose.models.choose_mask_id first")
    t0 = time.perf_counter()
    batch = make_batch(ids, labels, pad_id=backend.pad_id, n=batch_size, seed=seed)
    m = measure(backend, batch, pooling=pooling, seed=seed, micro=micro)
    bag = None
    if labels is not None:
        k = min(len(ids), BAG_MAX_SEQUENCES)
        bag = bag_of_tokens_probe(ids[:k], labels[:k], folds=min(5, k), seed=seed)
    pred = predict(m, bag)
    probe = spt_probe(backend, batch, spt_steps, seed=seed) if spt_steps else None
    notes = list(backend.notes)
    if labels is None:
        notes.append("no --labels: the label loss uses random labels (a random-label probe head); the blind share does "
                     "not depend on the labels under T1, but the bag-of-tokens check (R3) is skipped, so blind "
                     "shares that pass R1 and R2 give no prediction")
    return {"model": backend.name, "family": backend.family, "pooling": pooling,
            "labels": "user" if labels is not None else "random probe", "classes": batch.n_classes,
            "measure": m, "bag": bag, "prediction": pred, "spt_probe": probe, "notes": notes,
            "seconds": time.perf_counter() - t0}


def diagnose(model: str, data: str | Path, *, pooling: str = "mean", labels: str | None = None,
             text_field: str | None = None, spt_steps: int = 0, pretrained: bool = False,
             batch_size: int | None = None, max_length: int | None = None, seed: int = 0, micro: int = 8,
             skip_comments: bool = False) -> dict[str, Any]:
    """Read ``data``, load ``model`` (fresh weights from ``seed`` unless ``pretrained``), and diagnose.

    ``max_length``: tokens per sequence; None: :data:`DEFAULT_MAX_LENGTH`, or the model's usable length when that is
    shorter. ``batch_size``: sequences measured (the first ones of the file); None: :data:`DEFAULT_BATCH`, or every
    sequence when the file holds fewer. A value the caller sets is honoured or refused, never clamped; sequences
    cut at the length are counted in a note.

    ``skip_comments``: a text-line file's lines starting with ``#`` are skipped (counted in a note); by default every
    non-blank line is a sequence.

    Raises:
        ValueError / FileNotFoundError: bad data or model (one-line messages naming the argument); ``max_length``
            beyond the model's usable length, ``batch_size`` beyond the sequences of ``data``.
    """
    seqs = read_sequences(data, labels=labels, text_field=text_field, skip_comments=skip_comments)
    if batch_size is not None and batch_size > len(seqs):
        raise ValueError(f"--batch {batch_size}: --data {data} holds {len(seqs)} sequences; choose at most {len(seqs)} "
                         f"(or omit --batch: {DEFAULT_BATCH}, or every sequence when there are fewer)")
    chosen_batch = batch_size is not None
    batch_size = batch_size if chosen_batch else min(DEFAULT_BATCH, len(seqs))
    n_use = max(batch_size, BAG_MAX_SEQUENCES if labels is not None else batch_size)
    words = None
    if seqs.texts is not None and model.startswith("builtin:"):
        raise ValueError(f"--data {data}: MODEL {model} has no tokenizer, so the data must be token ids in a .npy file")
    if seqs.texts is not None:
        seqs.texts = seqs.texts[:n_use]
        if model.startswith("initlab:"):  # initlab's encoders have no tokenizer: whitespace words as tokens
            seqs.ids, words = word_ids(seqs.texts)
            seqs.texts = None
    if seqs.ids is not None:
        seqs.ids = seqs.ids[:n_use]
    hint = None if seqs.ids is None else int(max(int(s.max()) for s in seqs.ids)) + 1
    backend = load_backend(model, pretrained=pretrained, seed=seed, vocab_hint=hint)
    if seqs.skipped_comments:
        backend.notes.append(f"{seqs.skipped_comments} line{'s' if seqs.skipped_comments > 1 else ''} starting with '#' "
                             f"skipped (--skip-comments); {len(seqs)} sequences read")
    if words is not None:
        backend.notes.append(f"text tokenised into whitespace-separated words ({len(words)} distinct; ids from 2, "
                             "0 = padding, 1 = mask)")
    if max_length is not None and max_length > backend.max_len:
        raise ValueError(f"--max-length {max_length}: MODEL {model} takes at most {backend.max_len} tokens per sequence "
                         f"(its position table); choose at most {backend.max_len} (or omit --max-length)")
    length = max_length if max_length is not None else min(DEFAULT_MAX_LENGTH, backend.max_len)
    full = encode_all(seqs, backend, None)
    ids = [s[:length] for s in full]
    cut = sum(1 for s in full[:batch_size] if len(s) > length)
    if cut:
        backend.notes.append(f"{cut} of {min(batch_size, len(full))} sequences are longer than {length} tokens and were "
                             f"cut to {length} (--max-length)")
    if not chosen_batch:
        backend.notes.append(f"measured on {batch_size} sequences (the first {batch_size} of the file; --batch sets it)")
    short = [i for i, s in enumerate(ids[:batch_size]) if len(s) < 2]
    if short:
        raise ValueError(f"--data {data}: sequence {short[0] + 1} has fewer than 2 tokens after tokenisation")
    choose_mask_id(backend, ids, pretrained=pretrained)  # no mask token: an unused id, or refused when pretrained
    out = diagnose_loaded(backend, ids, seqs.labels[:n_use] if seqs.labels else None, pooling=pooling,
                          batch_size=batch_size, spt_steps=spt_steps, seed=seed, micro=micro)
    out.update(data=str(data), format=seqs.fmt, pretrained=pretrained, seed=seed)
    return out


def format_report(r: dict[str, Any]) -> str:
    """The verdict, then one row per layer: blind shares (label, masked reconstruction), entropy gap, per-head range."""
    m = r["measure"]
    lines = [f"diagnosis of {r['model']} ({r['family']}, {'pretrained' if r.get('pretrained') else 'fresh init'}), "
             f"{m['batch']} sequences of up to {m['length']} tokens, {r['pooling']} pooling, labels: {r['labels']}",
             "", "verdict: " + r["prediction"]["verdict"], ""]
    lines.append(f"{'layer':>5}  {'label blind share':>17}  {'(heads min-max)':>15}  {'MLM blind share':>15}  {'entropy gap':>11}")
    for L in m["layers"]:
        hs = L["label_share_heads"]
        lines.append(f"{L['layer']:>5}  {L['label_share']:>17.3f}  {min(hs):>7.3f}-{max(hs):<7.3f}  {L['mlm_share']:>15.3f}  "
                     f"{L['entropy_gap']:>11.3f}")
    lines += ["", f"first-layer proximity mass (|i-j| <= 2): {m['proximity_first']:.3f} (uniform attention: "
              f"{m['proximity_uniform']:.3f})",
              f"rule: R1 blind share >= {MIN_BLIND_SHARE:.3f}: {_yes(r['prediction']['checks']['R1'])}; "
              f"R2 entropy gap <= {MAX_ENTROPY_GAP}: {_yes(r['prediction']['checks']['R2'])}; "
              f"R3 bag-of-tokens probe < 0.5: {_yes(r['prediction']['checks']['R3'])}"
              + (" (needs --labels)" if r["prediction"]["checks"]["R3"] is None else "")]
    if r.get("bag"):
        b = r["bag"]
        lines.append(f"bag-of-tokens probe: accuracy {b['accuracy']:.3f} (majority {b['majority']:.3f}, normalised "
                     f"{b['normalised']:.3f})")
    p = r.get("spt_probe")
    if p:
        lines.append(f"SPT probe ({p['steps']} steps): reconstruction loss {p['loss_start']:.3f} -> {p['loss_end']:.3f}; "
                     f"first-layer proximity mass {p['proximity_before']:.3f} -> {p['proximity_after']:.3f}; "
                     f"relative-position score {p['relpos_before']:.3f} -> {p['relpos_after']:.3f}")
    lines += [f"note: {n}" for n in r.get("notes", [])]
    lines.append(f"({r['seconds']:.1f} s)")
    return "\n".join(lines)


def _yes(v: bool | None) -> str:
    return "skipped" if v is None else ("yes" if v else "no")


def save_figure(r: dict[str, Any], path: str | Path) -> Path:
    """A PNG of the label and masked-reconstruction blind shares per layer (heads as faint points), written
    atomically. The dashed line is the rule's R1 threshold 1/√2."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = r["measure"]["layers"]
    x = [L["layer"] for L in layers]
    fig, ax = plt.subplots(figsize=(6, 3.4))
    for key, color, name in (("label", "tab:blue", "label loss"), ("mlm", "tab:orange", "masked reconstruction")):
        ax.plot(x, [L[f"{key}_share"] for L in layers], "o-", color=color, label=name)
        for L in layers:
            hs = L[f"{key}_share_heads"]
            ax.scatter([L["layer"]] * len(hs), hs, s=8, color=color, alpha=0.3)
    ax.axhline(MIN_BLIND_SHARE, ls="--", color="gray", lw=1, label="rule R1 (1/√2)")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("layer")
    ax.set_ylabel("query-blind share of dL/dS")
    helps = r["prediction"]["spt_helps"]
    word = ("no prediction without labels" if helps is None
            else "SPT predicted to help" if helps else "SPT not predicted to help")
    ax.set_title(f"{r['model']} ({r['pooling']} pooling): {word}", fontsize=9)
    ax.set_xticks(x)
    ax.set_xlim(min(x) - 0.5, max(x) + 0.5)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())
