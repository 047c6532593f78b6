"""The user's sequences for ``initlab diagnose``: readers for the formats people have, and the batch.

Formats, by file suffix:

* ``.txt`` (or any other suffix): one text per line; blank lines and lines starting with ``#`` skipped; no labels.
* ``.jsonl``: one JSON object per line with a ``text`` field (or ``--text-field``); labels from ``--labels KEY``.
* ``.tsv``: LRA-style tab-separated values with a header row (ListOps ``Source``/``Target``); the text column is
  the first of ``text``, ``Source``, ``source``, ``input``, ``sentence`` present (or ``--text-field``); labels from
  ``--labels COLUMN``.
* ``.npy``: an integer array ``(N, T)`` of token ids (no tokenizer needed); negative ids mark padding (right
  padding; any id after the first negative one is padding too); no labels.

Every reader raises ``ValueError`` with one line naming the file (and line) and the expected form.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from initlab.runs import unreadable_file
from initlab.textio import TextDecodeError, read_text

__all__ = ["Sequences", "read_sequences", "Batch", "make_batch", "TEXT_COLUMNS", "word_ids"]

TEXT_COLUMNS = ("text", "Source", "source", "input", "sentence")


@dataclass
class Sequences:
    """What a data file holds: ``texts`` (list of str) or ``ids`` (list of 1-D int arrays), and ``labels`` (list
    of str, one per sequence) or None."""

    texts: list[str] | None
    ids: list[np.ndarray] | None
    labels: list[str] | None
    fmt: str

    def __len__(self) -> int:
        return len(self.texts if self.texts is not None else self.ids)


def _labels_missing(path: Path, column: str, fmt: str) -> ValueError:
    return ValueError(f"--data {path}: --labels {column}: {fmt} files have no label columns; use a .jsonl or .tsv file "
                      "with a label field, or omit --labels (a random-label probe is used)")


def read_sequences(path: str | Path, *, labels: str | None = None, text_field: str | None = None) -> Sequences:
    """Read ``path`` (format by suffix, module docstring).

    Raises:
        ValueError: an unreadable or empty file, a line that is not a JSON object, a missing text or label field,
            fewer than 2 sequences, ``labels`` for a format without labels, a non-integer or non-2-D ``.npy``.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".npy":
        if labels is not None:
            raise _labels_missing(path, labels, ".npy")
        try:
            arr = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as err:
            raise unreadable_file(f"--data {path}", err, ".npy array of token ids") from None
        if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.integer) or arr.shape[0] < 2 or arr.shape[1] < 2:
            raise ValueError(f"--data {path}: expected a 2-D integer array (N >= 2 sequences, T >= 2 token ids; negative "
                             f"= padding), got dtype {arr.dtype} shape {arr.shape}")
        seqs = []
        for row in arr:
            neg = np.flatnonzero(row < 0)
            seqs.append(row[: neg[0]] if len(neg) else row)
        short = [i for i, s in enumerate(seqs) if len(s) < 2]
        if short:
            raise ValueError(f"--data {path}: row {short[0]} has fewer than 2 token ids before its padding (expected >= 2)")
        return Sequences(None, [s.astype(np.int64) for s in seqs], None, "npy")
    try:
        text = read_text(path)
    except TextDecodeError as err:
        raise ValueError(f"--data {err}") from None
    except OSError as err:
        raise unreadable_file(f"--data {path}", err, "text file") from None
    if suffix == ".jsonl":
        texts, labs = [], []
        field = text_field or "text"
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"--data {path}:{n}: not a JSON object ({err.msg}); expected one object per line with a "
                                 f"{field!r} field") from None
            if not isinstance(obj, dict) or not isinstance(obj.get(field), str):
                raise ValueError(f"--data {path}:{n}: expected a JSON object with a string {field!r} field")
            texts.append(obj[field])
            if labels is not None:
                if labels not in obj or isinstance(obj[labels], (dict, list)) or obj[labels] is None:
                    raise ValueError(f"--data {path}:{n}: --labels {labels}: no scalar field {labels!r} in this object")
                labs.append(str(obj[labels]))
        return _done(path, texts, labs if labels is not None else None, "jsonl")
    if suffix == ".tsv":
        rows = list(csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE))
        rows = [r for r in rows if any(c.strip() for c in r)]
        if not rows:
            raise ValueError(f"--data {path}: empty; expected a header row and one sequence per row (tab-separated)")
        head = rows[0]
        col = text_field or next((c for c in TEXT_COLUMNS if c in head), None)
        if col is None or col not in head:
            raise ValueError(f"--data {path}: no text column in the header {head}; expected one of {list(TEXT_COLUMNS)} "
                             "(or name it with --text-field)")
        if labels is not None and labels not in head:
            raise ValueError(f"--data {path}: --labels {labels}: no such column in the header {head}")
        ti, li = head.index(col), (head.index(labels) if labels is not None else None)
        texts, labs = [], []
        for n, r in enumerate(rows[1:], 2):
            if len(r) != len(head):
                raise ValueError(f"--data {path}:{n}: {len(r)} tab-separated fields, the header has {len(head)}")
            texts.append(r[ti])
            if li is not None:
                labs.append(r[li])
        return _done(path, texts, labs if labels is not None else None, "tsv")
    if labels is not None:
        raise _labels_missing(path, labels, "text-line")
    texts = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return _done(path, texts, None, "lines")


