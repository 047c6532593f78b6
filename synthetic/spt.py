"""Synthetic length-100 self-pretraining (SPT) experiments: SPT vs label supervision, with attention analysis.

``initlab synthetic run [--preset quick|default|full] [--out DIR] [--overwrite]``

Per seed s (each "condition x seed" is a resumable :class:`initlab.runs.RunDir` cell):

* data: the ``local`` task (:mod:`initlab.synthetic.tasks`), ``n_train`` / ``n_test`` sequences of
  length T = 100, regenerated per seed; SPT sources are the local task's training inputs, the ``count``
  control task's inputs, or i.i.d. tokens (same vocabulary);
* SPT (self-pretraining): masked reconstruction -- each token is replaced by a mask token with
  probability ``mask_rate`` (i.i.d.) and the per-position decoder is trained with cross entropy on the
  masked positions only -- for ``spt_epochs`` epochs (snapshots at the sweep's epochs);
* fine-tuning: cross entropy of the mean-pooled classifier for ``finetune_epochs`` epochs (AdamW);
* conditions: ``scratch``; ``spt`` (load every weight but the heads from the SPT checkpoint, train all);
  ``frozen_attn`` (W_Q, W_K, W_V, W_O frozen at their random init); ``hybrid_qk`` / ``hybrid_qkvo`` /
  ``hybrid_ffn`` (from the SPT checkpoint only that group, everything else at the scratch init);
  ``spt_e<E>`` (SPT duration sweep; E = 0 is ``scratch``, E = ``spt_epochs`` is ``spt``);
  ``depth<L>_scratch`` / ``depth<L>_spt``; ``cross_count`` / ``cross_iid`` (SPT on other inputs);
* measured each epoch on a fixed probe batch of test sequences (first layer): proximity mass, relative-
  position score, attention entropy (:mod:`initlab.synthetic.metrics`); test accuracy; and once per seed at
  initialisation the score gradients of both losses and their blind-subspace parts, in the trained model
  and in the theorem's setting (one attention layer, no FFN/LayerNorm, W_Q = W_K = 0, i.e. uniform
  attention, mean pooling; float64).

All randomness is seeded (model init by ``seed``, data by ``1000 * seed + k``, batches by generators), so
the same seed gives identical metrics on CPU.
"""

from __future__ import annotations

import io
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from initlab.config import derive, to_dict
from initlab.runs import RunDir, atomic_write_bytes, atomic_write_text, torch_threads
from initlab.synthetic.metrics import (
    attention_entropy,
    proximity_mass,
    relative_position_score,
    uniform_proximity_mass,
    score_gradients_at_init,
)
from initlab.nn.encoder import ModelConfig, SequenceTransformer, freeze, load_partial
from initlab.nn.masking import mask_tokens
from initlab.synthetic.tasks import MASK_ID, TaskConfig, make_task, vocab_size

__all__ = ["SPTConfig", "PRESETS", "condition_names", "run", "summarize"]


