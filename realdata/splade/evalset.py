"""The evaluation set of SPLADE retrieval and the evaluation-data policy it enforces.

Role: the container every loader of :mod:`initlab.realdata.splade.data` and
:mod:`initlab.realdata.splade.files` returns (:class:`RetrievalSet`: corpus, queries, qrels) and the
duplicate-id rule they all share (:func:`put_unique`). The policy (docs/conventions.md): a duplicate id is
refused naming both places; the evaluated queries are those in both the queries file and the qrels;
judged documents absent from the corpus stay relevant and are never retrieved (as in trec_eval).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from initlab.textio import integer_field

__all__ = ["RetrievalSet", "DataPolicyError", "put_unique", "relevance_grade", "first_ids", "identical_id_policy",
           "is_self_copy", "DATA_RECALL_LEVEL"]

#: where the recall level of a set comes from when no documented convention of a known set sets it: trec_eval's
#: default, every positive grade of the qrels is relevant
DATA_RECALL_LEVEL = "the qrels: every grade >= 1 counts as relevant (trec_eval's default)"


class DataPolicyError(ValueError):
    """A file or record that breaks the evaluation-data policy (a duplicate id, a grade that is not an integer); the
    message names the file and line, or the record. Loaders wrapping a library's errors pass it on unchanged."""


@dataclass
class RetrievalSet:
    """An evaluation set. ``corpus``: doc id -> text; ``queries``: query id -> text;
    ``qrels``: query id -> {doc id: relevance (int)}. ``name`` labels results; ``binary_rel`` is the
    minimum relevance counted by binary measures (recall): 1 from the data (:data:`DATA_RECALL_LEVEL`), or the
    documented level of a known set (2 for TREC DL 2019 passage), which ``binary_rel_source`` then names; results
    record both and the evaluation prints them. A level no judgement of the evaluated queries reaches is warned
    about (recall is then 0 by construction).
    ``ignore_identical_ids``: apply BEIR's convention (``EvaluateRetrieval.evaluate(ignore_identical_ids=True)``,
    which matters for ArguAna and Quora, whose queries are also corpus documents) the way
    :func:`identical_id_policy` decides it, from the data: a retrieved document is dropped only where it is a copy of
    the query (its id and its text equal the query's) and the qrels do not judge it relevant.
    ``titles``: doc id -> title, for documents whose text is ``title + " " + text`` (BEIR): a copy of the query may
    hold the query's text under a title of its own."""

    name: str
    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    binary_rel: int = 1
    source: str = ""
    meta: dict = field(default_factory=dict)
    ignore_identical_ids: bool = False
    titles: dict[str, str] = field(default_factory=dict)
    binary_rel_source: str = DATA_RECALL_LEVEL

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
                          f"queries file, left out of every measure: {first_ids(no_text)}", RuntimeWarning, stacklevel=3)
        if unknown_docs:
            warnings.warn(f"{self.name}: {len(unknown_docs)} judged document id(s) not in the corpus (kept as relevant, "
                          f"never retrieved): {first_ids(unknown_docs)}", RuntimeWarning, stacklevel=3)
        self.queries = {q: self.queries[q] for q in judged}
        self.qrels = {q: self.qrels[q] for q in judged}
        top = max(g for q in judged for g in self.qrels[q].values())
        if top < self.binary_rel:
            warnings.warn(f"{self.name}: recall counts grade >= {self.binary_rel} as relevant ({self.binary_rel_source}), "
                          f"but no judgement of the evaluated queries reaches it (highest grade {top}): every recall is 0 "
                          "by construction", RuntimeWarning, stacklevel=3)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def is_self_copy(ds: RetrievalSet, qid: str) -> bool:
    """Document ``qid`` of the corpus is a copy of query ``qid``: the same id and the same text (case and spacing
    aside), the document's text read with or without its title (``ds.titles``: ArguAna's queries are its
    documents' bodies, Quora's its untitled documents)."""
    if qid not in ds.corpus:
        return False
    q = _norm(ds.queries[qid])
    if not q:
        return False
    doc = ds.corpus[qid]
    title = ds.titles.get(qid, "")
    body = doc[len(title):] if title and doc.startswith(title) else doc
    return q in (_norm(doc), _norm(body))


def identical_id_policy(ds: RetrievalSet) -> tuple[set[str], dict[str, int]]:
    """Which queries' identical-id document is dropped from their ranking, and the counts of the decision.

    The rule (docs/splade_at_scale.md, "Evaluation"): with ``ds.ignore_identical_ids``, the document whose id
    equals query ``q``'s id is dropped from ``q``'s ranking only where the data show it is a copy of the query,
    i.e. it also holds the query's text (:func:`is_self_copy`), and the qrels do not judge it relevant to ``q`` (a
    judged-relevant document is never dropped). Neither ids alone nor the set's name decide, so renaming the ids of
    a set (queries and documents apart), or its folder, cannot change its metrics unless it makes a query share an
    id with its own text.

    Returns:
        ``(drop, counts)``: the query ids whose own document is dropped, and ``counts`` with
        ``queries_with_a_document_of_their_id``, ``dropped_as_the_query``, ``kept_judged_relevant``,
        ``kept_other_text`` (all 0 when the convention is off).
    """
    shared = [q for q in ds.queries if q in ds.corpus] if ds.ignore_identical_ids else []
    judged = [q for q in shared if ds.qrels.get(q, {}).get(q, 0) > 0]
    other = [q for q in shared if q not in judged and not is_self_copy(ds, q)]
    drop = set(shared) - set(judged) - set(other)
    counts = {"queries_with_a_document_of_their_id": len(shared), "dropped_as_the_query": len(drop),
              "kept_judged_relevant": len(judged), "kept_other_text": len(other)}
    return drop, counts


def first_ids(ids: list[str], n: int = 10) -> str:
    """The first ``n`` ids, comma-separated, with a count of the rest (for warnings)."""
    return ", ".join(ids[:n]) + (f" ... ({len(ids) - n} more)" if len(ids) > n else "")


def relevance_grade(value, where: str) -> int:
    """The relevance grade ``value`` (a qrels column as text, or a number from ir_datasets or Hugging Face) as an
    integer: the one rule of every qrels reader (docs/conventions.md, "Evaluation-data policy").

    Grades are integers, as trec_eval and pytrec_eval read them; an integer written with a decimal point (``1.0``)
    is that integer. A fractional grade (``0.5``, ``1.5``) is refused, never truncated or rounded: truncating turned
    a half-relevant document into a non-relevant one with no word, and rounding up would be a choice the file does
    not make.

    Raises:
        DataPolicyError: one line naming ``where`` (file and line, or record), the grade and the rule.
    """
    return integer_field(value, where, "relevance grade", error=DataPolicyError,
                         hint=" (qrels grades are integers, as trec_eval and pytrec_eval read them)")


def put_unique(store: dict, key, value, seen: dict, where: str, what: str) -> None:
    """``store[key] = value``, refusing a duplicate ``key`` (``seen`` maps keys to their first location)."""
    if key in store:
        raise DataPolicyError(f"{where}: duplicate {what} {key!r} (first at {seen[key]}); ids must be unique, "
                         "remove one of the copies")
    store[key] = value
    seen[key] = where
