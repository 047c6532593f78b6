"""A generated multi-domain retrieval corpus that needs SPLADE's expansion: the OOD synthetic SPLADE's data.

Role: the corpus of :mod:`initlab.synthetic.splade.ood`, built so that lexical overlap alone fails
where the MLM head's learned expansion could decide, and evaluated out of domain as BEIR is for the seed.

Vocabulary (``vocab_size`` ids, special tokens included; every count is deterministic from the config):

* *general* words ``g00000, ...`` (``general_fraction`` of the non-special ids), shared by every domain, Zipfian
  (exponent ``zipf_general``); each domain has its own term statistics: its general-word ranking is the global
  one with a fraction ``domain_shuffle`` of the ranks permuted among themselves;
* *domain* words: the rest, split evenly over ``n_domains`` domains; each domain's words are grouped into
  *concepts* of ``surfaces`` surface words each (synonyms, ``x03c00012s1``: domain 3, concept 12, surface 1).
  A domain's concepts are Zipfian (exponent ``zipf_concepts``: a long tail of rare concepts), and within a
  concept the surfaces are Zipfian too (exponent ``zipf_surfaces``: one usual word and rarer synonyms).

A document of domain ``c`` has ``doc_len_min``..``doc_len_max`` words (uniform): ``key_concepts`` key
concepts drawn from ``c``'s concept distribution (without replacement), each with its own *document surface*
(drawn from the concept's surface distribution). Each word is, with probability ``p_key``, a mention of a key
concept (its document surface with probability ``surface_consistency``, else any surface of it; each document
surface occurs at least once, replacing a word that is no key concept's document surface), with
``p_domain`` another concept of ``c`` (concept and surface Zipfian), else a general word (``c``'s ranking).
A query is made from one source document: ``query_concepts`` of its key concepts, each written with a surface
*other than the document's* with probability ``p_synonym`` (uniform over the other surfaces), else the
document's, plus ``query_general`` general words, shuffled.

Relevance: the source document grade 2; every other document of the same domain that shares at least 2 of the
source's key concepts grade 1.

Splits: the first ``n_domains - n_heldout`` domains are the *training* domains, the last ``n_heldout`` are
*held out*. Training pairs (``n_train_queries``) come from training-domain documents; the *in-domain dev* set
(``n_dev_queries`` queries, retrieval over every training-domain document: the MS MARCO dev analogue) from
the same documents, another random stream; the *out-of-domain* sets (``n_ood_queries`` per held-out domain,
retrieval over that domain's documents only, as each BEIR set is its own corpus) never appear in training.
Every document of every domain is MLM-pretraining text (pretraining sees general text, as the real backbones'
did; the SPLADE fine-tuning sees the training domains only).

Query shift (:func:`query_shift_set`, evaluation only): an evaluation set's queries written anew from the same
source documents at another synonym rate, with the same relevance judgements; its own stream
``default_rng([seed, 5, set index, round(rate x 1e6)])``, so the corpus itself is unchanged.

Everything is deterministic given ``seed`` (numpy ``default_rng`` streams).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from initlab.config import check_ranges, ranged

from initlab.synthetic.splade.data import SPECIAL_TOKENS

__all__ = ["DomainCorpusConfig", "EvalSet", "DomainCorpus", "make_domain_corpus", "query_shift_set", "vocabulary_layout",
           "token_stats"]


@dataclass(frozen=True)
class DomainCorpusConfig:
    """Sizes and probabilities of the generated multi-domain corpus (module docstring). Counts are numbers of
    ids, documents or queries; ``p_*`` probabilities; ``zipf_*`` exponents."""

    vocab_size: int = ranged(30000, "[1, inf)")
    n_domains: int = ranged(8, "[2, inf)")  # one held out at least, one kept
    n_heldout: int = ranged(2, "[1, inf)")
    general_fraction: float = ranged(0.2, "[0, 1]")
    surfaces: int = ranged(3, "[2, inf)")  # a concept needs a synonym
    zipf_general: float = ranged(1.0, "[0, inf)")
    zipf_concepts: float = ranged(1.1, "[0, inf)")
    zipf_surfaces: float = ranged(1.0, "[0, inf)")
    domain_shuffle: float = ranged(0.3, "[0, 1]")
    docs_per_domain: int = ranged(300, "[1, inf)")
    doc_len_min: int = ranged(60, "[1, inf)")
    doc_len_max: int = ranged(100, "[1, inf)")
    key_concepts: int = ranged(3, "[1, inf)")
    p_key: float = ranged(0.25, "[0, 1]")
    p_domain: float = ranged(0.35, "[0, 1]")
    surface_consistency: float = ranged(0.8, "[0, 1]")
    query_concepts: int = ranged(2, "[1, inf)")
    p_synonym: float = ranged(0.6, "[0, 1]")
    query_general: int = ranged(1, "[0, inf)")
    n_train_queries: int = ranged(3000, "[1, inf)")
    n_dev_queries: int = ranged(200, "[1, inf)")
    n_ood_queries: int = ranged(100, "[1, inf)")
    seed: int = ranged(0, "[0, inf)")

    def __post_init__(self) -> None:
        check_ranges(self)
        _check(self)


@dataclass
class EvalSet:
    """One evaluation set: ``queries`` ``{qid: text}``, ``qrels`` ``{qid: {doc_id: grade}}``, the retrieval
    corpus ``doc_ids`` (a subset of the corpus documents) and ``domains`` it covers."""

    name: str
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    doc_ids: list[str]
    domains: list[int]


@dataclass
class DomainCorpus:
    """The generated corpus.

    Attributes:
        vocab: all tokens, special tokens first (index = token id), ``len(vocab) == config.vocab_size``.
        docs: ``{doc_id: text}`` of every domain (MLM pretraining text).
        doc_domain: ``{doc_id: domain}``.
        train_pairs: ``(query text, positive doc_id)`` from the training domains.
        dev: the in-domain dev set; ``ood``: one :class:`EvalSet` per held-out domain.
        train_domains / heldout_domains: domain indices.
        dev_queries / qrels / dev_source: the dev set as the phase experiment's measurement code reads it.
        sources: ``{set name: {qid: source doc_id}}`` of every evaluation set; doc_keys: ``{doc_id: [(concept,
            document surface)]}``; general_rank: per domain, the general word id at each rank (what
            :func:`query_shift_set` needs to write new queries).
    """

    config: DomainCorpusConfig
    vocab: list[str]
    docs: dict[str, str]
    doc_domain: dict[str, int]
    train_pairs: list[tuple[str, str]]
    dev: EvalSet
    ood: list[EvalSet]
    train_domains: list[int]
    heldout_domains: list[int]
    dev_source: dict[str, str] = field(default_factory=dict)
    sources: dict[str, dict[str, str]] = field(default_factory=dict)
    doc_keys: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    general_rank: list[np.ndarray] = field(default_factory=list)

    @property
    def dev_queries(self) -> dict[str, str]:
        return self.dev.queries

    @property
    def qrels(self) -> dict[str, dict[str, int]]:
        return self.dev.qrels


def _check(c: DomainCorpusConfig) -> None:
    """The relations between :class:`DomainCorpusConfig`'s fields (each field's own range is beside it)."""
    if not c.n_heldout < c.n_domains:
        raise ValueError(f"DomainCorpusConfig.n_heldout: expected 1 <= n_heldout < n_domains ({c.n_domains}), got {c.n_heldout}")
    if c.doc_len_max < c.doc_len_min:
        raise ValueError(f"DomainCorpusConfig.doc_len_max: expected >= doc_len_min ({c.doc_len_min}), got {c.doc_len_max}")
    if c.query_concepts > c.key_concepts:
        raise ValueError("DomainCorpusConfig.query_concepts: expected <= key_concepts")
    if c.p_key + c.p_domain > 1:
        raise ValueError(f"DomainCorpusConfig.p_key + p_domain: expected <= 1, got {c.p_key} + {c.p_domain}")
    layout = vocabulary_layout(c)
    if layout["concepts_per_domain"] < c.key_concepts or layout["general"] < 1:
        raise ValueError(f"DomainCorpusConfig.vocab_size: {c.vocab_size} ids leave {layout['concepts_per_domain']} "
                         f"concepts per domain and {layout['general']} general words; expected at least "
                         f"key_concepts ({c.key_concepts}) concepts and one general word")


def vocabulary_layout(c: DomainCorpusConfig) -> dict[str, int]:
    """How the ``vocab_size`` ids are split: ``special``, ``general`` (the general words, plus the ids left over
    by the domains' whole concepts), ``concepts_per_domain``, ``domain_words`` (all domains)."""
    content = c.vocab_size - len(SPECIAL_TOKENS)
    per_domain = int(round(content * (1 - c.general_fraction))) // c.n_domains
    concepts = per_domain // c.surfaces
    domain_words = concepts * c.surfaces * c.n_domains
    return {"special": len(SPECIAL_TOKENS), "general": content - domain_words, "concepts_per_domain": concepts,
            "domain_words": domain_words}


def _zipf(n: int, s: float) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1) ** s
    return p / p.sum()


