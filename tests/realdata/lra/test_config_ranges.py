"""``initlab lra pretrain|finetune|sweep`` refuse a config value outside its range before writing anything."""

from __future__ import annotations

import pytest

from initlab.realdata.lra.command import finetune_main, pretrain_main, sweep_main


@pytest.mark.parametrize("main, extra", [(pretrain_main, []), (finetune_main, []),
                                         (sweep_main, ["--ablation", "spt-vs-scratch"])],
                         ids=["pretrain", "finetune", "sweep"])
@pytest.mark.parametrize("override, message", [
    ("grad_clip=-1.0", "LRAConfig.grad_clip = -1.0 is outside its range [0, inf)"),
    ("max_len=0", "LRAConfig.max_len = 0 is outside its range [1, inf)"),
    ("max_len=-3", "LRAConfig.max_len = -3 is outside its range [1, inf)"),
    ("mask_ratio=1.5", "LRAConfig.mask_ratio = 1.5 is outside its range (0, 1)"),
    ("dropout=1", "LRAConfig.dropout = 1.0 is outside its range [0, 1)"),
    ('listops_gen={"n_train": 0}', "listops_gen.n_train = 0 is outside its range [1, inf)"),
])
def test_out_of_range_value_is_one_line_exit_2_nothing_written(main, extra, override, message, tmp_path, monkeypatch,
                                                               capsys):
    monkeypatch.chdir(tmp_path)  # a generated data folder would appear here
    with pytest.raises(SystemExit) as exit_:
        main(["--preset", "toy", "--set", override, "--out", "run", "--no-progress", *extra])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"error: {message}") and "\n" not in err, err
    assert list(tmp_path.iterdir()) == []  # no run folder, config.json or data folder
