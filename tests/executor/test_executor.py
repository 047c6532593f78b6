"""The cell executor (initlab.executor): estimates, resume and the key guard, errors, progress without resumed
work, identical results in this process, in a local pool and on a Dask LocalCluster, and a real Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from initlab import executor as ex
from initlab.executor import Cell, estimate, run_cells
from initlab.runs import ConfigMismatchError, NonFiniteError, RunDir

HERE = Path(__file__).resolve().parent
FN = "executor_cells:"


@pytest.fixture
def cells_importable(monkeypatch):
    """tests/executor/executor_cells.py and executor_sweep.py importable here and in worker processes (they inherit PYTHONPATH)."""
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))


def squares(n=4, units=2):
    cs = [Cell(f"sq{i}", FN + "square", {"x": i, "units": units}, key={"x": i}, units=units, unit_seconds=0.5)
          for i in range(n)]
    return cs + [Cell("sum", FN + "uses", {"needs": ["sq0", "sq1"]}, key={"sum": [0, 1]}, needs=("sq0", "sq1"))]


def cell_files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "cells").iterdir())}


# ------------------------------------------------------------------------------------------------
# cost model
# ------------------------------------------------------------------------------------------------
def test_estimate_is_list_scheduling_with_needs():
    a = Cell("a", "m:f", {}, 1, units=10, unit_seconds=1.0)
    b = Cell("b", "m:f", {}, 1, units=4, max_units=8, unit_seconds=1.0)
    c = Cell("c", "m:f", {}, 1, needs=("a",), units=2, unit_seconds=1.0)
    assert estimate([a, b, c], 1) == (16.0, 20.0)
    assert estimate([a, b, c], 2) == (12.0, 12.0)  # c waits for a (10 s), b fits beside a
    assert estimate([c, b, a], 2) == (12.0, 12.0)  # needs reorder: c still runs after a
    assert estimate([a, b, c], 3, speed=2.0) == (24.0, 24.0)
    assert estimate([Cell("d", "m:f", {}, 1, needs=("done-earlier",), units=3)], 4) == (3.0, 3.0)
    with pytest.raises(ValueError, match="cycle"):
        estimate([Cell("x", "m:f", {}, 1, needs=("y",)), Cell("y", "m:f", {}, 1, needs=("x",))], 1)
    with pytest.raises(ValueError, match="workers"):
        estimate([a], 0)


def test_the_estimate_lets_a_free_worker_take_a_later_ready_cell_as_the_pool_does():
    """A cell waiting for its needs does not hold a free worker: the pool hands that worker the first ready cell in
    plan order (the test below), and the estimate schedules it so."""
    p1 = Cell("p1", "m:f", {}, 1, units=10, unit_seconds=1.0)
    t1 = Cell("t1", "m:f", {}, 1, needs=("p1",), units=2, unit_seconds=1.0)
    p2 = Cell("p2", "m:f", {}, 1, units=5, unit_seconds=1.0)
    # p1 on one worker (0-10); p2 on the other at once (0-5), not after t1; t1 when p1 ends (10-12)
    assert estimate([p1, t1, p2], 2) == (12.0, 12.0)
    assert estimate([p1, t1, p2], 1) == (17.0, 17.0)
    # a worker with nothing ready waits for the first cell that becomes ready
    t2 = Cell("t2", "m:f", {}, 1, needs=("p2",), units=1, unit_seconds=1.0)
    assert estimate([p1, t1, p2, t2], 2) == (12.0, 12.0)  # t2 runs 5-6 on p2's worker, t1 10-12
    assert estimate([p1, t1, t2], 2) == (12.0, 12.0)  # t2's need is not in the plan: finished, so it runs at once


def test_a_pool_runs_a_ready_cell_in_plan_order_before_later_independent_ones(tmp_path, cells_importable):
    """A cell whose needs just finished goes before independent cells later in the plan (a seed's training before the
    next seed's backbone): the pool is handed one cell per free worker, never the whole ready list at once."""
    cells = [Cell("p1", FN + "writes_artifact", {"x": 1}, key={"p": 1}, units=1),
             Cell("p2", FN + "writes_artifact", {"x": 2}, key={"p": 2}, units=1),
             Cell("t1", FN + "reads_artifact", {"of": "p1"}, key={"t": 1}, needs=("p1",), units=1),
             Cell("p3", FN + "writes_artifact", {"x": 3}, key={"p": 3}, units=1)]
    root = tmp_path / "run"
    run_cells(RunDir(root), cells, workers=2, progress=False)
    order = (root / "runs.txt").read_text().split()
    assert sorted(order) == ["p1", "p2", "p3", "t1"] and order.index("t1") < order.index("p3")


def test_dask_runs_a_ready_cell_in_plan_order_before_later_independent_ones(tmp_path, cells_importable):
    """The same plan order on a Dask LocalCluster (one worker, one thread): Dask is handed one cell per free thread,
    so t1, ready when p1 ends, runs before p3 (handed every ready cell at once, Dask ran p3 first)."""
    distributed = pytest.importorskip("distributed")
    cells = [Cell("p1", FN + "writes_artifact", {"x": 1}, key={"p": 1}, units=1),
             Cell("p2", FN + "writes_artifact", {"x": 2}, key={"p": 2}, units=1),
             Cell("t1", FN + "reads_artifact", {"of": "p1"}, key={"t": 1}, needs=("p1",), units=1),
             Cell("p3", FN + "writes_artifact", {"x": 3}, key={"p": 3}, units=1)]
    root = tmp_path / "run"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                                  host="127.0.0.1", protocol="tcp://") as lc:
        run_cells(RunDir(root), cells, scheduler=lc.scheduler_address, progress=False)
    order = (root / "runs.txt").read_text().split()
    assert sorted(order) == ["p1", "p2", "p3", "t1"] and order.index("t1") < order.index("p3")


