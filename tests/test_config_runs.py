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
