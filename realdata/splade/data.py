"""Retrieval data for SPLADE: ir_datasets ids and local files in the standard layouts.

Two kinds of data, each from two sources:

* evaluation sets (:class:`RetrievalSet`: corpus, queries, qrels) --
  ``ir_datasets`` ids (``msmarco-passage/dev/small``, ``msmarco-passage/trec-dl-2019/judged``,
  ``beir/<name>[/test]``), a local MS MARCO folder, a local BEIR folder, or NanoBEIR (Hugging Face
  dataset ``sentence-transformers/NanoBEIR-en``, or a local BEIR-layout copy of it);
* training triples ``(query, positive passage, negative passage)`` -- ``ir_datasets``
  ``msmarco-passage/train/triples-small`` or local MS MARCO triples.

Local layouts (exactly those of the official downloads):

MS MARCO passage (https://microsoft.github.io/msmarco/):
    ``collection.tsv``            ``pid<TAB>passage``
    ``queries.<split>.tsv``       ``qid<TAB>query``        (e.g. queries.dev.small.tsv, queries.train.tsv)
    ``qrels.<split>.tsv``         TREC 4 columns ``qid 0 pid relevance`` (tabs or spaces)
    triples, either ids           ``qid<TAB>pos_pid<TAB>neg_pid`` (qidpidtriples.train.full.2.tsv)
                 or text          ``query<TAB>positive<TAB>negative`` (triples.train.small.tsv)
BEIR (Thakur et al., NeurIPS 2021 datasets track), one folder per dataset:
    ``corpus.jsonl``   ``{"_id": ..., "title": ..., "text": ...}`` per line
    ``queries.jsonl``  ``{"_id": ..., "text": ...}`` per line
    ``qrels/test.tsv`` header ``query-id<TAB>corpus-id<TAB>score``, then one judgement per line

A missing or malformed file raises ``FileNotFoundError`` / ``ValueError`` naming the file, the line and
the expected layout.

Evaluation-data policy (the same for every loader: MS MARCO TSV, BEIR folders, ir_datasets, NanoBEIR):

* a duplicate id (a second document or query with the same id, or a second judgement of the same
  query-document pair) is refused with a ``ValueError`` naming the file and both lines (ir_datasets and
  Hugging Face sources: both record numbers), never "last copy wins";
* the evaluated queries are those present in both the queries file and the qrels; the qrels handed to
  the measures are cut to them, so a judged query without text is never averaged in as 0. The counts
  (queries in the file, judged queries, evaluated queries) are kept in :attr:`RetrievalSet.meta` and
  every results row, and judged queries without text are listed in a warning;
* judged documents absent from the corpus are kept in the qrels (they count as relevant and never
  retrieved, as in trec_eval), counted and listed in a warning.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

__all__ = [
    "RetrievalSet",
    "MSMARCO_EVAL_IDS",
    "BEIR13",
    "BEIR13_IDS",
    "NANOBEIR_NAMES",
    "load_msmarco_folder",
    "load_beir_folder",
    "load_ir_datasets",
    "load_nanobeir",
    "load_eval_set",
    "check_eval_spec",
    "read_triples",
    "iter_ir_datasets_triples",
    "read_margin_triples",
]

MSMARCO_TRAIN_ID = "msmarco-passage/train/triples-small"
MSMARCO_EVAL_IDS = {"msmarco-dev": "msmarco-passage/dev/small", "trec-dl-2019": "msmarco-passage/trec-dl-2019/judged"}
BEIR13 = ("arguana", "climate-fever", "dbpedia-entity", "fever", "fiqa", "hotpotqa", "nfcorpus", "nq", "quora",
          "scidocs", "scifact", "trec-covid", "webis-touche2020")
# ir_datasets ids of the BEIR-13 test sets (the /test subset where the dataset has splits).
BEIR13_IDS = {
    "arguana": "beir/arguana", "climate-fever": "beir/climate-fever", "dbpedia-entity": "beir/dbpedia-entity/test",
    "fever": "beir/fever/test", "fiqa": "beir/fiqa/test", "hotpotqa": "beir/hotpotqa/test",
    "nfcorpus": "beir/nfcorpus/test", "nq": "beir/nq", "quora": "beir/quora/test", "scidocs": "beir/scidocs",
    "scifact": "beir/scifact/test", "trec-covid": "beir/trec-covid", "webis-touche2020": "beir/webis-touche2020/v2",
}
NANOBEIR_NAMES = ("NanoArguAna", "NanoClimateFEVER", "NanoDBPedia", "NanoFEVER", "NanoFiQA2018", "NanoHotpotQA",
                  "NanoMSMARCO", "NanoNFCorpus", "NanoNQ", "NanoQuoraRetrieval", "NanoSCIDOCS", "NanoSciFact",
                  "NanoTouche2020")

MSMARCO_LAYOUT = ("MS MARCO layout: collection.tsv 'pid<TAB>passage'; queries.<split>.tsv 'qid<TAB>query'; "
                  "qrels.<split>.tsv 'qid 0 pid relevance'")
BEIR_LAYOUT = ("BEIR layout: corpus.jsonl {\"_id\",\"title\",\"text\"}; queries.jsonl {\"_id\",\"text\"}; "
               "qrels/<split>.tsv with header 'query-id<TAB>corpus-id<TAB>score'")


@dataclass
class RetrievalSet:
    """An evaluation set. ``corpus``: doc id -> text; ``queries``: query id -> text;
    ``qrels``: query id -> {doc id: relevance (int)}. ``name`` labels results; ``ndcg_rel`` is the
    minimum relevance counted by binary measures (2 for TREC DL 2019 passage, else 1).
    ``ignore_identical_ids``: drop a retrieved document whose id equals the query id (BEIR's evaluation does
    this by default, ``EvaluateRetrieval.evaluate(ignore_identical_ids=True)``; it matters for ArguAna and
    Quora, whose queries are also corpus documents)."""

    name: str
    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    binary_rel: int = 1
    source: str = ""
    meta: dict = field(default_factory=dict)
    ignore_identical_ids: bool = False

    def __post_init__(self) -> None:
        if not self.corpus:
            raise ValueError(f"{self.name}: empty corpus")
        if not self.queries:
            raise ValueError(f"{self.name}: no queries")
        judged = [q for q in self.queries if self.qrels.get(q)]
        if not judged:
            raise ValueError(f"{self.name}: no query of the queries file has relevance judgements (qrels)")
        # Policy (module docstring): evaluate the queries present in both the queries file and the qrels.
        no_text = sorted(q for q in self.qrels if q not in self.queries)
        unknown_docs = sorted({d for q in judged for d in self.qrels[q] if d not in self.corpus})
        self.meta.update({
            "n_queries_file": len(self.queries), "n_queries_judged": sum(1 for q in self.qrels if self.qrels[q]),
            "n_queries_evaluated": len(judged), "judged_queries_without_text": len(no_text),
            "judged_docs_not_in_corpus": len(unknown_docs),
        })
        if no_text:
            warnings.warn(f"{self.name}: {len(no_text)} judged quer{'y' if len(no_text) == 1 else 'ies'} not in the "
                          f"queries file, left out of every measure: {_first(no_text)}", RuntimeWarning, stacklevel=3)
        if unknown_docs:
            warnings.warn(f"{self.name}: {len(unknown_docs)} judged document id(s) not in the corpus (kept as relevant, "
                          f"never retrieved): {_first(unknown_docs)}", RuntimeWarning, stacklevel=3)
        self.queries = {q: self.queries[q] for q in judged}
        self.qrels = {q: self.qrels[q] for q in judged}


def _first(ids: list[str], n: int = 10) -> str:
    return ", ".join(ids[:n]) + (f" ... ({len(ids) - n} more)" if len(ids) > n else "")


def _put(store: dict, key, value, seen: dict, where: str, what: str) -> None:
    """``store[key] = value``, refusing a duplicate ``key`` (``seen`` maps keys to their first location)."""
    if key in store:
        raise ValueError(f"{where}: duplicate {what} {key!r} (first at {seen[key]}); ids must be unique, "
                         "remove one of the copies")
    store[key] = value
    seen[key] = where


def _need(path: Path, layout: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: file not found (expected {layout})")
    return path


def _read_tsv(path: Path, n_cols: int, what: str, layout: str, with_lineno: bool = False) -> Iterator:
    with open(_need(path, layout), encoding="utf-8") as fh:
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
    for lineno, (i, t) in _read_tsv(Path(path), 2, what, MSMARCO_LAYOUT, with_lineno=True):
        _put(out, i.strip(), t, seen, f"{path}:{lineno}", "id")
    if not out:
        raise ValueError(f"{path}: no lines (expected {what})")
    return out


def read_trec_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """Read TREC qrels ``qid 0 docid relevance`` (whitespace separated, 4 columns)."""
    path = Path(path)
    qrels: dict[str, dict[str, int]] = {}
    seen: dict = {}
    with open(_need(path, "TREC qrels 'qid 0 docid relevance'"), encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise ValueError(f"{path}:{lineno}: expected TREC qrels with 4 columns 'qid 0 docid relevance', got {len(parts)}")
            try:
                rel = int(parts[3])
            except ValueError:
                raise ValueError(f"{path}:{lineno}: relevance {parts[3]!r} is not an integer (TREC qrels 'qid 0 docid relevance')") from None
            _put(qrels.setdefault(parts[0], {}), parts[2], rel, seen.setdefault(parts[0], {}), f"{path}:{lineno}",
                 f"judgement of query {parts[0]!r} for document")
    if not qrels:
        raise ValueError(f"{path}: no judgements (expected TREC qrels 'qid 0 docid relevance')")
    return qrels


def load_msmarco_folder(folder: str | Path, split: str = "dev.small", *, name: str | None = None,
                        binary_rel: int | None = None) -> RetrievalSet:
    """Load ``collection.tsv``, ``queries.<split>.tsv`` and ``qrels.<split>.tsv`` from ``folder``.

    For TREC DL 2019 use ``split="dl19"`` with files ``queries.dl19.tsv`` (msmarco-test2019-queries.tsv
    renamed) and ``qrels.dl19.tsv`` (2019qrels-pass.txt renamed); relevance >= 2 then counts as relevant
    for recall (``binary_rel`` defaults to 2 when the split name contains "dl").
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: MS MARCO folder not found ({MSMARCO_LAYOUT})")
    corpus = read_id_text_tsv(folder / "collection.tsv", "pid<TAB>passage")
    queries = read_id_text_tsv(folder / f"queries.{split}.tsv", "qid<TAB>query")
    qrels = read_trec_qrels(folder / f"qrels.{split}.tsv")
    if binary_rel is None:
        binary_rel = 2 if "dl" in split else 1
    default = {"dev.small": "msmarco-dev", "dl19": "trec-dl-2019"}.get(split, f"msmarco-{split}")
    return RetrievalSet(name or default, corpus, queries, qrels, binary_rel, source=str(folder))