@dataclass(frozen=True)
class SPTConfig:
    """Resolved configuration of one ``initlab synthetic run``."""

    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    task: TaskConfig = field(default_factory=TaskConfig)
    n_train: int = 1024
    n_test: int = 512
    d_model: int = 32
    n_heads: int = 1
    d_ff: int = 64
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.01
    finetune_epochs: int = 10
    spt_epochs: int = 10  # the SPT checkpoint used by spt, hybrids, depth and cross-data conditions
    spt_sweep_epochs: tuple[int, ...] = (0, 1, 10, 50)
    mask_rate: float = 0.15
    depths: tuple[int, ...] = (1, 2, 4)
    proximity_w: int = 2
    probe_size: int = 64
    conditions: tuple[str, ...] = ()  # empty = every condition
    map_seed: int = 0  # the seed whose mean attention maps are saved for the figures

    def __post_init__(self) -> None:
        for name in ("n_train", "n_test", "d_model", "n_heads", "d_ff", "batch_size", "finetune_epochs", "spt_epochs", "probe_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"SPTConfig.{name}: expected a positive int, got {v!r}")
        if not self.seeds:
            raise ValueError("SPTConfig.seeds: expected at least one seed")
        if any(e < 0 for e in self.spt_sweep_epochs):
            raise ValueError(f"SPTConfig.spt_sweep_epochs: expected ints >= 0, got {self.spt_sweep_epochs}")
        if any(L < 1 for L in self.depths) or 1 not in self.depths:
            raise ValueError(f"SPTConfig.depths: expected ints >= 1 including 1, got {self.depths}")
        if self.lr <= 0:
            raise ValueError(f"SPTConfig.lr: expected > 0, got {self.lr}")
        bad = [c for c in self.conditions if c not in condition_names(self, all_=True)]
        if bad:
            raise ValueError(f"SPTConfig.conditions: unknown {bad}; expected names from {condition_names(self, all_=True)}")


# -- conditions ----------------------------------------------------------------------------------
def _spec(cfg: SPTConfig) -> dict[str, dict[str, Any]]:
    """condition name -> {depth, spt: (source, epochs) or None, load: groups, freeze: groups}."""
    E = cfg.spt_epochs
    every = ("embeddings", "qkvo", "ffn", "layernorm")
    spec: dict[str, dict[str, Any]] = {
        "scratch": dict(depth=1, spt=None, load=(), freeze=()),
        "spt": dict(depth=1, spt=("local", E), load=every, freeze=()),
        "frozen_attn": dict(depth=1, spt=None, load=(), freeze=("qkvo",)),
        "hybrid_qk": dict(depth=1, spt=("local", E), load=("qk",), freeze=()),
        "hybrid_qkvo": dict(depth=1, spt=("local", E), load=("qkvo",), freeze=()),
        "hybrid_ffn": dict(depth=1, spt=("local", E), load=("ffn",), freeze=()),
    }
    for e in cfg.spt_sweep_epochs:
        if e not in (0, E):
            spec[f"spt_e{e}"] = dict(depth=1, spt=("local", e), load=every, freeze=())
    for L in cfg.depths:
        if L != 1:
            spec[f"depth{L}_scratch"] = dict(depth=L, spt=None, load=(), freeze=())
            spec[f"depth{L}_spt"] = dict(depth=L, spt=("local", E), load=every, freeze=())
    spec["cross_count"] = dict(depth=1, spt=("count", E), load=every, freeze=())
    spec["cross_iid"] = dict(depth=1, spt=("iid", E), load=every, freeze=())
    return spec


def condition_names(cfg: SPTConfig, all_: bool = False) -> list[str]:
    """Condition names run by ``cfg`` (all that ``cfg`` defines when ``all_`` or ``cfg.conditions`` is empty)."""
    names = list(_spec(cfg))
    if all_ or not cfg.conditions:
        return names
    return [n for n in names if n in cfg.conditions]


BASE = SPTConfig()  # sizes chosen for the CPU time budget (default < 15 min on 2 cores), not for the outcome
PRESETS: dict[str, SPTConfig] = {
    "quick": derive(
        BASE, seeds=(0,), n_train=256, n_test=256, finetune_epochs=4, spt_epochs=3, spt_sweep_epochs=(0, 3),
        depths=(1,), conditions=("scratch", "spt", "frozen_attn", "hybrid_qk"),
    ),
    "default": BASE,
    "full": derive(BASE, seeds=tuple(range(10)), n_train=4096, n_test=2048, d_model=64, d_ff=128, finetune_epochs=30),
}



# -- helpers --------------------------------------------------------------------------------------
def _model_cfg(cfg: SPTConfig, depth: int) -> ModelConfig:
    return ModelConfig(
        vocab_size=vocab_size(cfg.task), max_len=cfg.task.T, d_model=cfg.d_model, n_heads=cfg.n_heads,
        n_layers=depth, d_ff=cfg.d_ff,
    )


def _fresh_model(cfg: SPTConfig, depth: int, seed: int) -> SequenceTransformer:
    torch.manual_seed(seed)
    return SequenceTransformer(_model_cfg(cfg, depth))


def _data(cfg: SPTConfig, seed: int) -> dict[str, torch.Tensor]:
    xtr, ytr = make_task("local", cfg.n_train, 1000 * seed + 1, cfg.task)
    xte, yte = make_task("local", cfg.n_test, 1000 * seed + 2, cfg.task)
    return {"xtr": xtr, "ytr": ytr, "xte": xte, "yte": yte, "probe": xte[: cfg.probe_size]}


def _spt_inputs(cfg: SPTConfig, source: str, seed: int, data: dict[str, torch.Tensor]) -> torch.Tensor:
    if source == "local":
        return data["xtr"]
    k = {"count": 3, "iid": 4}[source]
    return make_task(source, cfg.n_train, 1000 * seed + k, cfg.task)[0]


@torch.no_grad()
def _probe(model: SequenceTransformer, probe: torch.Tensor, w: int) -> tuple[dict[str, float], torch.Tensor, torch.Tensor]:
    """Attention metrics of the first layer on the probe batch, plus the batch-mean map and scores (head 0)."""
    was = model.training
    model.eval()
    _, maps = model.encode(probe, return_attn=True)
    S = model.blocks[0].attn.last_scores
    model.blocks[0].attn.last_scores = None
    A = maps[0]
    out = {
        "prox": proximity_mass(A, w),
        "relpos": relative_position_score(S),
        "entropy": attention_entropy(A),
        "prox_layers": [proximity_mass(a, w) for a in maps],
    }
    model.train(was)
    return out, A[:, 0].mean(0), S[:, 0].mean(0)


@torch.no_grad()
def _accuracy(model: SequenceTransformer, x: torch.Tensor, y: torch.Tensor, bs: int = 256) -> float:
    was = model.training
    model.eval()
    correct = 0
    for i in range(0, len(x), bs):
        correct += int((model.classify(x[i : i + bs]).argmax(-1) == y[i : i + bs]).sum())
    model.train(was)
    return correct / len(x)


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def _save_state(path: Path, model: SequenceTransformer) -> None:
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    atomic_write_bytes(path, buf.getvalue())


# -- the two training loops ---------------------------------------------------------------------------
def pretrain(
    cfg: SPTConfig, source: str, depth: int, seed: int, data: dict[str, torch.Tensor], snapshots: Sequence[int],
    rd: RunDir, keep_maps: bool,
) -> dict[str, Any]:
    """Masked-reconstruction SPT on ``source`` inputs for ``max(snapshots)`` epochs; writes a checkpoint
    ``ckpt/spt_<source>_d<depth>_seed<seed>_e<E>.pt`` for each E in ``snapshots`` and returns the history."""
    model = _fresh_model(cfg, depth, seed)
    x = _spt_inputs(cfg, source, seed, data)
    gen = torch.Generator().manual_seed(7919 * seed + 17 + depth)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    xte_in, xte_mask = mask_tokens(data["xte"][:256], cfg.mask_rate, torch.Generator().manual_seed(seed + 5), mask_id=MASK_ID, at_least_one=True)
    history, maps = [], {}
    tag = f"spt_{source}_d{depth}_seed{seed}"

    def record(ep: int) -> None:
        m, A, S = _probe(model, data["probe"], cfg.proximity_w)
        with torch.no_grad():
            model.eval()
            logits = model.reconstruct(xte_in)[xte_mask]
            model.train()
        tgt = data["xte"][:256][xte_mask]
        m.update(epoch=ep, mlm_loss=float(F.cross_entropy(logits, tgt)), mlm_acc=float((logits.argmax(-1) == tgt).float().mean()))
        history.append(m)
        if keep_maps:
            maps[f"attn_ep{ep}"], maps[f"scores_ep{ep}"] = A.numpy(), S.numpy()
        if ep in snapshots:
            _save_state(rd.path("ckpt", f"{tag}_e{ep}.pt"), model)

    record(0)
    model.train()
    for ep in range(1, max(snapshots) + 1):
        perm = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), cfg.batch_size):
            xb = x[perm[i : i + cfg.batch_size]]
            inp, masked = mask_tokens(xb, cfg.mask_rate, gen, mask_id=MASK_ID, at_least_one=True)
            loss = F.cross_entropy(model.reconstruct(inp)[masked], xb[masked])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        record(ep)
    if keep_maps:
        _save_npz(rd.path("maps", f"{tag}.npz"), maps)
    return {"kind": "spt", "source": source, "depth": depth, "seed": seed, "history": history}


