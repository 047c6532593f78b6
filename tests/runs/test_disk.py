"""A full or read-only disk: one line naming the path and the cause, exit 2, no traceback, nothing half-written; an
output path is checked writable (a probe file) before any work starts. The disk is simulated by monkeypatching the
os/tempfile functions (the tests run as root, where a chmod-ed folder stays writable)."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest

from initlab import runs
from initlab.app.testing import run_cli as _run, one_line


def _line(err: str) -> str:
    return one_line(err, skip=("UserWarning", "RuntimeWarning"))


def _read_only(monkeypatch):
    """Every new file or folder fails with EROFS, as on a read-only mount."""
    def refuse(*a, **k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), k.get("dir") or (a[0] if a else None))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    real_mkdir = os.mkdir

    def mkdir(path, *a, **k):
        if Path(path).exists():
            return real_mkdir(path, *a, **k)
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr(os, "mkdir", mkdir)


def _disk_full(monkeypatch):
    """Writes fail with ENOSPC when flushed to disk (os.fsync), without a file name, as the kernel reports them."""
    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)


@pytest.fixture
def tiny_model(tmp_path):
    from initlab.mlmhead import tiny_masked_lm, tiny_tokenizer

    tok = tiny_tokenizer(tmp_path / "m")
    tiny_masked_lm("bert", len(tok), hidden=16, layers=1).save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    return tmp_path / "m"


def test_lra_pretrain_on_a_read_only_disk_is_refused_before_any_work(tmp_path, monkeypatch):
    import initlab.realdata.lra.train as T

    called = []
    monkeypatch.setattr(T, "pretrain", lambda *a, **k: called.append(1))
    _read_only(monkeypatch)
    out = tmp_path / "runs" / "pt"
    rc, _, err = _run(["lra", "pretrain", "--preset", "toy", "--out", str(out), "--no-progress"])
    line = _line(err)
    assert rc == 2 and str(tmp_path) in line and "read-only file system" in line
    assert not called and not out.exists()


def test_lra_pretrain_when_the_disk_fills_mid_run_names_the_file(tmp_path, monkeypatch):
    _disk_full(monkeypatch)
    out = tmp_path / "pt"
    rc, _, err = _run(["lra", "pretrain", "--preset", "toy", "--spt-epochs", "1", "--out", str(out), "--no-progress"])
    line = _line(err)
    assert rc == 2 and str(out) in line and "no space left on device" in line.lower()
    assert not (out / "DONE").exists() and not list(out.rglob("*.tmp"))


def test_diagnose_json_on_a_full_disk(tmp_path, monkeypatch):
    ids = tmp_path / "t.txt"
    ids.write_text("alpha beta gamma\nbeta gamma delta\ngamma delta eps\n")
    _disk_full(monkeypatch)
    out = tmp_path / "d.json"
    rc, _, err = _run(["diagnose", "initlab:spt", "--data", str(ids), "--batch", "3", "--json", str(out)])
    line = _line(err)
    assert rc == 2 and "d." in line and "no space left on device" in line.lower()
    assert not out.exists() and not list(tmp_path.glob(".d.*"))


def test_diagnose_json_in_a_read_only_folder_is_refused_before_measuring(tmp_path, monkeypatch):
    import initlab.diagnose as D

    ids = tmp_path / "t.txt"
    ids.write_text("alpha beta gamma\nbeta gamma delta\ngamma delta eps\n")
    monkeypatch.setattr(D, "diagnose", lambda *a, **k: pytest.fail("measured before checking the output"))
    _read_only(monkeypatch)
    rc, _, err = _run(["diagnose", "initlab:spt", "--data", str(ids), "--json", str(tmp_path / "d.json")])
    assert rc == 2 and "read-only file system" in _line(err)


def test_mlmhead_rescale_read_only_and_full(tiny_model, tmp_path, monkeypatch):
    import transformers

    with monkeypatch.context() as m:
        _read_only(m)
        rc, _, err = _run(["mlmhead", "rescale", str(tiny_model), "--k", "2", "--out", str(tmp_path / "r")])
        assert rc == 2 and "read-only file system" in _line(err) and not (tmp_path / "r").exists()

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", full)
    rc, _, err = _run(["mlmhead", "rescale", str(tiny_model), "--k", "2", "--out", str(tmp_path / "r")])
    line = _line(err)
    assert rc == 2 and str(tmp_path / "r") in line and "no space left on device" in line.lower()
    assert not (tmp_path / "r").exists() and not list(tmp_path.glob(".r.tmp-*"))


def test_atomic_write_names_the_path_and_cause(tmp_path, monkeypatch):
    _disk_full(monkeypatch)
    with pytest.raises(runs.WriteError, match=r"x\.json: cannot write \(no space left on device\)"):
        runs.atomic_write_json(tmp_path / "x.json", {"a": 1})
    assert not list(tmp_path.iterdir())


def test_check_output_path_probes_the_nearest_existing_folder(tmp_path, monkeypatch):
    runs.check_output_path(tmp_path / "a" / "b", flag="--out", kind="folder")  # writable: no error, nothing left
    assert not list(tmp_path.iterdir())
    _read_only(monkeypatch)
    with pytest.raises(runs.WriteError, match=r"--out .*a/b: cannot write in .* \(read-only file system\)"):
        runs.check_output_path(tmp_path / "a" / "b", flag="--out", kind="folder")
    with pytest.raises(runs.WriteError, match="read-only file system"):
        runs.check_output_path(tmp_path / "r.json", flag="--json", kind="file")