def _read_jsonl(path: Path, keys: tuple[str, ...]) -> Iterator[tuple[int, dict]]:
    with open(_need(path, BEIR_LAYOUT), encoding="utf-8") as fh:
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

    Document text is ``title + " " + text`` when the title is non-empty (as BEIR's evaluation does).
    ``ignore_identical_ids`` as in BEIR's evaluation (see :class:`RetrievalSet`).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: BEIR folder not found ({BEIR_LAYOUT})")
    corpus: dict[str, str] = {}
    seen: dict = {}
    for lineno, obj in _read_jsonl(folder / "corpus.jsonl", ("_id", "text")):
        title = (obj.get("title") or "").strip()
        _put(corpus, str(obj["_id"]), f"{title} {obj['text']}".strip() if title else obj["text"], seen,
             f"{folder / 'corpus.jsonl'}:{lineno}", "document id")
    queries: dict[str, str] = {}
    seen = {}
    for lineno, obj in _read_jsonl(folder / "queries.jsonl", ("_id", "text")):
        _put(queries, str(obj["_id"]), obj["text"], seen, f"{folder / 'queries.jsonl'}:{lineno}", "query id")
    qpath = folder / "qrels" / f"{split}.tsv"
    rows = _read_tsv(qpath, 3, "query-id<TAB>corpus-id<TAB>score", BEIR_LAYOUT, with_lineno=True)
    first = next(rows, None)
    header = None if first is None else first[1]
    if header is None or [h.strip() for h in header] != ["query-id", "corpus-id", "score"]:
        raise ValueError(f"{qpath}: expected header 'query-id<TAB>corpus-id<TAB>score', got {header}; {BEIR_LAYOUT}")
    qrels: dict[str, dict[str, int]] = {}
    seen = {}
    for lineno, (q, d, s) in rows:
        try:
            rel = int(float(s))
        except ValueError:
            raise ValueError(f"{qpath}:{lineno}: score {s!r} of query {q!r}, document {d!r} is not a number; {BEIR_LAYOUT}") from None
        _put(qrels.setdefault(q, {}), d, rel, seen.setdefault(q, {}), f"{qpath}:{lineno}",
             f"judgement of query {q!r} for document")
    return RetrievalSet(name or folder.name, corpus, queries, qrels, 1, source=str(folder),
                        ignore_identical_ids=ignore_identical_ids)


@contextlib.contextmanager
def _ir_datasets_errors(dataset_id: str):
    """Turn an ir_datasets failure (unknown id, no network for the first download) into an OSError that says
    how to run from local files instead."""
    try:
        yield
    except KeyError as err:
        raise ValueError(f"ir_datasets id {dataset_id!r} is not registered ({err})") from None
    except ValueError as err:
        if "duplicate" in str(err):  # our own data-policy error: passed on unchanged
            raise
        raise OSError(f"ir_datasets {dataset_id!r}: could not load (ValueError: {str(err)[:200]})") from err
    except Exception as err:
        raise OSError(f"ir_datasets {dataset_id!r}: could not load ({type(err).__name__}: {str(err)[:200]}). "
                      "Without network, pass local files: --train-source <triples TSV> for training, "
                      f"--data-root DIR for evaluation ({MSMARCO_LAYOUT}; {BEIR_LAYOUT})") from err


def load_ir_datasets(dataset_id: str, *, name: str | None = None, max_docs: int | None = None) -> RetrievalSet:
    """Load an evaluation set through ``ir_datasets`` (downloads on first use, then cached).

    BEIR documents with a title are encoded as ``title + " " + text``. ``max_docs`` truncates the corpus
    (for smoke tests only; metrics on a truncated corpus are not comparable).
    """
    import ir_datasets

    corpus: dict[str, str] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    with _ir_datasets_errors(dataset_id):
        ds = ir_datasets.load(dataset_id)
        seen: dict = {}
        for i, doc in enumerate(ds.docs_iter()):
            if max_docs is not None and i >= max_docs:
                break
            title = (getattr(doc, "title", "") or "").strip()
            _put(corpus, doc.doc_id, f"{title} {doc.text}".strip() if title else doc.text, seen,
                 f"ir_datasets {dataset_id} docs record {i + 1}", "document id")
        seen = {}
        for i, q in enumerate(ds.queries_iter()):
            _put(queries, q.query_id, q.text, seen, f"ir_datasets {dataset_id} queries record {i + 1}", "query id")
        seen = {}
        for i, r in enumerate(ds.qrels_iter()):
            _put(qrels.setdefault(r.query_id, {}), r.doc_id, int(r.relevance), seen.setdefault(r.query_id, {}),
                 f"ir_datasets {dataset_id} qrels record {i + 1}", f"judgement of query {r.query_id!r} for document")
    binary_rel = 2 if "trec-dl" in dataset_id else 1
    return RetrievalSet(name or dataset_id, corpus, queries, qrels, binary_rel, source=f"ir_datasets:{dataset_id}",
                        ignore_identical_ids=dataset_id.startswith("beir/"))


def load_nanobeir(name: str, *, local_folder: str | Path | None = None,
                  dataset_id: str = "sentence-transformers/NanoBEIR-en") -> RetrievalSet:
    """One NanoBEIR set (e.g. ``NanoNFCorpus``): from ``local_folder/<name>`` in BEIR layout if given,
    else from the Hugging Face dataset ``dataset_id`` (subsets corpus/queries/qrels, split ``name``)."""
    if name not in NANOBEIR_NAMES:
        raise ValueError(f"NanoBEIR name: expected one of {NANOBEIR_NAMES}, got {name!r}")
    if local_folder is not None:
        # NanoBEIR is scored as sentence-transformers' NanoBEIREvaluator does (no identical-id filter)
        return load_beir_folder(Path(local_folder) / name, "test", name=name, ignore_identical_ids=False)
    from datasets import load_dataset

    src = f"hf:{dataset_id}/{name}"
    corpus: dict[str, str] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for part, store in (("corpus", corpus), ("queries", queries)):
        seen: dict = {}
        for i, r in enumerate(load_dataset(dataset_id, part, split=name)):
            _put(store, str(r["_id"]), r["text"], seen, f"{src} {part} record {i + 1}", "id")
    seen = {}
    for i, r in enumerate(load_dataset(dataset_id, "qrels", split=name)):
        q = str(r["query-id"])
        _put(qrels.setdefault(q, {}), str(r["corpus-id"]), int(r.get("score", 1)), seen.setdefault(q, {}),
             f"{src} qrels record {i + 1}", f"judgement of query {q!r} for document")
    return RetrievalSet(name, corpus, queries, qrels, 1, source=src)


def check_eval_spec(spec: str, *, data_root: str | Path | None = None) -> None:
    """Check an evaluation-set name of :func:`load_eval_set` without loading it (syntax, known names, local
    folders exist), so a run can refuse a bad ``--sets`` before writing anything. Raises ValueError /
    FileNotFoundError like :func:`load_eval_set`."""
    root = Path(data_root) if data_root else None
    folder: Path | None = None
    if spec.startswith("ir_datasets:"):
        if not spec.split(":", 1)[1]:
            raise ValueError(f"evaluation set {spec!r}: expected ir_datasets:<id>")
        return
    if spec.startswith(("msmarco:", "beir:")):
        folder = Path(spec.split(":")[1])
    elif spec.startswith("nano:"):
        nm = spec.split(":", 1)[1]
        if nm not in NANOBEIR_NAMES:
            raise ValueError(f"NanoBEIR name: expected one of {NANOBEIR_NAMES}, got {nm!r}")
        folder = None if root is None else root / "nanobeir" / nm
    elif spec in MSMARCO_EVAL_IDS:
        folder = None if root is None else root / "msmarco"
    elif spec in BEIR13:
        folder = None if root is None else root / "beir" / spec
    else:
        load_eval_set(spec, data_root=data_root)  # raises the unknown-name error
    if folder is not None and not folder.is_dir():
        raise FileNotFoundError(f"evaluation set {spec!r}: folder {folder} not found ({MSMARCO_LAYOUT}; {BEIR_LAYOUT})")


def load_eval_set(spec: str, *, data_root: str | Path | None = None) -> RetrievalSet:
    """Resolve an evaluation set name.

    ``spec`` is ``msmarco-dev``, ``trec-dl-2019``, a BEIR-13 name, ``nano:<NanoName>``, or an explicit
    ``ir_datasets:<id>`` / ``msmarco:<folder>[:split]`` / ``beir:<folder>``. With ``data_root`` the named
    sets are read from local files instead: ``data_root/msmarco`` (splits ``dev.small``, ``dl19``),
    ``data_root/beir/<name>``, ``data_root/nanobeir/<NanoName>``.
    """
    if spec.startswith("ir_datasets:"):
        return load_ir_datasets(spec.split(":", 1)[1])
    if spec.startswith("msmarco:"):
        parts = spec.split(":")
        return load_msmarco_folder(parts[1], parts[2] if len(parts) > 2 else "dev.small")
    if spec.startswith("beir:"):
        return load_beir_folder(spec.split(":", 1)[1])
    root = Path(data_root) if data_root is not None else None
    if spec.startswith("nano:"):
        nm = spec.split(":", 1)[1]
        return load_nanobeir(nm, local_folder=None if root is None else root / "nanobeir")
    if spec in MSMARCO_EVAL_IDS:
        if root is None:
            return load_ir_datasets(MSMARCO_EVAL_IDS[spec], name=spec)
        return load_msmarco_folder(root / "msmarco", "dev.small" if spec == "msmarco-dev" else "dl19", name=spec)
    if spec in BEIR13:
        if root is None:
            return load_ir_datasets(BEIR13_IDS[spec], name=spec)
        return load_beir_folder(root / "beir" / spec, name=spec)
    raise ValueError(f"evaluation set {spec!r}: expected msmarco-dev, trec-dl-2019, one of {BEIR13}, nano:<name>, "
                     "ir_datasets:<id>, msmarco:<folder>[:split] or beir:<folder>")


# Training triples live in .triples (re-exported here: ``data.read_triples`` etc. keep working).
from .triples import iter_ir_datasets_triples, read_margin_triples, read_triples  # noqa: E402
