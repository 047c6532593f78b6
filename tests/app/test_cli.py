"""The console script's dispatcher: every command resolves to an importable main()."""

from __future__ import annotations

import importlib

import pytest

from initlab.app import cli
from initlab.app.experiments import EXPERIMENTS
from initlab.experiment.record import Command, Experiment

#: the console script's command table as it was written by hand before it was built from the records: the built
#: table must equal it, names, targets, help and order
FROZEN_COMMANDS = [
    (('reproduce', None), ('initlab.app.commands.reproduce:main', 'run the CPU reproduction (theorems, synthetic SPT, MLM-head score scale, synthetic SPLADE) and write a report')),
    (('theory', 'verify'), ('initlab.theorycheck.verify.command:verify_main', 'check the attention-gradient statements (T1-T7) on fresh random cases')),
    (('theory', 'score-scale'), ('initlab.theorycheck.score_scale.command:score_scale_main', 'tabulate the SPLADE score-scale analysis against the rescaling factor k')),
    (('synthetic', 'spt'), ('initlab.synthetic.spt.command:spt_main', 'synthetic length-100 self-pretraining experiments')),
    (('synthetic', 'run'), ('initlab.synthetic.spt.command:run_main', 'deprecated name of synthetic spt, kept for one release')),
    (('synthetic', 'splade'), ('initlab.synthetic.splade.phase.command:splade_main', 'synthetic SPLADE collapse and recovery under MLM-head rescaling')),
    (('diagnose', None), ('initlab.app.commands.diagnose:main', 'before training: is label-only training of a model on your data blind to query-dependent attention, and will self-pretraining help?')),
    (('synthetic', 'splade-ood'), ('initlab.synthetic.splade.ood.command:splade_ood_main', 'synthetic SPLADE out of domain: multi-domain corpus, BM25, plateau rule (exploratory)')),
    (('mlmhead', 'inspect'), ('initlab.app.commands.mlmhead:inspect_main', 'MLM-head scale report for a Hugging Face masked-LM checkpoint')),
    (('mlmhead', 'rescale'), ('initlab.app.commands.mlmhead:rescale_main', "divide a checkpoint's MLM-head projection by k and save it")),
    (('splade', 'train'), ('initlab.realdata.splade.command:train_main', 'train one SPLADE model (backbone x k) on MS MARCO')),
    (('splade', 'eval'), ('initlab.realdata.splade.command:eval_main', 'evaluate a SPLADE checkpoint (MS MARCO dev, TREC DL 2019, BEIR, NanoBEIR)')),
    (('splade', 'sweep'), ('initlab.realdata.splade.command:sweep_main', 'train and evaluate the backbone x k grid, resumable')),
    (('lra', 'pretrain'), ('initlab.realdata.lra.command:pretrain_main', "self-pretrain on a Long Range Arena task's inputs")),
    (('lra', 'finetune'), ('initlab.realdata.lra.command:finetune_main', 'fine-tune (from scratch or from an SPT checkpoint) on an LRA task')),
    (('lra', 'sweep'), ('initlab.realdata.lra.command:sweep_main', 'run an LRA ablation preset (SPT epochs, depth, cross-task, frozen, hybrid)')),
    (('lra', 'listops-plateau'), ('initlab.realdata.lra.command:listops_plateau_main', 'the preregistered CPU ListOps SPT-vs-scratch experiment (plateau budgets)')),
    (('lra', 'fidelity'), ('initlab.realdata.lra.command:fidelity_main', "the LRA preset fidelity table against Amos et al. and LRA's configs")),
    (('lra', 'listops-generate'), ('initlab.realdata.lra.command:listops_main', "generate ListOps (LRA's generator) as basic_{train,val,test}.tsv")),
]


def test_the_command_table_built_from_the_records_is_the_former_hand_written_one():
    assert list(cli.COMMANDS.items()) == FROZEN_COMMANDS


def test_a_records_commands_enter_the_table_with_the_roofs_around_them():
    a = Experiment("a", commands=(Command("grp", "one", "initlab.x:f", "first"), Command("grp", "two", "initlab.x:g", "second")))
    b = Experiment("b", commands=(Command("solo", None, "initlab.y:h", "alone"),))
    roof = ((None, Command("top", None, "initlab.z:t", "roof first")), ("a", Command("mid", None, "initlab.z:m", "after a")))
    table = cli.command_table([a, b], roof)
    assert list(table) == [("top", None), ("grp", "one"), ("grp", "two"), ("mid", None), ("solo", None)]
    assert table[("grp", "two")] == ("initlab.x:g", "second")
    assert list(cli.command_table([b, a], roof)) == [("top", None), ("solo", None), ("grp", "one"), ("grp", "two"), ("mid", None)]


