"""Long Range Arena loaders in the standard layouts, tokenised to fixed vocabularies.

Every task becomes a :class:`TaskData` with ``train``/``val``/``test`` :class:`Split` s of token ids
(``int16`` storage, right-padded with ``PAD_ID``), true lengths and labels. Vocabularies start with
two special tokens, ``PAD_ID = 0`` and ``MASK_ID = 1`` (the masked-reconstruction mask token).

=============  ==========================================================  =========  ==========
task           layout read                                                 max T      vocab
=============  ==========================================================  =========  ==========
``listops``    ``basic_{train,val,test}.tsv``, header ``Source  Target``    2000       2 + 17
``text``       ``aclImdb/{train,test}/{pos,neg}/*.txt`` or HF ``imdb``      4096       2 + 256 bytes
``retrieval``  ``new_aan_pairs.{train,eval,test}.tsv``                      4000/doc   2 + 256 bytes
               (``label id1 id2 text1 text2``, no header)
``image``      ``cifar-10-batches-py/{data_batch_1..5,test_batch}`` or      1024       2 + 256 levels
               HF ``cifar10``, grayscale
``pathfinder`` ``pathfinder32/curv_contour_length_14/metadata/*.npy`` and   1024       2 + 256 levels
               ``imgs/<k>/sample_<i>.png``; 80/10/10 split
=============  ==========================================================  =========  ==========

Validation splits: ListOps and Retrieval ship one; Text and Image do not, so a random 10 % of the
training set is held out, and Pathfinder ships no split at all (80/10/10 of all samples). These random
hold-outs are drawn with the *split seed* (``LRAConfig.split_seed``, fixed at 0), never with the run seed,
so every run seed trains and tests on the same examples (LRA's Text pipeline validated on the test set; its Image pipeline held out
the last 10 % of train, ``train[90%:]``; the S4 code base of Amos et al. a random 10 %). Sources: Tay et al., "Long Range Arena", ICLR 2021 (tasks, lengths);
the S4 code base used by Amos et al. 2024 (pathfinder metadata format, grayscale CIFAR).

Role of this module: reading the standard layouts (and the datasets-library copies) into :class:`TaskData`.
Tokenisers and the vocabularies are in :mod:`initlab.realdata.lra.tokens`; the split containers, hold-outs
and batching in :mod:`initlab.realdata.lra.splits`.

Text files (TSV, reviews, Pathfinder metadata) are read with :mod:`initlab.textio`: UTF-8, a leading
byte-order mark dropped, a non-UTF-8 file refused naming the file and line.

Security: the CIFAR-10 python batches are pickles. They are read with an unpickler that only admits
numpy array reconstruction and builtin containers (:class:`_NumpyOnlyUnpickler`); anything else in
the file raises ``ValueError``. Still, only read files from a source you trust.
"""

from __future__ import annotations

import csv
import io
import pickle
import sys
from pathlib import Path

import numpy as np
import torch

from initlab.textio import decode_text, integer_field, open_text, text_field, text_file
from initlab.realdata.lra.splits import Split, TaskData, holdout, pair_split, split_from_sequences
from initlab.realdata.lra.tokens import BYTE_VOCAB, LISTOPS_VOCAB, N_SPECIAL, encode_bytes, encode_listops, grayscale

__all__ = ["TASKS", "TASK_MAX_LEN", "TASK_CLASSES", "read_listops_tsv", "load_listops", "load_text", "load_retrieval",
           "load_image", "load_pathfinder", "load_task"]

TASKS = ("listops", "text", "retrieval", "image", "pathfinder")
TASK_MAX_LEN = {"listops": 2000, "text": 4096, "retrieval": 4000, "image": 1024, "pathfinder": 1024}
TASK_CLASSES = {"listops": 10, "text": 2, "retrieval": 2, "image": 10, "pathfinder": 2}


