"""Two-process CPU DDP (gloo) through torchrun + accelerate: gradients and parameters stay synchronised."""

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
    steps = res["nan_stop_step_per_rank"]  # non-finite guard: every rank stops at the same step, no DONE
    assert len(steps) == 2 and steps[0] == steps[1] >= 0 and not (tmp_path / "pretrain_nan" / "DONE").exists()
