"""A sweep's relative paths are the client's: ``--data-dir data`` is made absolute before the cells go to Dask
workers, whose working directory is their own (a worker read its own ``data`` and trained on it), and the saved
config and ``inputs.json`` record the absolute folder. The cluster is a LocalCluster on loopback (it binds its own
port) whose worker process starts in another directory than the client's."""

from __future__ import annotations

import os

import pytest

from initlab.config import derive
from initlab.realdata.lra.config import PRESETS
TOY = PRESETS["toy"]
from initlab.realdata.lra.listops import write_listops_tsv
from initlab.realdata.lra.sweep import run_sweep
from initlab.textio import read_json


def test_a_relative_data_dir_is_the_clients_on_a_dask_worker_in_another_directory(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    worker_dir, client_dir = tmp_path / "worker", tmp_path / "client"
    worker_dir.mkdir()
    write_listops_tsv(client_dir / "data", TOY.listops_gen, overwrite=True)  # only the client has data/
    cfg = derive(TOY, data_dir="data")
    monkeypatch.chdir(worker_dir)  # the worker process starts here and stays here
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  host="127.0.0.1", protocol="tcp://") as lc:
        monkeypatch.chdir(client_dir)
        with distributed.Client(lc.scheduler_address) as client:
            assert client.run(os.getcwd) == {a: str(worker_dir) for a in client.scheduler_info()["workers"]}
        rows = run_sweep("spt-vs-scratch", cfg, "sw", seeds=(0,), progress=False, figure=False,
                         scheduler=lc.scheduler_address)
    assert len(rows) == 2 and not any(r["failed"] for r in rows)
    saved = read_json(client_dir / "sw" / "config.json")["config"]
    assert saved["data_dir"] == str(client_dir / "data")
    inputs = read_json(client_dir / "sw" / "inputs.json")
    assert inputs["data listops"]["path"] == str((client_dir / "data").resolve())
