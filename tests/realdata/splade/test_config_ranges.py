"""``initlab splade train|sweep`` refuse a config value outside its range before writing anything (no config.json,
inputs.json, backbone or checkpoint)."""

from __future__ import annotations

from pathlib import Path

import pytest

from initlab.realdata.splade.command import sweep_main, train_main

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "splade"
ARGS = ["--preset", "quick", "--no-progress", "--train-source", str(FIX / "msmarco" / "triples.train.small.tsv"),
        "--data-root", str(FIX)]


@pytest.mark.parametrize("main, extra", [(train_main, ["--backbone", "tiny", "--k", "1"]),
                                         (sweep_main, ["--backbones", "tiny", "--ks", "1"])], ids=["train", "sweep"])
@pytest.mark.parametrize("overrides, message", [
    (["lambda_q=-1", "lambda_d=-1"], "SpladeTrainConfig.lambda_q = -1.0 is outside its range [0, inf)"),
    (["learning_rate=-0.001"], "SpladeTrainConfig.learning_rate = -0.001 is outside its range (0, inf)"),
    (["regularizer_warmup_ratio=2"], "SpladeTrainConfig.regularizer_warmup_ratio = 2.0 is outside its range [0, 1]"),
    (["global_batch_size=0"], "SpladeTrainConfig.global_batch_size = 0 is outside its range [1, inf)"),
    (["query_max_length=-5"], "SpladeTrainConfig.query_max_length = -5 is outside its range [3, inf)"),
])
def test_out_of_range_value_is_one_line_exit_2_nothing_written(main, extra, overrides, message, tmp_path, capsys):
    out = tmp_path / "run"
    sets = [a for o in overrides for a in ("--set", o)]
    with pytest.raises(SystemExit) as exit_:
        main(ARGS + extra + sets + ["--out", str(out)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"error: {message}") and "\n" not in err, err
    assert list(tmp_path.iterdir()) == []