def make_domain_corpus(c: DomainCorpusConfig) -> DomainCorpus:
    """Generate the corpus of the module docstring, deterministically from ``c.seed``.

    Raises:
        ValueError: a field out of range or inconsistent sizes (the field is named).
    """
    _check(c)
    lay = vocabulary_layout(c)
    n_gen, n_con, S = lay["general"], lay["concepts_per_domain"], c.surfaces
    general = [f"g{i:05d}" for i in range(n_gen)]
    words = [[[f"x{d:02d}c{j:05d}s{s}" for s in range(S)] for j in range(n_con)] for d in range(c.n_domains)]
    vocab = list(SPECIAL_TOKENS) + general + [w for dom in words for con in dom for w in con]
    assert len(vocab) == c.vocab_size

    setup, doc_rng, train_rng, dev_rng, ood_rng = (np.random.default_rng([c.seed, s]) for s in range(5))
    p_gen, p_con, p_sur = _zipf(n_gen, c.zipf_general), _zipf(n_con, c.zipf_concepts), _zipf(S, c.zipf_surfaces)
    gen_rank = []  # per domain: general word id at each rank
    for _ in range(c.n_domains):
        perm = np.arange(n_gen)
        idx = setup.choice(n_gen, int(c.domain_shuffle * n_gen), replace=False)
        perm[idx] = perm[setup.permutation(idx)]
        gen_rank.append(perm)

    docs: dict[str, str] = {}
    doc_domain: dict[str, int] = {}
    doc_keys: dict[str, list[tuple[int, int]]] = {}  # (concept, document surface)
    for d in range(c.n_domains):
        for i in range(c.docs_per_domain):
            did = f"x{d:02d}d{i:05d}"
            keys = doc_rng.choice(n_con, c.key_concepts, replace=False, p=p_con)
            surf = doc_rng.choice(S, c.key_concepts, p=p_sur)
            length = int(doc_rng.integers(c.doc_len_min, c.doc_len_max + 1))
            u = doc_rng.random(length)
            # one vectorised draw per kind of word (same distributions as word by word, far faster)
            key_j = doc_rng.integers(c.key_concepts, size=length)
            keep = doc_rng.random(length) < c.surface_consistency
            any_s = doc_rng.integers(S, size=length)
            dom_c = doc_rng.choice(n_con, size=length, p=p_con)
            dom_s = doc_rng.choice(S, size=length, p=p_sur)
            gen_w = doc_rng.choice(n_gen, size=length, p=p_gen)
            toks = []
            for t, x in enumerate(u):
                if x < c.p_key:
                    j = int(key_j[t])
                    toks.append(words[d][keys[j]][int(surf[j]) if keep[t] else int(any_s[t])])
                elif x < c.p_key + c.p_domain:
                    toks.append(words[d][int(dom_c[t])][int(dom_s[t])])
                else:
                    toks.append(general[gen_rank[d][int(gen_w[t])]])
            for j in range(c.key_concepts):  # every key concept's document surface occurs at least once
                w = words[d][keys[j]][int(surf[j])]
                if w not in toks:
                    free = [t for t, x in enumerate(toks) if not any(x == words[d][keys[i]][int(surf[i])]
                                                                      for i in range(c.key_concepts))]
                    toks[free[int(doc_rng.integers(len(free)))]] = w
            docs[did] = " ".join(toks)
            doc_domain[did] = d
            doc_keys[did] = [(int(k), int(s)) for k, s in zip(keys, surf)]

    train_domains = list(range(c.n_domains - c.n_heldout))
    heldout = list(range(c.n_domains - c.n_heldout, c.n_domains))
    by_domain = {d: [x for x in docs if doc_domain[x] == d] for d in range(c.n_domains)}

    def query(did: str, rng: np.random.Generator) -> str:
        return _query(c, doc_domain[did], doc_keys[did], gen_rank[doc_domain[did]], p_gen, rng, c.p_synonym)

    def qrels_of(did: str, pool: list[str]) -> dict[str, int]:
        mine = {k for k, _ in doc_keys[did]}
        rel = {o: 1 for o in pool if o != did and len(mine & {k for k, _ in doc_keys[o]}) >= 2}
        rel[did] = 2
        return rel

    train_docs = [x for d in train_domains for x in by_domain[d]]
    train_pairs = []
    for _ in range(c.n_train_queries):
        did = train_docs[int(train_rng.integers(len(train_docs)))]
        train_pairs.append((query(did, train_rng), did))

    def eval_set(name: str, pool: list[str], n: int, rng: np.random.Generator, domains: list[int]) -> tuple[EvalSet, dict]:
        qs, qr, src = {}, {}, {}
        for q in range(n):
            did = pool[int(rng.integers(len(pool)))]
            qid = f"{name}-q{q:05d}"
            qs[qid] = query(did, rng)
            qr[qid] = qrels_of(did, by_domain[doc_domain[did]])
            src[qid] = did
        return EvalSet(name, qs, qr, list(pool), domains), src

    dev, dev_source = eval_set("dev", train_docs, c.n_dev_queries, dev_rng, train_domains)
    ood_src = [eval_set(f"ood{d:02d}", by_domain[d], c.n_ood_queries, ood_rng, [d]) for d in heldout]
    sources = {"dev": dev_source, **{es.name: src for es, src in ood_src}}
    return DomainCorpus(c, vocab, docs, doc_domain, train_pairs, dev, [es for es, _ in ood_src], train_domains,
                        heldout, dev_source, sources, doc_keys, gen_rank)