def test_a_missing_artifact_is_rebuilt_only_while_a_cell_needs_it(tmp_path, cells_importable):
    """A fresh clone holds the committed cell results but no checkpoint: the producing cell runs again only when a
    cell still to run needs its artifact; with every dependent finished, nothing runs."""
    def plan():
        return [Cell("make", FN + "writes_artifact", {"x": 3}, key={"x": 3}, artifact="artifact/make.txt"),
                Cell("use1", FN + "reads_artifact", {"of": "make"}, key={"u": 1}, needs=("make",)),
                Cell("use2", FN + "reads_artifact", {"of": "make"}, key={"u": 2}, needs=("make",))]

    root = tmp_path / "run"
    run_cells(RunDir(root), plan()[:2], workers=1, progress=False)
    assert (root / "runs.txt").read_text().split() == ["make", "use1"]
    (root / "runs.txt").unlink()
    (root / "artifact" / "make.txt").unlink()  # a fresh clone: results kept, checkpoint gone
    run_cells(RunDir(root), plan(), workers=1, progress=False)
    assert (root / "runs.txt").read_text().split() == ["make", "use2"]  # rebuilt for use2 only; use1 kept
    assert json.loads((root / "cells" / "use2.json").read_text()) == {"read": "3"}
    (root / "runs.txt").unlink()
    (root / "artifact" / "make.txt").unlink()
    run_cells(RunDir(root), plan(), workers=1, progress=False)  # every dependent finished: nothing runs
    assert not (root / "runs.txt").exists()


def test_a_pool_starts_only_where_it_pays(tmp_path, cells_importable):
    rd = RunDir(tmp_path / "run")
    small = squares(2)  # 3 cells of 1 s: a 5 s worker start-up would not pay
    assert run_cells(rd, small, workers=2, progress=False, startup=5.0).workers == 1
    assert estimate(small, 2, startup=5.0)[0] > estimate(small, 1, startup=5.0)[0] == 3.0


