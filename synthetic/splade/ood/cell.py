"""One cell of the OOD synthetic SPLADE, run in a worker process: pretrain a backbone, train and evaluate one k.

Role: :func:`pretrain` MLM-pretrains one family's backbone on every domain's documents with its own recipe
(:func:`initlab.synthetic.splade.families.prepare_family_backbone`); :func:`run_cell` divides the tied head by k
(:func:`initlab.mlmhead.rescale_mlm_head`, as ``initlab mlmhead rescale``), measures the initial in-batch InfoNCE, trains to the plateau rule
(:func:`initlab.synthetic.splade.ood.train.train_to_plateau`) and evaluates nDCG@10 in domain and out of domain at
the checkpoints (:func:`initlab.synthetic.splade.ood.evaluate.evaluate_sets`); :func:`bm25_cell` scores BM25 on the
same sets (and on the query-shift sets of ``query_shift``, :func:`shift_sets_for`). :func:`corpus_for` is the
corpus of a seed, cached per process; :func:`mlm_texts` the backbones' (larger, unlabelled) pretraining text. An
imposed-norm cell (``imposed_s``) scales the untied head up by s before dividing it by k (config docstring).
"""

from __future__ import annotations

import functools
import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from initlab.config import derive
from initlab.runs import NonFiniteError, torch_threads
from initlab.synthetic.splade.domains import DomainCorpus, DomainCorpusConfig, make_domain_corpus, query_shift_set
from initlab.synthetic.splade.families import prepare_family_backbone
from initlab.synthetic.splade.ood.config import OODConfig, backbone_for
from initlab.synthetic.splade.ood.evaluate import evaluate_sets, mean_metrics, shift_means
from initlab.synthetic.splade.ood.train import train_to_plateau
from initlab.synthetic.splade.train import load_encoder, quiet

__all__ = ["corpus_for", "shift_sets_for", "mlm_texts", "MLMText", "pretrain", "run_cell", "bm25_cell",
           "initial_infonce", "inspect_cell", "impose_head_norm", "INSPECT_TEXTS"]

#: documents ``initlab mlmhead inspect`` measures each backbone on (the first ones of the seed's corpus)
INSPECT_TEXTS = 64


@functools.lru_cache(maxsize=2)
def _corpus(cfg: DomainCorpusConfig) -> DomainCorpus:
    return make_domain_corpus(cfg)


def corpus_for(cfg: OODConfig, seed: int) -> DomainCorpus:
    """The corpus of ``seed`` (``cfg.corpus`` with that seed), generated once per process."""
    return _corpus(derive(cfg.corpus, seed=seed))


@functools.lru_cache(maxsize=2)
def _shifted(cfg: DomainCorpusConfig, rates: tuple[float, ...]) -> tuple:
    corpus = _corpus(cfg)
    return tuple(query_shift_set(corpus, es, p) for p in rates for es in [corpus.dev, *corpus.ood])


def shift_sets_for(cfg: OODConfig, seed: int) -> tuple:
    """The query-shift evaluation sets of ``seed`` (``cfg.query_shift``'s rates, each over the dev set and every
    out-of-domain set; :func:`initlab.synthetic.splade.domains.query_shift_set`), generated once per process."""
    return _shifted(derive(cfg.corpus, seed=seed), tuple(cfg.query_shift))


@dataclass(frozen=True)
class MLMText:
    """A backbone's pretraining text: the corpus's ``vocab`` (token ids) and ``docs`` ``{doc id: text}``."""

    vocab: list[str]
    docs: dict[str, str]


def mlm_texts(cfg: OODConfig, seed: int) -> MLMText | DomainCorpus:
    """The MLM pretraining text of ``seed``'s backbones: with ``cfg.mlm_text_multiplier`` m = 1 the retrieval
    corpus itself (every domain's documents); with m > 1, per domain its retrieval documents, then the documents
    ``docs_per_domain .. m x docs_per_domain - 1`` of the same seed's corpus generated with ``m x docs_per_domain``
    documents per domain (the same language: vocabulary, concepts and per-domain term statistics; ids
    ``<doc id>u``), so m times as much text, the retrieval documents first (the natural-scale texts stay the same).
    Only ``docs`` and ``vocab`` are read by the pretraining."""
    corpus = corpus_for(cfg, seed)
    m = cfg.mlm_text_multiplier
    if m == 1:
        return corpus
    n = cfg.corpus.docs_per_domain
    big = _corpus(derive(cfg.corpus, seed=seed, docs_per_domain=m * n, n_train_queries=1, n_dev_queries=1,
                         n_ood_queries=1))  # the documents' random stream does not depend on the query counts
    docs = dict(corpus.docs)
    for d in range(cfg.corpus.n_domains):
        for i in range(n, m * n):
            did = f"x{d:02d}d{i:05d}"
            docs[did + "u"] = big.docs[did]
    return MLMText(list(corpus.vocab), docs)


