"""Tests for the shared config and run-folder helpers (initlab.config, initlab.runs)."""

from __future__ import annotations

import dataclasses
import json
from typing import Literal, Optional

import pytest

from initlab.config import derive, from_dict, load_config, to_dict
from initlab.runs import RunDir, RunExistsError, atomic_write_csv, atomic_write_json


@dataclasses.dataclass(frozen=True)
class Inner:
    w: int = 3


@dataclasses.dataclass(frozen=True)
class Cfg:
    lr: float = 1e-3
    epochs: int = 2
    name: str = "base"
    seeds: tuple[int, ...] = (0, 1)
    mode: Literal["a", "b"] = "a"
    note: Optional[str] = None
    inner: Inner = Inner()


def test_from_dict_roundtrip_and_int_to_float():
    cfg = from_dict(Cfg, {"lr": 1, "seeds": [4, 5], "inner": {"w": 7}})
    assert cfg.lr == 1.0 and isinstance(cfg.lr, float)
    assert cfg.seeds == (4, 5)
    assert cfg.inner == Inner(7)
    assert from_dict(Cfg, to_dict(cfg)) == cfg


def test_unknown_key_is_named():
    with pytest.raises(ValueError, match="epochz"):
        from_dict(Cfg, {"epochz": 3})
    with pytest.raises(ValueError, match="inner.q"):
        from_dict(Cfg, {"inner": {"q": 1}})


@pytest.mark.parametrize(
    "key,value",
    [("epochs", 2.5), ("epochs", True), ("lr", "fast"), ("seeds", [1, "x"]), ("name", 3), ("note", 4)],
)
def test_wrong_type_is_named(key, value):
    with pytest.raises(TypeError, match=key):
        from_dict(Cfg, {key: value})


def test_literal_rejects_other_values():
    with pytest.raises(ValueError, match="mode"):
        from_dict(Cfg, {"mode": "c"})


def test_derive_is_small_diff_and_frozen():
    base = Cfg()
    p = derive(base, epochs=9)
    assert p.epochs == 9 and p.lr == base.lr and base.epochs == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.epochs = 1  # type: ignore[misc]
    with pytest.raises(ValueError):
        derive(base, nope=1)


def test_config_json_roundtrip(tmp_path):
    run = RunDir(tmp_path / "r")
    path = run.write_config(Cfg(epochs=5))
    assert json.loads(path.read_text())["config"]["epochs"] == 5
    assert load_config(Cfg, path) == Cfg(epochs=5)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        load_config(Cfg, bad)


def test_atomic_json_handles_nonfinite_and_leaves_no_tmp(tmp_path):
    p = atomic_write_json(tmp_path / "x.json", {"a": float("nan"), "b": [float("inf"), 1.0]})
    assert json.loads(p.read_text()) == {"a": "nan", "b": ["inf", 1.0]}
    assert [q.name for q in tmp_path.iterdir()] == ["x.json"]


def test_atomic_csv(tmp_path):
    p = atomic_write_csv(tmp_path / "x.csv", [{"a": 1, "b": 2}, {"a": 3, "c": 4}])
    assert p.read_text().splitlines() == ["a,b,c", "1,2,", "3,,4"]


def test_rundir_refuses_finished_run_and_resumes_cells(tmp_path):
    root = tmp_path / "run"
    run = RunDir(root)
    run.save_cell("cond=a seed=0", {"acc": 0.5})
    assert RunDir(root).has_cell("cond=a seed=0")  # resume keeps cells
    assert RunDir(root).load_cell("cond=a seed=0") == {"acc": 0.5}
    run.mark_done()
    with pytest.raises(RunExistsError, match="--overwrite"):
        RunDir(root)
    fresh = RunDir(root, overwrite=True)
    assert not fresh.done and not fresh.has_cell("cond=a seed=0")
    assert len(list(tmp_path.glob("run.old-*"))) == 1  # moved aside, not deleted


