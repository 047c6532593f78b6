"""benchmarks/bench_splade_head.py: its memory probe measures what a case holds, and a tiny run writes its record."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_splade_head.py"
_spec = importlib.util.spec_from_file_location("bench_splade_head", _PATH)
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench
_spec.loader.exec_module(bench)


def test_peak_bytes_sees_a_temporary_and_what_is_kept():
    def temporary():
        x = torch.ones(1 << 18)  # 1 MiB, freed before the 2 MiB tensor is made
        del x
        return torch.ones(1 << 19)

    peak = bench.peak_bytes(temporary)
    assert 2 * 2 ** 20 <= peak < 3 * 2 ** 20


def test_tiny_run_writes_a_record(tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    monkeypatch.setattr(sys, "argv", ["bench_splade_head.py", "--shapes", "2x5x3x37", "--repeats", "1", "--out", str(out)])
    bench.main()
    rec = json.loads(out.read_text())
    (row,) = rec["shapes"]
    assert (row["B"], row["T"], row["d"], row["V"]) == (2, 5, 3, 37)
    assert row["max_abs_diff_fused_vs_st"] <= 1e-6
    assert set(row["seconds"]) == {"fused", "st", "matmul"} and row["peak_bytes"]["st"] > 0
    with pytest.raises(SystemExit, match="exists"):  # never overwritten
        bench.main()


def test_bad_shapes_are_refused():
    with pytest.raises(SystemExit, match="--shapes"):
        bench._parse_shapes("2x5x3")
