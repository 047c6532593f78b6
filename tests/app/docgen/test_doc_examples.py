"""Documented commands cannot go stale: every command in the README and docs/ parses with the real parser, every
dotted initlab name exists, and the checks catch each kind of staleness. (The shown output of docs/mlmhead.md is
checked by tests/app/docgen/test_mlmhead_doc.py.)"""

from __future__ import annotations

from initlab.app.docgen.cli_docs import parse_documented
from initlab.app.docgen import doc_examples as D


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


def test_the_checks_catch_stale_commands_and_modules(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "Run `initlab mlmhead inspect --no-such-option` or `initlab.runs.NoSuchThing`.\n\n"
        "```bash\n"
        "initlab lra finetune --init-groups nope --out x\n"
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
    assert len(bad) == 6, bad
    assert "has no option --no-such-option" in bad[0] and "invalid choice: 'nope'" in bad[1]
    assert "no run named 'nope'" in bad[2]  # --preset takes a path too, so argparse cannot check the name
    assert "no such initlab command" in bad[3] and "unrecognized arguments: --bogus" in bad[4]
    assert "README.md:7" in bad[4] and "no module initlab.no_such_module" in bad[5]
    assert [n for _, n in D.named_modules(tmp_path) if not D.module_exists(n)] == ["initlab.runs.NoSuchThing",
                                                                                   "initlab.no_such_module"]
