"""Documented commands and shown outputs cannot go stale: every command in the README and docs/ parses with the
real parser, every dotted initlab name exists, every shown-output block is what the commands print now (words
exactly, numbers within a stated tolerance), and the checks catch each kind of staleness."""

from __future__ import annotations

from initlab.cli import parse_documented
from initlab.commands import doc_examples as D


def test_every_documented_command_parses_with_its_real_parser():
    commands = D.documented_commands()
    assert len(commands) > 100 and sum(c.fenced for c in commands) > 25  # the collector finds them
    assert {c.argv[1] for c in commands if c.argv[0] == "initlab" and len(c.argv) > 1} >= {"reproduce", "theory", "synthetic", "mlmhead",
                                                                       "splade", "lra"}
    bad = []
    for cmd in commands:
        try:
            parse_documented(cmd)
        except ValueError as err:
            bad.append(str(err))
    assert not bad, "\n".join(bad)


def test_every_named_module_exists():
    names = D.named_modules()
    assert len(names) > 50
    missing = [f"{where}: {name}" for where, name in names if not D.module_exists(name)]
    assert not missing, "\n".join(missing)


def test_shown_outputs_are_what_the_commands_print_now():
    blocks = D.shown_outputs()
    assert [b.name for b in blocks] == ["mlmhead-tiny-modernbert"] and "tiny_masked_lm" in blocks[0].setup
    for block in blocks:
        diff = D.same_output(block.text, D.regenerate(block))
        assert diff is None, f"{block.page}: shown-output {block.name} is stale ({diff}); run " \
                             "python -m initlab.commands.doc_examples --write"


def test_the_checks_catch_stale_commands_modules_and_outputs(tmp_path, capsys):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "Run `initlab mlmhead inspect --no-such-option` or `initlab.runs.NoSuchThing`.\n\n"
        "```bash\n"
        "initlab lra finetune --preset nope --out x\n"
        "initlab nosuch command\n"
        "initlab splade train --backbone tiny --k 1 --out x \\\n    --bogus\n"
        "python -m initlab.no_such_module --x\n"
        "initlab lra listops-generate --out x --size toy\n"  # fine
        "```\n")
    bad = []
    for cmd in D.documented_commands(tmp_path):
        try:
            parse_documented(cmd)
        except ValueError as err:
            bad.append(str(err))
    assert len(bad) == 5, bad
    assert "has no option --no-such-option" in bad[0] and "invalid choice: 'nope'" in bad[1]
    assert "no such initlab command" in bad[2] and "unrecognized arguments: --bogus" in bad[3]
    assert "README.md:6" in bad[3] and "no module initlab.no_such_module" in bad[4]
    assert [n for _, n in D.named_modules(tmp_path) if not D.module_exists(n)] == ["initlab.runs.NoSuchThing",
                                                                                   "initlab.no_such_module"]
    shown = "W_head: Frobenius norm 188.1, row norm mean 9.926\n  2 |    8.6e-08 | 0.501"
    assert D.same_output(shown, shown.replace("188.1", "188.2").replace("8.6e-08", "8.3e-08")) is None  # rounding
    assert "number 0 differs: shown 188.1, now 190" in D.same_output(shown, shown.replace("188.1", "190"))
    assert "text differs" in D.same_output(shown, shown.replace("row norm", "column norm"))
    assert "text differs" in D.same_output(shown, shown + "\nCOLLAPSED at k = 1")
    # the command line: --check exits 1 on a stale block and names the fix; --write makes it current
    (tmp_path / "README.md").write_text(
        "```python\nprint('set-up')\n```\n\n<!-- BEGIN shown-output lf -->\n```\n$ initlab lra listops-generate --out d "
        "--size toy --seed 3\ntrain: d/basic_train.tsv\n```\n<!-- END shown-output lf -->\n")
    assert D.main(["--check", "--root", str(tmp_path)]) == 1
    assert "shown-output lf is stale" in capsys.readouterr().err
    assert D.main(["--write", "--root", str(tmp_path)]) == 0
    assert D.main(["--check", "--root", str(tmp_path)]) == 0
    assert "val: d/basic_val.tsv" in (tmp_path / "README.md").read_text()
