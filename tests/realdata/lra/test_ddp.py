"""Two-process CPU DDP (gloo) through torchrun + accelerate: gradients and parameters stay synchronised, a NaN
injected on one rank stops every rank at that step, dropout masks differ across ranks and runs are deterministic."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def test_lra_two_process_cpu_ddp(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "initlab.realdata.lra.ddp_check", str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads((tmp_path / "ddp_check.json").read_text())
    assert res["world_size"] == 2 and res["backend"] == "gloo"
    assert res["ranks_saw_different_data"]  # otherwise equal gradients would prove nothing
    assert res["max_grad_diff"] == 0.0 and res["max_param_diff"] == 0.0
    assert res["pretrain_world_size"] == 2 and (tmp_path / "pretrain" / "DONE").exists()
    steps = res["nan_stop_step_per_rank"]  # NaN injected on rank 1 only: every rank stops at that step, no DONE
    assert steps == [res["nan_injected_at_step_on_rank_1"]] * 2 and not (tmp_path / "pretrain_nan" / "DONE").exists()
    # dropout 0.3: each rank draws its own masks (a shared seed gave equal masks on same-shaped batches) ...
    assert res["dropout_probe_masks_differ_across_ranks"] and res["dropout_probe_share_equal_across_ranks"] < 0.8
    # ... and the run is still deterministic
    assert res["dropout_probes_equal_across_runs"] and res["dropout_checkpoints_identical_across_runs"]