def test_rundir_without_resume_refuses_nonempty(tmp_path):
    root = tmp_path / "run"
    RunDir(root).save_cell("c", {})
    with pytest.raises(RunExistsError):
        RunDir(root, resume=False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        RunDir(tmp_path / "file")


def test_parse_overrides_reads_json_values_and_names_the_flag():
    from initlab.config import parse_overrides

    got = parse_overrides(["epochs=3", "lr=1e-4", 'seeds=[1, 2]', "name=run a", "flag=true"])
    assert got == {"epochs": 3, "lr": 1e-4, "seeds": [1, 2], "name": "run a", "flag": True}
    assert derive(Cfg(), **parse_overrides(["epochs=4"])).epochs == 4
    with pytest.raises(ValueError, match="--set 'epochs'"):
        parse_overrides(["epochs"])


def test_config_and_records_with_a_bom_read_the_same(tmp_path):
    """A config JSON saved by a Windows editor (UTF-8 with a byte-order mark) loads; json.loads alone refuses it."""
    from initlab.runs import check_same_record

    run = RunDir(tmp_path / "r")
    path = run.write_config(Cfg(epochs=5))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load_config(Cfg, path) == Cfg(epochs=5)
    check_same_record(path, to_dict(Cfg(epochs=5)))  # same config, not "unreadable"
    run.save_cell("c", {"x": 1}, key={"k": 1})
    for p in (run.root / "cells").iterdir():
        p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    assert run.has_cell("c", key={"k": 1}) and run.load_cell("c", key={"k": 1}) == {"x": 1}
    path.write_bytes(b'{"config": {"name": "caf\xe9"}, "config_class": "Cfg"}')  # latin-1, not UTF-8
    with pytest.raises(ValueError, match=r"config.json:1: not UTF-8 text"):
        load_config(Cfg, path)


def test_check_same_record_refuses_other_content(tmp_path):
    from initlab.runs import check_same_record

    check_same_record(tmp_path / "missing.json", {"a": 1})  # nothing recorded yet: fine
    run = RunDir(tmp_path / "r")
    run.write_config(Cfg(epochs=5))
    check_same_record(run.root / "config.json", to_dict(Cfg(epochs=5)))  # same config: fine
    with pytest.raises(RunExistsError, match="differs in: epochs"):
        check_same_record(run.root / "config.json", to_dict(Cfg(epochs=6)))


def test_torch_threads_sets_and_restores_even_on_error():
    import torch

    from initlab.runs import torch_threads

    before = torch.get_num_threads()
    with pytest.raises(RuntimeError):
        with torch_threads(1):
            assert torch.get_num_threads() == 1
            raise RuntimeError("boom")
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_atomic_writes_keep_the_permissions_of_a_normal_write(tmp_path, umask):
    # a plain open(..., "w") gives 0o666 & ~umask; mkstemp alone gave 0o600 whatever the umask
    import os
    import stat

    old = os.umask(umask)
    try:
        with open(tmp_path / "plain.txt", "w") as fh:
            fh.write("x")
        atomic_write_json(tmp_path / "atomic.json", {"a": 1})
        RunDir(tmp_path / "run").mark_done()
    finally:
        os.umask(old)
    want = stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode)
    assert want == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "atomic.json").stat().st_mode) == want
    assert stat.S_IMODE((tmp_path / "run" / "DONE").stat().st_mode) == want


def test_atomic_write_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    import os
    import stat

    p = tmp_path / "x.json"
    p.write_text("{}")
    os.chmod(p, 0o640)
    atomic_write_json(p, {"b": 2})
    assert stat.S_IMODE(p.stat().st_mode) == 0o640 and json.loads(p.read_text()) == {"b": 2}


def test_config_guard_refuses_a_changed_config_and_changed_cells(tmp_path):
    from initlab.runs import ConfigMismatchError

    root = tmp_path / "run"
    run = RunDir(root, config=Cfg(epochs=2))
    run.save_cell("seed=0", {"acc": 0.5}, key={"epochs": 2, "seed": 0})
    # an interrupted run resumed under another config: refused, nothing reused or rewritten
    with pytest.raises(ConfigMismatchError, match="differs in: epochs"):
        RunDir(root, config=Cfg(epochs=6))
    assert json.loads((root / "config.json").read_text())["config"]["epochs"] == 2
    same = RunDir(root, config=Cfg(epochs=2))
    assert same.has_cell("seed=0", key={"epochs": 2, "seed": 0})
    with pytest.raises(ConfigMismatchError, match="cell 'seed=0'.*differs in: epochs"):
        same.has_cell("seed=0", key={"epochs": 6, "seed": 0})
    with pytest.raises(ConfigMismatchError):
        same.load_cell("seed=0", key={"epochs": 6, "seed": 0})
    # one exception type that callers of the older guards still catch
    assert issubclass(ConfigMismatchError, RunExistsError) and issubclass(ConfigMismatchError, ValueError)


def test_check_finite_names_step_and_checkpoint():
    import torch

    from initlab.runs import NonFiniteError, check_finite

    assert check_finite(torch.tensor(1.5), where="w", step=3) == 1.5
    with pytest.raises(NonFiniteError, match=r"w: non-finite gradient \(nan\) at step 7.*Last finite checkpoint: c.pt"):
        check_finite(float("nan"), where="w", step=7, what="gradient", last_checkpoint="c.pt")
    with pytest.raises(FloatingPointError, match="none written"):
        check_finite(torch.tensor(float("inf")), where="w", step=0)


