"""Bad input, by kind, across every command: one wording for a file where a folder is expected (and the
reverse), one clear line and exit 2 for a corrupt input file, range errors that name only the argument at
fault, and defaults that fit the model."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from initlab.app import cli
from initlab.runs import OutputPathError, RunDir, file_where_folder_expected


def _run(argv: list[str], module_main=None) -> tuple[int, str]:
    """(exit status, stderr) of ``initlab ARGV`` (or of ``module_main(argv)``), run in this process."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = (module_main or cli.main)(argv)
        except SystemExit as exit_:
            rc = exit_.code
    return int(rc or 0), err.getvalue()


@pytest.fixture()
def paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file.txt").write_text("hello\n")
    (tmp_path / "a_folder").mkdir()
    (tmp_path / "empty.txt").write_text("")
    return tmp_path


def _figures_main(argv):
    from initlab.paper_figs import spt_figures

    return spt_figures.main(argv)


def _claims_main(argv):
    from initlab.app.docgen import claims

    return claims.main(argv)


# every argument that takes a folder, given a file: the same words, exit 2, one line, nothing written
FOLDER_ARGS = [
    (["lra", "pretrain", "--preset", "toy", "--data-dir", "a_file.txt", "--out", "o"], "--data-dir"),
    (["lra", "pretrain", "--preset", "toy", "--spt-task", "listops", "--spt-data-dir", "a_file.txt", "--out", "o"],
     "--spt-data-dir"),
    (["lra", "pretrain", "--preset", "toy", "--out", "a_file.txt"], "--out"),
    (["lra", "listops-generate", "--size", "toy", "--out", "a_file.txt"], "--out"),
    (["lra", "listops-plateau", "--out", "a_file.txt"], "--out"),
    (["splade", "train", "--preset", "quick", "--backbone", "tiny", "--k", "1", "--out", "o", "--data-root", "a_file.txt"],
     "--data-root"),
    (["splade", "eval", "--model", "a_file.txt", "--sets", "scifact", "--out", "o"], "--model"),
    (["splade", "eval", "--model", "a_folder", "--sets", "scifact", "--out", "o", "--data-root", "a_file.txt"], "--data-root"),
    (["splade", "sweep", "--preset", "quick", "--backbones", "tiny", "--out", "o", "--data-root", "a_file.txt"], "--data-root"),
    (["mlmhead", "inspect", "a_file.txt"], "MODEL"),
    (["mlmhead", "rescale", "a_folder", "--k", "2", "--out", "a_file.txt"], "--out"),
    (["synthetic", "spt", "--preset", "quick", "--out", "a_file.txt"], "--out"),
    (["synthetic", "spt", "--preset", "quick", "--partial-report", "--out", "a_file.txt"], "--out"),
    (["synthetic", "splade", "--preset", "quick", "--out", "a_file.txt"], "--out"),
    (["reproduce", "--out", "a_file.txt"], "--out"),
    (["a_file.txt"], "results_dir", _figures_main),
    (["--results", "a_file.txt", "--readme", "a_file.txt", "--check"], "--results", _claims_main),
]


@pytest.mark.parametrize("case", FOLDER_ARGS, ids=lambda c: " ".join(c[0][:3]) + " " + c[1])
def test_a_file_where_a_folder_is_expected_has_one_wording(paths, case):
    argv, flag, *main = case
    rc, err = _run(argv, *main)
    assert rc == 2, err
    assert file_where_folder_expected("a_file.txt", flag) in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (paths / "o").exists()


def test_run_folder_in_the_way_of_a_file_uses_the_same_wording(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputPathError, match="f: is a file; expected a folder"):
        RunDir(tmp_path / "f")
    with pytest.raises(NotADirectoryError):  # what RunDir raised before: still caught by old callers
        RunDir(tmp_path / "f")


FILE_ARGS = [
    (["mlmhead", "inspect", "a_folder", "--texts", "a_folder"], "--texts"),
    (["mlmhead", "inspect", "a_folder", "--json", "a_folder"], "--json"),
    (["theory", "verify", "--json", "a_folder"], "--json"),
    (["lra", "fidelity", "--write", "a_folder"], "--write"),
    (["splade", "train", "--preset", "quick", "--backbone", "tiny", "--k", "1", "--out", "o", "--train-source", "a_folder"],
     "--train-source"),
    (["--readme", "a_folder", "--check"], "--readme", _claims_main),
]


@pytest.mark.parametrize("case", FILE_ARGS, ids=lambda c: " ".join(c[0][:2]) + " " + c[1])
def test_a_folder_where_a_file_is_expected_has_one_wording(paths, case):
    argv, flag, *main = case
    rc, err = _run(argv, *main)
    assert rc == 2 and f"{flag} a_folder: is a folder; expected a file" in err, err
    assert len(err.strip().splitlines()) == 1 and not (paths / "o").exists()


