"""A wrong Dask address (``--scheduler``) is one line within the stated timeout, exit 2, and nothing created: an HTTP
port (the dashboard's kind) hung with no output, a closed port ended in a traceback after 30 s, a scheduler without
workers hung showing 0 units done, and all had made the run folder first. The HTTP server is bound by the test itself on port 0 (no race); the closed port is a socket
bound but not listening (kept open, so the port cannot be reused meanwhile)."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading

import pytest

from initlab.executor import cluster
from initlab.app.testing import run_cli as _run


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the server's own request log is not the command's output
        pass


@contextlib.contextmanager
def http_port():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Quiet)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def closed_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))  # bound, never listening: a connection is refused
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


@pytest.fixture(autouse=True)
def short_timeout(monkeypatch):
    monkeypatch.setattr(cluster, "SCHEDULER_TIMEOUT", 4.0, raising=False)  # the stated timeout (10 s by default), shortened


COMMANDS = {
    "synthetic spt": ["synthetic", "spt", "--preset", "quick", "--no-progress"],
    "synthetic splade": ["synthetic", "splade", "--preset", "quick", "--no-progress"],
    "reproduce": ["reproduce", "--preset", "quick", "--only", "theory"],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_http_port_is_named_as_not_the_scheduler_and_nothing_is_created(name, tmp_path):
    out = tmp_path / "run"
    with http_port() as port:
        rc, _, err = _run(COMMANDS[name] + ["--scheduler", f"tcp://127.0.0.1:{port}", "--out", str(out)])
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert f"no Dask scheduler answered at tcp://127.0.0.1:{port}" in lines[0] and "dashboard" in lines[0]
    assert not out.exists() and not list(tmp_path.iterdir())


def test_a_closed_port_is_one_line_and_nothing_is_created(tmp_path):
    out = tmp_path / "run"
    with closed_port() as port:
        rc, _, err = _run(["synthetic", "spt", "--preset", "quick", "--no-progress", "--scheduler",
                           f"tcp://127.0.0.1:{port}", "--out", str(out)])
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert f"no Dask scheduler answered at tcp://127.0.0.1:{port}" in lines[0] and "refused" in lines[0]
    assert not out.exists()


def test_library_sweeps_refuse_a_wrong_address_before_making_their_folder(tmp_path):
    from initlab.realdata.lra.config import PRESETS
    TOY = PRESETS["toy"]
    from initlab.realdata.lra.sweep import run_sweep

    with http_port() as port:
        with pytest.raises(ValueError, match="no Dask scheduler answered"):
            run_sweep("spt-epochs", TOY, tmp_path / "sw", progress=False, scheduler=f"tcp://127.0.0.1:{port}")
    assert not (tmp_path / "sw").exists()


def test_a_real_scheduler_with_a_worker_answers():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None, host="127.0.0.1",
                                  protocol="tcp://") as lc:
        cluster.probe_scheduler(lc.scheduler_address)  # no error
    cluster.probe_scheduler("local:2")  # an in-process cluster: nothing to contact


@contextlib.contextmanager
def scheduler_without_workers():
    """A Dask scheduler on loopback (it binds its own port) that no worker ever joins."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None, host="127.0.0.1",
                                  protocol="tcp://") as lc:
        yield lc.scheduler_address


NO_WORKER_COMMANDS = {**COMMANDS, "lra sweep": ["lra", "sweep", "--preset", "toy", "--ablation", "spt-epochs",
                                                "--no-progress"]}


@pytest.mark.parametrize("name", sorted(NO_WORKER_COMMANDS))
def test_a_scheduler_without_workers_is_one_line_and_nothing_is_created(name, tmp_path):
    """Dask holds a cell with no worker to run it forever: the sweep printed its estimate, made its folder and
    showed 0 units done for as long as it was left running."""
    out = tmp_path / "run"
    with scheduler_without_workers() as address:
        rc, std, err = _run(NO_WORKER_COMMANDS[name] + ["--scheduler", address, "--out", str(out)])
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert f"the Dask scheduler at {address} has no workers" in lines[0] and "dask worker" in lines[0]
    assert not out.exists() and not list(tmp_path.iterdir()) and "expected" not in std


def test_library_sweeps_refuse_a_scheduler_without_workers_before_making_their_folder(tmp_path):
    from initlab.realdata.lra.config import PRESETS
    TOY = PRESETS["toy"]
    from initlab.realdata.lra.sweep import run_sweep

    with scheduler_without_workers() as address:
        with pytest.raises(cluster.NoWorkersError, match="has no workers"):
            run_sweep("spt-epochs", TOY, tmp_path / "sw", progress=False, scheduler=address)
    assert not (tmp_path / "sw").exists()