def _query(c: DomainCorpusConfig, d: int, keys: list[tuple[int, int]], gen_rank: np.ndarray, p_gen: np.ndarray,
           rng: np.random.Generator, p_synonym: float) -> str:
    """A query of a domain-``d`` document with key concepts ``keys`` (module docstring), each concept written with
    another surface than the document's with probability ``p_synonym``."""
    S = c.surfaces
    toks = []
    for j in rng.choice(len(keys), c.query_concepts, replace=False):
        con, s = keys[int(j)]
        if rng.random() < p_synonym:
            s = int(rng.choice([x for x in range(S) if x != s]))
        toks.append(f"x{d:02d}c{con:05d}s{s}")
    toks += [f"g{int(gen_rank[int(rng.choice(len(p_gen), p=p_gen))]):05d}" for _ in range(c.query_general)]
    rng.shuffle(toks)
    return " ".join(toks)


def query_shift_set(corpus: DomainCorpus, es: EvalSet, p_synonym: float) -> EvalSet:
    """``es`` with every query written anew from the same source document at synonym rate ``p_synonym`` (the share
    of query concepts written with a surface other than the document's; the corpus's queries use
    ``config.p_synonym``): a shift of the query vocabulary on the same documents and relevance judgements. Named
    ``"<es.name>@p<p_synonym>"``; deterministic (its own random stream per set and rate).

    Raises:
        ValueError: ``p_synonym`` outside [0, 1], or ``es`` not one of the corpus's evaluation sets.
    """
    if isinstance(p_synonym, bool) or not isinstance(p_synonym, (int, float, np.floating)) or not 0 <= p_synonym <= 1:
        raise ValueError(f"p_synonym: expected a probability in [0, 1], got {p_synonym!r}")
    p_synonym = float(p_synonym)
    names = [corpus.dev.name, *(o.name for o in corpus.ood)]
    own = {corpus.dev.name: corpus.dev, **{o.name: o for o in corpus.ood}}
    if es.name not in own or es.name not in corpus.sources or own[es.name].queries != es.queries:
        raise ValueError(f"es: expected one of this corpus's evaluation sets {names}, got {es.name!r}"
                         + ("" if es.name not in own else " from another corpus (its queries differ)"))
    c = corpus.config
    rng = np.random.default_rng([c.seed, 5, names.index(es.name), int(round(p_synonym * 1_000_000))])
    p_gen = _zipf(len(corpus.general_rank[0]), c.zipf_general)
    src = corpus.sources[es.name]
    queries = {q: _query(c, corpus.doc_domain[src[q]], corpus.doc_keys[src[q]],
                         corpus.general_rank[corpus.doc_domain[src[q]]], p_gen, rng, p_synonym) for q in es.queries}
    return EvalSet(f"{es.name}@p{p_synonym:g}", queries, dict(es.qrels), list(es.doc_ids), list(es.domains))


def token_stats(corpus: DomainCorpus) -> dict[str, float]:
    """Descriptive statistics of a generated corpus: ``vocab_size``, ``tokens``, ``types_seen`` (distinct words in
    the documents), ``singleton_share`` (of the seen types, those seen once: the long tail), ``mean_doc_len``,
    ``query_doc_overlap`` (mean share of a dev query's words that occur in its source document)."""
    from collections import Counter

    counts = Counter(w for t in corpus.docs.values() for w in t.split())
    overlap = [sum(w in set(corpus.docs[corpus.dev_source[q]].split()) for w in t.split()) / len(t.split())
               for q, t in corpus.dev.queries.items()]
    return {"vocab_size": len(corpus.vocab), "tokens": sum(counts.values()), "types_seen": len(counts),
            "singleton_share": sum(v == 1 for v in counts.values()) / max(1, len(counts)),
            "mean_doc_len": float(np.mean([len(t.split()) for t in corpus.docs.values()])),
            "query_doc_overlap": float(np.mean(overlap)) if overlap else math.nan}
