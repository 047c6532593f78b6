"""The user's sequences for ``initlab diagnose``: readers for the formats people have, and the batch.

Formats, by file suffix:

The suffix names the format; a file whose suffix names none of ``.npy``, ``.jsonl``, ``.tsv`` is recognised by its
content (a NumPy header: ``.npy``; every non-blank line a JSON object: ``.jsonl``), else read as text lines.

* ``.txt`` (or any other suffix): one text per line; blank lines skipped, every other line read (a line starting with
  ``#`` is a text too: a hashtag, a heading; ``skip_comments=True``, ``--skip-comments``, skips those and counts them);
  no labels.
* ``.jsonl``: one JSON object per line with a ``text`` field (or ``--text-field``); labels from ``--labels KEY``.
* ``.tsv``: LRA-style tab-separated values with a header row (ListOps ``Source``/``Target``); the text column is
  the first of ``text``, ``Source``, ``source``, ``input``, ``sentence`` present (or ``--text-field``); labels from
  ``--labels COLUMN``.
* ``.npy``: an integer array ``(N, T)`` of token ids (no tokenizer needed); negative ids mark padding (right
  padding; any id after the first negative one is padding too); no labels.

A gzip-compressed file is read decompressed (:mod:`initlab.textio`); its format is the suffix before ``.gz``
(``data.jsonl.gz`` is JSONL).

Labels are one class per value (:func:`label_classes`): in ``.jsonl`` the numbers ``0`` and ``0.0`` are one class
(``"0"``), a string, a number and a bool are values of different types and a file mixing them is refused naming the
first row whose type differs from the first row's; in ``.tsv`` a column whose values are all numbers is read as
numbers (``0`` and ``0.0`` one class), a column mixing numbers and words is refused the same way.

Every reader raises ``ValueError`` with one line naming the file (and line) and the expected form.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from initlab.runs import unreadable_file
from initlab.textio import TextDecodeError, read_text
from initlab.textio import text_field as string_field

__all__ = ["Sequences", "read_sequences", "label_classes", "Batch", "make_batch", "TEXT_COLUMNS", "word_ids"]

TEXT_COLUMNS = ("text", "Source", "source", "input", "sentence")


@dataclass
class Sequences:
    """What a data file holds: ``texts`` (list of str) or ``ids`` (list of 1-D int arrays), and ``labels`` (list
    of str, one per sequence: the class names of :func:`label_classes`) or None; ``skipped_comments``: lines
    starting with ``#`` skipped (text-line files read with ``skip_comments``)."""

    texts: list[str] | None
    ids: list[np.ndarray] | None
    labels: list[str] | None
    fmt: str
    skipped_comments: int = 0

    def __len__(self) -> int:
        return len(self.texts if self.texts is not None else self.ids)


def _labels_missing(path: Path, column: str, fmt: str) -> ValueError:
    return ValueError(f"--data {path}: --labels {column}: {fmt} files have no label columns; use a .jsonl or .tsv file "
                      "with a label field, or omit --labels (a random-label probe is used)")


