"""MS MARCO training triples ``(query, positive passage, negative passage)``: local TSV files (text or id
triples, teacher-scored margin triples) or ``ir_datasets`` docpairs. Layouts: see :mod:`.data`."""

from __future__ import annotations

from pathlib import Path

from .data import MSMARCO_TRAIN_ID, ir_datasets_errors
from .files import read_id_text_tsv, read_tsv

__all__ = ["read_triples", "iter_ir_datasets_triples", "read_margin_triples"]


def read_triples(path: str | Path, *, collection: str | Path | None = None, queries: str | Path | None = None,
                 limit: int | None = None) -> list[tuple[str, str, str]]:
    """Read MS MARCO training triples as ``(query, positive, negative)`` texts.

    Either text triples (``triples.train.small.tsv``: ``query<TAB>positive<TAB>negative``) or id triples
    (``qidpidtriples.train.full.2.tsv``: ``qid<TAB>pos_pid<TAB>neg_pid``, resolved through ``collection``
    and ``queries`` TSV files). The data decide, not the ids' shape: with ``collection`` and ``queries`` every line
    is an id triple (ids of any form: ``123``, ``msm-d4``) looked up in them, and a field that is not one of their
    ids is refused naming the line; without them the lines are text triples, and a first line of three integers
    (id triples whose files were not given) is refused.
    """
    path = Path(path)
    layout = "triples 'query<TAB>positive<TAB>negative' or 'qid<TAB>pos_pid<TAB>neg_pid'"
    rows = read_tsv(path, 3, "triple", layout)
    out: list[tuple[str, str, str]] = []
    docs = qs = None
    if (collection is None) != (queries is None):
        raise ValueError(f"{path}: id triples need both the collection and the queries TSV files "
                         "(--train-collection collection.tsv --train-queries queries.train.tsv); text triples neither")
    if collection is not None:
        docs = read_id_text_tsv(collection, "pid<TAB>passage")
        qs = read_id_text_tsv(queries, "qid<TAB>query")
    for lineno, row in enumerate(rows, 1):
        if limit is not None and len(out) >= limit:
            break
        if lineno == 1 and docs is None and all(c.strip().isdigit() for c in row):
            raise ValueError(f"{path}: id triples (qid pid pid) need the collection and queries TSV files "
                             "(--train-collection collection.tsv --train-queries queries.train.tsv)")
        if docs is not None:
            q, pos, neg = (c.strip() for c in row)
            if q not in qs:
                raise ValueError(f"{path}:{lineno}: id {q!r} not found in the queries {queries} (id triples: every "
                                 "field an id of the queries or the collection)")
            missing = next((d for d in (pos, neg) if d not in docs), None)
            if missing is not None:
                raise ValueError(f"{path}:{lineno}: id {missing!r} not found in the collection {collection}")
            out.append((qs[q], docs[pos], docs[neg]))
        else:
            out.append((row[0], row[1], row[2]))
    if not out:
        raise ValueError(f"{path}: no triples ({layout})")
    return out


def iter_ir_datasets_triples(dataset_id: str = MSMARCO_TRAIN_ID, limit: int | None = None) -> list[tuple[str, str, str]]:
    """``(query, positive, negative)`` texts from an ir_datasets docpairs dataset (ids resolved through
    its docs store and queries)."""
    import ir_datasets

    out = []
    with ir_datasets_errors(dataset_id):
        ds = ir_datasets.load(dataset_id)
        queries = {q.query_id: q.text for q in ds.queries_iter()}
        store = ds.docs_store()
        for pair in ds.docpairs_iter():
            if limit is not None and len(out) >= limit:
                break
            out.append((queries[pair.query_id], store.get(pair.doc_id_a).text, store.get(pair.doc_id_b).text))
    return out


def read_margin_triples(path: str | Path, *, collection: str | Path, queries: str | Path,
                        limit: int | None = None) -> list[tuple[str, str, str, float]]:
    """Teacher-scored triples for margin-MSE (Hofstätter et al. 2020, "Improving efficient neural ranking
    models with cross-architecture knowledge distillation", file
    ``bert_cat_ensemble_msmarcopassage_train_scores_ids.tsv``):
    ``pos_score<TAB>neg_score<TAB>qid<TAB>pos_pid<TAB>neg_pid``. Returns ``(query, positive, negative,
    pos_score - neg_score)``."""
    path = Path(path)
    layout = "margin triples 'pos_score<TAB>neg_score<TAB>qid<TAB>pos_pid<TAB>neg_pid'"
    if not collection or not queries:
        raise ValueError(f"{path}: margin triples need the collection and queries TSV files")
    docs = read_id_text_tsv(collection, "pid<TAB>passage")
    qs = read_id_text_tsv(queries, "qid<TAB>query")
    out = []
    for lineno, row in enumerate(read_tsv(path, 5, "margin triple", layout), 1):
        if limit is not None and len(out) >= limit:
            break
        try:
            margin = float(row[0]) - float(row[1])
            out.append((qs[row[2].strip()], docs[row[3].strip()], docs[row[4].strip()], margin))
        except ValueError:
            raise ValueError(f"{path}:{lineno}: scores must be numbers; {layout}") from None
        except KeyError as err:
            raise ValueError(f"{path}:{lineno}: id {err.args[0]} not found in {queries} / {collection}") from None
    if not out:
        raise ValueError(f"{path}: no lines ({layout})")
    return out
