"""A live run owns its folder (initlab.runs.run_lock): a second run into it, started while the first is alive, is
refused in one line (exit 2) by every resumable command, with --overwrite or not, and nothing is moved aside; a lock
whose run died is taken over by the stated rule. Two processes, no timing assumption: the holder process says it
holds the lock on its stdout and releases it when its stdin gets a line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from initlab import runs
from initlab.app import cli
from initlab.app.testing import run_cli as _run, one_line as _one_line

HOLDER = ("import sys\nfrom initlab.runs import run_lock\nwith run_lock(sys.argv[1]):\n"
          "    print('locked', flush=True)\n    sys.stdin.readline()\n")
FIX = Path(__file__).parents[1] / "realdata" / "fixtures" / "splade"
TRIPLES = str(FIX / "msmarco" / "triples.train.small.tsv")


@contextlib.contextmanager
def held_by_another_process(folder: Path):
    """A second process holding ``folder``'s lock for the block (handshake over its stdin/stdout)."""
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "locked"
        yield p.pid
    finally:
        p.stdin.write("\n")
        p.stdin.flush()
        assert p.wait(timeout=120) == 0


def test_lock_records_pid_host_start_and_is_removed_on_release(tmp_path):
    folder = tmp_path / "run"
    with runs.run_lock(folder) as lock:
        rec = json.loads(runs.lock_path(folder).read_text())
        assert rec["pid"] == os.getpid() and rec["host"] == socket.gethostname() and rec["started"]
        assert lock.path == tmp_path / ".run.initlab-lock"
        with runs.run_lock(folder):  # the same process may take it again (a stage inside initlab reproduce)
            pass
        assert runs.lock_path(folder).exists()
    assert not runs.lock_path(folder).exists() and not folder.exists()


def test_a_second_process_is_refused_while_the_first_is_alive(tmp_path):
    folder = tmp_path / "run"
    with held_by_another_process(folder) as pid:
        with pytest.raises(runs.RunLockedError, match=rf"in use by a live run \(pid {pid} on host {socket.gethostname()}"):
            runs.RunLock(folder).acquire()
        with pytest.raises(runs.RunLockedError):
            runs.check_unlocked(folder)
    with runs.run_lock(folder):  # released when the holder ended
        pass