def _done(path: Path, texts: list[str], labels: list[str] | None, fmt: str) -> Sequences:
    empty = [i for i, t in enumerate(texts) if not t.strip()]
    if empty:
        raise ValueError(f"--data {path}: sequence {empty[0] + 1} is empty (expected text in every row)")
    if len(texts) < 2:
        raise ValueError(f"--data {path}: expected at least 2 sequences, got {len(texts)}")
    if labels is not None and len(set(labels)) < 2:
        raise ValueError(f"--data {path}: --labels: expected at least 2 distinct labels, got {sorted(set(labels))}")
    return Sequences(texts, None, labels, fmt)


def word_ids(texts: Sequence[str], first_id: int = 2) -> tuple[list[np.ndarray], list[str]]:
    """Whitespace tokens as ids for a model without a tokenizer (initlab's own encoders): the distinct words of
    ``texts`` sorted, numbered from ``first_id`` (0 = padding, 1 = mask). Returns ``(ids per text, words)``."""
    words = sorted({w for t in texts for w in t.split()})
    index = {w: i + first_id for i, w in enumerate(words)}
    return [np.array([index[w] for w in t.split()], dtype=np.int64) for t in texts], words


@dataclass
class Batch:
    """Token ids ``ids (B, T)`` long, ``real (B, T)`` bool (True = real token, right padding), class labels
    ``y (B,)`` long, ``n_classes``, whether the labels are the user's (``true_labels``) and the class names."""

    ids: torch.Tensor
    real: torch.Tensor
    y: torch.Tensor
    n_classes: int
    true_labels: bool
    classes: list[str]


def encode_all(seqs: Sequences, backend: Any, max_length: int) -> list[np.ndarray]:
    """Token ids of every sequence (tokenised with the backend's tokenizer; ``.npy`` ids taken as they are),
    each cut to ``max_length``.

    Raises:
        ValueError: text data for a model without a tokenizer; ids outside the model's vocabulary.
    """
    if seqs.ids is not None:
        out = [s[:max_length] for s in seqs.ids]
        hi = max(int(s.max()) for s in out)
        if hi >= backend.vocab_size:
            raise ValueError(f"--data: token id {hi} is outside the model's vocabulary [0, {backend.vocab_size})")
        return out
    tok = backend.tokenizer
    if tok is None:
        raise ValueError(f"--data: MODEL {backend.name} has no tokenizer, so the data must be token ids in a .npy file "
                         "(or use a model folder that holds its tokenizer)")
    enc = tok(seqs.texts, truncation=True, max_length=max_length, add_special_tokens=True)
    return [np.asarray(x, dtype=np.int64) for x in enc["input_ids"]]


def make_batch(ids: Sequence[np.ndarray], labels: Sequence[str] | None, *, pad_id: int, n: int, seed: int) -> Batch:
    """The first ``n`` sequences, right-padded with ``pad_id``, with their labels (classes in sorted order) or,
    without labels, balanced random labels of 2 classes from ``seed`` (the random-label probe)."""
    ids = list(ids[:n])
    T = max(len(s) for s in ids)
    x = torch.full((len(ids), T), pad_id, dtype=torch.long)
    real = torch.zeros(len(ids), T, dtype=torch.bool)
    for i, s in enumerate(ids):
        x[i, : len(s)] = torch.from_numpy(s)
        real[i, : len(s)] = True
    if labels is not None:
        classes = sorted(set(labels))
        y = torch.tensor([classes.index(v) for v in labels[: len(ids)]], dtype=torch.long)
        return Batch(x, real, y, len(classes), True, classes)
    g = torch.Generator().manual_seed(seed)
    y = (torch.randperm(len(ids), generator=g) < len(ids) // 2).long()
    return Batch(x, real, y, 2, False, ["random-0", "random-1"])
