"""The cells of the synthetic SPT run: one SPT source or one fine-tuning condition over all seeds.

See :mod:`initlab.synthetic.spt` for the design. Checkpoints are written under
``<run>/ckpt/spt_<source>_<variant>_d<depth>_seed<s>_e<E>.pt`` with ``E`` a sweep epoch or ``rule``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from initlab.config import derive
from initlab.nn.encoder import SequenceTransformer, freeze, load_partial
from initlab.nn.masking import mask_tokens
from initlab.runs import RunDir, atomic_write_bytes
from initlab.synthetic.spt.ensemble import FinetuneMember, PretrainMember, finetune_members, pretrain_members
from initlab.synthetic.spt.metrics import attention_entropy, proximity_mass, relative_position_score, score_gradients_at_init
from initlab.synthetic.spt.config import SPTConfig, condition_spec, model_config
from initlab.synthetic.spt.tasks import MASK_ID, make_task

__all__ = ["seed_data", "spt_inputs", "probe", "pretrain_source", "finetune_condition", "init_gradients", "ckpt_path"]


def seed_data(cfg: SPTConfig, seed: int) -> dict[str, torch.Tensor]:
    """The local task's train/validation/test sets of ``seed`` and the probe batch (first test sequences)."""
    xtr, ytr = make_task("local", cfg.n_train, 1000 * seed + 1, cfg.task)
    xte, yte = make_task("local", cfg.n_test, 1000 * seed + 2, cfg.task)
    xva, yva = make_task("local", cfg.n_val, 1000 * seed + 6, cfg.task)
    return {"xtr": xtr, "ytr": ytr, "xva": xva, "yva": yva, "xte": xte, "yte": yte, "probe": xte[: cfg.probe_size]}