def finetune(
    cfg: SPTConfig, name: str, seed: int, data: dict[str, torch.Tensor], rd: RunDir, keep_maps: bool
) -> dict[str, Any]:
    """Label training of condition ``name`` for seed ``seed``; returns final metrics and history."""
    spec = _spec(cfg)[name]
    model = _fresh_model(cfg, spec["depth"], seed)
    loaded: list[str] = []
    if spec["spt"] is not None:
        source, E = spec["spt"]
        ck = rd.root / "ckpt" / f"spt_{source}_d{spec['depth']}_seed{seed}_e{E}.pt"
        if not ck.exists():
            raise FileNotFoundError(f"{ck}: SPT checkpoint missing (its SPT cell should have written it)")
        loaded = load_partial(model, torch.load(ck, weights_only=True), spec["load"])
    frozen = freeze(model, spec["freeze"]) if spec["freeze"] else []
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=cfg.weight_decay)
    gen = torch.Generator().manual_seed(7919 * seed + 3)
    xtr, ytr = data["xtr"], data["ytr"]
    history, maps = [], {}
    step = 0

    def record(ep: int, train_loss: float) -> None:
        m, A, S = _probe(model, data["probe"], cfg.proximity_w)
        m.update(epoch=ep, step=step, train_loss=train_loss, test_acc=_accuracy(model, data["xte"], data["yte"]))
        history.append(m)
        if keep_maps:
            maps[f"attn_ep{ep}"], maps[f"scores_ep{ep}"] = A.numpy(), S.numpy()

    record(0, float("nan"))
    model.train()
    for ep in range(1, cfg.finetune_epochs + 1):
        perm = torch.randperm(len(xtr), generator=gen)
        tot, nb = 0.0, 0
        for i in range(0, len(xtr), cfg.batch_size):
            idx = perm[i : i + cfg.batch_size]
            loss = F.cross_entropy(model.classify(xtr[idx]), ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot, nb, step = tot + loss.item(), nb + 1, step + 1
        record(ep, tot / nb)
    if keep_maps:
        _save_npz(rd.path("maps", f"ft_{name}_seed{seed}.npz"), maps)
    final = history[-1]
    return {
        "kind": "finetune", "condition": name, "seed": seed, "depth": spec["depth"],
        "spt": list(spec["spt"]) if spec["spt"] else None, "loaded": loaded, "frozen": frozen,
        "test_acc": final["test_acc"], "train_acc": _accuracy(model, xtr, ytr),
        "prox": final["prox"], "relpos": final["relpos"], "entropy": final["entropy"],
        "history": history,
    }


def init_gradients(cfg: SPTConfig, seed: int, data: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Score gradients of the label and masked-reconstruction losses at initialisation (first layer).

    ``model``: the depth-1 model of the experiments (float32); ``theorem``: the theorem's setting, one
    attention layer without FFN or LayerNorm, W_Q = W_K = 0 (exactly uniform attention), float64.
    """
    x, y = data["xtr"][:64], data["ytr"][:64]
    inp, masked = mask_tokens(x, cfg.mask_rate, torch.Generator().manual_seed(seed + 11), mask_id=MASK_ID, at_least_one=True)
    out: dict[str, Any] = {"kind": "init_grad", "seed": seed}
    model = _fresh_model(cfg, 1, seed)
    out["model"] = score_gradients_at_init(model, x, y, inp, masked)
    torch.manual_seed(seed)
    th_cfg = derive(_model_cfg(cfg, 1), use_ffn=False, use_layernorm=False)
    th = SequenceTransformer(th_cfg).double()
    with torch.no_grad():
        for lin in (th.blocks[0].attn.W_Q, th.blocks[0].attn.W_K):
            lin.weight.zero_()
            lin.bias.zero_()
    out["theorem"] = score_gradients_at_init(th, x, y, inp, masked)
    return out


# -- the run ------------------------------------------------------------------------------------------
def _plan(cfg: SPTConfig) -> list[tuple[str, dict[str, Any]]]:
    """Ordered cells: per seed, init gradients, the SPT runs needed, then the fine-tunes."""
    spec = _spec(cfg)
    names = condition_names(cfg)
    spt_needs: dict[tuple[str, int], set[int]] = {}
    for n in names:
        if spec[n]["spt"] is not None:
            src, E = spec[n]["spt"]
            spt_needs.setdefault((src, spec[n]["depth"]), set()).add(E)
    cells = []
    for s in cfg.seeds:
        cells.append((f"init_grad__seed{s}", dict(kind="init_grad", seed=s)))
        for (src, depth), eps in spt_needs.items():
            cells.append((f"spt_{src}_d{depth}__seed{s}", dict(kind="spt", seed=s, source=src, depth=depth, snapshots=sorted(eps))))
        for n in names:
            cells.append((f"{n}__seed{s}", dict(kind="finetune", seed=s, condition=n)))
    return cells


def _mean_std(v: list[float]) -> tuple[float, float]:
    a = np.asarray(v, dtype=float)
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0


def summarize(cfg: SPTConfig, results: dict[str, Any]) -> dict[str, Any]:
    """Aggregate cell results: per condition mean/std over seeds; init gradients; SPT-phase metrics."""
    spec = _spec(cfg)
    rows = []
    for n in condition_names(cfg):
        cells = [results[k] for k in results if results[k].get("kind") == "finetune" and results[k]["condition"] == n]
        if not cells:
            continue
        row: dict[str, Any] = {"condition": n, "n_seeds": len(cells), "depth": spec[n]["depth"],
                               "spt": "-" if spec[n]["spt"] is None else f"{spec[n]['spt'][0]}:{spec[n]['spt'][1]}ep"}
        for key in ("test_acc", "train_acc", "prox", "relpos", "entropy"):
            row[f"{key}_mean"], row[f"{key}_std"] = _mean_std([c[key] for c in cells])
        rows.append(row)
    grads: dict[str, Any] = {}
    gcells = [r for r in results.values() if r.get("kind") == "init_grad"]
    for setting in ("model", "theorem"):
        for key in ("label_grad_norm", "label_blind_frac", "mlm_grad_norm", "mlm_blind_frac"):
            if gcells:
                grads[f"{setting}_{key}_mean"], grads[f"{setting}_{key}_std"] = _mean_std([g[setting][key] for g in gcells])
    spt_rows = []
    for r in results.values():
        if r.get("kind") == "spt":
            last, first = r["history"][-1], r["history"][0]
            spt_rows.append({"source": r["source"], "depth": r["depth"], "seed": r["seed"], "epochs": last["epoch"],
                             "prox_init": first["prox"], "prox_end": last["prox"], "relpos_init": first["relpos"],
                             "relpos_end": last["relpos"], "mlm_acc_end": last["mlm_acc"]})
    return {"conditions": rows, "init_gradients": grads, "spt_runs": spt_rows}


def _fmt(m: float, s: float, pct: bool = False) -> str:
    return f"{100 * m:.1f} ± {100 * s:.1f}" if pct else f"{m:.3f} ± {s:.3f}"


def summary_markdown(cfg: SPTConfig, summ: dict[str, Any], seconds: float | None = None) -> str:
    """The results table (markdown)."""
    n_seeds = len(cfg.seeds)
    lines = [
        "## Synthetic self-pretraining (local task, T = %d)" % cfg.task.T, "",
        f"{n_seeds} seed(s); test accuracy (%) and first-layer attention metrics after fine-tuning, mean ± std over seeds; "
        f"proximity mass within |i-j| <= {cfg.proximity_w} (uniform attention: {uniform_proximity_mass(cfg.task.T, cfg.proximity_w):.3f}); "
        f"entropy in nats (uniform: {math.log(cfg.task.T):.2f}).", "",
        "| condition | depth | SPT | test acc % | train acc % | proximity mass | rel.-pos. score | entropy (nats) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in summ["conditions"]:
        lines.append(
            f"| {r['condition']} | {r['depth']} | {r['spt']} | {_fmt(r['test_acc_mean'], r['test_acc_std'], True)} | "
            f"{_fmt(r['train_acc_mean'], r['train_acc_std'], True)} | {_fmt(r['prox_mean'], r['prox_std'])} | "
            f"{_fmt(r['relpos_mean'], r['relpos_std'])} | {_fmt(r['entropy_mean'], r['entropy_std'])} |"
        )
    g = summ["init_gradients"]
    if g:
        lines += [
            "", "Score gradients at initialisation (first layer, batch of 64; blind fraction = ‖P_B G‖ / ‖G‖):", "",
            "| setting | label ‖G‖ | label blind frac. | masked-recon. ‖G‖ | masked-recon. blind frac. |",
            "| --- | --- | --- | --- | --- |",
        ]
        for st, label in (("model", "experiment model (FFN, LayerNorm, random W_Q, W_K)"), ("theorem", "theorem setting (attention only, uniform, float64)")):
            lines.append(
                f"| {label} | {g[f'{st}_label_grad_norm_mean']:.3g} | {_fmt(g[f'{st}_label_blind_frac_mean'], g[f'{st}_label_blind_frac_std'])} | "
                f"{g[f'{st}_mlm_grad_norm_mean']:.3g} | {_fmt(g[f'{st}_mlm_blind_frac_mean'], g[f'{st}_mlm_blind_frac_std'])} |"
            )
    spt = summ["spt_runs"]
    if spt:
        lines += ["", "SPT runs (first-layer proximity mass / rel.-pos. score before -> after, masked-token accuracy), mean over seeds:", "",
                  "| source | depth | epochs | proximity mass | rel.-pos. score | masked-token acc |", "| --- | --- | --- | --- | --- | --- |"]
        keys = sorted({(r["source"], r["depth"]) for r in spt})
        for src, d in keys:
            rs = [r for r in spt if r["source"] == src and r["depth"] == d]
            mean = lambda k: float(np.mean([r[k] for r in rs]))  # noqa: E731
            lines.append(f"| {src} | {d} | {rs[0]['epochs']} | {mean('prox_init'):.3f} -> {mean('prox_end'):.3f} | "
                         f"{mean('relpos_init'):.3f} -> {mean('relpos_end'):.3f} | {mean('mlm_acc_end'):.3f} |")
    if seconds is not None:
        lines += ["", f"Wall time of this invocation: {seconds:.0f} s (cells already finished are not redone)."]
    return "\n".join(lines) + "\n"


def _run_cell(cfg: SPTConfig, rd: RunDir, name: str, c: dict[str, Any], data_cache: dict[int, Any]) -> dict[str, Any]:
    s = c["seed"]
    if s not in data_cache:
        data_cache.clear()
        data_cache[s] = _data(cfg, s)
    data = data_cache[s]
    keep = s == cfg.map_seed
    if c["kind"] == "init_grad":
        res = init_gradients(cfg, s, data)
    elif c["kind"] == "spt":
        res = pretrain(cfg, c["source"], c["depth"], s, data, c["snapshots"], rd, keep and c["source"] == "local" and c["depth"] == 1)
    else:
        res = finetune(cfg, c["condition"], s, data, rd, keep and c["condition"] in ("scratch", "spt", "frozen_attn"))
    rd.save_cell(name, res)
    return res


def _seed_worker(args: tuple[dict[str, Any], str, int, int]) -> int:
    """Worker process: run the unfinished cells of one seed (each saved as soon as it is done)."""
    from initlab.config import from_dict

    cfg_dict, out, seed, threads = args
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True, warn_only=True)
    cfg = from_dict(SPTConfig, cfg_dict)
    rd = RunDir(out, resume=True)
    cache: dict[int, Any] = {}
    for name, c in _plan(cfg):
        if c["seed"] == seed and not rd.has_cell(name):
            _run_cell(cfg, rd, name, c, cache)
    return seed


def run(
    cfg: SPTConfig, out: str | Path, overwrite: bool = False, progress: bool = True,
    draw: Callable[[Path], list[Path]] | None = None, workers: int = 1, threads: int = 1,
) -> str:
    """Run (or resume) every cell of ``cfg`` into ``out``; write metrics, figures and ``summary.md``.

    Args:
        workers: processes running seeds in parallel (1 = in this process).
        threads: torch intra-op threads per process (1 is fastest at these sizes; more threads only add
            synchronisation overhead on 100 x 32 matrices, badly so on a loaded machine).
    Returns the markdown summary.
    Raises:
        initlab.runs.RunExistsError: ``out`` holds a finished run and ``overwrite`` is False.
        ValueError: ``workers`` or ``threads`` < 1.
    """
    from tqdm.auto import tqdm

    if workers < 1 or threads < 1:
        raise ValueError(f"workers/threads: expected ints >= 1, got {workers}/{threads}")
    t0 = time.perf_counter()
    rd = RunDir(out, overwrite=overwrite, resume=True)
    rd.write_config(cfg)
    plan = _plan(cfg)
    bar = tqdm(total=len(plan), desc="synthetic SPT", unit="cell", disable=not progress)
    n_seeds_left = len({c["seed"] for name, c in plan if not rd.has_cell(name)})
    if min(workers, n_seeds_left) <= 1:
        torch.use_deterministic_algorithms(True, warn_only=True)
        cache: dict[int, Any] = {}
        with torch_threads(threads):
            for name, c in plan:
                bar.set_postfix_str(name)
                if not rd.has_cell(name):
                    _run_cell(cfg, rd, name, c, cache)
                bar.update(1)
    else:
        import multiprocessing as mp

        todo = sorted({c["seed"] for name, c in plan if not rd.has_cell(name)})
        with mp.get_context("spawn").Pool(min(workers, len(todo))) as pool:
            job = pool.map_async(_seed_worker, [(to_dict(cfg), str(rd.root), s, threads) for s in todo])
            while not job.ready():
                job.wait(1.0)
                bar.n = sum(rd.has_cell(name) for name, _ in plan)
                bar.refresh()
            job.get()  # re-raises a worker's error
        bar.n = len(plan)
        bar.refresh()
    bar.close()
    results = {name: rd.load_cell(name) for name, _ in plan}
    summ = summarize(cfg, results)
    rd.write_json("metrics.json", {"config": to_dict(cfg), "summary": summ, "cells": results})
    csv_rows = [{k: v for k, v in r.items() if k not in ("history", "loaded", "frozen")} for r in results.values() if r["kind"] == "finetune"]
    rd.write_csv("metrics.csv", csv_rows)
    rd.write_csv("summary.csv", summ["conditions"])
    hist_rows = []
    for r in results.values():
        if r["kind"] in ("finetune", "spt"):
            tag = r["condition"] if r["kind"] == "finetune" else f"spt_{r['source']}_d{r['depth']}"
            for h in r["history"]:
                hist_rows.append({"run": tag, "seed": r["seed"], **{k: v for k, v in h.items() if k != "prox_layers"}})
    rd.write_csv("history.csv", hist_rows)
    md = summary_markdown(cfg, summ, time.perf_counter() - t0)
    if draw is not None:  # the figures, drawn from the files just written
        figs = draw(rd.root)
        md += "\nFigures: " + ", ".join(f"`{p.name}`" for p in figs if p.suffix == ".png") + "\n"
    atomic_write_text(rd.root / "summary.md", md)
    rd.mark_done()
    return md