def test_cell_fields_are_checked():
    with pytest.raises(ValueError, match="fn"):
        Cell("a", "no_colon", {}, 1)
    with pytest.raises(ValueError, match="max_units"):
        Cell("a", "m:f", {}, 1, units=5, max_units=2)
    assert 1 <= ex.default_workers() <= (os.cpu_count() or 1)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_cell_receives_the_results_of_the_cells_it_needs_in_its_arguments(tmp_path, cells_importable, workers):
    """``receives`` hands a finished cell's saved result to its dependant as an argument (in this process and in a
    pool), also when that cell finished in an earlier invocation; the plan's ``args`` and the key stay as planned."""
    def plan():
        return [*squares(3)[:3], Cell("both", FN + "receives", {"x": 0}, key={"both": 1}, needs=("sq1", "sq2"),
                                       receives={"a": "sq1", "b": "sq2"})]

    root = tmp_path / "run"
    run_cells(RunDir(root), plan()[:2], workers=1, progress=False)  # sq1 finished earlier, sq2 not
    cells = plan()
    assert cells[3].args == {"x": 0} and cells[3].receives == (("a", "sq1"), ("b", "sq2"))
    run_cells(RunDir(root), cells, workers=workers, progress=False)
    got = json.loads((root / "cells" / "both.json").read_text())
    assert got == {"sum": 1 + 4, "args": ["a", "b", "x"]}


def test_receives_names_only_needed_cells_and_new_arguments():
    with pytest.raises(ValueError, match="receives"):
        Cell("a", "m:f", {}, 1, needs=("b",), receives={"x": "c"})
    with pytest.raises(ValueError, match="receives"):
        Cell("a", "m:f", {"x": 1}, 1, needs=("b",), receives={"x": "b"})


def test_measure_speed_is_a_positive_factor():
    raw = ex.measure_speed(budget_s=0.1, raw=True)
    assert raw > 0 and ex.measure_speed(budget_s=0.1) > 0


# ------------------------------------------------------------------------------------------------
# in this process: resume, key guard, errors
# ------------------------------------------------------------------------------------------------
def test_inline_run_saves_resumes_and_guards_keys(tmp_path, cells_importable):
    rd = RunDir(tmp_path / "run")
    rep = run_cells(rd, squares(), workers=1, progress=False)
    assert rep.results["sum"] == {"sum": 1} and not rep.failed and rep.skipped == []
    saved = json.loads((rd.root / "cells" / "sq3.json").read_text())
    assert saved["square"] == 9 and saved["threads"] == 1 and saved["deterministic"] is True
    again = run_cells(rd, squares(), workers=1, progress=False)
    assert sorted(again.skipped) == sorted(c.name for c in squares()) and again.results == {}
    changed = [Cell("sq0", FN + "square", {"x": 0}, key={"x": 0, "lr": 1}), *squares()[1:]]
    with pytest.raises(ConfigMismatchError, match="sq0"):
        run_cells(rd, changed, workers=1, progress=False)


def test_bad_cell_lists_are_refused_before_any_work(tmp_path, cells_importable):
    rd = RunDir(tmp_path / "run")
    with pytest.raises(ValueError, match="duplicate"):
        run_cells(rd, squares() + squares()[:1], workers=1, progress=False)
    with pytest.raises(ValueError, match="needs"):
        run_cells(rd, [Cell("a", FN + "square", {"x": 1}, 1, needs=("nowhere",))], workers=1, progress=False)
    with pytest.raises(ValueError, match="--scheduler"):
        run_cells(rd, squares(), scheduler="local:zero", progress=False)
    with pytest.raises(ValueError, match="on_error"):
        run_cells(rd, squares(), on_error="ignore", progress=False)
    assert list((rd.root / "cells").iterdir()) == []


