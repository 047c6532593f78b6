"""`initlab theory verify` and the theory reproduce stage (initlab.theorycheck.verify.runner)."""

from __future__ import annotations

import json

import pytest

from initlab.theory.attention import curves
from initlab.theorycheck.verify import command as theory_cmd
from initlab.theorycheck.verify import stage
from initlab.app import cli
from initlab.config import derive
from initlab.theory.attention import checks
from initlab.theory.verify import base as verify_base
from initlab.theorycheck.verify import runner as verify


pytestmark = pytest.mark.usefixtures("one_thread")


ALL = ["T1", "T1'", "T2", "T3", "T3'", "T4", "T5", "T6", "T7"]


def test_verify_cli_passes_and_json_lists_every_statement(tmp_path, capsys):
    out = tmp_path / "v.json"
    rc = cli.main(["theory", "verify", "--cases", "3", "--t-max", "40", "--mc-samples", "4000", "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    report = json.loads(out.read_text())
    assert [r["statement"] for r in report["statements"]] == ALL
    for r in report["statements"]:
        assert r["verdict"] == "PASS" and r["cases"] == 3
        assert r["max_rel_error"] < 1e-6
        assert sum(c["n"] for c in r["checks"].values()) >= 3
    assert report["passed"] is True
    for name in ALL + ["PASS", "max abs err", "max rel err"]:
        assert name in text


@pytest.mark.parametrize("target", ["T1", "T2", "T3", "T4", "T5"])
def test_verify_reports_fail_for_an_injected_wrong_gradient(monkeypatch, capsys, target):
    """A deliberately wrong claim (gradient perturbed by a relative 1e-6 in one entry) must FAIL."""

    def hook(statement, G):
        if statement != target:
            return G
        G = G.contiguous().clone()
        G.view(-1)[1] += 1e-6 * float(G.abs().max()) + 1e-12
        return G

    monkeypatch.setattr(verify_base, "_TEST_HOOK", hook)
    rc = theory_cmd.verify_main(["--cases", "2", "--t-max", "12", "--mc-samples", "2000"])
    text = capsys.readouterr().out
    assert rc == 1
    rows = {line.split()[0]: line for line in text.splitlines() if line.split() and line.split()[0] in ALL}
    assert "FAIL" in rows[target]
    assert all("PASS" in line for name, line in rows.items() if name != target)


def test_verify_bad_arguments(capsys):
    for argv, flag in ((["--cases", "0"], "--cases"), (["--t-max", "1"], "--t-max"), (["--mc-samples", "1"], "--mc-samples"), (["--seed", "-1"], "--seed")):
        with pytest.raises(SystemExit) as exc:
            theory_cmd.verify_main(argv)
        assert exc.value.code == 2
        assert f"argument {flag}: expected an integer" in capsys.readouterr().err
    with pytest.raises(ValueError, match="statements: unknown"):
        verify.run_verify(verify.BASE, statements=["T9"])


def test_verify_reproduce_stage_writes_resumes_and_overwrites(tmp_path, monkeypatch):
    monkeypatch.setitem(verify.PRESETS, "quick", derive(verify.BASE, cases=2, t_max=16, mc_samples=2000))
    calls = []
    real = verify.run_verify
    monkeypatch.setattr(verify, "run_verify", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(curves, "t2_band_curve", lambda seed, Ts, widths, reps: real_t2(seed, [4, 16], (1,), 1))
    monkeypatch.setattr(curves, "t4_projection_curve", lambda seed, ps, T, K, q, w, n: real_t4(seed, [0.0, 0.8], 8, 3, q, w, 1000))
    out = tmp_path / "theory"
    md = stage.theory(out, "quick", overwrite=False, workers=1)  # in this process: the monkeypatches apply
    for name in ("DONE", "config.json", "verify.json", "summary.md", "t2_band_ratio.png", "t4_projection_vs_p.png", "t2_curve.json", "t4_curve.json"):
        assert (out / name).exists(), name
    assert "T1" in md and "PASS" in md and md == (out / "summary.md").read_text()
    assert [r["statement"] for r in json.loads((out / "verify.json").read_text())["statements"]] == ALL
    assert json.loads((out / "config.json").read_text())["config"]["cases"] == 2
    assert len(calls) == len(ALL)  # one cell per statement
    assert stage.theory(out, "quick", overwrite=False, workers=1) == md  # finished: not recomputed
    assert len(calls) == len(ALL)
    stage.theory(out, "quick", overwrite=True, workers=1)  # recomputed, old folder moved aside
    assert len(calls) == 2 * len(ALL)
    assert list(tmp_path.glob("theory.old-*"))
    with pytest.raises(ValueError, match="preset"):
        stage.theory(tmp_path / "x", "huge")


real_t2 = curves.t2_band_curve
real_t4 = curves.t4_projection_curve


def test_verify_t2_curve_shrinks_with_T():
    rows = curves.t2_band_curve(0, [8, 256], (2,), 2)
    small, big = rows
    assert big["bound"] < small["bound"]
    assert big["mean_ratio"] < small["mean_ratio"]
    assert all(r["max_ratio"] <= r["bound"] for r in rows)


def test_verify_respects_t_max(tmp_path):
    report = verify.run_verify(derive(verify.BASE, cases=6, t_max=3, mc_samples=2000), statements=["T2"])
    assert report["passed"]
    assert {r["T"] for r in report["statements"][0]["measured"]["band_ratio_samples"]} <= {2, 3}


@pytest.mark.parametrize("target", ["T2", "T3", "T4", "T5"])
def test_verify_fails_for_a_wrong_closed_form(monkeypatch, target):
    """The checks are not tautological: a slightly wrong theorem (not a wrong gradient) must FAIL."""
    ag, am = checks.ag, checks.am
    if target == "T2":  # a bound that is too tight: ||d|| / T instead of ||d|| / sqrt(T)
        monkeypatch.setattr(ag, "band_relative_bound", lambda T, w: float(ag.band_edge_deficit(T, w).norm() / T))
    elif target == "T3":  # T - 1 instead of T
        real = ag.t3_closed_form
        monkeypatch.setattr(ag, "t3_closed_form", lambda c: (lambda r: (r[0] * (c.T - 1) / c.T, r[1], r[2]))(real(c)))
    elif target == "T4":  # 1 / (T (T - 1)) instead of 1 / T^2
        real = am.psi
        monkeypatch.setattr(am, "psi", lambda P, p, q: real(P, p, q) * P.shape[0] / (P.shape[0] - 1))
    else:  # CLS blind fraction sqrt(1 - 1/(T + 1))
        monkeypatch.setattr(ag, "cls_blind_fraction", lambda T: (1 - 1 / (T + 1)) ** 0.5)
    report = verify.run_verify(derive(verify.BASE, cases=4, t_max=40, mc_samples=8000), statements=[target])
    assert report["statements"][0]["verdict"] == "FAIL" and report["passed"] is False
