"""The diagnose validation: settings build the right data and models; an arm runs, saves its record and is not
repeated on a rerun; the records feed the claim."""

from __future__ import annotations

import json

import torch

from initlab.synthetic.diagnose import claims as diagnose_claims
from initlab.synthetic.diagnose.report import collect
from initlab.synthetic.diagnose.run import run_arm
from initlab.synthetic.diagnose.settings import SEEDS, SETTINGS, Budget, cls_id, setting_data, setting_model

TINY = Budget(n_train=32, n_val=16, n_test=16, spt_epochs=1, finetune_max_epochs=1, batch_size=16)


def test_settings_data_and_models():
    assert len(SETTINGS) >= 8 and len(set(SEEDS)) == len(SEEDS)
    cls = SETTINGS["cls"]
    d = setting_data(cls, 1, TINY)
    assert d["xtr"].shape == (32, cls.task_cfg.T + 1) and bool((d["xtr"][:, 0] == cls_id(cls)).all())
    m = setting_model(cls, 1, TINY)
    assert m.cfg.pooling == "cls" and m.cfg.vocab_size == cls_id(cls) + 1
    x = d["xtr"][:4]
    H = m.encode(x)
    assert torch.equal(m.pooled(H), H[:, 0])
    prox = setting_model(SETTINGS["prox"], 1, TINY)
    _, maps = prox.encode(setting_data(SETTINGS["prox"], 1, TINY)["xtr"][:2], return_attn=True)
    assert float(maps[0].detach().diagonal(dim1=-2, dim2=-1).mean()) > 0.3  # the prior concentrates attention at init
    assert SETTINGS["depth4"].depth == 4 and SETTINGS["bag"].task_cfg.mean_run == 1.0


def test_arm_record_and_resume(tmp_path):
    s = SETTINGS["local_T50"]
    a = run_arm(tmp_path, s, 1, "spt", TINY, log=lambda m: None)
    assert 0 <= a["test_acc"] <= 1 and a["spt"]["epochs"] == 1
    again = run_arm(tmp_path, s, 1, "spt", TINY, log=lambda m: (_ for _ in ()).throw(AssertionError("reran")))
    assert again == json.loads((tmp_path / "cells" / "local_T50__seed1__spt.json").read_text())


def test_records_feed_the_claim(tmp_path):
    cells = tmp_path / "cells"
    cells.mkdir()
    for seed, (a, b) in zip(SEEDS, [(0.5, 0.9), (0.55, 0.92), (0.52, 0.95)]):
        for arm, acc in (("scratch", a), ("spt", b)):
            rec = {"test_acc": acc, "epochs_run": 3, "probe_after_spt": {"prox": 0.4, "relpos": 0.5}}
            (cells / f"local__seed{seed}__{arm}.json").write_text(json.dumps(rec))
    diag = {"local": {"measure": {"layers": [{"label_share": 0.93, "mlm_share": 0.2, "entropy_gap": 0.01}]},
                      "bag": {"normalised": 0.1}, "prediction": {"spt_helps": True, "checks": {}}}}
    recs = collect(tmp_path, diag)
    assert set(recs["settings"]["local"]["seeds"]) == {str(s) for s in SEEDS}
    assert diagnose_claims.predicts_gain(recs).word == "reproduced"