def test_loss_guard_divergence_rule():
    import pickle

    import torch

    from initlab.runs import DIVERGENCE_FACTOR, DivergenceError, LossGuard, NonFiniteError

    g = LossGuard("w")
    assert g.check(torch.tensor(3.0), step=0) == 3.0 and g.early == [3.0]  # the first step's loss is the early value
    assert g.check(3.0 * DIVERGENCE_FACTOR, step=1) == 3.0 * DIVERGENCE_FACTOR  # exactly at the limit: goes on
    with pytest.raises(DivergenceError, match=r"w: loss diverged \(3\.001e\+04 at step 2, more than 10000 times its "
                                              r"early value 3\); training stopped\. Last finite checkpoint: c\.pt") as info:
        g.check(3.001e4, step=2, last_checkpoint="c.pt")
    err = info.value
    assert isinstance(err, NonFiniteError) and (err.what, err.step, err.early, err.factor) == ("loss", 2, 3.0, 1e4)
    with pytest.raises(NonFiniteError, match=r"non-finite loss \(nan\) at step 3"):
        g.check(float("nan"), step=3)
    floored = LossGuard("w")
    floored.check(1e-3, step=0)  # a run starting near 0 is compared with the floor (1.0), not with 1e-3
    assert floored.early == [1.0] and floored.check(9000.0, step=1) == 9000.0
    members = LossGuard("ens")  # one early value per element (ensemble members)
    members.check(torch.tensor([2.0, 4.0]), step=0)
    members.check(torch.tensor([1.5e4, 3e4]), step=1)  # 7500 x each: goes on (3e4 would stop member 0, not 1)
    with pytest.raises(DivergenceError, match="more than 10000 times its early value 2"):
        members.check(torch.tensor([2.1e4, 1.0]), step=2)
    with pytest.raises(ValueError, match="got 3 losses at step 3, 2 at its first step"):
        members.check(torch.tensor([1.0, 1.0, 1.0]), step=3)
    off = LossGuard("w", factor=None)  # finiteness only
    off.check(1.0, step=0)
    assert off.check(1e30, step=1) == 1e30
    for bad in (1.0, float("inf")):
        with pytest.raises(ValueError, match="factor"):
            LossGuard("w", factor=bad)
    with pytest.raises(ValueError, match="floor"):
        LossGuard("w", floor=0.0)
    for e in (err, NonFiniteError("w", 4, "gradient", float("nan"), None)):  # both pickle (worker processes)
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and str(back) == str(e) and back.step == e.step
        moved = e.with_checkpoint("d.pt")
        assert type(moved) is type(e) and moved.last_checkpoint == "d.pt" and "Last finite checkpoint: d.pt" in str(moved)


def test_check_output_path_is_one_rule_for_files_and_folders(tmp_path):
    from initlab.runs import OutputPathError, check_output_path

    (tmp_path / "f.json").write_text("{}")
    assert check_output_path(tmp_path / "new.json", flag="--json", kind="file") == tmp_path / "new.json"
    with pytest.raises(RunExistsError, match="--json .*file exists.*--overwrite"):
        check_output_path(tmp_path / "f.json", flag="--json", kind="file")
    check_output_path(tmp_path / "f.json", flag="--json", kind="file", overwrite=True)
    with pytest.raises(OutputPathError, match="does not exist"):  # no folders are created for a file
        check_output_path(tmp_path / "nope" / "x.json", flag="--json", kind="file")
    assert not (tmp_path / "nope").exists()
    with pytest.raises(OutputPathError, match="is a folder"):
        check_output_path(tmp_path, flag="--json", kind="file")
    with pytest.raises(OutputPathError, match="is a file"):
        check_output_path(tmp_path / "f.json", flag="--out", kind="folder")
    with pytest.raises(OutputPathError, match="is a file"):
        check_output_path(tmp_path / "f.json" / "sub", flag="--out", kind="folder")
    RunDir(tmp_path / "done").mark_done()
    with pytest.raises(RunExistsError, match="finished run"):
        check_output_path(tmp_path / "done", flag="--out", kind="folder")
    check_output_path(tmp_path / "done", flag="--out", kind="folder", overwrite=True)
    check_output_path(tmp_path / "fresh" / "deeper", flag="--out", kind="folder")


def test_a_later_field_is_recorded_only_off_its_default(tmp_path):
    """A field added after runs were saved: at its default the record (and so a saved run's config guard) is what it
    was before the field existed; off it, the field is recorded and the guard sees the change."""
    from initlab.config import later_field
    from initlab.runs import ConfigMismatchError, RunDir

    @dataclasses.dataclass(frozen=True)
    class Later(Cfg):
        engine: Literal["dense", "fused"] = later_field("dense")

    assert to_dict(Later()) == to_dict(Cfg())  # the record of a run made before the field existed
    fused = derive(Later(), engine="fused")
    assert to_dict(fused) == {**to_dict(Cfg()), "engine": "fused"}
    assert from_dict(Later, to_dict(fused)) == fused and from_dict(Later, to_dict(Cfg())) == Later()
    assert derive(fused, engine="dense") == Later()
    with pytest.raises(ValueError, match="engine"):
        derive(Later(), engine="sparse")
    RunDir(tmp_path / "old", config=Cfg())
    RunDir(tmp_path / "old", resume=True, config=Later())  # resumes
    with pytest.raises(ConfigMismatchError, match="engine"):
        RunDir(tmp_path / "old", resume=True, config=fused)
