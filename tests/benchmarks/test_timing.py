"""The shared timing helper of benchmarks/ (interleaved rounds, per-round ratios), on a fake clock."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "_timing.py"
_spec = importlib.util.spec_from_file_location("bench_timing", _PATH)
timing = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = timing  # dataclasses look their module up there
_spec.loader.exec_module(timing)


def _fake(durations: dict[str, list[float]]):
    """Cases whose r-th call takes durations[name][r] seconds on a fake clock; the call log is kept."""
    now = [0.0]
    calls: list[str] = []
    count = {n: 0 for n in durations}

    def case(name):
        def run():
            now[0] += durations[name][count[name]]
            count[name] += 1
            calls.append(name)
            return name

        return run

    return {n: case(n) for n in durations}, (lambda: now[0]), calls


def test_rounds_interleave_with_rotated_order_and_ratios_are_per_round():
    # A slows down over time (load rising), B stays 2x faster in every round: per-round ratios are all 2
    # although the medians of each side alone would mix different loads.
    cases, clock, calls = _fake({"A": [9.0, 2.0, 4.0, 8.0, 16.0], "B": [9.0, 1.0, 2.0, 4.0, 8.0]})
    cmp = timing.interleaved(cases, baseline="B", repeats=4, warmup=1, clock=clock)
    assert calls == ["A", "B", "A", "B", "B", "A", "A", "B", "B", "A"]  # warm-up, then AB BA AB BA
    assert cmp.order == [["A", "B"], ["B", "A"], ["A", "B"], ["B", "A"]]
    assert cmp.seconds == {"A": [2.0, 4.0, 8.0, 16.0], "B": [1.0, 2.0, 4.0, 8.0]}
    assert cmp.ratios["A"] == [2.0, 2.0, 2.0, 2.0] and cmp.ratios["B"] == [1.0] * 4
    summary = cmp.summary()["A"]
    assert summary["ratio_to_B"] == {"median": 2.0, "q1": 2.0, "q3": 2.0, "min": 2.0, "max": 2.0}
    assert summary["seconds"]["median"] == 6.0 and summary["seconds"]["min"] == 2.0
    assert cmp.results == {"A": "A", "B": "B"}
    assert "time / B's: 2.00" in cmp.table()


def test_spread_of_ratios_and_three_cases():
    cases, clock, _ = _fake({"ours": [1.0, 1.0, 1.0], "peer": [2.0, 3.0, 7.0], "other": [1.0, 1.0, 1.0]})
    cmp = timing.interleaved(cases, baseline="ours", repeats=3, warmup=0, clock=clock)
    assert cmp.order == [["ours", "peer", "other"], ["peer", "other", "ours"], ["other", "ours", "peer"]]
    r = cmp.summary()["peer"]["ratio_to_ours"]
    assert (r["median"], r["min"], r["max"], r["q1"], r["q3"]) == (3.0, 2.0, 7.0, 2.5, 5.0)


def test_bad_arguments():
    cases, clock, _ = _fake({"A": [1.0]})
    with pytest.raises(ValueError, match="baseline"):
        timing.interleaved(cases, baseline="Z", repeats=1, clock=clock)
    with pytest.raises(ValueError, match="repeats"):
        timing.interleaved(cases, baseline="A", repeats=0, clock=clock)
    with pytest.raises(ValueError, match="burners"):
        timing.Burners(-1)
