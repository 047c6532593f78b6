"""The generated multi-domain corpus of the OOD synthetic SPLADE: sizes, splits, surface switching, bad input."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from initlab.synthetic.splade.data import SPECIAL_TOKENS
from initlab.synthetic.splade.domains import DomainCorpusConfig, make_domain_corpus, token_stats, vocabulary_layout

SMALL = DomainCorpusConfig(vocab_size=1200, n_domains=4, n_heldout=1, docs_per_domain=40, n_train_queries=150,
                           n_dev_queries=30, n_ood_queries=20)


def test_vocabulary_is_exactly_the_configured_size_and_split_by_role():
    c = make_domain_corpus(SMALL)
    lay = vocabulary_layout(SMALL)
    assert len(c.vocab) == 1200 == lay["special"] + lay["general"] + lay["domain_words"]
    assert tuple(c.vocab[:5]) == SPECIAL_TOKENS and len(set(c.vocab)) == len(c.vocab)
    assert lay["domain_words"] == 4 * lay["concepts_per_domain"] * SMALL.surfaces
    assert vocabulary_layout(DomainCorpusConfig())["concepts_per_domain"] == 999  # the default: 30000 ids, 8 domains


def test_documents_queries_and_splits():
    c = make_domain_corpus(SMALL)
    lens = [len(t.split()) for t in c.docs.values()]
    assert min(lens) >= 60 and max(lens) <= 100 and len(c.docs) == 4 * 40
    assert c.train_domains == [0, 1, 2] and c.heldout_domains == [3]
    vocab = set(c.vocab)
    assert all(w in vocab for t in c.docs.values() for w in t.split())
    # no word of the held-out domain appears in any training pair; every training document is of a training domain
    held = {w for w in c.vocab if w.startswith("x03")}
    assert not any(w in held for q, d in c.train_pairs for w in (q + " " + c.docs[d]).split())
    assert {c.doc_domain[d] for _, d in c.train_pairs} <= {0, 1, 2}
    (ood,) = c.ood
    assert set(ood.doc_ids) == {d for d in c.docs if c.doc_domain[d] == 3} and len(ood.queries) == 20
    assert set(c.dev.doc_ids) == {d for d in c.docs if c.doc_domain[d] != 3}
    for q, rel in c.dev.qrels.items():
        assert rel[c.dev_source[q]] == 2 and all(g in (1, 2) for g in rel.values())
    assert make_domain_corpus(SMALL).docs == c.docs  # deterministic
    assert make_domain_corpus(dataclasses.replace(SMALL, seed=1)).docs != c.docs


def _switch_rate(c):
    """Share of query concept words absent from the source document's key-concept surface words."""
    switched = total = 0
    for q, t in c.dev.queries.items():
        doc = set(c.docs[c.dev_source[q]].split())
        for w in t.split():
            if w.startswith("x"):
                total += 1
                switched += w not in doc
    return switched / total


def test_queries_switch_surface_words_as_configured():
    never = make_domain_corpus(dataclasses.replace(SMALL, p_synonym=0.0, n_dev_queries=200))
    always = make_domain_corpus(dataclasses.replace(SMALL, p_synonym=1.0, surface_consistency=1.0, p_domain=0.0,
                                                    n_dev_queries=200))
    assert _switch_rate(never) == 0.0  # the document's own surface: always in the document
    # every query concept word is a synonym the document never uses (no other concept mentions to draw it by chance)
    assert _switch_rate(always) == 1.0
    assert token_stats(never)["query_doc_overlap"] > token_stats(always)["query_doc_overlap"]


def test_domains_have_their_own_general_word_statistics():
    def general_ranks(c, d):
        counts = {}
        for doc, dom in c.doc_domain.items():
            if dom == d:
                for w in c.docs[doc].split():
                    if w.startswith("g"):
                        counts[w] = counts.get(w, 0) + 1
        return counts

    def overlap_top(c, k=10):
        tops = [set(sorted(general_ranks(c, d), key=lambda w: -general_ranks(c, d)[w])[:k]) for d in range(2)]
        return len(tops[0] & tops[1])

    big = dataclasses.replace(SMALL, docs_per_domain=80)
    assert overlap_top(make_domain_corpus(dataclasses.replace(big, domain_shuffle=0.0))) > \
        overlap_top(make_domain_corpus(dataclasses.replace(big, domain_shuffle=0.9)))


def test_zipf_long_tail_in_the_documents():
    c = make_domain_corpus(dataclasses.replace(SMALL, vocab_size=6000))
    s = token_stats(c)
    assert s["types_seen"] < 6000 and s["singleton_share"] > 0.1  # rare words seen once, others never
    counts = np.sort(np.array(list(__import__("collections").Counter(
        w for t in c.docs.values() for w in t.split()).values())))[::-1]
    assert counts[0] > 20 * np.median(counts)


@pytest.mark.parametrize("change, field", [
    (dict(vocab_size=0), "vocab_size"), (dict(n_heldout=4), "n_heldout"), (dict(surfaces=1), "surfaces"),
    (dict(doc_len_max=10), "doc_len_max"), (dict(p_key=0.8, p_domain=0.5), "p_key"), (dict(p_synonym=1.5), "p_synonym"),
    (dict(query_concepts=4), "query_concepts"), (dict(vocab_size=40), "vocab_size"),
])
def test_bad_config_names_the_field(change, field):
    with pytest.raises(ValueError, match=field):
        make_domain_corpus(dataclasses.replace(SMALL, **change))


def test_query_shift_sets_rewrite_the_queries_of_the_same_sources_at_the_given_synonym_rate():
    from initlab.synthetic.splade.domains import query_shift_set

    cfg = dataclasses.replace(SMALL, surface_consistency=1.0, p_domain=0.0, n_dev_queries=120)
    c = make_domain_corpus(cfg)
    for es in (c.dev, *c.ood):
        never, always = query_shift_set(c, es, 0.0), query_shift_set(c, es, 1.0)
        assert never.name == f"{es.name}@p0" and always.name == f"{es.name}@p1"
        for s in (never, always):  # the same questions about the same documents: only the query words change
            assert list(s.queries) == list(es.queries) and s.qrels == es.qrels and s.doc_ids == es.doc_ids
        src = c.sources[es.name]
        words = lambda s: [(w, set(c.docs[src[q]].split())) for q, t in s.queries.items() for w in t.split()  # noqa: E731
                           if w.startswith("x")]
        assert all(w in doc for w, doc in words(never))  # the document's own surface
        assert not any(w in doc for w, doc in words(always))  # always a synonym the document never uses
        assert query_shift_set(c, es, 1.0).queries == always.queries  # deterministic
    assert c.sources["dev"] == c.dev_source
    with pytest.raises(ValueError, match="p_synonym"):
        query_shift_set(c, c.dev, 1.5)
    with pytest.raises(ValueError, match="p_synonym"):
        query_shift_set(c, c.dev, True)
    other = make_domain_corpus(dataclasses.replace(SMALL, n_domains=5, n_heldout=2))
    with pytest.raises(ValueError, match="es: expected one of"):
        query_shift_set(c, other.ood[1], 0.5)  # ood04: this corpus holds out domain 3 only
    reseeded = make_domain_corpus(dataclasses.replace(cfg, seed=1))
    with pytest.raises(ValueError, match="from another corpus"):
        query_shift_set(c, reseeded.ood[0], 0.5)  # the same name, another corpus's queries
    assert query_shift_set(c, c.dev, np.float64(0.0)).queries == query_shift_set(c, c.dev, 0).queries
