"""What a user reads: the README's command table, docs/commands.md and every ``--help`` agree.

The table and the page are generated from the CLI's own registry and parsers
(``python -m initlab.app.docgen.cli_docs``); these tests fail when the committed copies are stale,
when an option has no help text or shows literal markup in ``--help``, when the README stops being a
front page, or when a relative link in the README or docs/ points nowhere.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from initlab.app import cli
from initlab.app.docgen import cli_docs

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
PARSERS = cli_docs.all_parsers()
#: markup that prints literally in a terminal: code spans, bold/italic, reST roles
MARKUP = re.compile(r"`|\*\*|(?:^|\s)\*[^\s*][^*]*\*(?=\s|$|[.,;:)])|:(?:func|mod|class|meth):")


def _block(text: str) -> str:
    return cli_docs.BEGIN_MARK + text.split(cli_docs.BEGIN_MARK)[1].split(cli_docs.END_MARK)[0] + cli_docs.END_MARK


def test_readme_command_table_is_generated_from_the_registry():
    assert _block(README.read_text(encoding="utf-8")) == cli_docs.command_table_markdown(), (
        "README command table is stale: run python -m initlab.app.docgen.cli_docs")


def test_commands_page_is_generated_from_the_parsers():
    page = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    assert page == cli_docs.commands_page_markdown(), "docs/commands.md is stale: run python -m initlab.app.docgen.cli_docs"


def test_every_registered_command_and_figure_script_is_in_the_table():
    names = {name for name, _, _ in PARSERS}
    assert len(names) == len(cli.COMMANDS) + len(cli_docs.FIGURE_SCRIPTS)
    table = cli_docs.command_table_markdown()
    for name, _, parser in PARSERS:
        assert f"`{cli_docs.table_cell(cli_docs.usage_line(parser, name))}`" in table


def test_required_options_appear_unbracketed():
    usage = {name: cli_docs.usage_line(p, name) for name, _, p in PARSERS}
    assert " --model MODEL " in usage["initlab splade eval"] and "[--model" not in usage["initlab splade eval"]
    assert " --backbone BACKBONE --k K " in usage["initlab splade train"] and "[--backbone" not in usage["initlab splade train"]
    assert "--ablation {" in usage["initlab lra sweep"] and "[--ablation" not in usage["initlab lra sweep"]


@pytest.mark.parametrize("name,parser", [(n, p) for n, _, p in PARSERS], ids=[n for n, _, _ in PARSERS])
def test_every_option_has_plain_help(name, parser):
    parser.format_help()  # a stray % in a help string breaks --help
    assert parser.description and not MARKUP.search(parser.description), f"{name}: description {parser.description!r}"
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        flag = "/".join(action.option_strings) or action.dest
        assert action.help and action.help.strip(), f"{name} {flag}: no help text"
        assert not MARKUP.search(action.help), f"{name} {flag}: literal markup in help {action.help!r}"


def test_markup_pattern_catches_markup_but_not_globs():
    assert MARKUP.search("use `initlab spt`") and MARKUP.search("a **bold** word") and MARKUP.search("an *emphasised* word")
    assert not MARKUP.search("folder of basic_*.tsv and new_aan_pairs.*.tsv") and not MARKUP.search("fields mc_* in --json")


def test_registry_help_is_plain():
    for key, (_, help_) in cli.COMMANDS.items():
        assert help_ and not MARKUP.search(help_), f"{key}: {help_!r}"


def test_readme_is_a_front_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 160, f"README has {len(lines)} lines; move detail into docs/"
    start = next(i for i, line in enumerate(lines) if line.startswith("## Quick start"))
    claims = next(i for i, line in enumerate(lines) if line.startswith("## What reproduces"))
    assert start < 40 and claims < 60, "Quick start and the claims table must be visible near the top"


def _relative_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    return [link for link in links if not re.match(r"[a-z]+:", link) and not link.startswith("#")]


#: pages written on parallel branches; while one is absent, links to it are an expected failure.
#: Delete this set once all of them are merged.
PAGES_IN_FLIGHT: set[str] = set()


@pytest.mark.parametrize("page", [README, *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_resolve(page):
    missing = sorted({link.split("#")[0] for link in _relative_links(page) if not (page.parent / link.split("#")[0]).exists()})
    if missing:
        in_flight = {str((page.parent / m).resolve().relative_to(ROOT)) for m in missing} <= PAGES_IN_FLIGHT
        if in_flight:
            pytest.xfail(f"{page.name}: pages not merged yet: {missing}")
        assert not missing, f"{page.name}: links to missing files {missing}"


def _slugs(page: Path) -> set[str]:
    """GitHub's heading anchors of a markdown page (lower case, punctuation dropped, spaces to hyphens)."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    heads = re.findall(r"^#+ +(.+?) *$", text, flags=re.M)
    return {re.sub(r"[^a-z0-9_ -]", "", h.lower()).replace(" ", "-") for h in heads}


@pytest.mark.parametrize("page", [README, *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_anchors_resolve(page):
    bad = []
    for link in _relative_links(page) + [l for l in re.findall(r"\]\((#[^)\s]+)\)", page.read_text(encoding="utf-8"))]:
        target, _, anchor = link.partition("#")
        path = page if not target else page.parent / target
        if anchor and path.suffix == ".md" and path.exists() and anchor not in _slugs(path):
            bad.append(link)
    assert not bad, f"{page.name}: anchors that match no heading: {bad}"
