"""Local retrieval files in the standard layouts: MS MARCO passage TSV folders and BEIR folders.

Role: reading and validating files (the layouts are described in :mod:`initlab.realdata.splade.data`).
A missing or malformed file raises ``FileNotFoundError`` / ``ValueError`` naming the file, the line and
the expected layout; duplicate ids are refused (:func:`initlab.realdata.splade.evalset.put_unique`).
Every file is read with :func:`initlab.textio.open_text`: UTF-8, a leading byte-order mark dropped (it would
otherwise become part of the first id), a non-UTF-8 file refused naming the file and line.
Sources: MS MARCO passage ranking (https://microsoft.github.io/msmarco/); BEIR (Thakur et al., NeurIPS
2021 datasets track).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from initlab.textio import id_field, open_text, text_file, text_field

from .evalset import DATA_RECALL_LEVEL, DataPolicyError, RetrievalSet, put_unique, relevance_grade

__all__ = ["MSMARCO_LAYOUT", "BEIR_LAYOUT", "read_tsv", "read_id_text_tsv", "read_trec_qrels", "load_msmarco_folder",
           "load_beir_folder"]


MSMARCO_LAYOUT = ("MS MARCO layout: collection.tsv 'pid<TAB>passage'; queries.<split>.tsv 'qid<TAB>query'; "
                  "qrels.<split>.tsv 'qid 0 pid relevance'")


BEIR_LAYOUT = ("BEIR layout: corpus.jsonl {\"_id\",\"title\",\"text\"}; queries.jsonl {\"_id\",\"text\"}; "
               "qrels/<split>.tsv with header 'query-id<TAB>corpus-id<TAB>score'")


def _need(path: Path, layout: str) -> Path:
    """``path`` (or ``path.gz``, read decompressed by :mod:`initlab.textio`), or FileNotFoundError naming the layout."""
    path = text_file(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: file not found (expected {layout})")
    return path


def read_tsv(path: Path, n_cols: int, what: str, layout: str, with_lineno: bool = False) -> Iterator:
    with open_text(_need(path, layout)) as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) != n_cols:
                raise ValueError(f"{path}:{lineno}: expected {n_cols} tab-separated columns ({what}), got {len(parts)}; {layout}")
            yield (lineno, parts) if with_lineno else parts


def read_id_text_tsv(path: str | Path, what: str = "id<TAB>text") -> dict[str, str]:
    """Read ``id<TAB>text`` lines (MS MARCO collection.tsv, queries.*.tsv) into a dict."""
    out: dict[str, str] = {}
    seen: dict[str, str] = {}
    for lineno, (i, t) in read_tsv(Path(path), 2, what, MSMARCO_LAYOUT, with_lineno=True):
        put_unique(out, i.strip(), t, seen, f"{path}:{lineno}", "id")
    if not out:
        raise ValueError(f"{path}: no lines (expected {what})")
    return out


def read_trec_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read TREC qrels ``qid 0 docid relevance`` (whitespace separated, 4 columns)."""
    path = Path(path)
    qrels: dict[str, dict[str, int]] = {}
    seen: dict = {}
    with open_text(_need(path, "TREC qrels 'qid 0 docid relevance'")) as fh:
        for lineno, line in enumerate(fh, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise ValueError(f"{path}:{lineno}: expected TREC qrels with 4 columns 'qid 0 docid relevance', got {len(parts)}")
            rel = relevance_grade(parts[3], f"{path}:{lineno}")
            put_unique(qrels.setdefault(parts[0], {}), parts[2], rel, seen.setdefault(parts[0], {}), f"{path}:{lineno}",
                 f"judgement of query {parts[0]!r} for document")
    if not qrels:
        raise ValueError(f"{path}: no judgements (expected TREC qrels 'qid 0 docid relevance')")
    return qrels


def load_msmarco_folder(folder: str | Path, split: str = "dev.small", *, name: str | None = None,
                        binary_rel: int = 1, binary_rel_source: str = DATA_RECALL_LEVEL) -> RetrievalSet:
    """Load ``collection.tsv``, ``queries.<split>.tsv`` and ``qrels.<split>.tsv`` from ``folder``.

    Recall counts grade >= ``binary_rel`` as relevant: 1 unless the caller names a known set's documented level
    (``binary_rel_source`` says where it comes from; the named set ``trec-dl-2019`` of
    :func:`~.data.load_eval_set` passes TREC DL's 2). The split's name decides nothing: ``dl19``, ``medline``
    or ``needle`` are read alike. For TREC DL 2019 from local files use ``--data-root DIR`` with
    ``DIR/msmarco/queries.dl19.tsv`` (msmarco-test2019-queries.tsv renamed) and ``qrels.dl19.tsv``
    (2019qrels-pass.txt renamed).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: MS MARCO folder not found ({MSMARCO_LAYOUT})")
    corpus = read_id_text_tsv(folder / "collection.tsv", "pid<TAB>passage")
    queries = read_id_text_tsv(folder / f"queries.{split}.tsv", "qid<TAB>query")
    qrels = read_trec_qrels(folder / f"qrels.{split}.tsv")
    return RetrievalSet(name or f"msmarco-{split}", corpus, queries, qrels, binary_rel, source=str(folder),
                        binary_rel_source=binary_rel_source)


def _read_jsonl(path: Path, keys: tuple[str, ...]) -> Iterator[tuple[int, dict]]:
    with open_text(_need(path, BEIR_LAYOUT)) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{lineno}: not JSON ({err.msg}); {BEIR_LAYOUT}") from None
            missing = [k for k in keys if not isinstance(obj, dict) or k not in obj]
            if missing:
                raise ValueError(f"{path}:{lineno}: missing key(s) {missing}; {BEIR_LAYOUT}")
            yield lineno, obj


def load_beir_folder(folder: str | Path, split: str = "test", *, name: str | None = None,
                     ignore_identical_ids: bool = True) -> RetrievalSet:
    """Load a BEIR dataset folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``).

    Document text is ``title + " " + text`` when the title is non-empty (as BEIR's evaluation does); a missing
    ``title`` is no title. Every ``text`` and ``title`` is a JSON string and every ``_id`` a string or an integer,
    else :class:`~.evalset.DataPolicyError` names the file, the line and the field (``null`` is never the text
    ``"None"``). ``ignore_identical_ids`` as in BEIR's evaluation, decided per query from the data by
    :func:`~.evalset.identical_id_policy` (never from the folder's name).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: BEIR folder not found ({BEIR_LAYOUT})")
    corpus: dict[str, str] = {}
    titles: dict[str, str] = {}
    seen: dict = {}
    for lineno, obj in _read_jsonl(folder / "corpus.jsonl", ("_id", "text")):
        where = f"{folder / 'corpus.jsonl'}:{lineno}"
        doc_id = id_field(obj["_id"], where, "_id", error=DataPolicyError)
        text = text_field(obj["text"], where, "text", error=DataPolicyError)
        title = text_field(obj.get("title", ""), where, "title", error=DataPolicyError).strip()
        put_unique(corpus, doc_id, f"{title} {text}".strip() if title else text, seen, where, "document id")
        if title:
            titles[doc_id] = title
    queries: dict[str, str] = {}
    seen = {}
    for lineno, obj in _read_jsonl(folder / "queries.jsonl", ("_id", "text")):
        where = f"{folder / 'queries.jsonl'}:{lineno}"
        put_unique(queries, id_field(obj["_id"], where, "_id", error=DataPolicyError),
                   text_field(obj["text"], where, "text", error=DataPolicyError), seen, where, "query id")
    qpath = folder / "qrels" / f"{split}.tsv"
    rows = read_tsv(qpath, 3, "query-id<TAB>corpus-id<TAB>score", BEIR_LAYOUT, with_lineno=True)
    first = next(rows, None)
    header = None if first is None else first[1]
    if header is None or [h.strip() for h in header] != ["query-id", "corpus-id", "score"]:
        raise ValueError(f"{qpath}: expected header 'query-id<TAB>corpus-id<TAB>score', got {header}; {BEIR_LAYOUT}")
    qrels: dict[str, dict[str, int]] = {}
    seen = {}
    for lineno, (q, d, s) in rows:
        rel = relevance_grade(s, f"{qpath}:{lineno}")
        put_unique(qrels.setdefault(q, {}), d, rel, seen.setdefault(q, {}), f"{qpath}:{lineno}",
             f"judgement of query {q!r} for document")
    return RetrievalSet(name or folder.name, corpus, queries, qrels, 1, source=str(folder),
                        ignore_identical_ids=ignore_identical_ids, titles=titles)