@pytest.mark.parametrize("records, roof, match", [
    ([Experiment("a", commands=(Command("g", "x", "initlab.x:f", "h"),)),
      Experiment("b", commands=(Command("g", "x", "initlab.y:f", "h"),))], (), "defined twice"),
    ([Experiment("a", commands=(Command("g", "x", "initlab.x:f", "h"),))], ((None, Command("g", None, "initlab.z:t", "h")),),
     "run directly and with subcommands"),
    ([Experiment("a", commands=(Command("g", "x", "initlab.x:f", "h"),))], (("nowhere", Command("r", None, "initlab.z:t", "h")),),
     "unknown experiment"),
])
def test_a_clashing_command_table_is_refused(records, roof, match):
    with pytest.raises(ValueError, match=match):
        cli.command_table(records, roof)


def test_every_record_with_commands_is_in_the_table():
    assert {(c.group, c.name) for e in EXPERIMENTS for c in e.commands} <= set(cli.COMMANDS)


def test_help_lists_every_command(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for group, cmd in cli.COMMANDS:
        assert (group if cmd is None else f"{group} {cmd}") in out


@pytest.mark.parametrize("key", sorted(cli.COMMANDS, key=lambda k: (k[0], k[1] or "")))
def test_every_command_target_exists(key):
    module_name, func_name = cli.COMMANDS[key][0].split(":")
    module = importlib.import_module(module_name)
    assert callable(getattr(module, func_name))


def test_unknown_commands_fail_with_usage():
    with pytest.raises(SystemExit, match="unknown command 'nope'"):
        cli.main(["nope"])
    with pytest.raises(SystemExit, match="expected one of verify"):
        cli.main(["theory", "prove"])


def test_group_help_lists_only_that_group(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["theory", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "theory verify" in out and "splade train" not in out


def test_ctrl_c_exits_130_without_traceback(monkeypatch, capsys):
    import types

    def interrupted(argv, prog):
        raise KeyboardInterrupt

    fake = types.SimpleNamespace(main=interrupted)
    monkeypatch.setitem(cli.COMMANDS, ("fake", None), ("fake_mod:main", "test"))
    monkeypatch.setattr(importlib, "import_module", lambda name: fake)
    assert cli.main(["fake"]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err and "KeyboardInterrupt" not in err


def test_existing_output_file_is_a_clear_error_not_a_traceback(tmp_path, capsys):
    existing = tmp_path / "report.json"
    existing.write_text("{}")
    # reproduce --out naming a file; theory verify --json naming an existing file / a missing folder:
    # refused before any work starts, with exit code 2 and the flag named
    with pytest.raises(SystemExit) as exc:
        cli.main(["reproduce", "--out", str(existing), "--only", "theory"])
    assert exc.value.code == 2 and "--out" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main(["theory", "verify", "--cases", "1", "--json", str(existing)])
    assert exc.value.code == 2 and "file exists" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main(["theory", "score-scale", "--json", str(tmp_path / "nonexistent" / "dir" / "x.json")])
    assert exc.value.code == 2 and "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "nonexistent").exists()
    with pytest.raises(SystemExit) as exc:
        cli.main(["synthetic", "spt", "--preset", "quick", "--out", str(existing)])
    assert exc.value.code == 2 and "--out" in capsys.readouterr().err


def test_a_path_whose_bytes_are_not_utf8_works_under_a_strict_utf8_console(tmp_path):
    """A folder named in another encoding (here the byte 0xff) reaches Python as text with a lone surrogate; under a
    UTF-8 locale stdout is strict, and the run failed on its last line ("wrote PATH") after its work was done."""
    import os
    import subprocess
    import sys

    folder = os.path.join(os.fsencode(tmp_path), b"runs\xff")
    os.mkdir(folder)
    with open(os.path.join(folder, b"t.txt"), "w", encoding="utf-8") as fh:
        fh.write("a b c\nd e f\ng h i\n")
    out = os.path.join(folder, b"d.json")
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}  # strict, as under LANG=en_US.UTF-8
    p = subprocess.run([sys.executable, "-m", "initlab.app.cli", "diagnose", "initlab:spt", "--data",
                        os.path.join(folder, b"t.txt"), "--json", out], env=env, capture_output=True)
    assert p.returncode == 0, p.stderr.decode("utf-8", "replace")
    assert b"wrote " + out in p.stdout and os.path.isfile(out)
