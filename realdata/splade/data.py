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

Role of this module: the named evaluation sets (MS MARCO dev, TREC DL 2019, BEIR-13, NanoBEIR) and their
sources (``ir_datasets``, the NanoBEIR dataset, local folders), resolved from one spec by
:func:`load_eval_set`. The set and its policy are :mod:`initlab.realdata.splade.evalset`, the local files
:mod:`initlab.realdata.splade.files`, the training triples :mod:`initlab.realdata.splade.triples`.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from initlab.textio import id_field, text_field

from .evalset import DATA_RECALL_LEVEL, DataPolicyError, RetrievalSet, put_unique, relevance_grade
from .files import BEIR_LAYOUT, MSMARCO_LAYOUT, load_beir_folder, load_msmarco_folder

__all__ = [
    "MSMARCO_TRAIN_ID",
    "MSMARCO_EVAL_IDS",
    "BEIR13",
    "BEIR13_IDS",
    "NANOBEIR_NAMES",
    "ir_datasets_errors",
    "load_ir_datasets",
    "load_nanobeir",
    "load_eval_set",
    "check_eval_spec",
    "local_set_files",
    "local_folder_spec",
    "absolute_spec",
    "RECALL_LEVELS",
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
#: the documented recall level of the known sets whose judgements are graded on another scale than "relevant or
#: not", by the name that selects them (``--sets trec-dl-2019``) or their ir_datasets id: the one place a level comes
#: from a name; every other set counts every grade >= 1 (:data:`~.evalset.DATA_RECALL_LEVEL`). Printed when the set
#: is evaluated and recorded in its results row (``recall_rel``, ``recall_rel_source``).
_TREC_DL = ("TREC Deep Learning passage ranking's documented level: grade 1 is 'related', grade >= 2 relevant "
            "(Craswell et al., TREC 2019/2020 Deep Learning track overviews)")
RECALL_LEVELS = {
    "trec-dl-2019": (2, _TREC_DL),
    **{f"msmarco-passage/trec-dl-{y}{j}": (2, _TREC_DL) for y in (2019, 2020) for j in ("", "/judged")},
}
NANOBEIR_NAMES = ("NanoArguAna", "NanoClimateFEVER", "NanoDBPedia", "NanoFEVER", "NanoFiQA2018", "NanoHotpotQA",
                  "NanoMSMARCO", "NanoNFCorpus", "NanoNQ", "NanoQuoraRetrieval", "NanoSCIDOCS", "NanoSciFact",
                  "NanoTouche2020")


@contextlib.contextmanager
def ir_datasets_errors(dataset_id: str):
    """Turn an ir_datasets failure (unknown id, no network for the first download) into an OSError that says
    how to run from local files instead."""
    try:
        yield
    except KeyError as err:
        raise ValueError(f"ir_datasets id {dataset_id!r} is not registered ({err})") from None
    except DataPolicyError:  # our own data-policy error (a duplicate id, a fractional grade): passed on unchanged
        raise
    except ValueError as err:
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
    titles: dict[str, str] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    with ir_datasets_errors(dataset_id):
        ds = ir_datasets.load(dataset_id)
        seen: dict = {}
        for i, doc in enumerate(ds.docs_iter()):
            if max_docs is not None and i >= max_docs:
                break
            where = f"ir_datasets {dataset_id} docs record {i + 1}"
            text = text_field(doc.text, where, "text", error=DataPolicyError)
            title = text_field(getattr(doc, "title", ""), where, "title", error=DataPolicyError).strip()
            put_unique(corpus, doc.doc_id, f"{title} {text}".strip() if title else text, seen, where, "document id")
            if title:
                titles[doc.doc_id] = title
        seen = {}
        for i, q in enumerate(ds.queries_iter()):
            where = f"ir_datasets {dataset_id} queries record {i + 1}"
            put_unique(queries, q.query_id, text_field(q.text, where, "text", error=DataPolicyError), seen, where,
                       "query id")
        seen = {}
        for i, r in enumerate(ds.qrels_iter()):
            where = f"ir_datasets {dataset_id} qrels record {i + 1}"
            put_unique(qrels.setdefault(r.query_id, {}), r.doc_id, relevance_grade(r.relevance, where),
                       seen.setdefault(r.query_id, {}), where, f"judgement of query {r.query_id!r} for document")
    level, source = RECALL_LEVELS.get(dataset_id, (1, DATA_RECALL_LEVEL))
    return RetrievalSet(name or dataset_id, corpus, queries, qrels, level, source=f"ir_datasets:{dataset_id}",
                        ignore_identical_ids=dataset_id.startswith("beir/"), titles=titles, binary_rel_source=source)


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
            where = f"{src} {part} record {i + 1}"
            put_unique(store, id_field(r["_id"], where, "_id", error=DataPolicyError),
                       text_field(r["text"], where, "text", error=DataPolicyError), seen, where, "id")
    seen = {}
    for i, r in enumerate(load_dataset(dataset_id, "qrels", split=name)):
        q = str(r["query-id"])
        where = f"{src} qrels record {i + 1}"
        put_unique(qrels.setdefault(q, {}), str(r["corpus-id"]), relevance_grade(r.get("score", 1), where),
                   seen.setdefault(q, {}), where, f"judgement of query {q!r} for document")
    return RetrievalSet(name, corpus, queries, qrels, 1, source=src)


def local_folder_spec(spec: str) -> tuple[str, Path, str] | None:
    """``(kind, folder, split)`` of an explicit local set ``msmarco:FOLDER[:SPLIT]`` or ``beir:FOLDER``, else None.

    A folder's name may hold ``:`` (``beir:runs:2024/beir1``): a BEIR spec is its folder after the first ``:``; an
    MS MARCO spec is its folder whole when that folder exists, else the folder before its last ``:`` and the split
    after it (``msmarco:runs:2024/ms:dl19``). The same parse serves loading, checking and fingerprinting, so a run
    fingerprints the files it reads.

    Raises:
        ValueError: an empty folder or split.
    """
    if spec.startswith("beir:"):
        rest = spec[len("beir:"):]
        if not rest:
            raise ValueError(f"evaluation set {spec!r}: expected beir:<folder>")
        return "beir", Path(rest), "test"
    if not spec.startswith("msmarco:"):
        return None
    rest = spec[len("msmarco:"):]
    folder, split = rest, "dev.small"
    if ":" in rest and not Path(rest).is_dir():
        folder, split = rest.rsplit(":", 1)
    if not folder or not split:
        raise ValueError(f"evaluation set {spec!r}: expected msmarco:<folder>[:split] (a folder, then an optional "
                         "split such as dev.small)")
    return "msmarco", Path(folder), split


def absolute_spec(spec: str) -> str:
    """``spec`` with the folder of an explicit local set made absolute (this process's working directory), so that
    a cell run elsewhere (a Dask worker) reads the same files; any other spec unchanged."""
    import os

    parsed = local_folder_spec(spec)
    if parsed is None:
        return spec
    kind, folder, split = parsed
    whole = spec[len(kind) + 1:]
    if kind == "beir" or whole == str(folder):
        return f"{kind}:{os.path.abspath(folder)}"
    return f"{kind}:{os.path.abspath(folder)}:{split}"


def local_set_files(spec: str, *, data_root: str | Path | None = None) -> list[Path]:
    """The local files :func:`load_eval_set` reads for ``spec`` (a ``.gz`` copy where the file itself is absent), or
    ``[]`` for a source that is not a local folder (ir_datasets, the NanoBEIR dataset on Hugging Face): what a resumed
    evaluation fingerprints (:func:`initlab.runs.check_inputs`)."""
    from initlab.textio import text_file

    root = Path(data_root) if data_root else None
    folder, split, kind = None, None, None
    parsed = local_folder_spec(spec)
    if parsed is not None:
        kind, folder, split = parsed
    elif root is not None and spec.startswith("nano:"):
        folder, split, kind = root / "nanobeir" / spec.split(":", 1)[1], "test", "beir"
    elif root is not None and spec in MSMARCO_EVAL_IDS:
        folder, split, kind = root / "msmarco", "dev.small" if spec == "msmarco-dev" else "dl19", "msmarco"
    elif root is not None and spec in BEIR13:
        folder, split, kind = root / "beir" / spec, "test", "beir"
    if folder is None:
        return []
    names = (["collection.tsv", f"queries.{split}.tsv", f"qrels.{split}.tsv"] if kind == "msmarco" else
             ["corpus.jsonl", "queries.jsonl", f"qrels/{split}.tsv"])
    return [text_file(folder / n) for n in names]


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
    parsed = local_folder_spec(spec)
    if parsed is not None:
        folder = parsed[1]
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
        whole = spec.split(":", 1)[1]
        if spec.startswith("msmarco:") and ":" in whole:  # both readings of a ':' in the path, named
            raise FileNotFoundError(f"evaluation set {spec!r}: neither folder {whole} nor folder {folder} (with split "
                                    f"{parsed[2]!r}) found ({MSMARCO_LAYOUT})")
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
    parsed = local_folder_spec(spec)
    if parsed is not None:
        kind, folder, split = parsed
        return load_msmarco_folder(folder, split) if kind == "msmarco" else load_beir_folder(folder)
    root = Path(data_root) if data_root is not None else None
    if spec.startswith("nano:"):
        nm = spec.split(":", 1)[1]
        return load_nanobeir(nm, local_folder=None if root is None else root / "nanobeir")
    if spec in MSMARCO_EVAL_IDS:
        if root is None:
            return load_ir_datasets(MSMARCO_EVAL_IDS[spec], name=spec)
        level, source = RECALL_LEVELS.get(spec, (1, DATA_RECALL_LEVEL))
        return load_msmarco_folder(root / "msmarco", "dev.small" if spec == "msmarco-dev" else "dl19", name=spec,
                                   binary_rel=level, binary_rel_source=source)
    if spec in BEIR13:
        if root is None:
            return load_ir_datasets(BEIR13_IDS[spec], name=spec)
        return load_beir_folder(root / "beir" / spec, name=spec)
    raise ValueError(f"evaluation set {spec!r}: expected msmarco-dev, trec-dl-2019, one of {BEIR13}, nano:<name>, "
                     "ir_datasets:<id>, msmarco:<folder>[:split] or beir:<folder>")
