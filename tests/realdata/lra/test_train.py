"""End to end on CPU: toy generated ListOps, pretrain -> finetune through the CLI, resume, ablation
mechanics (hybrid init, frozen attention), a toy sweep, and the GPU check's dry run."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from initlab.app.cli import main as cli
from initlab.realdata.lra import train as T
from initlab.realdata.lra.config import ABLATIONS, PRESETS
TOY = PRESETS["toy"]
from initlab.realdata.lra.sweep import expand_conditions, pretrain_key


def test_lra_toy_pretrain_then_finetune_cli(tmp_path, capsys):
    pt, ft = tmp_path / "pt", tmp_path / "ft"
    assert cli(["lra", "pretrain", "--preset", "toy", "--out", str(pt), "--no-progress"]) == 0
    res = json.loads((pt / "results.json").read_text())
    assert res["epochs"] == 2 and len(res["history"]) == 2 and res["mask_ratio"] == 0.10
    assert (pt / "spt_best.safetensors").is_file() and (pt / "DONE").is_file()
    assert json.loads((pt / "config.json").read_text())["config"]["task"] == "listops"
    assert (pt / "listops_data" / "basic_train.tsv").read_text().startswith("Source\tTarget\n")
    assert cli(["lra", "finetune", "--preset", "toy", "--spt", str(pt), "--out", str(ft), "--no-progress"]) == 0
    res = json.loads((ft / "results.json").read_text())
    hist = res["history"]
    best = max(hist, key=lambda r: r["val_acc"])
    assert res["best_epoch"] == best["epoch"] and res["val_acc"] == best["val_acc"]
    assert 0.0 <= res["test_acc"] <= 1.0 and res["n_copied_from_spt"] > 0
    assert (ft / "history.csv").read_text().splitlines()[0].startswith("epoch,train_loss,val_acc")
    layers = res["attention_metrics"]["layers"]
    assert len(layers) == TOY.n_layers and 0 <= layers[0]["proximity_mass"] <= 1
    # fine-tuned encoder weights started from the SPT checkpoint (embeddings moved, but from there)
    spt = T.load_weights(pt / "spt_best.safetensors")
    fresh = T.build_model(TOY).backbone.state_dict()
    assert not torch.equal(spt["tok_emb.weight"], fresh["tok_emb.weight"])
    # an unfinished pretrain folder is refused as --spt (its checkpoint is only the best so far)
    (pt / "DONE").rename(pt / "DONE.bak")
    with pytest.raises(SystemExit):
        cli(["lra", "finetune", "--preset", "toy", "--spt", str(pt), "--out", str(tmp_path / "ft2"), "--no-progress"])
    assert "unfinished pretrain run" in capsys.readouterr().err and not (tmp_path / "ft2").exists()
    (pt / "DONE.bak").rename(pt / "DONE")
    # a finished run is not silently overwritten
    with pytest.raises(SystemExit):
        cli(["lra", "pretrain", "--preset", "toy", "--out", str(pt), "--no-progress"])
    assert "already holds a finished run" in capsys.readouterr().err


def test_lra_pretrain_resumes_after_interruption(tmp_path, monkeypatch):
    cfg = replace(TOY, spt_epochs=2, metrics_examples=0)
    full = T.pretrain(cfg, tmp_path / "a", progress=False)
    import initlab.executor as ex

    calls = {"n": 0}
    real = ex.progress_bar

    def interrupt(it, *args, **kwargs):  # the second epoch's bar: an interruption (each epoch opens one)
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(it, *args, **kwargs)

    monkeypatch.setattr(ex, "progress_bar", interrupt)
    with pytest.raises(KeyboardInterrupt):
        T.pretrain(cfg, tmp_path / "b", progress=False)
    assert not (tmp_path / "b" / "DONE").exists()
    st = torch.load(tmp_path / "b" / "ckpt" / "last.pt", weights_only=True)
    assert st["epoch"] == 1
    monkeypatch.setattr(ex, "progress_bar", real)
    resumed = T.pretrain(cfg, tmp_path / "b", progress=False)
    assert [r["val_loss"] for r in resumed["history"]] == pytest.approx([r["val_loss"] for r in full["history"]], rel=1e-6)
    a, b = T.load_weights(tmp_path / "a" / "spt_best.safetensors"), T.load_weights(tmp_path / "b" / "spt_best.safetensors")
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    with pytest.raises(T.ConfigMismatchError):  # an unfinished run is never continued with another config
        (tmp_path / "b" / "DONE").unlink()
        T.pretrain(replace(cfg, lr=0.5), tmp_path / "b", progress=False)


def test_lra_spt_milestones_equal_separate_shorter_runs(tmp_path):
    """The spt-epochs ablation's shortcut: under a constant schedule the best-so-far checkpoint frozen after
    E epochs of a longer run is the checkpoint of a separate E-epoch run."""
    cfg = replace(TOY, spt_epochs=3, metrics_examples=0)
    long = T.pretrain(cfg, tmp_path / "long", milestones=[1, 2], progress=False)
    assert cfg.schedule == "constant" and len(long["history"]) == 3
    for e in (1, 2):
        short = T.pretrain(replace(cfg, spt_epochs=e), tmp_path / f"short{e}", progress=False)
        assert [r["val_loss"] for r in short["history"]] == [r["val_loss"] for r in long["history"][:e]]
        a = T.load_weights(tmp_path / "long" / f"spt_best_e{e}.safetensors")
        b = T.load_weights(tmp_path / f"short{e}" / "spt_best.safetensors")
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), e


def test_lra_hybrid_init_and_frozen_attention(tmp_path):
    cfg = replace(TOY, metrics_examples=0)
    spt_state = T.build_model(replace(cfg, seed=123)).backbone.state_dict()  # stands in for an SPT checkpoint
    m = T.build_model(cfg)
    fresh = {k: v.clone() for k, v in m.backbone.state_dict().items()}
    T.init_from_spt(m, spt_state, "qk")
    now = m.backbone.state_dict()
    for k in now:
        src = spt_state if (".W_Q." in k or ".W_K." in k) else fresh
        assert torch.equal(now[k], src[k]), k
    T.save_weights(spt_state, tmp_path / "spt.safetensors", metadata=T.split_metadata(T.load_data(cfg)))
    res = T.finetune(replace(cfg, init="spt", init_groups="qkvo", freeze=("attention",)), tmp_path / "ft",
                     tmp_path / "spt.safetensors", progress=False)
    assert res["n_frozen"] == 8 * cfg.n_layers
    final = T.load_weights(tmp_path / "ft" / "best.safetensors")
    for k, v in spt_state.items():
        name = "backbone." + k
        if any(f".{w}." in name for w in ("W_Q", "W_K", "W_V", "W_O")):
            assert torch.equal(final[name], v), k  # copied from SPT and kept frozen
    init_head = T.build_model(cfg).backbone.state_dict()["cls_head.weight"]
    assert not torch.equal(final["backbone.cls_head.weight"], init_head)  # the rest did train
    with pytest.raises(ValueError, match="spt_ckpt"):
        T.finetune(replace(cfg, init="spt"), tmp_path / "x", None)
    with pytest.raises(FileNotFoundError, match="missing.safetensors"):
        T.finetune(replace(cfg, init="spt"), tmp_path / "x", tmp_path / "missing.safetensors")


def test_lra_bad_input_writes_nothing(tmp_path, capsys):
    # missing data folder: the error names it and the layout, and no run folder is created
    out = tmp_path / "run"
    with pytest.raises(FileNotFoundError, match=r"nowhere: not found; expected layout: DIR/basic_\{train,val,test\}.tsv"):
        T.pretrain(replace(TOY, data_dir=str(tmp_path / "nowhere")), out, progress=False)
    assert not out.exists()
    # malformed TSV through the CLI: error names file and line; still nothing written
    bad = tmp_path / "bad"
    bad.mkdir()
    for s in ("train", "val", "test"):
        (bad / f"basic_{s}.tsv").write_text("Source\tTarget\n( [MAX 1 ] )\n")
    with pytest.raises(SystemExit):
        cli(["lra", "finetune", "--preset", "toy", "--data-dir", str(bad), "--out", str(out), "--no-progress"])
    assert "basic_train.tsv:2: expected 2 tab-separated columns" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(SystemExit):
        cli(["lra", "pretrain", "--preset", "toy", "--set", "task=pathx", "--out", str(out)])
    assert "task: expected one of" in capsys.readouterr().err and not out.exists()
    # a sweep on missing data: the error names the folder; the sweep folder it started is removed again
    with pytest.raises(SystemExit):
        cli(["lra", "sweep", "--preset", "toy", "--ablation", "spt-vs-scratch", "--data-dir", str(tmp_path / "nowhere"),
             "--out", str(out), "--no-progress"])
    assert "--data-dir" in (err := capsys.readouterr().err) and "nowhere: no such folder" in err and not out.exists()


def test_lra_ablation_presets_expand():
    base = PRESETS["image"]
    names = {a: [c for c, _, _ in expand_conditions(a, base, 0)] for a in ABLATIONS}
    assert names["depth"] == ["L1-scratch", "L1-spt", "L3-scratch", "L3-spt"]
    assert [c for c, _, _ in expand_conditions("depth", TOY, 0)] == ["L1-scratch", "L1-spt"]  # TOY has 1 layer
    conds = expand_conditions("spt-epochs", base, 0)
    assert [ms for _, _, ms in conds] == [None, 1, 10, 50, 100, 200]
    spt_runs = {pretrain_key(c) for _, c, ms in conds if c.init == "spt"}
    assert len(spt_runs) == 1  # one 200-epoch SPT run serves every milestone (constant schedule)
    cross = dict((n, c) for n, c, _ in expand_conditions("cross-task", base, 0))
    assert cross["other-task-data"].spt_task == "pathfinder" and cross["own-data"].spt_task is None
    frozen = dict((n, c) for n, c, _ in expand_conditions("frozen-attention", base, 0))
    assert frozen["spt-frozen"].freeze == ("attention",) and frozen["scratch-trainable"].freeze == ()
    hybrid = {n: c.init_groups for n, c, _ in expand_conditions("hybrid", base, 0)}
    assert hybrid == {"init-all": "all", "init-qk": "qk", "init-qkvo": "qkvo", "init-ffn": "ffn", "scratch": "all"}
    with pytest.raises(ValueError, match="no partner"):
        expand_conditions("cross-task", PRESETS["listops"], 0)
    assert PRESETS["listops"].n_layers == 6 and PRESETS["image"].d_model == 64


def test_lra_toy_sweep_spt_vs_scratch(tmp_path, capsys):
    out = tmp_path / "sw"
    assert cli(["lra", "sweep", "--preset", "toy", "--ablation", "spt-vs-scratch", "--set", "metrics_examples=2",
                "--out", str(out), "--no-progress"]) == 0
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [r["condition"] for r in rows] == ["scratch", "spt"]
    assert rows[1]["spt_epochs"] == TOY.spt_epochs and rows[0]["spt_epochs"] == 0
    assert (out / "results.csv").read_text().startswith("ablation,condition,seed")
    assert (out / "spt-vs-scratch.png").stat().st_size > 1000 and (out / "DONE").exists()
    with pytest.raises(SystemExit):
        cli(["lra", "sweep", "--preset", "toy", "--ablation", "spt-vs-scratch", "--set", "nope=1", "--out", str(tmp_path / "z")])
    assert "unknown config key(s) nope" in capsys.readouterr().err


def test_lra_gpu_check_dry_run(tmp_path):
    from initlab.realdata.lra.gpu_check import assumed_peak, main

    assert main(["--dry-run", "--steps", "1", "--json", str(tmp_path / "g.json")]) == 0
    rows = json.loads((tmp_path / "g.json").read_text())["rows"]
    assert [(r["task"], r["mode"]) for r in rows] == [("listops", "classify"), ("listops", "masked"), ("image", "classify"),
                                                      ("image", "masked")]
    assert all(r["tokens_per_s"] > 0 and r["achieved_tflops"] > 0 for r in rows)
    assert assumed_peak("NVIDIA H200") == ("H200", 989.0) and assumed_peak("NVIDIA H100 PCIe")[1] == 756.0
    assert assumed_peak("Some Future GPU") is None


def test_lra_causal_and_cross_task_pretraining(tmp_path):
    import numpy as np
    from PIL import Image

    res = T.pretrain(replace(TOY, spt_objective="causal", spt_epochs=1), tmp_path / "causal", progress=False)
    assert res["objective"] == "causal" and np.isfinite(res["best_val_loss"])
    # cross-task: an Image-task model self-pretrained on Pathfinder inputs (same 256-level vocabulary)
    base = tmp_path / "pf" / "curv_contour_length_14"
    (base / "metadata").mkdir(parents=True)
    (base / "imgs" / "0").mkdir(parents=True)
    rng = np.random.default_rng(0)
    lines = []
    for i in range(20):
        Image.fromarray(rng.integers(0, 256, (32, 32), dtype=np.uint8), mode="L").save(base / "imgs" / "0" / f"sample_{i}.png")
        lines.append(f"imgs/0 sample_{i}.png {i} {i % 2}\n")
    (base / "metadata" / "0.npy").write_text("".join(lines))
    cfg = replace(TOY, task="image", spt_task="pathfinder", spt_data_dir=str(tmp_path / "pf"), spt_epochs=1, batch_size=8,
                  listops_gen=None)
    res = T.pretrain(cfg, tmp_path / "cross", progress=False)
    assert res["spt_task"] == "pathfinder" and res["mask_ratio"] == 0.5 and np.isfinite(res["best_val_loss"])
    w = T.load_weights(tmp_path / "cross" / "spt_best.safetensors")
    assert w["tok_emb.weight"].shape[0] == 258  # the Image task's vocabulary
    with pytest.raises(ValueError, match="different vocabulary"):
        T.pretrain(replace(TOY, spt_task="image"), tmp_path / "bad", progress=False)
    assert not (tmp_path / "bad").exists()  # rejected before anything is written


def test_lra_reproduce_stage_quick(tmp_path):
    from initlab.realdata.lra.stage import lra_listops

    md = lra_listops(tmp_path / "lra", preset="quick")
    assert md.startswith("## CPU ListOps under the plateau rule") and "| 0 |" in md
    assert lra_listops(tmp_path / "lra", preset="quick").split("\n")[:6] == md.split("\n")[:6]  # finished: not redone
    with pytest.raises(ValueError, match="preset"):
        lra_listops(tmp_path / "x", preset="huge")


def test_lra_sweep_cli_names_bad_seeds(tmp_path, capsys):
    import pytest as _pytest

    from initlab.realdata.lra.command import sweep_main

    with _pytest.raises(SystemExit) as exc:
        sweep_main(["--ablation", "hybrid", "--seeds", "a,b", "--out", str(tmp_path / "s")])
    assert exc.value.code == 2 and "--seeds" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def _pathfinder_folder(root, n: int = 20):
    import numpy as np
    from PIL import Image

    base = root / "curv_contour_length_14"
    (base / "metadata").mkdir(parents=True)
    (base / "imgs" / "0").mkdir(parents=True)
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (32, 32), dtype=np.uint8), mode="L").save(base / "imgs" / "0" / f"sample_{i}.png")
        lines.append(f"imgs/0 sample_{i}.png {i} {i % 2}\n")
    (base / "metadata" / "0.npy").write_text("".join(lines))
    return root


def test_lra_finetune_of_another_seed_sees_the_spt_split_and_another_split_is_refused(tmp_path, capsys):
    # regression: `lra finetune --seed 1 --spt <a seed-0 SPT run>` fine-tuned on Pathfinder examples the SPT run had
    # pretrained on (the 80/10/10 split followed --seed), with exit 0 and no warning
    from safetensors import safe_open

    from initlab.realdata.lra.runtime import load_data
    from initlab.realdata.lra.splits import split_fingerprint

    pf = _pathfinder_folder(tmp_path / "pf")
    cfg = replace(TOY, task="pathfinder", data_dir=str(pf), listops_gen=None, spt_epochs=1, epochs=1, batch_size=8,
                  metrics_examples=0)
    pt = tmp_path / "pt"
    res = T.pretrain(cfg, pt, progress=False)
    with safe_open(str(pt / "spt_best.safetensors"), framework="pt") as fh:
        meta = fh.metadata()
    assert json.loads(meta.pop("initlab_split")) == {"task": "pathfinder", "fingerprint": res["split_fingerprint"]}
    assert meta == {}
    assert res["split_fingerprint"] == split_fingerprint(load_data(replace(cfg, seed=1)))  # the seed moves no example
    common = ["--preset", "toy", "--data-dir", str(pf), "--set", "task=pathfinder", "--set", "listops_gen=null",
              "--set", "batch_size=8", "--set", "metrics_examples=0", "--epochs", "1", "--no-progress", "--spt", str(pt)]
    assert cli(["lra", "finetune", "--seed", "1", "--out", str(tmp_path / "ft1")] + common) == 0
    capsys.readouterr()
    for extra in (["--set", "split_seed=1"], ["--limit", "10"]):  # another split of the same task: refused
        out = tmp_path / f"ft-{extra[-1]}"
        with pytest.raises(SystemExit) as exc:
            cli(["lra", "finetune", "--out", str(out)] + common + extra)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert "pretrained on another split of pathfinder" in err and res["split_fingerprint"] in err
        assert not out.exists()  # refused before anything is written


def test_lra_spt_checkpoint_without_a_split_or_corrupt_is_refused_in_one_line(tmp_path, capsys):
    ft = tmp_path / "ft"
    bare = tmp_path / "bare.safetensors"
    T.save_weights(T.build_model(TOY).backbone.state_dict(), bare)  # no split recorded
    (tmp_path / "empty.txt").write_text("")
    for spt, words in ((bare, "records no data split"), (tmp_path / "empty.txt", "not a readable safetensors file"),
                       (tmp_path / "nowhere.safetensors", "no such file or folder"),
                       (tmp_path, "not the folder of an initlab lra pretrain run")):
        with pytest.raises(SystemExit) as exc:
            cli(["lra", "finetune", "--preset", "toy", "--spt", str(spt), "--out", str(ft), "--no-progress"])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and len(err.strip().splitlines()) == 1 and words in err and "Traceback" not in err
        assert not ft.exists()


def test_lra_dropout_seed_is_per_rank_and_keeps_rank_0():
    import torch

    from initlab.realdata.lra.loop import dropout_seed

    assert dropout_seed(3, 5, 0) == 3005  # the single-process seed, unchanged
    seeds = {dropout_seed(s, e, r) for s in range(3) for e in range(50) for r in range(8)}
    assert len(seeds) == 3 * 50 * 8 and all(0 <= x < 2**32 for x in seeds)  # distinct, and inside torch's 32 bits
    masks = []
    for rank in (0, 1):
        torch.manual_seed(dropout_seed(0, 0, rank))
        masks.append(torch.nn.functional.dropout(torch.ones(256), 0.3))
    assert not torch.equal(masks[0], masks[1])