def _need(path: Path, layout: str) -> Path:
    """``path`` (or ``path.gz``, read decompressed by :mod:`initlab.textio`), or FileNotFoundError naming the layout."""
    path = text_file(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: not found; expected layout: {layout}")
    return path


# ---------------------------------------------------------------------------------------------- ListOps
LISTOPS_LAYOUT = "DIR/basic_{train,val,test}.tsv, tab-separated with header 'Source<TAB>Target' (LRA listops-1000)"


def read_listops_tsv(path: str | Path, keep_parens: bool = False, limit: int | None = None) -> tuple[list[list[int]], list[int]]:
    """Read one ``basic_*.tsv`` -> (token id lists, labels).

    Raises:
        FileNotFoundError: ``path`` is missing.
        ValueError: missing ``Source``/``Target`` header, a bad row, or a label outside 0..9
            (the message names the file and line).
    """
    path = _need(Path(path), LISTOPS_LAYOUT)
    seqs, labels = [], []
    with open_text(path, newline="") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None or [h.strip() for h in header[:2]] != ["Source", "Target"]:
            raise ValueError(f"{path}: expected header 'Source<TAB>Target', got {header!r}; layout: {LISTOPS_LAYOUT}")
        for lineno, row in enumerate(reader, start=2):
            if limit is not None and len(seqs) >= limit:
                break
            if not row:
                continue
            if len(row) < 2:
                raise ValueError(f"{path}:{lineno}: expected 2 tab-separated columns (Source, Target), got {len(row)}")
            label = integer_field(row[1], f"{path}:{lineno}", "Target")
            if not 0 <= label <= 9:
                raise ValueError(f"{path}:{lineno}: Target {label} outside 0..9")
            seqs.append(encode_listops(row[0], keep_parens, where=f"{path}:{lineno}"))
            labels.append(label)
    if not seqs:
        raise ValueError(f"{path}: no examples; layout: {LISTOPS_LAYOUT}")
    return seqs, labels


def load_listops(data_dir: str | Path, max_len: int = 2000, keep_parens: bool = False, limit: int | None = None) -> TaskData:
    """ListOps from ``data_dir/basic_{train,val,test}.tsv`` (see :func:`read_listops_tsv`)."""
    d = _need(Path(data_dir), LISTOPS_LAYOUT)
    splits = {}
    for name in ("train", "val", "test"):
        seqs, labels = read_listops_tsv(d / f"basic_{name}.tsv", keep_parens, limit)
        splits[name] = split_from_sequences(seqs, labels, max_len)
    return TaskData("listops", LISTOPS_VOCAB, max_len, 10, splits["train"], splits["val"], splits["test"])


# ---------------------------------------------------------------------------------------------- Text (IMDB)
IMDB_LAYOUT = "aclImdb/{train,test}/{pos,neg}/*.txt (the Stanford Large Movie Review archive, unpacked)"


def _read_aclimdb(root: Path, split: str, limit: int | None) -> tuple[list[str], list[int]]:
    texts, labels = [], []
    for label, sub in ((0, "neg"), (1, "pos")):
        folder = root / split / sub
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: not found; expected layout: {IMDB_LAYOUT}")
        files = sorted(folder.glob("*.txt"))
        if not files:
            raise ValueError(f"{folder}: no *.txt reviews; expected layout: {IMDB_LAYOUT}")
        for f in files[: (limit + 1) // 2 if limit else None]:
            texts.append(decode_text(f.read_bytes(), f))  # UTF-8, BOM dropped; encode_bytes re-encodes
            labels.append(label)
    return texts, labels


def load_text(data_dir: str | Path | None = None, max_len: int = 4096, split_seed: int = 0, val_frac: float = 0.1,
              limit: int | None = None, hf_name: str = "stanfordnlp/imdb") -> TaskData:
    """IMDB at byte level: local ``aclImdb`` folder if ``data_dir`` is given, else ``datasets.load_dataset(hf_name)``
    (columns ``text``, ``label``). Val = a ``val_frac`` share of train drawn with ``split_seed``."""
    if data_dir is not None:
        root = _need(Path(data_dir), IMDB_LAYOUT)
        if (root / "aclImdb").is_dir():
            root = root / "aclImdb"
        raw = {s: _read_aclimdb(root, s, limit) for s in ("train", "test")}
    else:  # pragma: no cover - network / cache path
        import datasets

        ds = datasets.load_dataset(hf_name)
        raw = {s: imdb_from_hf(ds[s], limit) for s in ("train", "test")}
    tr = split_from_sequences([encode_bytes(t, max_len) for t in raw["train"][0]], raw["train"][1], max_len)
    te = split_from_sequences([encode_bytes(t, max_len) for t in raw["test"][0]], raw["test"][1], max_len)
    tr, va = holdout(tr, val_frac, split_seed)
    return TaskData("text", BYTE_VOCAB, max_len, 2, tr, va, te)


def imdb_from_hf(split, limit: int | None = None) -> tuple[list[str], list[int]]:
    """(texts, labels) from a Hugging Face ``imdb`` split (columns ``text``, ``label``)."""
    for col in ("text", "label"):
        if col not in split.column_names:
            raise ValueError(f"imdb split: missing column {col!r}; got {split.column_names}")
    if limit is not None:
        split = split.shuffle(seed=0).select(range(min(limit, len(split))))
    return ([text_field(x, f"imdb split record {i + 1}", "text") for i, x in enumerate(split["text"])],
            [integer_field(x, f"imdb split record {i + 1}", "label") for i, x in enumerate(split["label"])])


# ---------------------------------------------------------------------------------------------- Retrieval (AAN)
AAN_LAYOUT = "DIR/new_aan_pairs.{train,eval,test}.tsv, 5 tab-separated columns label, id1, id2, text1, text2 (LRA tsv_data)"


def read_aan_tsv(path: str | Path, max_len: int = 4000, limit: int | None = None):
    """One AAN pairs file -> (docs1, docs2, labels); a leading header row ``label ...`` is skipped.

    Raises:
        FileNotFoundError / ValueError: naming the file (and line) and the expected layout.
    """
    path = _need(Path(path), AAN_LAYOUT)
    d1, d2, labels = [], [], []
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with open_text(path, newline="") as fh:
        for lineno, row in enumerate(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE), start=1):
            if limit is not None and len(labels) >= limit:
                break
            if not row:
                continue
            if lineno == 1 and row[0].strip().lower() == "label":
                continue
            if len(row) != 5:
                raise ValueError(f"{path}:{lineno}: expected 5 tab-separated columns, got {len(row)}; layout: {AAN_LAYOUT}")
            label = integer_field(row[0], f"{path}:{lineno}", "label")
            if label not in (0, 1):
                raise ValueError(f"{path}:{lineno}: label {label} not in {{0, 1}}")
            d1.append(encode_bytes(row[3], max_len))
            d2.append(encode_bytes(row[4], max_len))
            labels.append(label)
    if not labels:
        raise ValueError(f"{path}: no examples; layout: {AAN_LAYOUT}")
    return d1, d2, labels


def load_retrieval(data_dir: str | Path, max_len: int = 4000, limit: int | None = None) -> TaskData:
    """AAN document-pair matching; each :class:`Split` holds tokens (N, 2, T)."""
    d = _need(Path(data_dir), AAN_LAYOUT)
    splits = {}
    for ours, theirs in (("train", "train"), ("val", "eval"), ("test", "test")):
        a, b, y = read_aan_tsv(d / f"new_aan_pairs.{theirs}.tsv", max_len, limit)
        splits[ours] = pair_split(a, b, y, max_len)
    return TaskData("retrieval", BYTE_VOCAB, max_len, 2, splits["train"], splits["val"], splits["test"], pair=True)


# ---------------------------------------------------------------------------------------------- Image (CIFAR-10)
CIFAR_LAYOUT = "cifar-10-batches-py/{data_batch_1..5,test_batch} (the official CIFAR-10 python pickles)"


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickler admitting only what the CIFAR batches need: numpy array/dtype reconstruction and the
    ``_codecs.encode`` used for bytes in protocol-2 pickles. Any other global raises ``ValueError``
    (a pickle can otherwise run arbitrary code)."""

    _ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
        ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    }

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise ValueError(f"refusing to unpickle global {module}.{name} (only numpy arrays are allowed)")


def read_cifar_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 python batch -> (gray images (N, 1024) uint8, labels (N,) int64).

    Raises:
        FileNotFoundError: missing file. ValueError: not a CIFAR batch (names the file and layout).
    """
    path = _need(Path(path), CIFAR_LAYOUT)
    try:
        with open(path, "rb") as fh:
            obj = _NumpyOnlyUnpickler(fh, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError) as err:
        raise ValueError(f"{path}: not a readable CIFAR-10 python batch ({err}); layout: {CIFAR_LAYOUT}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: expected a dict with b'data' and b'labels'; layout: {CIFAR_LAYOUT}")
    data = obj.get(b"data", obj.get("data"))
    labels = obj.get(b"labels", obj.get("labels"))
    if data is None or labels is None:
        raise ValueError(f"{path}: missing b'data' or b'labels'; layout: {CIFAR_LAYOUT}")
    data = np.asarray(data)
    if data.ndim != 2 or data.shape[1] != 3072 or data.dtype != np.uint8 or len(labels) != data.shape[0]:
        raise ValueError(f"{path}: b'data' must be uint8 (N, 3072) with N labels, got {data.dtype} {data.shape}")
    rgb = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # channel-major rows -> (N, 32, 32, 3)
    labels = [integer_field(v, f"{path} b'labels'[{i}]", "label") for i, v in enumerate(labels)]
    return grayscale(rgb).reshape(-1, 1024), np.asarray(labels, dtype=np.int64)


def _image_split(gray: np.ndarray, labels: np.ndarray) -> Split:
    tok = torch.from_numpy(gray.astype(np.int16) + N_SPECIAL)
    return Split(tok, torch.full((len(labels),), tok.shape[1], dtype=torch.long), torch.from_numpy(np.asarray(labels, dtype=np.int64)))


def cifar_from_hf(split, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(gray (N, 1024) uint8, labels) from a Hugging Face ``cifar10`` split (columns ``img``, ``label``)."""
    img_col = "img" if "img" in split.column_names else "image"
    if img_col not in split.column_names or "label" not in split.column_names:
        raise ValueError(f"cifar10 split: expected columns img/label, got {split.column_names}")
    n = len(split) if limit is None else min(limit, len(split))
    imgs = np.stack([np.asarray(split[i][img_col].convert("RGB")) for i in range(n)])
    labels = [integer_field(v, f"cifar10 split record {i + 1}", "label") for i, v in enumerate(split["label"][:n])]
    return grayscale(imgs).reshape(n, -1), np.asarray(labels, dtype=np.int64)


def load_image(data_dir: str | Path | None = None, split_seed: int = 0, val_frac: float = 0.1, limit: int | None = None,
               hf_name: str = "uoft-cs/cifar10") -> TaskData:
    """CIFAR-10 as grayscale 1024-pixel sequences (pixel values are the tokens). Val = a ``val_frac`` share
    of train drawn with ``split_seed``."""
    if data_dir is not None:
        root = _need(Path(data_dir), CIFAR_LAYOUT)
        if (root / "cifar-10-batches-py").is_dir():
            root = root / "cifar-10-batches-py"
        parts = [read_cifar_batch(root / f"data_batch_{i}") for i in range(1, 6)]
        tr_x, tr_y = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        te_x, te_y = read_cifar_batch(root / "test_batch")
        if limit is not None:
            tr_x, tr_y, te_x, te_y = tr_x[:limit], tr_y[:limit], te_x[:limit], te_y[:limit]
    else:  # pragma: no cover - network / cache path
        import datasets

        ds = datasets.load_dataset(hf_name)
        tr_x, tr_y = cifar_from_hf(ds["train"], limit)
        te_x, te_y = cifar_from_hf(ds["test"], limit)
    tr, va = holdout(_image_split(tr_x, tr_y), val_frac, split_seed)
    return TaskData("image", BYTE_VOCAB, 1024, 10, tr, va, _image_split(te_x, te_y))


# ---------------------------------------------------------------------------------------------- Pathfinder
PATHFINDER_LAYOUT = ("lra_release/pathfinder32/curv_contour_length_14/{metadata/*.npy, imgs/<k>/sample_<i>.png}; "
                     "each metadata row: '<imgs/k> <sample_i.png> <idx> <label> ...' (whitespace-separated text, "
                     "or a numpy string array with those columns)")


def _pathfinder_root(data_dir: Path) -> Path:
    for cand in (data_dir, data_dir / "curv_contour_length_14", data_dir / "pathfinder32" / "curv_contour_length_14",
                 data_dir / "lra_release" / "pathfinder32" / "curv_contour_length_14"):
        if (cand / "metadata").is_dir():
            return cand
    raise FileNotFoundError(f"{data_dir}: no metadata/ folder found; expected layout: {PATHFINDER_LAYOUT}")


def _metadata_rows(path: Path) -> list[list[str]]:
    raw = path.read_bytes()
    if raw.startswith(b"\x93NUMPY"):
        arr = np.load(io.BytesIO(raw), allow_pickle=False)
        return [[str(x) for x in row] for row in np.atleast_2d(arr)]
    return [line.split() for line in decode_text(raw, path).splitlines() if line.strip()]


def _read_png_gray(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("L"), dtype=np.uint8)


def load_pathfinder(data_dir: str | Path, split_seed: int = 0, limit: int | None = None, resolution: int = 32) -> TaskData:
    """Pathfinder-32 (hard: ``curv_contour_length_14``) with an 80/10/10 split of all samples drawn with ``split_seed``.

    Raises:
        FileNotFoundError: missing metadata folder or a listed PNG. ValueError: malformed metadata row
            or an image that is not ``resolution x resolution`` (names the file).
    """
    root = _pathfinder_root(_need(Path(data_dir), PATHFINDER_LAYOUT))
    meta_files = sorted((root / "metadata").glob("*.npy"), key=lambda p: (len(p.stem), p.stem))
    if not meta_files:
        raise FileNotFoundError(f"{root / 'metadata'}: no *.npy files; expected layout: {PATHFINDER_LAYOUT}")
    pix, labels = [], []
    for mf in meta_files:
        for i, row in enumerate(_metadata_rows(mf), start=1):
            if limit is not None and len(labels) >= limit:
                break
            if len(row) < 4:
                raise ValueError(f"{mf}:{i}: expected >= 4 columns (folder, file, index, label), got {row!r}; layout: {PATHFINDER_LAYOUT}")
            label = integer_field(row[3], f"{mf}:{i}", "label")
            png = root / row[0] / row[1]
            img = _read_png_gray(_need(png, PATHFINDER_LAYOUT))
            if img.shape != (resolution, resolution):
                raise ValueError(f"{png}: expected a {resolution}x{resolution} image, got {img.shape}")
            pix.append(img.reshape(-1))
            labels.append(label)
    if not labels:
        raise ValueError(f"{root / 'metadata'}: no samples listed; layout: {PATHFINDER_LAYOUT}")
    full = _image_split(np.stack(pix), np.asarray(labels))
    g = torch.Generator().manual_seed(split_seed)
    perm = torch.randperm(len(full), generator=g)
    n_tr, n_va = int(0.8 * len(full)), int(0.1 * len(full))
    return TaskData("pathfinder", BYTE_VOCAB, resolution * resolution, 2, full.subset(perm[:n_tr]),
                    full.subset(perm[n_tr : n_tr + n_va]), full.subset(perm[n_tr + n_va :]))


# ---------------------------------------------------------------------------------------------- dispatch
def load_task(task: str, data_dir: str | Path | None = None, *, split_seed: int = 0, max_len: int | None = None,
              limit: int | None = None) -> TaskData:
    """Load ``task`` (one of :data:`TASKS`) from ``data_dir`` (``None``: the datasets library for text and
    image). ``max_len`` overrides the standard length (ListOps, Text, Retrieval only). ``split_seed`` seeds the
    random hold-outs of Text, Image and Pathfinder (``LRAConfig.split_seed``; never the run seed).

    Raises:
        ValueError: unknown task, or ``data_dir`` missing for a task that has no hub source.
    """
    if task not in TASKS:
        raise ValueError(f"task: expected one of {TASKS}, got {task!r}")
    L = max_len or TASK_MAX_LEN[task]
    if task in ("listops", "retrieval", "pathfinder") and data_dir is None:
        raise ValueError(f"data_dir: task {task!r} needs a local folder (no hub copy); expected layout: "
                         + {"listops": LISTOPS_LAYOUT, "retrieval": AAN_LAYOUT, "pathfinder": PATHFINDER_LAYOUT}[task])
    if task == "listops":
        return load_listops(data_dir, L, limit=limit)
    if task == "text":
        return load_text(data_dir, L, split_seed=split_seed, limit=limit)
    if task == "retrieval":
        return load_retrieval(data_dir, L, limit=limit)
    if task == "image":
        return load_image(data_dir, split_seed=split_seed, limit=limit)
    return load_pathfinder(data_dir, split_seed=split_seed, limit=limit)