def test_lra_pretrain_into_a_live_run_folder_is_refused_with_or_without_overwrite(tmp_path):
    """deepinv#525: both runs exited 0 and the folder ended with one run's config and the other's results."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text('{"config_class": "LRAConfig", "config": {}}')
    (run / "DONE").write_text("x\n")
    before = sorted(p.name for p in run.iterdir())
    with held_by_another_process(run) as pid:
        for extra in ([], ["--overwrite"]):
            rc, _, err = _run(["lra", "pretrain", "--preset", "toy", "--out", str(run), "--no-progress", *extra])
            line = _one_line(err)
            assert rc == 2 and "in use by a live run" in line and f"pid {pid}" in line
    assert sorted(p.name for p in run.iterdir()) == before
    assert not list(tmp_path.glob("run.old-*"))  # --overwrite moved nothing aside


def test_overwrite_never_moves_aside_a_folder_a_live_run_holds(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "DONE").write_text("x\n")
    with held_by_another_process(run):
        with pytest.raises(runs.RunLockedError):
            runs.RunDir(run, overwrite=True)
    assert (run / "DONE").exists() and not list(tmp_path.glob("run.old-*"))


def test_the_same_command_started_twice_runs_once(tmp_path):
    """The second `lra pretrain` into the folder of a first one that is running (held inside its run, between
    reading its arguments and training) is refused; the first then finishes normally."""
    script = ("import sys\nimport initlab.realdata.lra.train as T\nreal = T.open_run\n"
              "def hooked(*a, **k):\n    print('started', flush=True)\n    sys.stdin.readline()\n    return real(*a, **k)\n"
              "T.open_run = hooked\nfrom initlab.app import cli\nsys.exit(cli.main(sys.argv[1:]))\n")
    run = tmp_path / "run"
    argv = ["lra", "pretrain", "--preset", "toy", "--spt-epochs", "1", "--out", str(run), "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen([sys.executable, "-c", script, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        for line in first.stdout:
            if line.strip() == "started":
                break
        rc, _, err = _run(argv)
        assert rc == 2 and "in use by a live run" in _one_line(err) and f"pid {first.pid}" in err
    finally:
        first.stdin.write("\n")
        first.stdin.flush()
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err
    assert (run / "DONE").exists() and not runs.lock_path(run).exists()


def _dead_pid() -> int:
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    return int(p.stdout)


def _write_lock(folder: Path, **rec) -> Path:
    lp = runs.lock_path(folder)
    lp.parent.mkdir(parents=True, exist_ok=True)
    lp.write_text(json.dumps({"host": socket.gethostname(), "started": "2026-01-01T00:00:00", **rec}))
    return lp


def test_a_lock_whose_process_is_gone_is_taken_over_with_a_warning(tmp_path):
    pid = _dead_pid()
    _write_lock(tmp_path / "run", pid=pid, process_start="1")
    with pytest.warns(RuntimeWarning, match=rf"took over the lock of an earlier run \(pid {pid}.*its process {pid} is gone"):
        with runs.run_lock(tmp_path / "run"):
            assert json.loads(runs.lock_path(tmp_path / "run").read_text())["pid"] == os.getpid()


@pytest.mark.parametrize("how", ["SIGKILL, not yet reaped", "SIGTERM", "SIGKILL"])
def test_a_lock_whose_process_was_killed_is_taken_over(tmp_path, how):
    """A run killed by ``timeout`` (SIGTERM) or ``kill -9`` leaves its lock behind; the next run takes it over. A
    killed process its parent has not reaped yet (a zombie) answers ``kill(pid, 0)`` and kept the lock alive."""
    folder = tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "locked"
        p.send_signal(signal.SIGTERM if how == "SIGTERM" else signal.SIGKILL)
        if how.endswith("not yet reaped"):
            os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)  # it has exited; left a zombie, as a busy parent would
        else:
            p.wait()
        assert runs.lock_path(folder).exists()  # a killed run cannot remove its lock
        with pytest.warns(RuntimeWarning, match=rf"pid {p.pid} .*stale: its process {p.pid} is gone"):
            with runs.run_lock(folder):
                assert json.loads(runs.lock_path(folder).read_text())["pid"] == os.getpid()
    finally:
        p.kill()
        p.wait()


def test_a_take_over_cut_short_by_its_processs_death_does_not_block_the_next_run(tmp_path):
    """A process killed while taking over a stale lock left its ``.break`` file, which refused every later run."""
    lp = _write_lock(tmp_path / "run", pid=_dead_pid(), process_start="1")
    breaker = lp.with_name(lp.name + ".break")
    breaker.write_text(json.dumps({"pid": _dead_pid(), "host": socket.gethostname(), "started": "2026-01-01T00:00:00"}))
    with pytest.warns(RuntimeWarning, match="took over the lock of an earlier run"):
        with runs.run_lock(tmp_path / "run"):
            pass
    assert not breaker.exists() and not lp.exists()


def test_a_live_take_over_is_still_refused(tmp_path):
    lp = _write_lock(tmp_path / "run", pid=_dead_pid(), process_start="1")
    parent = os.getppid()
    lp.with_name(lp.name + ".break").write_text(json.dumps(
        {"pid": parent, "host": socket.gethostname(), "process_start": runs.process_start_time(parent)}))
    with pytest.raises(runs.RunLockedError, match="another run is taking over its stale lock now"):
        runs.RunLock(tmp_path / "run").acquire()


def test_a_reused_pid_does_not_keep_a_lock_alive(tmp_path):
    parent = os.getppid()  # alive, on this host, but not the process that wrote the lock (another start time)
    _write_lock(tmp_path / "run", pid=parent, process_start="not-its-start-time")
    with pytest.warns(RuntimeWarning, match="now belongs to another process"):
        with runs.run_lock(tmp_path / "run"):
            pass
    _write_lock(tmp_path / "run", pid=parent, process_start=runs.process_start_time(parent))
    with pytest.raises(runs.RunLockedError):
        runs.RunLock(tmp_path / "run").acquire()


def test_a_lock_from_another_host_is_refused_until_it_goes_unrefreshed(tmp_path):
    lp = _write_lock(tmp_path / "run", pid=12345, host="another-host.example")
    with pytest.raises(runs.RunLockedError, match="another-host.example"):
        runs.RunLock(tmp_path / "run").acquire()
    old = time.time() - runs.FOREIGN_LOCK_STALE_SECONDS - 60
    os.utime(lp, (old, old))
    with pytest.warns(RuntimeWarning, match="not refreshed for"):
        with runs.run_lock(tmp_path / "run"):
            pass


def test_a_partial_report_reads_a_live_run_without_its_lock(tmp_path):
    """--partial-report only reads the cells a run has finished and writes report_partial.md, which the run never
    writes: it is allowed while the run is alive (to look at its progress)."""
    from initlab.synthetic import spt

    cfg = spt.PRESETS["quick"]
    with held_by_another_process(tmp_path / "run"):
        spt.partial_report(cfg, tmp_path / "run")
    assert (tmp_path / "run" / "report_partial.md").exists()


def test_other_ranks_of_a_torchrun_job_share_rank_zeros_folder(tmp_path, monkeypatch):
    with held_by_another_process(tmp_path / "run"):
        monkeypatch.setenv("RANK", "1")
        runs.check_unlocked(tmp_path / "run")
        with runs.run_lock(tmp_path / "run"):
            pass


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    from initlab.mlmhead import tiny_masked_lm, tiny_tokenizer

    m = tmp_path_factory.mktemp("ckpt") / "m"
    tok = tiny_tokenizer(m)
    tiny_masked_lm("bert", len(tok), hidden=16, layers=1).save_pretrained(m)
    tok.save_pretrained(m)
    return m


COMMANDS = {
    "reproduce": ["reproduce", "--preset", "quick", "--only", "theory", "--out", "{out}"],
    "synthetic spt": ["synthetic", "spt", "--preset", "quick", "--out", "{out}"],
    "synthetic splade": ["synthetic", "splade", "--preset", "quick", "--out", "{out}"],
    "synthetic splade-ood": ["synthetic", "splade-ood", "--preset", "tiny", "--out", "{out}"],
    "lra pretrain": ["lra", "pretrain", "--preset", "toy", "--out", "{out}"],
    "lra finetune": ["lra", "finetune", "--preset", "toy", "--out", "{out}"],
    "lra sweep": ["lra", "sweep", "--preset", "toy", "--ablation", "spt-epochs", "--out", "{out}"],
    "lra listops-plateau": ["lra", "listops-plateau", "--out", "{out}"],
    "lra listops-generate": ["lra", "listops-generate", "--size", "toy", "--out", "{out}"],
    "splade train": ["splade", "train", "--preset", "quick", "--backbone", "tiny", "--k", "1", "--train-source", TRIPLES,
                     "--out", "{out}"],
    "splade sweep": ["splade", "sweep", "--preset", "quick", "--backbones", "tiny", "--ks", "1", "--train-source",
                     TRIPLES, "--out", "{out}"],
    "splade eval": ["splade", "eval", "--model", "{ckpt}", "--sets", f"beir:{FIX / 'beir' / 'scifact'}", "--out", "{out}"],
    "mlmhead rescale": ["mlmhead", "rescale", "{ckpt}", "--k", "2", "--out", "{out}"],
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_resumable_command_refuses_a_live_run_folder(name, tmp_path, tiny_checkpoint):
    out = tmp_path / "run"
    argv = [a.format(out=out, ckpt=tiny_checkpoint) for a in COMMANDS[name]]
    with held_by_another_process(out) as pid:
        rc, _, err = _run(argv)
    line = _one_line(err)
    assert rc == 2 and "in use by a live run" in line and f"pid {pid}" in line, name
    assert not out.exists()


def _runners(tiny_checkpoint):
    """Every library function that owns a run folder, called on ``out`` (the lock is its first step)."""
    from initlab.app import stages
    from initlab.mlmhead.checkpoint import save_rescaled
    from initlab.realdata.lra import listops, sweep as lra_sweep, train as lra_train
    from initlab.realdata.lra.config import PRESETS
    TOY = PRESETS["toy"]
    from initlab.realdata.splade import sweep as splade_sweep, train as splade_train
    from initlab.realdata.splade.config import get_preset
    from initlab.synthetic import spt
    from initlab.synthetic.diagnose import run as diag_run
    from initlab.synthetic.splade.ood import runner as ood
    from initlab.synthetic.splade.ood.config import PRESETS as OOD_PRESETS
    from initlab.synthetic.splade.phase import runner as phase
    from initlab.theorycheck.verify import stage as verify_stage

    quick = splade_train.SpladeTrainConfig  # noqa: F841 -- the config class the presets build
    return {
        "stages.run_reproduce": lambda out: stages.run_reproduce(out, "quick", ["theory"], speed=1.0),
        "verify_stage.theory": lambda out: verify_stage.theory(out, "quick"),
        "spt.run": lambda out: spt.run(spt.PRESETS["quick"], out, progress=False),
        "phase.run_phase": lambda out: phase.run_phase(out, phase.PRESETS["quick"], progress=False),
        "ood.run_ood": lambda out: ood.run_ood(out, OOD_PRESETS["tiny"], progress=False),
        "diagnose.run_all": lambda out: diag_run.run_all(out),
        "lra.pretrain": lambda out: lra_train.pretrain(TOY, out, progress=False),
        "lra.finetune": lambda out: lra_train.finetune(TOY, out, progress=False),
        "lra.run_sweep": lambda out: lra_sweep.run_sweep("spt-epochs", TOY, out, progress=False),
        "lra.write_listops_tsv": lambda out: listops.write_listops_tsv(out, TOY.listops_gen),
        "splade.train_splade": lambda out: splade_train.train_splade(get_preset("quick"), out, progress=False),
        "splade.run_cell": lambda out: splade_sweep.run_cell(get_preset("quick"), out, progress=False),
        "splade.run_sweep": lambda out: splade_sweep.run_sweep(get_preset("quick"), out, backbones=["tiny"], ks=[1],
                                                               progress=False),
        "splade.eval_checkpoint": lambda out: splade_sweep.eval_checkpoint(tiny_checkpoint, ["x"], out),
        "mlmhead.save_rescaled": lambda out: save_rescaled(None, None, out),
    }


@pytest.mark.parametrize("name", sorted(_runners(None)))
def test_every_run_folder_owner_takes_the_lock_first(name, tmp_path, tiny_checkpoint):
    out = tmp_path / "run"
    with held_by_another_process(out):
        with pytest.raises(runs.RunLockedError):
            _runners(tiny_checkpoint)[name](out)
    assert not out.exists()
