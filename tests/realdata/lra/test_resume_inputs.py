"""A resumed or reused LRA run proves that its inputs are the ones it started on: the data files and the SPT
checkpoint it fine-tunes from are fingerprinted (``inputs.json``) and compared; a change is refused with
ConfigMismatchError naming the file, before anything is written."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from initlab.realdata.lra import train as T
from initlab.realdata.lra.config import PRESETS
TOY = PRESETS["toy"]
from initlab.realdata.lra.listops import write_listops_tsv
from initlab.runs import ConfigMismatchError


@pytest.fixture
def listops_dir(tmp_path):
    d = tmp_path / "listops"
    write_listops_tsv(d, TOY.listops_gen)
    return d


def _edit_a_label(path):
    head, first, *rest = path.read_text().splitlines()
    src, target = first.rsplit("\t", 1)
    first = f"{src}\t{(int(target) + 1) % 10}"
    path.write_text("\n".join([head, first, *rest]) + "\n")


def _cfg(listops_dir, **kw):
    return replace(TOY, data_dir=str(listops_dir), listops_gen=None, spt_epochs=1, epochs=1, **kw)


def test_an_interrupted_pretrain_refuses_changed_data_files(tmp_path, listops_dir):
    out = tmp_path / "pt"
    T.pretrain(_cfg(listops_dir), out, progress=False, verbose=False)
    (out / "DONE").unlink()  # as if interrupted before it finished
    _edit_a_label(listops_dir / "basic_train.tsv")
    before = sorted(p.name for p in out.rglob("*"))
    with pytest.raises(ConfigMismatchError, match=r"other inputs: .*basic_train\.tsv"):
        T.pretrain(_cfg(listops_dir), out, progress=False, verbose=False)
    assert sorted(p.name for p in out.rglob("*")) == before and not (out / "DONE").exists()


def test_a_reused_finished_run_refuses_changed_data_files(tmp_path, listops_dir):
    out = tmp_path / "pt"
    T.pretrain(_cfg(listops_dir), out, progress=False, verbose=False)
    assert T.pretrain(_cfg(listops_dir), out, progress=False, verbose=False, reuse_finished=True)
    _edit_a_label(listops_dir / "basic_val.tsv")
    with pytest.raises(ConfigMismatchError, match=r"basic_val\.tsv"):
        T.pretrain(_cfg(listops_dir), out, progress=False, verbose=False, reuse_finished=True)


def test_a_copied_or_touched_data_file_with_the_same_bytes_resumes(tmp_path, listops_dir):
    out = tmp_path / "pt"
    T.pretrain(_cfg(listops_dir), out, progress=False, verbose=False)
    (out / "DONE").unlink()
    p = listops_dir / "basic_test.tsv"
    p.write_bytes(p.read_bytes())  # a new modification time, the same content
    T.pretrain(_cfg(listops_dir), out, progress=False, verbose=False)
    assert (out / "DONE").exists()


def test_a_finetune_refuses_another_spt_checkpoint_on_resume(tmp_path, listops_dir):
    a, b = tmp_path / "pt_a", tmp_path / "pt_b"
    T.pretrain(_cfg(listops_dir), a, progress=False, verbose=False)
    T.pretrain(_cfg(listops_dir, seed=1), b, progress=False, verbose=False)
    ckpt = tmp_path / "spt.safetensors"
    shutil.copy(a / "spt_best.safetensors", ckpt)
    ft = tmp_path / "ft"
    cfg = _cfg(listops_dir, init="spt")
    T.finetune(cfg, ft, ckpt, progress=False, verbose=False)
    (ft / "DONE").unlink()
    shutil.copy(b / "spt_best.safetensors", ckpt)  # same split, other weights
    with pytest.raises(ConfigMismatchError, match=r"spt_checkpoint .*spt\.safetensors"):
        T.finetune(cfg, ft, ckpt, progress=False, verbose=False)