def _number(text: str) -> float | None:
    """``text`` as a finite number, or None when it is a word."""
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _class_name(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _kind(value: Any, from_text: bool) -> str:
    if from_text:
        return "number" if _number(value) is not None else "word"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "string"


def label_classes(values: Sequence[Any], wheres: Sequence[str], flag: str, *, from_text: bool) -> list[str]:
    """The class name of every label, one class per value.

    ``values`` are JSON scalars (``from_text=False``: number, string, bool) or TSV cells (``from_text=True``: a
    cell is a number when ``float()`` reads it as a finite number, else a word). Numbers are named by their value
    (``0``, ``0.0`` and ``"0.0"`` are the class ``"0"``; ``0.5`` is ``"0.5"``), strings, words and bools as they
    are written (``true`` is ``"True"``).

    Raises:
        ValueError: a label whose type differs from the first label's, naming its place (``wheres[i]``), the value,
            both types and the first label's place.
    """
    if not values:
        return []
    first = _kind(values[0], from_text)
    out = []
    for v, where in zip(values, wheres):
        kind = _kind(v, from_text)
        if kind != first:
            raise ValueError(f"{where}: {flag}: label {v!r} is a {kind}, but the first label ({values[0]!r}, at "
                             f"{wheres[0]}) is a {first}; one label column holds one type (write every label as a "
                             f"{first}), so that one value is one class")
        if kind == "number":
            out.append(_class_name(_number(v) if from_text else float(v)))
        else:
            out.append(str(v))
    return out


def _sniff(path: Path, suffix: str) -> str:
    """The format of a file whose suffix names none of ``.npy``/``.jsonl``/``.tsv``, from its content: a NumPy header
    is ``.npy``, text whose every non-blank line is a JSON object is ``.jsonl``, anything else text lines."""
    try:
        with open(path, "rb") as fh:
            if fh.read(6) == b"\x93NUMPY":
                return ".npy"
        lines = [ln for ln in read_text(path).splitlines() if ln.strip()]
    except (OSError, ValueError):
        return suffix  # the reader of that suffix names the problem
    try:
        if lines and all(ln.lstrip().startswith("{") and isinstance(json.loads(ln), dict) for ln in lines):
            return ".jsonl"
    except json.JSONDecodeError:
        pass
    return suffix


def read_sequences(path: str | Path, *, labels: str | None = None, text_field: str | None = None,
                   skip_comments: bool = False) -> Sequences:
    """Read ``path`` (format by suffix, module docstring; ``skip_comments``: text-line files skip lines starting
    with ``#``, counted in ``skipped_comments``).

    Raises:
        ValueError: an unreadable or empty file, a line that is not a JSON object, a missing text or label field,
            fewer than 2 sequences, ``labels`` for a format without labels, a non-integer or non-2-D ``.npy``,
            labels of mixed types (:func:`label_classes`).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".gz":  # read decompressed by initlab.textio; the format is the suffix before .gz
        suffix = Path(path.stem).suffix.lower()
    if suffix not in (".npy", ".jsonl", ".tsv"):  # a name that claims no format: the data decide
        suffix = _sniff(path, suffix)
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
        texts, labs, wheres = [], [], []
        field = text_field or "text"
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"--data {path}:{n}: not a JSON object ({err.msg}); expected one object per line with a "
                                 f"{field!r} field") from None
            if not isinstance(obj, dict) or field not in obj:
                raise ValueError(f"--data {path}:{n}: expected a JSON object with a string {field!r} field")
            texts.append(string_field(obj[field], f"--data {path}:{n}", field))
            if labels is not None:
                if labels not in obj or isinstance(obj[labels], (dict, list)) or obj[labels] is None:
                    raise ValueError(f"--data {path}:{n}: --labels {labels}: no scalar field {labels!r} in this object")
                labs.append(obj[labels])
                wheres.append(f"--data {path}:{n}")
        classes = label_classes(labs, wheres, f"--labels {labels}", from_text=False) if labels is not None else None
        return _done(path, texts, classes, "jsonl")
    if suffix == ".tsv":
        numbered = [(n, r) for n, r in enumerate(csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE), 1)
                    if any(c.strip() for c in r)]  # blank rows skipped; errors name the file's own line numbers
        rows = [r for _, r in numbered]
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
        texts, labs, wheres = [], [], []
        for n, r in numbered[1:]:
            if len(r) != len(head):
                raise ValueError(f"--data {path}:{n}: {len(r)} tab-separated fields, the header has {len(head)}")
            texts.append(r[ti])
            if li is not None:
                labs.append(r[li].strip())
                wheres.append(f"--data {path}:{n}")
        classes = label_classes(labs, wheres, f"--labels {labels}", from_text=True) if labels is not None else None
        return _done(path, texts, classes, "tsv")
    if labels is not None:
        raise _labels_missing(path, labels, "text-line")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    texts = [ln for ln in lines if not (skip_comments and ln.startswith("#"))]
    seqs = _done(path, texts, None, "lines")
    seqs.skipped_comments = len(lines) - len(texts)
    return seqs


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


def encode_all(seqs: Sequences, backend: Any, max_length: int | None) -> list[np.ndarray]:
    """Token ids of every sequence (tokenised with the backend's tokenizer; ``.npy`` ids taken as they are),
    each cut to ``max_length`` (None: not cut).

    Raises:
        ValueError: text data for a model without a tokenizer; ids outside the model's vocabulary.
    """
    if seqs.ids is not None:
        out = [s[:max_length] for s in seqs.ids]  # [:None] keeps every id
        hi = max(int(s.max()) for s in out)
        if hi >= backend.vocab_size:
            raise ValueError(f"--data: token id {hi} is outside the model's vocabulary [0, {backend.vocab_size})")
        return out
    tok = backend.tokenizer
    if tok is None:
        raise ValueError(f"--data: MODEL {backend.name} has no tokenizer, so the data must be token ids in a .npy file "
                         "(or use a model folder that holds its tokenizer)")
    enc = tok(seqs.texts, truncation=max_length is not None, max_length=max_length, add_special_tokens=True)
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
