"""Synthetic SPLADE phase diagram: four tiny backbone families x head scale s x MLM-head rescaling k.

Per family (:mod:`initlab.synthetic.splade_families`) one tied backbone is MLM-pretrained on the
synthetic corpus. A cell of the diagram multiplies the head by ``s`` and divides it by ``k`` in one
of three ways (``modes``):

* ``tied`` -- ``s`` and ``k`` both on the tied matrix (a high-norm tied checkpoint, rescaled with
  ``initlab mlmhead rescale``): input embeddings ``e = s / k``, head ``h = s / k``, still tied;
* ``k_output`` -- ``s`` on the tied matrix, ``k`` on the output projection only
  (``initlab mlmhead rescale --untie``): ``e = s``, ``h = s / k``, untied unless ``k = 1``;
* ``s_output`` -- a checkpoint whose untied output projection alone is ``s`` times larger, rescaled
  output-only: ``e = 1``, ``h = s / k``, untied.

Every (mode, s, k) maps to one trained model ``(family, tied, e, h, seed)``; different (mode, s, k)
that give the same weights (e.g. tied s = 16, k = 16 and tied s = 1, k = 1; bitwise the same for
powers of two) share that one cell, so a cell is trained once. Each cell: scale quantities at
initialisation, SPLADE training with sentence-transformers' SparseEncoderTrainer (the recipe of
:mod:`initlab.synthetic.splade`), evaluation (nDCG@10, MRR@10 by ``ir_measures``, active dims, FLOPS),
the collapse verdict of :func:`initlab.nn.collapse.detect_collapse` (empty, dense or near-constant
vectors, identical rankings, non-finite values) and the scale quantities again after training. A
non-finite gradient or loss stops the cell, which is recorded as failed (collapsed, with the step)
and the sweep goes on. Per (family, s) the report of ``initlab mlmhead inspect``
(:func:`initlab.mlmhead.report.inspect_model`) on the scaled, tied backbone gives its recommended k.

Outputs: ``config.json``, ``backbone/<family>/`` (pretrained, with ``natural_scale.json``),
``cells/*.json`` (resumable, each keyed by its own config), then the tables and figures written by
:mod:`initlab.synthetic.splade_phase_summary`, then ``DONE``.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from initlab.config import derive, to_dict
from initlab.runs import NonFiniteError, RunDir, torch_threads
from initlab.synthetic.splade_data import CorpusConfig, make_corpus
from initlab.synthetic.splade_families import FAMILIES, FamilyConfig, prepare_family_backbone, scale_backbone

__all__ = ["PhaseConfig", "PRESETS", "MODES", "CellSpec", "cell_spec", "grid", "cell_key", "collapse_verdict", "run_phase_cell",
           "inspect_cell", "run_phase"]

#: the three ways of applying s and k (see the module docstring).
MODES: tuple[str, ...] = ("tied", "k_output", "s_output")


@dataclass(frozen=True)
class PhaseConfig:
    """The phase-diagram sweep: grid, SPLADE recipe and the thresholds of the analysis, fixed before running.

    Grid: ``families`` x ``head_scales`` (s) x ``ks`` (k) in ``modes``; ``output_ks`` are the k of the
    ``k_output`` and ``s_output`` modes (k = 1 of ``k_output`` is the tied cell). Recipe: as
    :class:`initlab.synthetic.splade.SpladeSweepConfig` (``steps`` AdamW steps of batch ``batch_size``,
    peak ``lr``, FLOPS regulariser weights ``lambda_q``/``lambda_d`` after a quadratic warm-up over
    ``reg_warmup_ratio`` of the steps, T limits ``query_max_len``/``doc_max_len``, losses logged every
    ``log_every`` steps, ``init_batch`` pairs for the initial InfoNCE).

    Thresholds: collapse by :func:`initlab.nn.collapse.detect_collapse` with ``dense_fraction``,
    ``max_mean_cosine``, ``max_same_ranking``; ``loss_threshold`` (nats of the logged InfoNCE part)
    for "steps to threshold"; ``harm_margin`` (nDCG@10) for every "worse than" in the claim verdicts;
    ``poor_min_loss_margin`` (nats) for a poor minimum; ``hit_tolerance`` (nDCG@10) for a near-hit of
    the recommended k. Each worker process runs its cells with ``torch_threads`` threads.
    """

    corpus: CorpusConfig = CorpusConfig(n_docs=240, n_train_queries=1600, n_dev_queries=80)
    backbone: FamilyConfig = FamilyConfig()
    families: tuple[str, ...] = FAMILIES
    head_scales: tuple[float, ...] = (0.25, 1.0, 16.0)
    ks: tuple[float, ...] = (1.0, 2.0, 4.0, 16.0, 64.0)
    output_ks: tuple[float, ...] = (4.0, 16.0)
    modes: tuple[str, ...] = ("tied", "k_output")
    seeds: tuple[int, ...] = (0,)
    steps: int = 150
    batch_size: int = 32
    lr: float = 5e-4
    lr_warmup_ratio: float = 0.1
    lambda_q: float = 5e-2
    lambda_d: float = 3e-2
    reg_warmup_ratio: float = 1 / 3
    query_max_len: int = 12
    doc_max_len: int = 32
    log_every: int = 5
    init_batch: int = 32
    dense_fraction: float = 0.9
    max_mean_cosine: float = 0.99
    max_same_ranking: float = 0.9
    loss_threshold: float = 1.0
    harm_margin: float = 0.05
    poor_min_loss_margin: float = 0.1
    hit_tolerance: float = 0.01
    inspect_texts: int = 40
    torch_threads: int = 1


BASE = PhaseConfig()
_P2 = tuple(2.0 ** i for i in range(-2, 7))  # 1/4 ... 64
PRESETS: dict[str, PhaseConfig] = {
    "quick": derive(BASE, corpus=derive(BASE.corpus, n_docs=120, n_train_queries=600, n_dev_queries=40),
                    backbone=derive(BASE.backbone, mlm_steps=100), families=("bert", "modernbert"),
                    head_scales=(1.0, 16.0), ks=(1.0, 16.0), output_ks=(16.0,), steps=40),
    "default": BASE,
    "full": derive(BASE, head_scales=_P2, ks=_P2, output_ks=tuple(k for k in _P2 if k != 1.0),
                   modes=MODES, seeds=(0, 1, 2), steps=200),
    # the fresh seed on which the alternative recommended-k rule (``edge_k`` in
    # :mod:`initlab.synthetic.splade_phase_report`) is tested: the default recipe, tied mode, seed 1
    "confirm": derive(BASE, modes=("tied",), seeds=(1,)),
    # the fresh seed for the input-side check at equal output scale (s = 1/4, k = 16: tied e = h = 1/64
    # against output-only e = 1/4, h = 1/64), added after the seed-0 default run; see docs/synthetic_splade.md
    "confirm-input": derive(BASE, modes=("tied", "k_output"), head_scales=(0.25,), ks=(1.0, 16.0),
                            output_ks=(16.0,), seeds=(1,)),
}


@dataclass(frozen=True)
class CellSpec:
    """One trained model: input word embeddings ``e * W``, output projection ``h * W``, tied or not."""

    family: str
    tied: bool
    e: float
    h: float
    seed: int

    @property
    def name(self) -> str:
        return f"{self.family}_{'tied' if self.tied else 'untied'}_e={self.e:g}_h={self.h:g}_seed={self.seed}"


def cell_spec(family: str, mode: str, s: float, k: float, seed: int) -> CellSpec:
    """The trained model behind grid point (family, mode, s, k, seed).

    Raises:
        ValueError: unknown ``mode``.
    """
    if mode == "tied":
        return CellSpec(family, True, s / k, s / k, seed)
    if mode == "k_output":
        return CellSpec(family, True, s, s, seed) if k == 1.0 else CellSpec(family, False, s, s / k, seed)
    if mode == "s_output":
        return CellSpec(family, False, 1.0, s / k, seed)
    raise ValueError(f"mode: expected one of {list(MODES)}, got {mode!r}")


def grid(cfg: PhaseConfig) -> list[dict[str, Any]]:
    """Every grid point ``{family, mode, s, k, seed, cell}`` of ``cfg`` (``cell``: the :class:`CellSpec` name)."""
    points = []
    for family in cfg.families:
        for mode in cfg.modes:
            ks = cfg.ks if mode == "tied" else ((1.0,) if mode == "k_output" else ()) + tuple(cfg.output_ks)
            for s in cfg.head_scales:
                for k in ks:
                    for seed in cfg.seeds:
                        spec = cell_spec(family, mode, s, k, seed)
                        points.append({"family": family, "mode": mode, "s": s, "k": k, "seed": seed, "cell": spec.name})
    return points


def _check(cfg: PhaseConfig) -> None:
    for f in cfg.families:
        if f not in FAMILIES:
            raise ValueError(f"families: expected names from {list(FAMILIES)}, got {f!r}")
    for m in cfg.modes:
        if m not in MODES:
            raise ValueError(f"modes: expected names from {list(MODES)}, got {m!r}")
    for name in ("head_scales", "ks", "output_ks"):
        for v in getattr(cfg, name):
            if not (math.isfinite(v) and v > 0 and math.log2(v) == round(math.log2(v))):
                raise ValueError(f"{name}: expected powers of two (exact products s / k), got {v!r}")


_GRID_FIELDS = ("families", "head_scales", "ks", "output_ks", "modes", "seeds")


def cell_key(cfg: PhaseConfig, spec: CellSpec) -> dict[str, Any]:
    """The config a cell depends on: its spec and the whole recipe (not the grid lists or worker count)."""
    recipe = {k: v for k, v in to_dict(cfg).items() if k not in _GRID_FIELDS}
    return {"cell": {"family": spec.family, "tied": spec.tied, "e": spec.e, "h": spec.h, "seed": spec.seed},
            "recipe": recipe}


# ------------------------------------------------------------------------------------------------
# one cell (runs in a worker process)
# ------------------------------------------------------------------------------------------------
def _load(backbone_dir: Path, cfg: PhaseConfig, seed: int):
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    from initlab.synthetic.splade import _quiet

    torch.manual_seed(seed)
    with _quiet():
        tr = Transformer(str(backbone_dir), transformer_task="fill-mask", max_seq_length=cfg.doc_max_len)
        tr.auto_model.tie_weights()
        model = SparseEncoder(modules=[tr, SpladePooling(pooling_strategy="max")], device="cpu")
    return model


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


def run_phase_cell(backbone_dir: str, cfg: PhaseConfig, spec: CellSpec, work_dir: str) -> dict[str, Any]:
    """Train and evaluate one :class:`CellSpec`; returns the JSON-ready cell record.

    Keys: the spec fields, ``init`` / ``final`` (:func:`initlab.synthetic.splade.measure_init` before and
    after training), ``hidden_rel_change`` (``||H_cell - H_backbone||_F / ||H_backbone||_F`` of the last
    hidden states on the first ``init_batch`` documents, before training), ``loss_curve``, the metrics of
    :func:`initlab.synthetic.splade.evaluate` (None for a failed cell), ``failed`` (the non-finite error
    message or None), ``collapse`` (reasons; a failed cell has its error as reason), ``collapse_stats``,
    ``tied_after`` (whether the head is still tied after training), ``seconds`` (wall) and ``cpu_seconds``
    (this process's CPU time: with one thread, about the wall time on an idle core).
    """
    from initlab.mlmhead import is_tied
    from initlab.synthetic import splade as sp

    t0, c0 = time.perf_counter(), time.process_time()
    corpus = make_corpus(cfg.corpus)
    with torch_threads(cfg.torch_threads), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = _load(Path(backbone_dir), cfg, spec.seed)
        hf = model[0].auto_model
        feats = sp._batch_features(model, list(corpus.docs.values())[: cfg.init_batch], cfg.doc_max_len)
        h_ref = _hidden(hf, feats)
        scale_backbone(hf, spec.e, spec.h, spec.tied)
        hidden_change = float((_hidden(hf, feats) - h_ref).norm() / h_ref.norm())
        init = sp.measure_init(model, corpus, cfg, spec.seed)
        rec: dict[str, Any] = {"family": spec.family, "tied": spec.tied, "e": spec.e, "h": spec.h, "seed": spec.seed,
                               "init": init, "hidden_rel_change": hidden_change, "failed": None}
        try:
            curve = sp.train_cell(model, corpus, cfg, spec.seed, Path(work_dir))
        except NonFiniteError as err:
            rec.update({"loss_curve": [], "failed": str(err), "collapse": [str(err)], "collapse_stats": {},
                        "final": None, "tied_after": None, "seconds": time.perf_counter() - t0,
                        "cpu_seconds": time.process_time() - c0,
                        **{m: None for m in ("ndcg@10", "mrr@10", "q_active_dims", "d_active_dims", "flops")}})
            return rec
        metrics, q, d, scores = sp.evaluate(model, corpus, cfg, return_vectors=True)
        finite_weights = all(bool(torch.isfinite(p).all()) for p in model.parameters())
        verdict = collapse_verdict(curve, q, d, scores, len(corpus.vocab), finite_weights, cfg)
        final = sp.measure_init(model, corpus, cfg, spec.seed) if finite_weights else None
    rec.update({**metrics, "loss_curve": curve, "collapse": verdict.reasons, "collapse_stats": verdict.stats,
                "final": final, "tied_after": is_tied(hf), "seconds": time.perf_counter() - t0,
                "cpu_seconds": time.process_time() - c0})
    return rec


def inspect_cell(backbone_dir: str, cfg: PhaseConfig, family: str, s: float) -> dict[str, Any]:
    """``initlab mlmhead inspect`` on the pretrained backbone with its tied matrix multiplied by ``s``.

    Texts: the first ``inspect_texts`` corpus documents; k grid: ``cfg.ks``; batch B: ``cfg.batch_size``.
    Returns the report of :func:`initlab.mlmhead.report.inspect_model` (its ``recommended`` entry holds k).
    """
    from initlab.mlmhead.report import inspect_model
    from initlab.synthetic.splade_families import load_family_backbone

    from initlab.synthetic.splade import _quiet

    corpus = make_corpus(cfg.corpus)
    with torch_threads(cfg.torch_threads), warnings.catch_warnings(), _quiet():
        warnings.simplefilter("ignore")
        model, tok = load_family_backbone(Path(backbone_dir))
        scale_backbone(model, s, s, tied=True)
        rep = inspect_model(model, tok, list(corpus.docs.values())[: cfg.inspect_texts], ks=cfg.ks,
                            max_length=cfg.doc_max_len, batch=cfg.batch_size)
    return {**rep, "family": family, "s": s, "family_name": rep["family"]}


def _pretrain(folder: str, family: str, cfg: PhaseConfig, seed: int) -> str:
    from initlab.synthetic.splade import _quiet

    with torch_threads(cfg.torch_threads), warnings.catch_warnings(), _quiet():
        warnings.simplefilter("ignore")
        return str(prepare_family_backbone(Path(folder), family, make_corpus(cfg.corpus), cfg.backbone, seed))


class _InlinePool:
    """``workers = 1``: run each job at submit time in this process (no process start-up, same results)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def submit(self, fn, *args):
        from concurrent.futures import Future

        fut: Future = Future()
        try:
            fut.set_result(fn(*args))
        except Exception as err:  # re-raised by fut.result(), as in a process pool
            fut.set_exception(err)
        return fut


def _pool(workers: int):
    if workers == 1:
        return _InlinePool()
    import multiprocessing

    return ProcessPoolExecutor(max_workers=workers, initializer=_worker_init, mp_context=multiprocessing.get_context("spawn"))


def _worker_init() -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ["TQDM_DISABLE"] = "1"  # the model-card and weight-loading bars of every cell
    torch.set_num_threads(1)
    import transformers

    transformers.logging.disable_progress_bar()


# ------------------------------------------------------------------------------------------------
# the sweep
# ------------------------------------------------------------------------------------------------
def run_phase(out: Path, cfg: PhaseConfig, overwrite: bool = False, progress: bool = True,
              draw: Callable[[Path], Any] | None = None, workers: int = 2) -> RunDir:
    """Run (or resume) the phase diagram of ``cfg`` into ``out``; finished cells are not redone.

    Backbones are pretrained once per (family, seed); each distinct cell is trained once, in
    ``workers`` processes (results do not depend on it). Then :func:`initlab.synthetic.splade_phase_summary.write_report` writes the
    tables, ``draw(out)`` the figures (from the saved files), and ``DONE`` is written.

    Raises:
        ValueError: a bad grid (unknown family or mode, a scale that is not a power of two), workers < 1.
        initlab.runs.RunExistsError: ``out`` holds a finished run and ``overwrite`` is False.
        initlab.runs.ConfigMismatchError: ``out`` holds an unfinished run (or a cell) of another config.
    """
    from tqdm.auto import tqdm

    from initlab.synthetic.splade_phase_summary import write_report

    _check(cfg)
    if workers < 1:
        raise ValueError(f"workers: expected >= 1, got {workers}")
    rd = RunDir(out, overwrite=overwrite, resume=True, config=cfg)
    points = grid(cfg)
    specs: dict[str, CellSpec] = {}
    for p in points:
        specs.setdefault(p["cell"], cell_spec(p["family"], p["mode"], p["s"], p["k"], p["seed"]))
    todo = [sp for name, sp in specs.items() if not rd.has_cell(name, key=cell_key(cfg, sp))]
    inspect_todo = [(f, s) for f in cfg.families for s in cfg.head_scales
                    if not rd.has_cell(f"inspect_{f}_s={s:g}", key=_inspect_key(cfg, f, s))]
    bb = {(f, seed): str(rd.root / "backbone" / f"{f}_seed={seed}") for f in cfg.families for seed in cfg.seeds}
    t0 = time.perf_counter()
    with _pool(workers) as pool:
        futs = [pool.submit(_pretrain, folder, f, cfg, seed) for (f, seed), folder in bb.items()]
        for fut in tqdm(futs, desc="MLM pretraining (families)", disable=not progress):
            fut.result()
        jobs = {pool.submit(run_phase_cell, bb[(sp.family, sp.seed)], cfg, sp, str(rd.root / "trainer_tmp" / sp.name)): sp
                for sp in todo}
        jobs.update({pool.submit(inspect_cell, bb[(f, cfg.seeds[0])], cfg, f, s): (f, s) for f, s in inspect_todo})
        bar = tqdm(total=len(jobs), desc="synthetic SPLADE cells", disable=not progress)
        from concurrent.futures import as_completed

        for fut in as_completed(jobs):
            what = jobs[fut]
            res = fut.result()
            if isinstance(what, CellSpec):
                rd.save_cell(what.name, res, key=cell_key(cfg, what))
                if res["collapse"]:
                    warnings.warn(f"SPLADE cell {what.name}: {'; '.join(res['collapse'])}", RuntimeWarning, stacklevel=2)
            else:
                f, s = what
                rd.save_cell(f"inspect_{f}_s={s:g}", res, key=_inspect_key(cfg, f, s))
            bar.update(1)
        bar.close()
    import shutil

    shutil.rmtree(rd.root / "trainer_tmp", ignore_errors=True)
    write_report(rd, cfg, points, seconds=time.perf_counter() - t0)
    if draw is not None:
        try:
            draw(rd.root)
        except Exception as err:  # a figure must never lose the results; say so loudly
            warnings.warn(f"synthetic SPLADE figures failed: {type(err).__name__}: {err}", RuntimeWarning)
    rd.mark_done()
    return rd


def _inspect_key(cfg: PhaseConfig, family: str, s: float) -> dict[str, Any]:
    return {"family": family, "s": s, "ks": list(cfg.ks), "batch": cfg.batch_size, "texts": cfg.inspect_texts,
            "backbone": to_dict(cfg.backbone), "corpus": to_dict(cfg.corpus), "seed": cfg.seeds[0]}