@pytest.mark.parametrize("argv, flag, other", [
    (["mlmhead", "inspect", "a_folder", "--max-length", "-1"], "--max-length", "--batch"),
    (["mlmhead", "inspect", "a_folder", "--batch", "1"], "--batch", "--max-length"),
    (["synthetic", "spt", "--preset", "quick", "--workers", "0", "--out", "o"], "--workers", "--preset"),
    (["lra", "pretrain", "--preset", "toy", "--limit", "0", "--out", "o"], "--limit", "listops_data"),
    (["lra", "pretrain", "--preset", "toy", "--seed", "-1", "--out", "o"], "--seed", "--limit"),
    (["lra", "pretrain", "--preset", "toy", "--milestones", "a", "--out", "o"], "--milestones", "invalid literal"),
    (["lra", "sweep", "--preset", "toy", "--ablation", "hybrid", "--seeds", "-1", "--out", "o"], "--seeds", "--seed "),
    (["lra", "listops-generate", "--size", "toy", "--seed", "-1", "--out", "o"], "--seed", "--size"),
    (["theory", "score-scale", "--mu-b", "nan"], "--mu-b", "mu:"),
    (["splade", "eval", "--model", "a_folder", "--sets", "scifact", "--out", "o", "--batch-size", "0"], "--batch-size",
     "--top-k"),
    (["splade", "train", "--preset", "quick", "--backbone", "tiny", "--k", "0", "--out", "o"], "--k", "--backbone"),
])
def test_range_errors_name_only_the_argument_at_fault(paths, argv, flag, other):
    rc, err = _run(argv)
    last = err.strip().splitlines()[-1]
    assert rc == 2 and f"argument {flag}:" in last and other not in last, err
    assert not (paths / "o").exists()


def test_negative_seeds_are_refused_in_configs_too():
    # Python's random.Random(-1) equals Random(1): a negative ListOps seed silently repeated another seed's data
    from dataclasses import replace

    from initlab.realdata.lra.config import PRESETS
    TOY = PRESETS["toy"]

    with pytest.raises(ValueError, match="seed"):
        replace(TOY, seed=-1)
    with pytest.raises(ValueError, match="limit"):
        replace(TOY, limit=0)


def test_corrupt_checkpoints_give_one_line_and_exit_2(paths):
    from initlab.mlmhead.tiny import tiny_masked_lm, tiny_tokenizer

    model_dir = paths / "model"
    tok = tiny_tokenizer(model_dir)
    tiny_masked_lm("bert", len(tok)).save_pretrained(model_dir)
    (model_dir / "model.safetensors").write_bytes(b"12345")  # truncated weights
    for argv in (["mlmhead", "inspect", "model"], ["mlmhead", "rescale", "model", "--k", "2", "--out", "o"],
                 ["splade", "eval", "--model", "model", "--sets", "scifact", "--out", "o"],
                 ["lra", "finetune", "--preset", "toy", "--spt", "empty.txt", "--out", "o"]):
        rc, err = _run(argv)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (argv, err)
        assert "not a readable" in err and ("model" in err or "empty.txt" in err)
        assert not (paths / "o").exists()
    (model_dir / "config.json").write_text("{not json")
    rc, err = _run(["mlmhead", "inspect", "model"])
    assert rc == 2 and "MODEL model: not a readable model folder (its config.json could not be read)" in err


def test_partial_report_of_a_missing_run_is_refused_not_created(paths):
    rc, err = _run(["synthetic", "spt", "--preset", "quick", "--partial-report", "--out", "nothing_here"])
    assert rc == 2 and "--out nothing_here: no such folder" in err and not (paths / "nothing_here").exists()


def test_spt_data_dir_without_another_task_is_refused(paths):
    rc, err = _run(["lra", "pretrain", "--preset", "toy", "--spt-data-dir", "a_folder", "--out", "o"])
    assert rc == 2 and "--spt-data-dir a_folder: used only with an --spt-task other than the task" in err
    assert not (paths / "o").exists()


@pytest.mark.parametrize("positions, expected", [(64, 63), (130, 64)])
def test_mlmhead_inspect_default_length_fits_the_model(tmp_path, positions, expected):
    # regression: a RoBERTa-style model with 64 positions (63 usable) failed with inspect's own default --max-length 64
    import json

    import transformers

    from initlab.mlmhead.tiny import tiny_masked_lm, tiny_tokenizer

    folder = tmp_path / "roberta"
    tok = tiny_tokenizer(folder)
    config = tiny_masked_lm("roberta", len(tok)).config
    config.max_position_embeddings = positions
    transformers.AutoModelForMaskedLM.from_config(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    rc, err = _run(["mlmhead", "inspect", str(folder), "--json", str(tmp_path / "r.json")])
    assert rc == 0, err
    assert json.loads((tmp_path / "r.json").read_text())["max_length"] == expected
    rc, err = _run(["mlmhead", "inspect", str(folder), "--max-length", str(positions)])  # asked for, too long: refused
    assert rc == 2 and "usable length" in err


#: commands that take ``--preset FILE``, and a field of their config with a list value
RUN_FILE_COMMANDS = [(["synthetic", "spt"], "seeds"), (["reproduce"], "skip")]


@pytest.mark.parametrize("command,field", RUN_FILE_COMMANDS)
@pytest.mark.parametrize("change,words", [
    ("[no_such_field]\nwhy = \"w\"\nvalue = 1\n", ("no_such_field",)),  # an unknown field
    ("[{field}]\nwhy = \"w\"\nvalue = \"zero\"\n", ("{field}", "expected")),  # a value of the wrong type
    ("[{field}]\nvalue = []\n", ("{field}", "why")),  # a change without its reason
])
def test_a_bad_run_file_given_by_path_is_one_line_and_exit_2(paths, command, field, change, words):
    (paths / "bad.toml").write_text('purpose = "p"\nbase = "quick"\n' + change.format(field=field))
    for preset, want in (("bad.toml", ("--preset bad.toml", *(w.format(field=field) for w in words))),
                         ("missing.toml", ("--preset missing.toml", "no such run file"))):
        rc, err = _run([*command, "--preset", preset, "--out", "o"])
        assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert all(w in err for w in want), err
        assert not (paths / "o").exists()
