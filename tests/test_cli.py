"""The console script's dispatcher: every command resolves to an importable main()."""

from __future__ import annotations

import importlib

import pytest

from initlab import cli


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
