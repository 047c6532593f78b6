"""End to end on CPU, no network: toy preset trains a tiny in-process BERT on fixture files in the real
layouts, then encode -> exact retrieval -> ir_measures metrics; resume; safetensors-only loading;
collapse recorded, not raised; a 2-process gloo DDP run gives the FLOPS term of one process on the same
global batch; the sweep skips finished cells; the GPU check dry-runs on CPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from initlab.config import derive, load_config
from initlab.realdata.splade.command import train_main
from initlab.realdata.splade.config import PRESETS, SpladeTrainConfig
from initlab.realdata.splade.data import load_eval_set
from initlab.realdata.splade.evaluate import encode_texts, evaluate_set
from initlab.realdata.splade.modeling import load_splade
from initlab.realdata.splade.retrieval import dense_topk_reference
from initlab.realdata.splade.train import detect_collapse, train_splade

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "splade"
REPO = Path(__file__).resolve().parents[3]
TRAIN_ARGS = ["--preset", "quick", "--backbone", "tiny", "--k", "2", "--no-progress",
              "--train-source", str(FIX / "msmarco" / "triples.train.small.tsv"), "--data-root", str(FIX),
              "--set", "max_steps=3", "--set", "save_steps=2"]
EVAL_SETS = '["msmarco-dev", "trec-dl-2019", "scifact", "nano:NanoSciFact"]'


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("splade") / "toy"
    assert train_main(TRAIN_ARGS + ["--out", str(out), "--eval", "--set", f"eval_sets={EVAL_SETS}"]) == 0
    return out


def _toy_cfg(out: Path) -> SpladeTrainConfig:
    return load_config(SpladeTrainConfig, out / "config.json")


def test_toy_train_encode_retrieve_metrics(toy_run):
    cfg = _toy_cfg(toy_run)
    assert cfg.k == 2.0 and cfg.max_steps == 3 and cfg.tiny_model == "bert"
    for name in ("DONE", "loss_curve.csv", "loss_curve.png", "flops_terms.json", "results.json", "results.csv",
                 "model/model.safetensors", "train_results.json"):
        assert (toy_run / name).exists(), name
    assert not list((toy_run / "model").rglob("*.bin"))
    curve = (toy_run / "loss_curve.csv").read_text().splitlines()
    assert len(curve) == 1 + 3  # header + one row per step (logging_steps=1)
    import csv

    rows = list(csv.DictReader((toy_run / "loss_curve.csv").open()))
    flops_q = json.loads((toy_run / "flops_terms.json").read_text())["query"]
    lam = [float(r["query_regularizer_weight"]) for r in rows]
    assert lam == [0.0, cfg.lambda_q, cfg.lambda_q]  # quadratic warm-up over int(3 / 3) = 1 step
    for r, f in zip(rows[1:], flops_q[1:]):  # logged weighted term = lambda_q(t) x unweighted FLOPS term
        assert float(r["query_regularizer_loss"]) == pytest.approx(cfg.lambda_q * f, abs=6e-5)  # logs keep 4 decimals
    res = json.loads((toy_run / "results.json").read_text())
    sets = {r["set"]: r for r in res["sets"]}
    assert set(sets) == {"msmarco-dev", "trec-dl-2019", "scifact", "NanoSciFact"}
    for r in sets.values():
        for m in ("RR@10", "nDCG@10", "R@10"):
            assert 0.0 <= r[m] <= 1.0
        assert r["flops"] > 0 and r["q_active"] > 0 and r["d_active"] > 0 and isinstance(r["collapsed"], bool)
        # what the length limits cut and the identical-id decisions are written, per set
        assert set(r["truncation"]) == {"queries", "documents"} and r["truncation"]["documents"]["texts"] == r["n_docs"]
        assert r["identical_ids"]["hits_dropped"] >= 0 and r["unreached_rows"] == 0
    train = json.loads((toy_run / "train_results.json").read_text())
    assert train["truncation"]["queries"]["texts"] > 0 and 0 <= train["truncation"]["documents"]["tokens_cut_share"] <= 1
    # the head really was divided by k = 2 before training (recorded on the saved config)
    assert json.loads((toy_run / "model" / "config.json").read_text())["mlm_head_rescale_k"] == 2.0

    # Recompute RR@10 on the dev set independently: reload the safetensors model, dense float64 scores of
    # every document, hand-written reciprocal rank. The tiny, barely trained model ties many scores, and
    # evaluators order ties differently, so the pipeline's ir_measures value must lie between the
    # optimistic (relevant document first in its tie group) and pessimistic (last) reciprocal ranks.
    model = load_splade(toy_run / "model")
    assert model[0].tokenizer.tokenize("the cat sleeps") == ["the", "cat", "sleeps"]  # fixture words are in the vocab
    ds = load_eval_set("msmarco-dev", data_root=FIX)
    Q = encode_texts(model, list(ds.queries.values()), kind="query")
    D = encode_texts(model, list(ds.corpus.values()), kind="document")
    scores, _ = dense_topk_reference(Q, D, len(ds.corpus))  # sorted scores of all documents
    full = torch.from_numpy(Q.toarray().astype(np.float64) @ D.toarray().astype(np.float64).T)
    dids = list(ds.corpus)
    lo, hi = [], []
    for qi, qid in enumerate(ds.queries):
        rel = [dids.index(d) for d, r in ds.qrels[qid].items() if r > 0]
        s_rel = float(full[qi, rel].max())
        tol = 1e-5 * abs(s_rel)
        better = int((full[qi] > s_rel + tol).sum())
        tied = int((torch.abs(full[qi] - s_rel) <= tol).sum())
        best, worst = better + 1, better + tied
        lo.append(1.0 / worst if (worst <= 10 and s_rel > 0) else 0.0)
        hi.append(1.0 / best if (best <= 10 and s_rel > 0) else 0.0)
    assert scores.shape == (len(ds.queries), len(ds.corpus))
    assert np.mean(lo) - 1e-9 <= sets["msmarco-dev"]["RR@10"] <= np.mean(hi) + 1e-9


def test_resume_from_trainer_checkpoint_matches_uninterrupted(toy_run, tmp_path):
    # An interrupted run: only checkpoint-2 survives. Resuming trains step 3 only, and its FLOPS term
    # equals the uninterrupted run's step-3 term (same weights, optimizer state, data order).
    part = tmp_path / "part"
    part.mkdir()
    shutil.copy(toy_run / "config.json", part / "config.json")
    shutil.copytree(toy_run / "checkpoints" / "checkpoint-2", part / "checkpoints" / "checkpoint-2")
    shutil.copytree(toy_run / "tiny_backbone", part / "tiny_backbone")
    # killed while writing checkpoint-3: weights there, trainer_state.json (written last) missing
    shutil.copytree(toy_run / "checkpoints" / "checkpoint-2", part / "checkpoints" / "checkpoint-3",
                    ignore=shutil.ignore_patterns("trainer_state.json"))
    with pytest.warns(RuntimeWarning, match="checkpoint-3: incomplete checkpoint"):
        res = train_splade(_toy_cfg(toy_run), part, progress=False)
    ck3 = part / "checkpoints" / "checkpoint-3"
    assert not ck3.exists() or (ck3 / "trainer_state.json").is_file()  # deleted (or rewritten whole)
    assert res["steps"] == 3
    resumed = json.loads((part / "flops_terms.json").read_text())
    full = json.loads((toy_run / "flops_terms.json").read_text())
    assert len(resumed["query"]) == 1 and resumed["first_step"] == 3 and full["first_step"] == 1
    assert resumed["query"][0] == pytest.approx(full["query"][2], rel=1e-4)
    assert resumed["document"][0] == pytest.approx(full["document"][2], rel=1e-4)
    # a finished training is not redone: refused, or (inside a cell whose evaluation is pending) reused
    from initlab.runs import RunExistsError

    with pytest.raises(RunExistsError, match="finished training"):
        train_splade(_toy_cfg(toy_run), part, progress=False)
    assert train_splade(_toy_cfg(toy_run), part, progress=False, reuse_finished=True)["steps"] == 3


def test_load_refuses_pickle_and_missing(toy_run, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(toy_run / "model", bad)
    torch.save({"x": torch.zeros(1)}, bad / "pytorch_model.bin")
    with pytest.raises(ValueError, match="pickle"):
        load_splade(bad)
    with pytest.raises(FileNotFoundError, match="checkpoint folder not found"):
        load_splade(tmp_path / "missing")


def test_collapse_is_recorded_not_raised(toy_run):
    ds = load_eval_set("scifact", data_root=FIX)
    model = load_splade(toy_run / "model")
    head = model[0].auto_model.get_output_embeddings()
    with torch.no_grad():
        head.bias.fill_(-1e4)  # every logit negative -> ReLU kills all terms -> active dims 0
    with pytest.warns(RuntimeWarning, match="collapse"):
        row = evaluate_set(model, ds, top_k=10)
    assert row["collapsed"] and any("empty" in r for r in row["reasons"]) and row["d_active"] == 0.0
    with torch.no_grad():
        head.bias.fill_(float("nan"))
    with pytest.warns(RuntimeWarning, match="collapse"):
        row = evaluate_set(model, ds, top_k=10)
    assert row["collapsed"] and np.isnan(row["nDCG@10"])
    with pytest.warns(RuntimeWarning, match="non-finite loss"):
        assert detect_collapse(losses=[1.0, float("nan")], q_active=5, d_active=5, vocab_size=100)["collapsed"]
    with pytest.warns(RuntimeWarning, match="dense"):
        assert detect_collapse(losses=[1.0], q_active=95, d_active=5, vocab_size=100)["collapsed"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not detect_collapse(losses=[1.0], q_active=5, d_active=50, vocab_size=100)["collapsed"]


def test_global_flops_differs_from_mean_of_local_flops():
    # Why the all-gather matters: sum_j (mean over 4)^2 != mean over 2 halves of sum_j (mean over 2)^2.
    from initlab.realdata.splade.losses import GlobalFlopsLoss

    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    reg = GlobalFlopsLoss(model=None)
    glob = float(reg.compute_loss_from_embeddings(x))
    local = 0.5 * (float(reg.compute_loss_from_embeddings(x[:2])) + float(reg.compute_loss_from_embeddings(x[[0, 2]])))
    assert glob == pytest.approx(0.5) and local != pytest.approx(glob)


def test_two_process_ddp_flops_term_equals_single_process(toy_run, tmp_path):
    out = tmp_path / "ddp"
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
           "-m", "initlab.app.cli", "splade", "train", "--out", str(out)] + TRAIN_ARGS
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((out / "train_results.json").read_text())["world_size"] == 2
    two = json.loads((out / "flops_terms.json").read_text())
    one = json.loads((toy_run / "flops_terms.json").read_text())
    for side in ("query", "document"):
        assert len(two[side]) == len(one[side]) == 3
        # step 1 sees identical weights: equal to float32 rounding; later steps differ only by the
        # summation order of the all-reduced gradients
        assert two[side][0] == pytest.approx(one[side][0], rel=1e-6)
        np.testing.assert_allclose(two[side], one[side], rtol=1e-3)


def test_sweep_skips_finished_cells(toy_run, tmp_path):
    from initlab.realdata.splade.sweep import run_sweep

    base = derive(PRESETS["quick"], max_steps=3, save_steps=2, train_source=str(FIX / "msmarco" / "triples.train.small.tsv"),
                  data_root=str(FIX), eval_sets=tuple(json.loads(EVAL_SETS)))
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    shutil.copytree(toy_run, sweep / "tiny-bert__k2")  # a finished cell folder not yet recorded
    rows = run_sweep(base, sweep, backbones=["bert"], ks=[2], progress=False)
    assert [r["cell"] for r in rows] == ["tiny-bert__k2"] and (sweep / "cells" / "tiny-bert__k2.json").exists()
    assert (sweep / "summary.csv").exists() and (sweep / "DONE").exists()
    mtime = (sweep / "tiny-bert__k2" / "model" / "model.safetensors").stat().st_mtime
    from initlab.runs import RunExistsError

    with pytest.raises(RunExistsError):
        run_sweep(base, sweep, backbones=["bert"], ks=[2], progress=False)
    (sweep / "DONE").unlink()  # an interrupted sweep: the recorded cell is skipped, nothing retrained
    assert run_sweep(base, sweep, backbones=["bert"], ks=[2], progress=False) == rows
    assert (sweep / "tiny-bert__k2" / "model" / "model.safetensors").stat().st_mtime == mtime


def test_gpu_check_dry_run_on_cpu(tmp_path):
    from initlab.realdata.splade.gpu_check import run_gpu_check

    rep = run_gpu_check(tiny=True, steps=1, batch=4, out=tmp_path / "gc", data_root=str(FIX))
    assert rep["steps"] == 1 and rep["samples_per_s"] > 0 and rep["tokens_per_s"] > rep["samples_per_s"]
    assert rep["eval"] and 0.0 <= rep["eval"][0]["nDCG@10"] <= 1.0


_DDP_GRAD_SCRIPT = r'''
import sys, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from sentence_transformers.sparse_encoder.losses import FlopsLoss
from initlab.realdata.splade.losses import GlobalFlopsLoss

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
x = torch.randn(8, 5, dtype=torch.float64)  # the global batch (B, d_in), identical on every rank
lin = torch.nn.Linear(5, 7, dtype=torch.float64)
out = {}
for name, reg in (("global", GlobalFlopsLoss(None)), ("local", FlopsLoss(None))):
    model = DDP(torch.nn.Linear(5, 7, dtype=torch.float64))
    model.module.load_state_dict(lin.state_dict())
    emb = torch.relu(model(x.chunk(world)[rank]))  # (B / world, V) this process's term weights
    loss = reg.compute_loss_from_embeddings(emb)
    loss.backward()  # DDP averages the gradients over processes
    out[name] = (loss.item(), model.module.weight.grad.clone())
if rank == 0:
    torch.save(out, sys.argv[1])
dist.barrier()  # no rank tears gloo down while another still works (else: "terminate called", SIGABRT)
dist.destroy_process_group()
'''


def test_global_flops_gradient_under_ddp_equals_single_process(tmp_path):
    # The gradient, not only the value: 2 gloo processes x DDP (gradient averaging) with GlobalFlopsLoss give
    # exactly (float64) the single-process gradient of the FLOPS term of the whole batch; ST's per-process
    # FlopsLoss does not.
    from sentence_transformers.sparse_encoder.losses import FlopsLoss

    from initlab.realdata.splade.losses import GlobalFlopsLoss

    script = tmp_path / "ddp_grad.py"
    script.write_text(_DDP_GRAD_SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
           str(script), str(tmp_path / "grads.pt")]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = torch.load(tmp_path / "grads.pt", weights_only=True)
    torch.manual_seed(0)
    x = torch.randn(8, 5, dtype=torch.float64)
    lin = torch.nn.Linear(5, 7, dtype=torch.float64)
    ref = GlobalFlopsLoss(None).compute_loss_from_embeddings(torch.relu(lin(x)))
    ref.backward()
    assert got["global"][0] == pytest.approx(ref.item(), rel=1e-12)
    torch.testing.assert_close(got["global"][1], lin.weight.grad, rtol=1e-12, atol=1e-14)
    assert not torch.allclose(got["local"][1], lin.weight.grad, rtol=1e-3)  # per-process FLOPS is another loss
    assert FlopsLoss(None).compute_loss_from_embeddings(torch.relu(lin(x))).item() == pytest.approx(ref.item())


def test_folder_of_another_config_is_refused(toy_run, tmp_path, capsys):
    # a finished k=2 run must not be reported as a k=8 run
    args = [a if a != "2" else "8" for a in TRAIN_ARGS]  # --k 2 -> --k 8
    with pytest.raises(SystemExit) as exc:
        train_main(args + ["--out", str(toy_run), "--set", f"eval_sets={EVAL_SETS}"])
    assert exc.value.code == 2 and "already holds a finished run" in capsys.readouterr().err
    # an interrupted k=2 run (no DONE, no model) is not resumed as a k=8 run either
    part = tmp_path / "part"
    part.mkdir()
    shutil.copy(toy_run / "config.json", part / "config.json")
    with pytest.raises(SystemExit) as exc:
        train_main(args + ["--out", str(part), "--set", f"eval_sets={EVAL_SETS}"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "different training config" in err and "differs in: k" in err
    assert _toy_cfg(toy_run).k == 2.0 and _toy_cfg(part).k == 2.0  # untouched


def test_eval_cache_is_keyed_by_checkpoint(toy_run, tmp_path):
    from initlab.realdata.splade.sweep import eval_checkpoint
    from initlab.runs import RunExistsError

    out = tmp_path / "ev"
    first = eval_checkpoint(toy_run / "model", ["scifact"], out, data_root=str(FIX), top_k=10)
    with pytest.raises(RunExistsError, match="finished run"):  # a finished evaluation is not redone silently
        eval_checkpoint(toy_run / "model", ["scifact"], out, data_root=str(FIX), top_k=10)
    (out / "DONE").unlink()  # an interrupted evaluation: the finished set is reused under the same key
    again = eval_checkpoint(toy_run / "model", ["scifact"], out, data_root=str(FIX), top_k=10)
    assert again["sets"] == first["sets"]
    (out / "DONE").unlink()
    with pytest.raises(RunExistsError, match="differs in: sets"):
        eval_checkpoint(toy_run / "model", ["scifact", "msmarco-dev"], out, data_root=str(FIX), top_k=10)
    other = tmp_path / "other_model"
    shutil.copytree(toy_run / "model", other)
    with pytest.raises(RunExistsError, match="different evaluation"):
        eval_checkpoint(other, ["scifact"], out, data_root=str(FIX), top_k=10)
    with pytest.raises(RunExistsError, match="top_k"):
        eval_checkpoint(toy_run / "model", ["scifact"], out, data_root=str(FIX), top_k=5)


def test_leave_process_group_tears_down_the_group(tmp_path):
    """A torchrun rank leaves the process group before exiting (a rank that exits with the group's threads running
    can abort at interpreter exit and fail the launch); in a single process it does nothing."""
    import torch.distributed as dist

    from initlab.realdata.splade.train import leave_process_group

    leave_process_group()  # no group: nothing to do
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    assert dist.is_initialized()
    leave_process_group()
    assert not dist.is_initialized()
