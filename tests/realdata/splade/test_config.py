"""SPLADE reproduction configs: the fixed recipe, presets as diffs, the grid and its guards; CLI parsing."""

from __future__ import annotations

import pytest

from initlab.config import to_dict
from initlab.realdata.splade.command import parse_overrides, sweep_main, train_main
from initlab.realdata.splade.config import BACKBONES, K_VALUES, PRESETS, RECIPE, cell_config, cell_name, get_preset


def test_recipe_fixed_across_grid():
    cfgs = [cell_config(RECIPE if b != "gte" else cell_config.__globals__["derive"](RECIPE, trust_remote_code=True), b, k)
            for b in BACKBONES for k in K_VALUES]
    assert len(cfgs) == 7 * 6 == len({cell_name(c) for c in cfgs})
    fixed = {key: v for key, v in to_dict(RECIPE).items() if key not in ("backbone", "k", "trust_remote_code")}
    for c in cfgs:
        d = to_dict(c)
        assert {key: d[key] for key in fixed} == fixed  # only backbone and k move
    assert cell_name(cell_config(RECIPE, "modernbert", 16)) == "ModernBERT-base__k16"


def test_remote_code_needs_explicit_flag_and_k_positive():
    with pytest.raises(ValueError, match="--trust-remote-code"):
        cell_config(RECIPE, "gte", 1)
    with pytest.raises(ValueError, match=r"SpladeTrainConfig.k = 0.0 is outside its range \(0, inf\)"):
        cell_config(RECIPE, "bert", 0)
    with pytest.raises(ValueError, match="--preset huge: expected one of quick, default, full"):
        get_preset("huge")
    assert PRESETS["quick"].tiny_model == "bert" and PRESETS["full"] == RECIPE and "toy" not in PRESETS


def test_parse_overrides_and_cli_errors(capsys):
    assert parse_overrides(["max_steps=3", 'eval_sets=["a"]', "train_source=x.tsv"]) == {
        "max_steps": 3, "eval_sets": ["a"], "train_source": "x.tsv"}
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        parse_overrides(["max_steps"])
    with pytest.raises(SystemExit):
        train_main(["--backbone", "gte", "--k", "1", "--out", "/nonexistent/x"])
    assert "--trust-remote-code" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train_main(["--backbone", "bert", "--k", "1", "--out", "/nonexistent/x", "--set", "no_such_field=1"])
    assert "no_such_field" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        sweep_main(["--out", "/nonexistent/x", "--ks", "1,-2"])


def test_bad_backbone_or_training_file_fails_before_writing(tmp_path, capsys):
    from pathlib import Path

    fix = Path(__file__).resolve().parents[1] / "fixtures" / "splade" / "msmarco"
    out = tmp_path / "run"
    with pytest.raises(SystemExit):
        train_main(["--backbone", str(tmp_path / "no_such_model"), "--k", "1", "--out", str(out),
                    "--train-source", str(fix / "triples.train.small.tsv")])
    err = capsys.readouterr().err
    assert "no_such_model" in err and "expected one of the short names" in err
    with pytest.raises(SystemExit):
        train_main(["--preset", "quick", "--backbone", "tiny", "--k", "1", "--out", str(out), "--train-source", str(fix / "missing.tsv")])
    assert "--train-source" in (err := capsys.readouterr().err) and "missing.tsv: no such file" in err
    assert not out.exists()  # nothing half-written
