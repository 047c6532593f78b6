"""The kind of training triples is decided by the data, not by the shape of the first line's ids: with a
collection and queries the triples are id triples (any id form), each id looked up; without them, text triples.
Id triples with non-numeric ids were read as text (the ids became the training texts) with no word."""

from __future__ import annotations

from pathlib import Path

import pytest

from initlab.realdata.splade import triples

FIX = Path(__file__).parents[1] / "fixtures" / "splade" / "msmarco"


def _files(tmp_path, prefix):
    coll = tmp_path / "collection.tsv"
    qs = tmp_path / "queries.tsv"
    coll.write_text("".join(f"{prefix}d{i}\tpassage number {i}\n" for i in range(4)))
    qs.write_text("".join(f"{prefix}q{i}\tquery number {i}\n" for i in range(2)))
    return coll, qs


def test_id_triples_with_non_numeric_ids_are_resolved(tmp_path):
    coll, qs = _files(tmp_path, "msm-")
    t = tmp_path / "ids.tsv"
    t.write_text("msm-q0\tmsm-d0\tmsm-d1\nmsm-q1\tmsm-d2\tmsm-d3\n")
    got = triples.read_triples(t, collection=coll, queries=qs)
    assert got == [("query number 0", "passage number 0", "passage number 1"),
                   ("query number 1", "passage number 2", "passage number 3")]


def test_a_field_that_is_not_an_id_of_the_collection_is_refused(tmp_path):
    coll, qs = _files(tmp_path, "")
    t = tmp_path / "mixed.tsv"
    t.write_text("q0\td0\td1\nwhat is a cat\ta cat is an animal\ta dog barks\n")
    with pytest.raises(ValueError, match=r"mixed\.tsv:2: id 'what is a cat' not found"):
        triples.read_triples(t, collection=coll, queries=qs)


def test_text_triples_stay_text_and_numeric_ids_without_a_collection_are_refused(tmp_path):
    assert triples.read_triples(FIX / "triples.train.small.tsv")[0][0]
    with pytest.raises(ValueError, match="need the collection and queries"):
        triples.read_triples(FIX / "qidpidtriples.train.full.2.tsv")