def test_errors_raise_or_are_recorded_and_retried(tmp_path, cells_importable):
    rd = RunDir(tmp_path / "run")
    nan = Cell("nan", FN + "diverge", {}, key=1)
    after = Cell("after", FN + "uses", {"needs": ["nan"]}, key=1, needs=("nan",))
    with pytest.raises(NonFiniteError) as got:
        run_cells(rd, [nan], workers=1, progress=False)
    assert got.value.step == 3 and got.value.where == "test loop" and got.value.last_checkpoint == "ckpt/x"
    with pytest.raises(RuntimeError, match="broken cell") as other:  # any other error: itself, the cell named
        run_cells(rd, [Cell("bad", FN + "broken", {}, key=1)], workers=1, progress=False)
    assert "(in cell bad)" in other.value.__notes__
    rep = run_cells(rd, [nan, after, *squares(2)], workers=1, progress=False, on_error="record")
    assert set(rep.failed) == {"nan", "after"} and rep.nonfinite["nan"]["step"] == 3
    assert "needs nan" in rep.failed["after"] and rep.results["sum"] == {"sum": 1}
    assert not rd.has_cell("nan") and rd.has_cell("sum")  # a failed cell is not saved: a rerun retries it
    rerun = run_cells(rd, [nan, after, *squares(2)], workers=1, progress=False, on_error="record")
    assert set(rerun.failed) == {"nan", "after"} and "sum" in rerun.skipped


@pytest.mark.parametrize("workers", [1, 2])
def test_a_diverged_cell_keeps_its_kind_and_message_across_processes(tmp_path, cells_importable, workers):
    from initlab.runs import DivergenceError

    rd = RunDir(tmp_path / "run")
    with pytest.raises(DivergenceError, match="loss diverged") as got:
        run_cells(rd, [Cell("grows", FN + "grows", {}, key=1), *squares(2)], workers=workers, progress=False)
    assert got.value.step == 5 and got.value.early == 0.7 and got.value.factor == 1e4
    rep = run_cells(rd, [Cell("grows", FN + "grows", {}, key=1)], workers=workers, progress=False, on_error="record")
    assert "loss diverged (2e+05 at step 5" in rep.failed["grows"]