def pretrain(folder: str, family: str, cfg: OODConfig, seed: int, on_step: Any = None) -> str:
    """MLM-pretrain (or reuse) ``family``'s backbone in ``folder`` on the seed's pretraining text (:func:`mlm_texts`),
    the head computed at the masked positions only (the same loss;
    :func:`initlab.synthetic.splade.model.sparse_mlm_loss`)."""
    with torch_threads(cfg.torch_threads), warnings.catch_warnings(), quiet():
        warnings.simplefilter("ignore")
        return str(prepare_family_backbone(Path(folder), family, mlm_texts(cfg, seed), backbone_for(cfg, family), seed,
                                           on_step=on_step, sparse_mlm=True))


@torch.no_grad()
def impose_head_norm(hf, target_frobenius: float) -> float:
    """Untie ``hf``'s MLM head and scale it (its projection ``W_head``; the bias and the input embeddings stay) so
    that ``||W_head||_F`` equals ``target_frobenius``: :func:`initlab.mlmhead.rescale_mlm_head` with ``k = 1/s``,
    ``untie=True``, ``s = target / ||W_head||_F``. Returns s.

    Raises:
        ValueError: ``target_frobenius`` not finite and > 0 (or a factor ``rescale_mlm_head`` refuses).
    """
    from initlab.mlmhead import head_projection, rescale_mlm_head

    if not (isinstance(target_frobenius, (int, float)) and math.isfinite(target_frobenius) and target_frobenius > 0):
        raise ValueError(f"target_frobenius: expected a finite number > 0, got {target_frobenius!r}")
    s = float(target_frobenius) / float(head_projection(hf).detach().double().norm())
    rescale_mlm_head(hf, 1.0 / s, untie=True)
    return s


@torch.no_grad()
def initial_infonce(model, corpus: DomainCorpus, cfg: OODConfig) -> float:
    """In-batch InfoNCE (nats) of the first ``cfg.init_batch`` training pairs before training (chance: ln B)."""
    from initlab.synthetic.splade.measure import splade_vectors

    pairs = corpus.train_pairs[: cfg.init_batch]
    q = splade_vectors(model, [p[0] for p in pairs], cfg.query_max_len).double()
    d = splade_vectors(model, [corpus.docs[p[1]] for p in pairs], cfg.doc_max_len).double()
    s = torch.nan_to_num(q @ d.T, nan=0.0, posinf=1e30, neginf=-1e30)
    return float(torch.nn.functional.cross_entropy(s, torch.arange(len(pairs))))