def spt_inputs(cfg: SPTConfig, source: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """SPT ``(train inputs, validation inputs)`` of ``source`` (``local`` uses the task's own sets)."""
    if source == "local":
        return make_task("local", cfg.n_train, 1000 * seed + 1, cfg.task)[0], make_task("local", cfg.n_val, 1000 * seed + 6, cfg.task)[0]
    k = {"count": 3, "iid": 4}[source]
    return make_task(source, cfg.n_train, 1000 * seed + k, cfg.task)[0], make_task(source, cfg.n_val, 1000 * seed + k + 4, cfg.task)[0]


def _fresh(cfg: SPTConfig, depth: int, variant: str, seed: int) -> SequenceTransformer:
    torch.manual_seed(seed)
    return SequenceTransformer(model_config(cfg, depth, variant))


def ckpt_path(rd: RunDir, source: str, variant: str, depth: int, seed: int, epoch: int | str) -> Path:
    return rd.root / "ckpt" / f"spt_{source}_{variant}_d{depth}_seed{seed}_e{epoch}.pt"


@torch.no_grad()
def probe(model: SequenceTransformer, x: torch.Tensor, w: int) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """First-layer attention metrics on the probe batch ``x (B, T)``, plus its batch-mean map and scores
    (head 0, ``(T, T)`` each)."""
    was = model.training
    model.eval()
    _, maps = model.encode(x, return_attn=True)
    S = model.blocks[0].attn.last_scores
    model.blocks[0].attn.last_scores = None
    A = maps[0]
    out = {"prox": proximity_mass(A, w), "relpos": relative_position_score(S), "entropy": attention_entropy(A),
           "prox_layers": [proximity_mass(a, w) for a in maps]}
    model.train(was)
    return out, A[:, 0].mean(0).numpy(), S[:, 0].mean(0).numpy()


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def _save_state(path: Path, state: dict[str, torch.Tensor]) -> None:
    buf = io.BytesIO()
    torch.save(state, buf)
    atomic_write_bytes(path, buf.getvalue())


def _map_seed(cfg: SPTConfig) -> int:
    return cfg.seeds[0] if cfg.map_seed == -1 else cfg.map_seed


def pretrain_source(cfg: SPTConfig, source: str, variant: str, depth: int, snapshots: Sequence[int], rd: RunDir,
                    vectorized: bool = True) -> dict[str, Any]:
    """SPT on ``source`` inputs for every seed (one ensemble); writes the rule's and the snapshot
    checkpoints and returns per seed the validation curve, the rule's epoch and probe metrics."""
    members = []
    for s in cfg.seeds:
        x, xv = spt_inputs(cfg, source, s)
        members.append(PretrainMember(_fresh(cfg, depth, variant, s), x, xv, torch.Generator().manual_seed(7919 * s + 17 + depth), s + 5))
    res = pretrain_members(members, lr=cfg.lr, weight_decay=cfg.weight_decay, batch_size=cfg.batch_size,
                           mask_rate=cfg.mask_rate, mask_id=MASK_ID, patience=cfg.spt_patience, max_epochs=cfg.spt_max_epochs,
                           snapshots=tuple(snapshots), vectorized=vectorized, where=f"synthetic SPT pretrain ({source}, {variant}, depth {depth})")
    out = []
    for s, r in zip(cfg.seeds, res):
        probes, maps = {}, {}
        px = seed_data(cfg, s)["probe"]  # always the local task's probe batch
        for e, state in r["states"].items():
            _save_state(ckpt_path(rd, source, variant, depth, s, e), state)
            m = SequenceTransformer(model_config(cfg, depth, variant))
            m.load_state_dict(state)
            probes[str(e)], maps[f"attn_e{e}"], maps[f"scores_e{e}"] = probe(m, px, cfg.proximity_w)
        if s == _map_seed(cfg) and source == "local" and variant == "full" and depth == 1:
            _save_npz(rd.path("maps", f"spt_local_seed{s}.npz"), maps)
        out.append({"seed": s, "val_loss": r["val_loss"], "rule_epoch": r["best_epoch"], "stop_epoch": r["stop_epoch"],
                    "probes": probes})
    return {"kind": "spt", "source": source, "variant": variant, "depth": depth, "seeds": out}


def finetune_condition(cfg: SPTConfig, name: str, rd: RunDir, vectorized: bool = True, progress: bool = False) -> list[dict[str, Any]]:
    """Label training of condition ``name`` for every seed (one ensemble); per seed the history, the
    test accuracy at the best validation epoch and the probe metrics at fine-tuning start and end."""
    spec = condition_spec(cfg)[name]
    members, starts, loaded, frozen = [], [], [], []
    for s in cfg.seeds:
        d = seed_data(cfg, s)
        model = _fresh(cfg, spec["depth"], spec["variant"], s)
        got: list[str] = []
        if spec["spt"] is not None:
            source, e = spec["spt"]
            ck = ckpt_path(rd, source, spec["variant"], spec["depth"], s, e)
            if not ck.exists():
                raise FileNotFoundError(f"{ck}: SPT checkpoint missing (its SPT cell should have written it)")
            got = load_partial(model, torch.load(ck, weights_only=True), spec["load"])
        fr = freeze(model, spec["freeze"]) if spec["freeze"] else []
        starts.append(probe(model, d["probe"], cfg.proximity_w))
        loaded.append(got)
        frozen.append(fr)
        members.append(FinetuneMember(model, d["xtr"], d["ytr"], d["xva"], d["yva"], d["xte"], d["yte"],
                                      torch.Generator().manual_seed(7919 * s + 3)))
    res, trained = finetune_members(members, lr=cfg.lr, weight_decay=cfg.weight_decay, batch_size=cfg.batch_size,
                                    epochs=cfg.finetune_epochs, vectorized=vectorized, where=f"synthetic SPT fine-tune ({name})")
    out = []
    for i, s in enumerate(cfg.seeds):
        end, A1, S1 = probe(trained[i], members[i].x_test[: cfg.probe_size], cfg.proximity_w)
        start, A0, S0 = starts[i]
        if s == _map_seed(cfg) and name in ("scratch", "spt", "frozen_attn", "attn_scratch", "attn_spt"):
            _save_npz(rd.path("maps", f"ft_{name}_seed{s}.npz"), {"attn_start": A0, "scores_start": S0, "attn_end": A1, "scores_end": S1})
        r = res[i]
        out.append({"condition": name, "seed": s, "depth": spec["depth"], "variant": spec["variant"],
                    "spt": list(spec["spt"]) if spec["spt"] else None, "loaded": loaded[i], "frozen": frozen[i],
                    "test_acc": r["test_acc"], "val_acc": r["val_acc"], "best_epoch": r["best_epoch"],
                    "final_test_acc": r["final_test_acc"], "init_test_acc": r["init_test_acc"],
                    "final_train_acc": r["history"][-1]["train_acc"],
                    **{f"{k}_start": start[k] for k in ("prox", "relpos", "entropy")},
                    **{f"{k}_end": end[k] for k in ("prox", "relpos", "entropy")},
                    "history": r["history"]})
    return out


def init_gradients(cfg: SPTConfig, seed: int) -> dict[str, Any]:
    """Score gradients of the label and masked-reconstruction losses at initialisation (first layer).

    ``model``: the depth-1 model of the experiments (float32); ``theorem``: the theorem's setting, one
    attention layer without FFN or LayerNorm, W_Q = W_K = 0 (exactly uniform attention), float64.
    """
    d = seed_data(cfg, seed)
    x, y = d["xtr"][:64], d["ytr"][:64]
    inp, masked = mask_tokens(x, cfg.mask_rate, torch.Generator().manual_seed(seed + 11), mask_id=MASK_ID, at_least_one=True)
    out: dict[str, Any] = {"kind": "init_grad", "seed": seed}
    out["model"] = score_gradients_at_init(_fresh(cfg, 1, "full", seed), x, y, inp, masked)
    torch.manual_seed(seed)
    th = SequenceTransformer(derive(model_config(cfg, 1), use_ffn=False, use_layernorm=False)).double()
    with torch.no_grad():
        for lin in (th.blocks[0].attn.W_Q, th.blocks[0].attn.W_K):
            lin.weight.zero_()
            lin.bias.zero_()
    out["theorem"] = score_gradients_at_init(th, x, y, inp, masked)
    return out