# ------------------------------------------------------------------------------------------------
# progress: resumed work is shown as done but never counted as speed
# ------------------------------------------------------------------------------------------------
def test_time_left_ignores_resumed_work(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(ex.time, "monotonic", lambda: now[0])
    cells = [Cell(f"c{i}", "m:f", {}, 1, units=10, unit_seconds=2.0) for i in range(2)]
    bar = ex.SweepBar(cells, done_before=30.0, workers=1, speed=1.0, desc="t", enabled=False)
    assert bar._n() == 30.0 and bar._total() == 50.0  # cells finished earlier: shown done, not run
    assert bar.seconds_left() == 40.0  # cost model: 20 units x 2 s
    bar.event("c0", "start", 6.0, 10.0)  # resumed 6 epochs from a checkpoint: instant, not speed
    assert bar._n() == 36.0 and bar._factor() == 1.0
    assert bar.seconds_left() == pytest.approx(4 * 2.0 + 10 * 2.0)
    now[0] += 16.0
    bar.event("c0", "advance", 2.0, None)  # 2 units in 16 s: 8 s per unit, 4x the model
    assert bar._factor() == pytest.approx(4.0)
    assert bar.seconds_left() == pytest.approx(2 * 8.0 + 10 * 8.0)
    bar.event("c0", "total", 8.0, None)  # early stop: the cell ends at 8 units
    bar.finish("c0")
    assert bar._total() == 48.0 and bar.seconds_left() == pytest.approx(10 * 8.0)
    bar.event("c0", "advance", 5.0, None)  # a late message of a finished cell changes nothing
    assert bar._n() == 38.0


def test_the_bar_is_one_line_of_units_and_is_closed(tmp_path, cells_importable, capsys):
    rd = RunDir(tmp_path / "run")
    run_cells(rd, squares(2)[:1], workers=1, progress=True, desc="demo")
    run_cells(rd, squares(2), workers=1, progress=True, desc="demo")
    err = capsys.readouterr().err
    assert "demo: 1 cells (2 units) to run in this process" in err
    assert "(1 cells, 2 units, finished earlier, skipped)" in err
    assert "units" in err and "elapsed" in err and "left" in err


def test_the_plan_line_counts_the_units_the_bar_counts(tmp_path, cells_importable, capsys):
    """The plan line names cells and units, and its units (to run + finished earlier) are the bar's total."""
    import re

    rd = RunDir(tmp_path / "run")
    cells = squares(2, units=4)  # sq0, sq1 (4 units each) and sum (1 unit)
    run_cells(rd, cells[:1], workers=1, progress=True, desc="demo")
    capsys.readouterr()
    run_cells(rd, cells, workers=1, progress=True, desc="demo", speed=1.0)
    err = capsys.readouterr().err
    assert "demo: 2 cells (5 units) to run" in err and "(1 cells, 4 units, finished earlier, skipped)" in err
    totals = {int(m) for m in re.findall(r"\d+/(\d+) units", err)}
    assert totals == {9}, err


def test_machine_speed_is_the_plan_line_speed_inside_its_block(tmp_path, cells_importable, capsys, monkeypatch):
    """Inside machine_speed(s) run_cells measures nothing and its plan line states s; outside it measures again."""
    import initlab.executor as ex

    calls = []
    monkeypatch.setattr(ex, "measure_speed", lambda *a, **k: calls.append(a) or 3.0)
    with ex.machine_speed(2.5):
        run_cells(RunDir(tmp_path / "a"), squares(1)[:1], workers=1, progress=True, desc="demo")
    assert calls == [] and "machine speed 2.50" in capsys.readouterr().err
    run_cells(RunDir(tmp_path / "b"), squares(1)[:1], workers=1, progress=True, desc="demo")
    assert len(calls) == 1 and "machine speed 3.00" in capsys.readouterr().err
    with pytest.raises(ValueError, match="speed"):
        with ex.machine_speed(0.0):
            pass


@pytest.mark.parametrize("workers", [1, 2])
def test_a_cell_running_past_its_planned_units_keeps_the_bar_drawing(tmp_path, cells_importable, capsys, workers):
    """A cell that reports more units than the cost model planned (an SPT run that needed more epochs) grows the
    bar's total; it used to push tqdm's count past its total, which tqdm cannot format."""
    rd = RunDir(tmp_path / "run")
    cells = [Cell(f"c{i}", FN + "square", {"x": i, "units": 6, "sleep": 0.4}, key=i, units=2.0, unit_seconds=0.01)
             for i in range(3)]  # redrawn (once a second) while past their 2 planned units
    rep = run_cells(rd, cells, workers=workers, progress=True, desc="overrun")
    assert set(rep.results) == {"c0", "c1", "c2"}
    assert "overrun: 100%" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------
# the same results in this process, in a local pool and on a Dask LocalCluster
# ------------------------------------------------------------------------------------------------
def test_a_local_pool_gives_the_same_files_as_this_process(tmp_path, cells_importable):
    """(The same on a Dask LocalCluster, with a real sweep: tests/synthetic/splade/phase/test_phase.py.)"""
    inline = RunDir(tmp_path / "inline")
    run_cells(inline, squares(), workers=1, progress=False)
    pool = RunDir(tmp_path / "pool")
    rep = run_cells(pool, squares(), workers=2, progress=False)
    assert rep.workers == 2 and rep.results["sum"] == {"sum": 1} and set(rep.cell_seconds) == {c.name for c in squares()}
    assert cell_files(pool.root) == cell_files(inline.root)  # threads == 1 and deterministic in the workers too


# ------------------------------------------------------------------------------------------------
# a real Ctrl-C (SIGINT to the process group) during a sweep in worker processes
# ------------------------------------------------------------------------------------------------
DRIVER = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a parent that ignores SIGINT (a background job) passes that on
from initlab.app import cli
cli.COMMANDS[("demosweep", None)] = ("executor_sweep:demo_sweep_main", "a demo sweep")
sys.exit(cli.main(["demosweep", sys.argv[1]]))
"""


def test_sigint_stops_cleanly_and_a_rerun_resumes(tmp_path, cells_importable):
    out = tmp_path / "run"
    out.mkdir()
    (out / "HOLD").write_text("")  # each cell waits after its epoch 2 until interrupted: no race with its end
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(out)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    ckpts = out / "ckpt"

    def held() -> int:
        return sum(1 for p in ckpts.glob("*.json") if json.loads(p.read_text() or "{}").get("epoch") == 2)

    deadline = time.monotonic() + 600  # a failsafe only: both workers reach their hold whatever the load
    while time.monotonic() < deadline and proc.poll() is None and held() < 2:  # both workers mid-cell, held
        time.sleep(0.1)
    assert proc.poll() is None and held() == 2, proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
    stdout, stderr = proc.communicate(timeout=600)  # a failsafe only
    assert proc.returncode == 130, stderr
    tail = stderr.rstrip().splitlines()[-1]
    assert tail == "initlab demosweep: interrupted; finished parts are kept, rerun the same command to resume", stderr
    assert "Traceback" not in stderr, stderr  # neither the main process nor a worker printed one
    after_message = stderr.rstrip().rsplit("interrupted;", 1)[1]
    assert "units" not in after_message  # no bar redrawn after the message
    done_epochs = {p.stem: json.loads(p.read_text())["epoch"] for p in ckpts.glob("*.json")}
    assert any(0 < e < 6 for e in done_epochs.values()), done_epochs
    (out / "HOLD").unlink()
    rerun = subprocess.run([sys.executable, "-c", DRIVER, str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    for name, epochs in done_epochs.items():
        rec = json.loads((out / "cells" / f"{name}.json").read_text())
        assert rec["epochs"] == 6
        if epochs < 6:  # interrupted mid-cell: the rerun starts after its last checkpointed epoch
            assert rec["resumed_from"] == epochs


def test_a_cell_holds_its_function_and_sends_its_name():
    """A cell keeps the function object (a reader follows it to the code); workers get its importable name."""
    from initlab.theorycheck.score_scale import table

    cell = Cell("x", table.table_cell, {}, None)
    assert cell.fn is table.table_cell and cell.target == "initlab.theorycheck.score_scale.table:table_cell"

    def nested(root, name, args, progress):
        return None

    for fn in (nested, lambda root, name, args, progress: None):
        with pytest.raises(ValueError, match="module-level function"):
            Cell("y", fn, {}, None)
    assert Cell("z", "initlab.theorycheck.score_scale.table:table_cell", {}, None).target.endswith(":table_cell")


def test_every_planned_cell_names_the_function_it_holds():
    """Every stage's plan: the name a worker imports resolves to the very function the cell holds."""
    from initlab.executor.core import resolve_target
    from initlab.synthetic.splade.phase import runner as phase
    from initlab.synthetic.spt import PRESETS as SPT_PRESETS
    from initlab.synthetic.spt.runner import plan as spt_plan
    from initlab.theorycheck.score_scale import experiment as score_scale_stage
    from initlab.theorycheck.verify import runner as verify
    from initlab.theorycheck.verify import experiment as theory_stage

    cells = (theory_stage.cells(verify.PRESETS["quick"]) + score_scale_stage.cells(score_scale_stage.PRESETS["quick"], "quick")
             + spt_plan(SPT_PRESETS["quick"]) + phase.plan(phase.PRESETS["quick"]))
    assert {c.target.split(":")[1] for c in cells} >= {"statement_cell", "table_cell", "spt_cell", "finetune_cell",
                                                       "cell_pretrain", "cell_train", "cell_inspect"}
    for c in cells:
        assert callable(c.fn) and resolve_target(c.target) is c.fn, c.name


# ------------------------------------------------------------------------------------------------
# progress written to a file or pipe: plain lines at a coarse interval, never carriage-return redraws
# ------------------------------------------------------------------------------------------------
def test_progress_into_a_file_is_plain_lines_at_a_coarse_interval(monkeypatch):
    import io

    now = [0.0]
    monkeypatch.setattr(ex.time, "monotonic", lambda: now[0])
    log = io.StringIO()  # not a terminal, as a reproduce log or CI output
    monkeypatch.setattr(ex.sys, "stderr", log)
    cells = [Cell(f"c{i}", "m:f", {}, 1, units=100, unit_seconds=1.0) for i in range(2)]
    bar = ex.SweepBar(cells, done_before=0.0, workers=1, speed=1.0, desc="t", enabled=True)
    for step in range(200):  # one advance a second for 200 s: a terminal bar would redraw 200 times
        now[0] += 1.0
        bar.event(f"c{step // 100}", "advance", 1.0, None)
        if step % 100 == 99:
            bar.finish(f"c{step // 100}")
    bar.close()
    text = log.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert 2 <= len(lines) <= 200 / ex.LOG_INTERVAL + 3, lines  # the first, one per interval, the last
    assert lines[-1].startswith("t: 100%") and "200/200" in lines[-1]
    plain = io.StringIO()
    for _ in ex.progress_bar(range(1000), file=plain, desc="loop"):
        pass
    assert "\r" not in plain.getvalue() and len(plain.getvalue().splitlines()) <= 3
    quiet = io.StringIO()
    for _ in ex.progress_bar(range(10), file=quiet, disable=True):  # a disabled bar writes nothing and closes
        pass
    assert quiet.getvalue() == ""


def test_no_tqdm_bar_bypasses_progress_bar():
    """Every progress bar of the package goes through ``initlab.executor.progress_bar`` (no direct tqdm use)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    direct = [str(p.relative_to(root)) for folder in ("initlab", "realdata", "synthetic", "theory", "paper_figs")
              for p in (root / folder).rglob("*.py")
              if p.relative_to(root).as_posix() != "initlab/executor/bar.py" and re.search(r"^\s*from tqdm|^\s*import tqdm", p.read_text(), re.M)]
    assert direct == []


def test_a_dask_run_whose_workers_all_left_ends_in_one_line(tmp_path, cells_importable, monkeypatch):
    """Every worker gone mid-run (here the cell ends its worker process, which no nanny restarts): Dask holds the cell
    in its no-worker state forever and the bar showed 0 units done for as long as it was left; it ends with
    NoWorkersError once no worker has been seen for SCHEDULER_TIMEOUT seconds (shortened here). The scheduler binds
    its own port on loopback; the test waits for the worker to join, with no deadline of its own."""
    import subprocess
    import sys

    distributed = pytest.importorskip("distributed")
    from initlab.executor import cluster

    monkeypatch.setattr(cluster, "SCHEDULER_TIMEOUT", 3.0)
    rd = RunDir(tmp_path / "run")
    cells = [Cell("dies", FN + "exit_worker", {}, key={"dies": 1})]
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None, host="127.0.0.1",
                                  protocol="tcp://") as lc:
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", lc.scheduler_address,
                                   "--no-nanny", "--nthreads", "1", "--no-dashboard"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            with distributed.Client(lc.scheduler_address) as client:
                client.wait_for_workers(1)
            with pytest.raises(ex.NoWorkersError, match=r"every worker of the Dask scheduler .* left.*1 cell\(s\) "
                                                        r"unfinished"):
                run_cells(rd, cells, scheduler=lc.scheduler_address, progress=False)
        finally:
            worker.kill()
            worker.wait()
    assert not rd.has_cell("dies")
