"""Synthetic retrieval corpus with known relevance for the CPU SPLADE experiment.

The corpus is a bag of synthetic "words" with three kinds of terms, so that lexical matching works
but term weights must be learned:

* background words ``b00, b01, ...`` -- shared by all documents (stop-word-like, Zipf-distributed);
* topic words ``t03_07`` (topic 3, word 7) -- each topic has its own Zipf-distributed vocabulary;
* entity words ``e0123`` -- each document draws ``entities_per_doc`` of them from a shared pool;
  two entities together nearly identify one document.

A document of topic ``c`` has ``doc_len`` words: its entities (each at least once), then words drawn
with probabilities ``p_topic`` (topic word of ``c``), ``p_entity`` (one of its entities) and the rest
(background word). A query is generated from one source document: ``query_entities`` of its entity
words, ``query_topic_words`` words from its topic distribution and ``query_background`` background
words, shuffled.

Relevance (qrels): the source document has grade 2, every other document of the same topic grade 1,
all others 0 (not listed). Train queries and dev queries are generated from independent random
streams of the same seed, so train and dev never share a (query text, source) draw by construction
of the stream (they may coincide by chance, as real query logs do).

Everything is deterministic given ``CorpusConfig.seed`` (numpy ``default_rng``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from initlab.config import check_ranges, ranged

__all__ = ["CorpusConfig", "SyntheticCorpus", "make_corpus", "SPECIAL_TOKENS"]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


@dataclass(frozen=True)
class CorpusConfig:
    """Sizes and probabilities of the synthetic corpus (all counts are numbers of words or texts)."""

    n_topics: int = ranged(12, "[1, inf)")
    topic_words: int = ranged(12, "[1, inf)")
    n_background: int = ranged(24, "[1, inf)")
    n_entities: int = ranged(300, "[1, inf)")
    n_docs: int = ranged(360, "[1, inf)")
    doc_len: int = ranged(24, "[1, inf)")
    entities_per_doc: int = ranged(4, "[1, inf)")
    p_topic: float = ranged(0.4, "[0, 1]")
    p_entity: float = ranged(0.2, "[0, 1]")
    zipf_exponent: float = ranged(1.0, "[0, inf)")
    query_entities: int = ranged(1, "[0, inf)")
    query_topic_words: int = ranged(2, "[0, inf)")
    query_background: int = ranged(1, "[0, inf)")
    n_train_queries: int = ranged(2000, "[1, inf)")
    n_dev_queries: int = ranged(120, "[1, inf)")
    seed: int = ranged(0, "[0, inf)")

    def __post_init__(self) -> None:
        check_ranges(self)
        _check(self)


@dataclass
class SyntheticCorpus:
    """The generated corpus.

    Attributes:
        vocab: all tokens, special tokens first (index = token id).
        docs: ``{doc_id: text}`` (words separated by single spaces).
        doc_topic: ``{doc_id: topic}``.
        train_pairs: list of ``(query text, positive doc_id)``.
        dev_queries: ``{query_id: text}``.
        qrels: ``{query_id: {doc_id: grade}}`` with grade 2 (source) or 1 (same topic).
        dev_source: ``{query_id: source doc_id}``.
    """

    config: CorpusConfig
    vocab: list[str]
    docs: dict[str, str]
    doc_topic: dict[str, int]
    train_pairs: list[tuple[str, str]]
    dev_queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    dev_source: dict[str, str] = field(default_factory=dict)


def _check(cfg: CorpusConfig) -> None:
    """The relations between :class:`CorpusConfig`'s fields (each field's own range is beside it)."""
    if not cfg.p_topic + cfg.p_entity <= 1:
        raise ValueError(f"CorpusConfig.p_topic + p_entity must lie in [0, 1], got {cfg.p_topic} + {cfg.p_entity}")
    if cfg.entities_per_doc > cfg.n_entities:
        raise ValueError("CorpusConfig.entities_per_doc must not exceed n_entities")
    if cfg.entities_per_doc > cfg.doc_len:
        raise ValueError("CorpusConfig.entities_per_doc must not exceed doc_len")
    if cfg.query_entities > cfg.entities_per_doc:
        raise ValueError("CorpusConfig.query_entities must not exceed entities_per_doc")
    if cfg.query_entities + cfg.query_topic_words + cfg.query_background < 1:
        raise ValueError("CorpusConfig: a query needs at least one word")


def _zipf(n: int, s: float) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1) ** s
    return p / p.sum()


def make_corpus(cfg: CorpusConfig) -> SyntheticCorpus:
    """Generate the corpus described in the module docstring, deterministically from ``cfg.seed``.

    Raises:
        ValueError: inconsistent sizes or probabilities in ``cfg`` (the field is named).
    """
    _check(cfg)
    background = [f"b{i:02d}" for i in range(cfg.n_background)]
    topics = [[f"t{c:02d}_{i:02d}" for i in range(cfg.topic_words)] for c in range(cfg.n_topics)]
    entities = [f"e{i:04d}" for i in range(cfg.n_entities)]
    vocab = list(SPECIAL_TOKENS) + background + [w for ws in topics for w in ws] + entities
    p_bg = _zipf(cfg.n_background, cfg.zipf_exponent)
    p_tw = _zipf(cfg.topic_words, cfg.zipf_exponent)

    doc_rng, train_rng, dev_rng = (np.random.default_rng([cfg.seed, stream]) for stream in (1, 2, 3))

    docs: dict[str, str] = {}
    doc_topic: dict[str, int] = {}
    doc_entities: dict[str, list[str]] = {}
    for d in range(cfg.n_docs):
        did = f"d{d:05d}"
        topic = d % cfg.n_topics
        ents = [entities[i] for i in doc_rng.choice(cfg.n_entities, cfg.entities_per_doc, replace=False)]
        words = list(ents)
        kinds = doc_rng.random(cfg.doc_len - len(ents))
        for u in kinds:
            if u < cfg.p_topic:
                words.append(topics[topic][doc_rng.choice(cfg.topic_words, p=p_tw)])
            elif u < cfg.p_topic + cfg.p_entity:
                words.append(ents[doc_rng.integers(len(ents))])
            else:
                words.append(background[doc_rng.choice(cfg.n_background, p=p_bg)])
        doc_rng.shuffle(words)
        docs[did] = " ".join(words)
        doc_topic[did] = topic
        doc_entities[did] = ents
    doc_ids = list(docs)

    def query_from(did: str, rng: np.random.Generator) -> str:
        ents = doc_entities[did]
        words = [ents[i] for i in rng.choice(len(ents), cfg.query_entities, replace=False)]
        words += [topics[doc_topic[did]][rng.choice(cfg.topic_words, p=p_tw)] for _ in range(cfg.query_topic_words)]
        words += [background[rng.choice(cfg.n_background, p=p_bg)] for _ in range(cfg.query_background)]
        rng.shuffle(words)
        return " ".join(words)

    train_pairs = []
    for _ in range(cfg.n_train_queries):
        did = doc_ids[train_rng.integers(cfg.n_docs)]
        train_pairs.append((query_from(did, train_rng), did))

    dev_queries: dict[str, str] = {}
    dev_source: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for q in range(cfg.n_dev_queries):
        qid = f"q{q:05d}"
        did = doc_ids[dev_rng.integers(cfg.n_docs)]
        dev_queries[qid] = query_from(did, dev_rng)
        dev_source[qid] = did
        rel = {other: 1 for other in doc_ids if doc_topic[other] == doc_topic[did]}
        rel[did] = 2
        qrels[qid] = rel
    return SyntheticCorpus(cfg, vocab, docs, doc_topic, train_pairs, dev_queries, qrels, dev_source)
