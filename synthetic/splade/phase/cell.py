"""One cell of the synthetic SPLADE phase diagram, run in a worker process.

Role: train, evaluate and inspect one model of :mod:`initlab.synthetic.splade.phase.config`'s grid.
:func:`run_phase_cell` scales the pretrained family backbone (input embeddings ``e``, head ``h``, tied or
not; :func:`scale_cell`: the imposed scale, then ``initlab.mlmhead.rescale_mlm_head`` by k), measures it at
initialisation, trains it with the SPLADE recipe of
:mod:`initlab.synthetic.splade.train` (SPLADE v2, arXiv:2109.10086), evaluates it
(:mod:`initlab.synthetic.splade.measure`) and gives the collapse verdict of
:func:`initlab.nn.collapse.detect_collapse`; a non-finite gradient or loss makes the cell ``failed``.
:func:`inspect_cell` runs ``initlab mlmhead inspect`` on a scaled backbone; :func:`pretrain_family`
MLM-pretrains one family's backbone.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import torch

from initlab.runs import NonFiniteError, torch_threads
from initlab.synthetic.splade.data import make_corpus
from initlab.synthetic.splade.families import prepare_family_backbone, scale_backbone
from initlab.synthetic.splade.phase.config import CellSpec, PhaseConfig, backbone_for
from initlab.synthetic.splade.measure import batch_features, evaluate, measure_init
from initlab.synthetic.splade.train import load_encoder, quiet, train_cell

__all__ = ["collapse_verdict", "run_phase_cell", "scale_cell", "posthoc_rescales", "inspect_cell", "pretrain_family"]


@torch.no_grad()
def _hidden(hf, feats: dict[str, torch.Tensor]) -> torch.Tensor:
    hf.eval()
    out = hf(input_ids=feats["input_ids"], attention_mask=feats["attention_mask"], output_hidden_states=True)
    return out.hidden_states[-1][feats["attention_mask"].bool()].double()


def collapse_verdict(curve: list[dict[str, Any]], q: torch.Tensor, d: torch.Tensor, scores: torch.Tensor,
                     vocab_size: int, finite_weights: bool, cfg: PhaseConfig):
    """The collapse verdict of one trained cell: :func:`initlab.nn.collapse.detect_collapse` on the loss
    curve, the mean active dims of the query ``q (Nq, V)`` and document ``d (Nd, V)`` term weights, the
    document vectors (near-constant rule) and ``scores (Nq, Nd)`` (identical-rankings rule), with the
    thresholds of ``cfg``. Returns a :class:`initlab.nn.collapse.CollapseVerdict`."""
    from initlab.nn.collapse import detect_collapse

    q_active = float((q > 0).sum(1).double().mean())
    d_active = float((d > 0).sum(1).double().mean())
    return detect_collapse(losses=curve, q_active=q_active, d_active=d_active, vocab_size=vocab_size,
                           finite_weights=finite_weights, doc_vectors=d, scores=scores,
                           dense_fraction=cfg.dense_fraction, max_mean_cosine=cfg.max_mean_cosine,
                           max_same_ranking=cfg.max_same_ranking)


def run_phase_cell(backbone_dir: str, cfg: PhaseConfig, spec: CellSpec, work_dir: str, progress: Any = None) -> dict[str, Any]:
    """Train and evaluate one :class:`CellSpec`; returns the JSON-ready cell record.

    ``progress``: an :class:`initlab.executor.Progress`, advanced once per training step (None: no reports).

    Keys: the spec fields, ``init`` / ``final`` (:func:`initlab.synthetic.splade.measure.measure_init` before and
    after training), ``hidden_rel_change`` (``||H_cell - H_backbone||_F / ||H_backbone||_F`` of the last
    hidden states on the first ``init_batch`` documents, before training), ``loss_curve``, the metrics of
    :func:`initlab.synthetic.splade.measure.evaluate` (None for a failed cell), ``failed`` (the non-finite error
    message or None), ``collapse`` (reasons; a failed cell has its error as reason), ``collapse_stats``,
    ``tied_after`` (whether the head is still tied after training), ``seconds`` (wall) and ``cpu_seconds``
    (this process's CPU time: with one thread, about the wall time on an idle core).
    """
    from initlab.mlmhead import is_tied

    t0, c0 = time.perf_counter(), time.process_time()
    corpus = make_corpus(cfg.corpus)
    with torch_threads(cfg.torch_threads), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = load_encoder(Path(backbone_dir), cfg.doc_max_len, spec.seed, cfg.engine)
        hf = model[0].auto_model
        feats = batch_features(model, list(corpus.docs.values())[: cfg.init_batch], cfg.doc_max_len)
        h_ref = _hidden(hf, feats)
        scale_cell(hf, spec)
        hidden_change = float((_hidden(hf, feats) - h_ref).norm() / h_ref.norm())
        init = measure_init(model, corpus, cfg, spec.seed)
        rec: dict[str, Any] = {"family": spec.family, "tied": spec.tied, "e": spec.e, "h": spec.h, "seed": spec.seed,
                               "init": init, "hidden_rel_change": hidden_change, "failed": None}
        try:
            curve = train_cell(model, corpus, cfg, spec.seed, Path(work_dir),
                               callbacks=() if progress is None else (_step_callback(progress),))
        except NonFiniteError as err:
            rec.update({"loss_curve": [], "failed": str(err), "collapse": [str(err)], "collapse_stats": {},
                        "final": None, "tied_after": None, "seconds": time.perf_counter() - t0,
                        "cpu_seconds": time.process_time() - c0,
                        **{m: None for m in ("ndcg@10", "mrr@10", "q_active_dims", "d_active_dims", "flops")}})
            return rec
        metrics, q, d, scores = evaluate(model, corpus, cfg, return_vectors=True)
        finite_weights = all(bool(torch.isfinite(p).all()) for p in model.parameters())
        verdict = collapse_verdict(curve, q, d, scores, len(corpus.vocab), finite_weights, cfg)
        final = measure_init(model, corpus, cfg, spec.seed) if finite_weights else None
        c_train = time.process_time() - c0
        posthoc = posthoc_rescales(model, corpus, cfg) if finite_weights else []
    rec.update({**metrics, "loss_curve": curve, "collapse": verdict.reasons, "collapse_stats": verdict.stats,
                "final": final, "tied_after": is_tied(hf), "posthoc": posthoc, "seconds": time.perf_counter() - t0,
                "cpu_seconds": time.process_time() - c0, "cpu_seconds_train": c_train})
    return rec


def scale_cell(hf, spec: CellSpec):
    """Give the pretrained tied backbone ``hf`` the weights of ``spec``, in place; returns ``hf``.

    First the imposed scale (:meth:`CellSpec.imposed`, :func:`initlab.synthetic.splade.families.scale_backbone`:
    tied when input and head scale agree, else the head untied and scaled alone), then the MLM-head rescaling by
    ``spec.k`` with :func:`initlab.mlmhead.rescale_mlm_head` (``untie`` for an untied cell), as ``initlab mlmhead
    rescale [--untie]`` does to a checkpoint.
    """
    from initlab.mlmhead import rescale_mlm_head

    e, h = spec.imposed()
    scale_backbone(hf, e, h, tied=e == h)
    return rescale_mlm_head(hf, spec.k, untie=not spec.tied)


def _step_callback(progress: Any):
    """A transformers ``TrainerCallback`` advancing ``progress`` by one unit per optimisation step."""
    from transformers import TrainerCallback

    class _Steps(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            progress.advance(1)

    return _Steps()


@torch.no_grad()
def posthoc_rescales(model, corpus, cfg: PhaseConfig) -> list[dict[str, Any]]:
    """The trained model divided by each ``cfg.posthoc_ks`` (its head projection ``W_head``: the shared tensor of
    a tied model, input embeddings included, as ``mlmhead rescale`` does; the output projection alone of an
    untied one), evaluated and checked by the collapse detector. Each division is
    :func:`initlab.mlmhead.rescaled` (:func:`initlab.mlmhead.rescale_mlm_head` inside a ``with`` block), so the
    weights and the recorded k are restored bit-exactly after each factor.

    One row per factor: ``k``, ``ndcg@10``, ``ndcg_select``, ``ndcg_test``, ``q_active_dims``, ``d_active_dims``,
    ``finite_vectors``, ``collapse`` (reasons) and ``collapse_stats`` (the detector's measured quantities).
    These are the trained-and-rescaled models of the collapse calibration (:mod:`initlab.synthetic.splade.calibration`).
    """
    from initlab.mlmhead import rescaled

    hf = model[0].auto_model
    rows = []
    for k in cfg.posthoc_ks:
        with rescaled(hf, k):
            m, q, d, scores = evaluate(model, corpus, cfg, return_vectors=True)
        v = collapse_verdict([], q, d, scores, len(corpus.vocab), True, cfg)
        rows.append({"k": float(k), **{key: m[key] for key in ("ndcg@10", "ndcg_select", "ndcg_test", "q_active_dims",
                                                               "d_active_dims", "finite_vectors")},
                     "collapse": v.reasons, "collapse_stats": v.stats})
    return rows


def inspect_cell(backbone_dir: str, cfg: PhaseConfig, family: str, s: float, seed: int = 0) -> dict[str, Any]:
    """``initlab mlmhead inspect`` on the pretrained backbone with its tied matrix multiplied by ``s``.

    Texts: the first ``inspect_texts`` corpus documents; k grid: ``cfg.ks``; batch B: ``cfg.batch_size``.
    Returns the report of :func:`initlab.mlmhead.report.inspect_model` (its ``recommended`` entry holds k).
    """
    from initlab.mlmhead.report import inspect_model
    from initlab.synthetic.splade.families import load_family_backbone

    corpus = make_corpus(cfg.corpus)
    with torch_threads(cfg.torch_threads), warnings.catch_warnings(), quiet():
        warnings.simplefilter("ignore")
        model, tok = load_family_backbone(Path(backbone_dir))
        scale_backbone(model, s, s, tied=True)
        rep = inspect_model(model, tok, list(corpus.docs.values())[: cfg.inspect_texts], ks=cfg.ks,
                            max_length=cfg.doc_max_len, batch=cfg.batch_size)
    return {**rep, "family": family, "s": s, "seed": seed, "family_name": rep["family"]}


def pretrain_family(folder: str, family: str, cfg: PhaseConfig, seed: int, on_step: Any = None) -> str:
    """MLM-pretrain (or reuse) the backbone of ``family`` in ``folder``; returns the folder. ``on_step``: called
    after each MLM step."""
    with torch_threads(cfg.torch_threads), warnings.catch_warnings(), quiet():
        warnings.simplefilter("ignore")
        return str(prepare_family_backbone(Path(folder), family, make_corpus(cfg.corpus), backbone_for(cfg, family), seed,
                                           on_step=on_step))