def run_cell(backbone_dir: str, cfg: OODConfig, family: str, k: float, seed: int, work_dir: str,
             progress: Any = None, imposed_norm: float | None = None, token_cache: bool = True) -> dict[str, Any]:
    """Train and evaluate ``family``'s backbone with its tied head divided by ``k``; the JSON-ready record.
    ``imposed_norm``: the imposed-norm arm instead: the head untied and scaled to this Frobenius norm
    (:func:`impose_head_norm`), then divided by ``k`` (head only, :func:`initlab.mlmhead.rescale_mlm_head`); the
    record adds ``imposed_s`` (the factor s). ``token_cache``: each text tokenised once in the cell
    (:class:`initlab.synthetic.splade.train.TokenCache`: the same batches bit for bit, so the same record; off only to
    measure or test it).

    Keys: ``family``, ``k``, ``seed``, ``init_infonce``, ``head_frobenius`` (after dividing by k), ``training`` (the
    result of :func:`train_to_plateau`: steps, stopped_by, dev losses, per-checkpoint evaluations), ``final`` (the
    evaluation at the stop), ``failed`` (the non-finite error or None), ``collapse`` (reasons of
    :func:`initlab.nn.collapse.detect_collapse`), ``seconds``, ``cpu_seconds``, ``cpu_seconds_per_step``.
    """
    from initlab.mlmhead import head_projection, rescale_mlm_head
    from initlab.nn.collapse import detect_collapse

    t0, c0 = time.perf_counter(), time.process_time()
    corpus = corpus_for(cfg, seed)
    shifted = shift_sets_for(cfg, seed)
    rec: dict[str, Any] = {"family": family, "k": float(k), "seed": seed, "failed": None}
    with torch_threads(cfg.torch_threads), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = load_encoder(Path(backbone_dir), cfg.doc_max_len, seed, cfg.engine, token_cache=token_cache)
        hf = model[0].auto_model
        if imposed_norm is None:
            rescale_mlm_head(hf, k)  # tied: the one shared tensor, as `initlab mlmhead rescale` does
        else:  # the imposed-norm arm: the head untied, scaled up to the high norm, then divided by k (head only)
            rec["imposed_s"] = impose_head_norm(hf, imposed_norm)
            rescale_mlm_head(hf, float(k), untie=True)
        rec["head_frobenius"] = float(head_projection(hf).detach().double().norm())
        rec["init_infonce"] = initial_infonce(model, corpus, cfg)
        c_train = time.process_time()
        try:
            tr = train_to_plateau(model, corpus, cfg, seed, Path(work_dir),
                                  on_checkpoint=lambda step: evaluate_sets(model, corpus, cfg.query_max_len, cfg.doc_max_len,
                                                                          shifted),
                                  progress=progress)
        except NonFiniteError as err:
            rec.update({"failed": str(err), "collapse": [str(err)], "training": None, "final": None,
                        "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0})
            return rec
        c_train = time.process_time() - c_train
        from initlab.mlmhead import is_tied

        rec["head_tied"] = is_tied(hf)  # after training: the tied arm stays tied, the imposed arm untied
        final = tr["checkpoints"][str(tr["steps"])]
        finite = all(bool(torch.isfinite(p).all()) for p in model.parameters())
        verdict = detect_collapse(losses=tr["loss_curve"], q_active=final["q_active_dims"], d_active=final["d_active_dims"],
                                  vocab_size=len(corpus.vocab), finite_weights=finite)
    rec.update({"training": tr, "final": final, "final_dev_loss": tr["dev_loss"][-1]["loss"], "collapse": verdict.reasons,
                "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
                "cpu_seconds_per_step": c_train / max(1, tr["steps"])})
    return rec


def inspect_cell(backbone_dir: str, cfg: OODConfig, family: str, seed: int) -> dict[str, Any]:
    """``initlab mlmhead inspect`` (:func:`initlab.mlmhead.report.inspect_model`) on the pretrained backbone (s = 1):
    texts the first :data:`INSPECT_TEXTS` documents of the seed's corpus, k grid ``cfg.ks``, batch B
    ``cfg.batch_size``; the report (its ``recommended`` entry holds the recommended k) with ``family``, ``s`` and
    ``seed``. The rules ``inspect`` and ``edge`` of :func:`initlab.synthetic.splade.claims.rule_k` read it."""
    from initlab.mlmhead.report import inspect_model
    from initlab.synthetic.splade.families import load_family_backbone

    corpus = corpus_for(cfg, seed)
    with torch_threads(cfg.torch_threads), warnings.catch_warnings(), quiet():
        warnings.simplefilter("ignore")
        model, tok = load_family_backbone(Path(backbone_dir))
        rep = inspect_model(model, tok, list(corpus.docs.values())[:INSPECT_TEXTS], ks=cfg.ks,
                            max_length=cfg.doc_max_len, batch=cfg.batch_size)
    return {**rep, "family": family, "s": 1.0, "seed": seed, "family_name": rep["family"]}


def bm25_cell(cfg: OODConfig, seed: int) -> dict[str, Any]:
    """BM25 (:mod:`initlab.synthetic.splade.ood.bm25`) on the seed's dev and out-of-domain sets, with corpus
    statistics (:func:`initlab.synthetic.splade.domains.token_stats`): ``{seed, dev, ood, ood_mean, corpus,
    ln_batch}``, and with ``cfg.query_shift`` ``shift_sets`` ``{set name: nDCG@10s}`` and ``shift``
    ``{"id@p<p>" | "ood@p<p>": nDCG@10s}`` (out of domain averaged over the held-out domains)."""
    from initlab.synthetic.splade.domains import token_stats
    from initlab.synthetic.splade.ood.bm25 import bm25_scores

    corpus = corpus_for(cfg, seed)
    ood = {es.name: bm25_scores(es, corpus.docs) for es in corpus.ood}
    out = {"seed": seed, "dev": bm25_scores(corpus.dev, corpus.docs), "ood": ood,
           "ood_mean": mean_metrics(list(ood.values())), "corpus": token_stats(corpus),
           "ln_batch": math.log(cfg.batch_size)}
    shifted = shift_sets_for(cfg, seed)
    if shifted:
        out["shift_sets"] = {es.name: bm25_scores(es, corpus.docs) for es in shifted}
        out["shift"] = shift_means(corpus, shifted, out["shift_sets"])
    return out
