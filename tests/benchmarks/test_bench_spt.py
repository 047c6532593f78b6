"""benchmarks/bench_spt.py: the FLOP count behind its arithmetic limit, and the ``--what paths`` comparison runs."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from initlab.nn.encoder import ModelConfig, SequenceTransformer

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_spt.py"
_spec = importlib.util.spec_from_file_location("bench_spt", _PATH)
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench
_spec.loader.exec_module(bench)


@pytest.mark.parametrize("B,T,d,d_ff,layers,use_ffn", [(3, 7, 8, 12, 1, True), (2, 11, 16, 8, 2, True), (4, 5, 8, 8, 1, False)])
def test_step_flops_equals_torch_count_of_explicit_path(B, T, d, d_ff, layers, use_ffn):
    """The explicit path does all its matmuls through ops FlopCounterMode knows, so its count is the truth."""
    torch.manual_seed(0)
    m = SequenceTransformer(ModelConfig(vocab_size=9, max_len=T, d_model=d, d_ff=d_ff, n_layers=layers, use_ffn=use_ffn,
                                        use_layernorm=use_ffn, n_classes=3))
    tok = torch.randint(0, 9, (B, T))
    counter = FlopCounterMode(display=False)
    with counter:
        H, _ = m.encode(tok, return_attn=True)
        m.cls_head(m.pool(H)).sum().backward()
    assert bench.step_flops(B, T, d, d_ff, layers, 3, use_ffn) == counter.get_total_flops()


def test_paths_comparison_runs_every_case(capsys):
    out = bench.bench_paths(repeats=1, n_layers=1, matmul_n=32)
    assert set(out["rows"]) == {"sdpa", "explicit", "sdpa alibi", "explicit alibi", "nn.TransformerEncoderLayer"}
    assert out["rows"]["sdpa"]["ratio_to_sdpa"] == 1.0
    assert all(math.isfinite(r["ms"]) and r["ms"] > 0 and r["share_of_peak"] > 0 for r in out["rows"].values())
    assert out["step_gflop"] == pytest.approx(bench.step_flops(64, 100, 32, 64) / 1e9)
    assert "GFLOP/s" in capsys.readouterr().out


def test_bad_arguments_are_refused():
    with pytest.raises(SystemExit):
        bench.main(["--what", "paths", "--repeats", "0"])


def test_batched_comparison_runs_both_loops(capsys):
    from initlab.config import derive
    from initlab.synthetic import spt
    from initlab.synthetic.spt.tasks import TaskConfig

    cfg = derive(spt.BASE, task=TaskConfig(T=12), n_train=16, n_val=8, n_test=16, d_model=8, d_ff=8, batch_size=8,
                 probe_size=4)
    out = bench.bench_batched(n_seeds=2, epochs=1, repeats=1, cfg=cfg)
    assert set(out["rows"]) == {"spt", "fine-tune"}
    for row in out["rows"].values():
        assert row["one_steps_per_s"] > 0 and row["batched_steps_per_s"] > 0 and row["speedup"]["median"] > 0
    assert "steps/s" in capsys.readouterr().out
