"""The console script's dispatcher: every command resolves to an importable main()."""

from __future__ import annotations

import importlib

import pytest

from initlab.app import cli


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
