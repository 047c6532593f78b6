"""BEIR's identical-id rule: a hit whose id equals its query's id is dropped only where the data show the
document is a copy of the query (the same id and text, the text read with or without its title), never where the qrels
judge it relevant; what was dropped or kept is counted in the result row and warned about; metrics do not move
when the ids are renamed."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from initlab.realdata.splade.evalset import RetrievalSet, identical_id_policy
from initlab.realdata.splade.evaluate import evaluate_set

from bag_of_words import WORDS, BagOfWords as _BagOfWords


def _quiet_eval(ds, top_k=10):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evaluate_set(_BagOfWords(), ds, top_k=top_k)


def test_numeric_ids_never_drop_a_judged_relevant_document_with_other_text():
    # A converted set with ids 1..n in both spaces: document "1" is not query "1" (other text) and is judged relevant.
    corpus = {"1": "cat sofa", "2": "dog rain"}
    ds = RetrievalSet("numeric", corpus, {"1": "cat", "2": "dog"}, {"1": {"1": 1}, "2": {"2": 1}}, ignore_identical_ids=True)
    with pytest.warns(RuntimeWarning, match="numeric: 2 judged-relevant document"):
        row = evaluate_set(_BagOfWords(), ds, top_k=10)
    assert row["nDCG@10"] == pytest.approx(1.0)  # was 0: both relevant documents dropped silently
    assert row["identical_ids"] == {"queries_with_a_document_of_their_id": 2, "dropped_as_the_query": 0,
                                    "kept_judged_relevant": 2, "kept_other_text": 0, "hits_dropped": 0}


def test_the_query_itself_is_dropped_counted_and_warned():
    corpus = {"q0": "cat sofa", "d1": "cat", "d2": "dog"}
    ds = RetrievalSet("quora-like", corpus, {"q0": "cat  Sofa"}, {"q0": {"d1": 1}}, ignore_identical_ids=True)
    with pytest.warns(RuntimeWarning, match="quora-like: dropped 1 hit"):
        row = evaluate_set(_BagOfWords(), ds, top_k=3)
    assert row["RR@10"] == pytest.approx(1.0)
    assert row["identical_ids"]["dropped_as_the_query"] == 1 and row["identical_ids"]["hits_dropped"] == 1


def test_a_copy_under_a_title_is_the_query_but_a_set_name_decides_nothing():
    # ArguAna's documents hold their query's text under a title of their own: the body shows the copy
    corpus = {"a": "Debate title cat  Sofa", "b": "dog", "c": "cat"}
    qrels = {"a": {"c": 1}, "b": {"b": 2}}
    ds = RetrievalSet("x", corpus, {"a": "cat sofa", "b": "dog rain"}, qrels, ignore_identical_ids=True,
                      titles={"a": "Debate title"})
    drop, counts = identical_id_policy(ds)
    assert drop == {"a"} and counts["kept_judged_relevant"] == 1 and counts["dropped_as_the_query"] == 1
    # the same documents without their titles known, under ArguAna's name: "a"'s document holds other text
    named = RetrievalSet("arguana", corpus, {"a": "cat sofa", "b": "dog rain"}, qrels, ignore_identical_ids=True)
    drop, counts = identical_id_policy(named)
    assert drop == set() and counts["kept_other_text"] == 1
    off = RetrievalSet("msmarco-like", corpus, {"a": "title words cat sofa"}, {"a": {"c": 1}})
    assert identical_id_policy(off)[0] == set()  # the convention is off: nothing is dropped


def _write_beir(folder, docs, queries, qrels):
    import json

    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{g}\n" for q, d, g in qrels), encoding="utf-8")


def test_a_known_sets_folder_renamed_to_ids_one_to_n_keeps_its_metrics(tmp_path):
    """A set in a folder named like a BEIR set that holds its queries (ArguAna), its ids renamed to 1..n in both
    spaces: document "1" shares query "1"'s id but holds other text, so it is a document like any other."""
    from initlab.realdata.splade.files import load_beir_folder

    docs = [("sofa cat", "rain"), ("dog", "cat"), ("sun", "tree")]  # (title, text)
    queries = ["cat", "sun tree"]
    qrels = [(0, 1, 1), (1, 2, 1)]  # query 0 -> document 1, query 1 -> document 2
    results = {}
    for label, doc_id, q_id in (("orig", lambda j: f"doc-{j}", lambda i: f"test-{i}"),
                                ("renamed", lambda j: str(j + 1), lambda i: str(i + 1))):
        folder = tmp_path / label / "arguana"
        _write_beir(folder, [{"_id": doc_id(j), "title": t, "text": x} for j, (t, x) in enumerate(docs)],
                    [{"_id": q_id(i), "text": q} for i, q in enumerate(queries)],
                    [(q_id(q), doc_id(d), g) for q, d, g in qrels])
        results[label] = _quiet_eval(load_beir_folder(folder))
    for m in ("RR@10", "nDCG@10", "R@10"):
        assert results["renamed"][m] == pytest.approx(results["orig"][m], abs=1e-12), m
    assert results["renamed"]["identical_ids"]["dropped_as_the_query"] == 0


def test_a_self_copy_in_a_beir_folder_is_found_from_its_body(tmp_path):
    from initlab.realdata.splade.files import load_beir_folder

    folder = tmp_path / "any-name"
    _write_beir(folder, [{"_id": "a", "title": "Debate", "text": "cat sofa"}, {"_id": "b", "title": "", "text": "cat"}],
                [{"_id": "a", "text": "cat sofa"}], [("a", "b", 1)])
    row = _quiet_eval(load_beir_folder(folder))
    assert row["identical_ids"]["dropped_as_the_query"] == 1 and row["RR@10"] == pytest.approx(1.0)


@st.composite
def _sets(draw):
    n_docs = draw(st.integers(2, 6))
    n_q = draw(st.integers(1, 4))
    # documents of 3-4 words, queries of 1-2: a document never holds a query's text, so none is the query
    docs = [" ".join(draw(st.lists(st.sampled_from(WORDS), min_size=3, max_size=4))) for _ in range(n_docs)]
    queries = [" ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=2))) for _ in range(n_q)]
    qrels = [{j: draw(st.integers(1, 2)) for j in draw(st.sets(st.integers(0, n_docs - 1), min_size=1, max_size=3))}
             for _ in range(n_q)]
    doc_ids = draw(st.permutations(list(range(1, n_docs + 1))))  # renamings drawn from a small pool of ids:
    q_ids = draw(st.lists(st.integers(1, 8), min_size=n_q, max_size=n_q, unique=True))  # the spaces collide
    return docs, queries, qrels, doc_ids, q_ids


def _build(docs, queries, qrels, doc_name, q_name):
    corpus = {doc_name(j): t for j, t in enumerate(docs)}
    qs = {q_name(i): t for i, t in enumerate(queries)}
    qr = {q_name(i): {doc_name(j): r for j, r in rel.items()} for i, rel in enumerate(qrels)}
    return RetrievalSet("renamed", corpus, qs, qr, ignore_identical_ids=True)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_sets())
def test_metrics_do_not_change_when_both_id_spaces_are_renamed(data):
    docs, queries, qrels, doc_ids, q_ids = data
    ref = _quiet_eval(_build(docs, queries, qrels, lambda j: f"doc-{j}", lambda i: f"query-{i}"))
    got = _quiet_eval(_build(docs, queries, qrels, lambda j: str(doc_ids[j]), lambda i: str(q_ids[i])))
    for m in ("RR@10", "nDCG@10", "R@10"):
        assert got[m] == pytest.approx(ref[m], abs=1e-12), m
