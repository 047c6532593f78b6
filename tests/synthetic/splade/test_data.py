"""Synthetic SPLADE corpus: determinism, well-defined relevance, bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from initlab.config import derive
from initlab.synthetic.splade.data import SPECIAL_TOKENS, CorpusConfig, make_corpus

SMALL = CorpusConfig(n_topics=3, topic_words=4, n_background=5, n_entities=30, n_docs=24, doc_len=10,
                     entities_per_doc=3, n_train_queries=50, n_dev_queries=12)


def test_same_seed_same_corpus_other_seed_differs():
    a, b = make_corpus(SMALL), make_corpus(SMALL)
    assert a.docs == b.docs and a.train_pairs == b.train_pairs and a.dev_queries == b.dev_queries and a.qrels == b.qrels
    c = make_corpus(derive(SMALL, seed=1))
    assert c.docs != a.docs


@given(seed=st.integers(0, 10_000), qe=st.integers(1, 3), qt=st.integers(0, 2), qb=st.integers(0, 2))
def test_relevance_is_well_defined(seed, qe, qt, qb):
    cfg = derive(SMALL, seed=seed, query_entities=qe, query_topic_words=qt, query_background=qb)
    c = make_corpus(cfg)
    vocab = set(c.vocab)
    assert tuple(c.vocab[: len(SPECIAL_TOKENS)]) == SPECIAL_TOKENS and len(vocab) == len(c.vocab)
    for did, text in c.docs.items():
        assert len(text.split()) == cfg.doc_len and set(text.split()) <= vocab
    for qid, text in c.dev_queries.items():
        words = text.split()
        assert len(words) == qe + qt + qb and set(words) <= vocab
        rels = c.qrels[qid]
        src = c.dev_source[qid]
        assert [d for d, g in rels.items() if g == 2] == [src]  # exactly one source document
        topic = c.doc_topic[src]
        assert {d for d, g in rels.items() if g == 1} == {d for d, t in c.doc_topic.items() if t == topic} - {src}
        ents = [w for w in words if w.startswith("e")]
        assert len(ents) == qe and set(ents) <= set(c.docs[src].split())  # entities come from the source
        assert all(w.startswith(f"t{topic:02d}_") for w in words if w.startswith("t"))
    for q, did in c.train_pairs:
        assert did in c.docs and set(q.split()) <= vocab


@pytest.mark.parametrize("change", [dict(n_docs=0), dict(p_topic=0.9, p_entity=0.2), dict(entities_per_doc=40),
                                    dict(query_entities=4), dict(doc_len=2)])
def test_bad_config_is_a_clear_error(change):
    with pytest.raises(ValueError, match="CorpusConfig"):
        make_corpus(derive(SMALL, **change))
