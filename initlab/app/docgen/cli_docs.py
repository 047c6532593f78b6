"""The command table of the README and ``docs/commands.md``, generated from the CLI's own parsers, and the
parser of documented commands (:func:`parse_documented`, used by the documented-commands test).

    python -m initlab.app.docgen.cli_docs [ROOT]    # rewrite ROOT/README.md's command block and ROOT/docs/commands.md
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import sys
from pathlib import Path
from typing import Sequence

from initlab.app.cli import COMMANDS
from initlab.textio import read_text

#: scripts that redraw figures or tables from saved results: module -> one-line help; run as ``python -m MODULE``
FIGURE_SCRIPTS: dict[str, str] = {
    "initlab.paper_figs.theory_figures": "redraw the theory figures (T2 band ratio, T4 projection) from a theory stage folder",
    "initlab.paper_figs.spt_figures": "redraw the synthetic SPT figures from a finished run folder",
    "initlab.paper_figs.score_scale_figures": "redraw the score-scale theory-vs-Monte-Carlo figure",
    "initlab.paper_figs.synthetic_splade_phase_figures": "redraw the synthetic SPLADE phase-diagram figures from an initlab synthetic splade folder",
    "initlab.paper_figs.splade_scale_figures": "redraw the SPLADE-at-scale figure (NanoBEIR nDCG@10 vs FLOPS) from a sweep folder",
    "initlab.paper_figs.lra_figures": "redraw the bar chart of an LRA sweep folder",
    "initlab.app.docgen.headline_figures": "draw the README's headline figures from the saved results in docs/results",
    "initlab.app.docgen.tables": "write the result tables of a finished initlab reproduce folder as markdown pages",
    "initlab.app.docgen.claims": "regenerate the README's claims-verdict table from the saved results in docs/results",
}
BEGIN_MARK, END_MARK = "<!-- BEGIN commands -->", "<!-- END commands -->"


class _ParserCaptured(BaseException):  # not an Exception: a command's broad except must not swallow it
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__(parser.prog)
        self.parser = parser


def command_parser(target: str, prog: str) -> argparse.ArgumentParser:
    """The argparse parser that the command ``target`` ("module:function") builds, without running it.

    The command's ``main(argv, prog=...)`` is called with ``parse_args`` (and ``parse_known_args``)
    replaced by a stub that raises as soon as the parser is complete, so the parser documented is exactly
    the one the command parses with, and nothing after parsing runs. Output written before parsing (the
    deprecation note of an alias) is swallowed.

    Raises:
        RuntimeError: the function returned without parsing its arguments.
    """
    module_name, func_name = target.split(":")
    func = getattr(importlib.import_module(module_name), func_name)

    def stop(self, *args, **kwargs):
        raise _ParserCaptured(self)

    saved = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args
    argparse.ArgumentParser.parse_args = argparse.ArgumentParser.parse_known_args = stop  # type: ignore[method-assign]
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            try:
                func([], prog=prog)
            except TypeError as err:  # a figure script's main(argv) without prog
                if "prog" not in str(err):
                    raise
                func([])
    except _ParserCaptured as got:
        return got.parser
    finally:
        argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = saved  # type: ignore[method-assign]
    raise RuntimeError(f"{target}: returned without parsing its arguments")


def all_parsers() -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(command line, one-line help, parser) for every registered command, then every figure script."""
    out = []
    for (group, cmd), (target, help_) in COMMANDS.items():
        name = "initlab " + (group if cmd is None else f"{group} {cmd}")
        out.append((name, help_, command_parser(target, name)))
    for module, help_ in FIGURE_SCRIPTS.items():
        name = f"python -m {module}"
        out.append((name, help_, command_parser(f"{module}:main", name)))
    return out


def usage_line(parser: argparse.ArgumentParser, name: str | None = None) -> str:
    """argparse's own usage synopsis on one line, without ``[-h]`` (required options appear unbracketed).

    ``name`` replaces the parser's prog (an alias such as ``initlab synthetic run`` parses with the
    parser of the command it stands for).
    """
    formatter = argparse.HelpFormatter(parser.prog, width=100_000)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    usage = " ".join(formatter.format_help().split()).replace(" [-h]", "")
    return usage if name is None else name + usage[len(parser.prog):]


def table_cell(text: str, code: bool = True) -> str:
    """Text for a markdown table cell: pipes escaped; outside code spans also angle brackets and asterisks
    (a glob such as ``basic_*.tsv`` must not open an emphasis)."""
    text = text.replace("|", "\\|")
    return text if code else text.replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")


def command_table_markdown() -> str:
    """The markdown command table (usage synopsis and one-line help per command), between the README markers."""
    lines = [BEGIN_MARK, "| command | what it does |", "| --- | --- |"]
    for name, help_, parser in all_parsers():
        anchor = re.sub(r"[^a-z0-9_ -]", "", name.lower()).replace(" ", "-")
        lines.append(f"| `{table_cell(usage_line(parser, name))}` | {table_cell(help_, code=False)} ([options](docs/commands.md#{anchor})) |")
    lines.append(END_MARK)
    return "\n".join(lines)


def commands_page_markdown() -> str:
    """docs/commands.md: every command with every option and its help text, as argparse sees them."""
    lines = ["# Command reference", "",
             "Generated from the CLI's own parsers by `python -m initlab.app.docgen.cli_docs`; do not edit by hand",
             "(`tests/app/docgen/test_cli_docs.py` fails when this page and the parsers disagree).", ""]
    for name, help_, parser in all_parsers():
        lines += [f"## {name}", "", help_[:1].upper() + help_[1:] + ".", "", "```", usage_line(parser, name), "```", ""]
        rows = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
        if rows:
            formatter = argparse.HelpFormatter(parser.prog, width=100_000)
            lines += ["| option | help |", "| --- | --- |"]
            for a in rows:
                flag = formatter._format_action_invocation(a) if a.option_strings else formatter._format_args(a, a.dest)
                help_text = ("required; " if a.required else "") + (a.help or "")
                lines.append(f"| `{table_cell(flag)}` | {table_cell(help_text, code=False)} |")
            lines.append("")
    return "\n".join(lines)


def write_command_docs(root: Path) -> int:
    """Rewrite the README block between the command markers and docs/commands.md under ``root``."""
    readme = root / "README.md"
    if not readme.is_file():
        raise SystemExit(f"python -m initlab.app.docgen.cli_docs: {readme}: no such file; run it from the repository root or pass the root")
    text = read_text(readme)
    if text.count(BEGIN_MARK) != 1 or text.count(END_MARK) != 1:
        raise SystemExit(f"{readme}: expected exactly one {BEGIN_MARK} ... {END_MARK} block")
    head, rest = text.split(BEGIN_MARK)
    tail = rest.split(END_MARK)[1]
    from initlab.runs import atomic_write_text

    page = root / "docs" / "commands.md"
    for path, text in ((readme, head + command_table_markdown() + tail), (page, commands_page_markdown())):
        mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
        atomic_write_text(path, text).chmod(mode)  # keep the file's permissions (a temporary file is 0600)
    print(f"wrote the command table of {readme} and {root / 'docs' / 'commands.md'}")
    return 0


def parse_documented(cmd) -> argparse.Namespace:
    """Parse ``cmd`` (an :class:`initlab.app.docgen.doc_examples.DocCommand`, a command the README or a docs page
    shows) with the real parser of its command (nothing runs). A reference in the text (``fenced``
    false) may stop short: it must name an existing command (or group) and only options that command has.

    Raises:
        ValueError: an unknown command, group, module or option, or (code blocks) arguments the parser refuses
            (argparse's message).
    """
    argv = list(cmd.argv)
    if argv[0] == "initlab":
        rest = argv[1:]
        if not rest or rest[0] in ("-h", "--help", "--version"):
            return argparse.Namespace()
        group = rest[0]
        groups = {g for g, _ in COMMANDS}
        if (group, None) in COMMANDS:
            target, args, name = COMMANDS[(group, None)][0], rest[1:], f"initlab {group}"
        elif len(rest) >= 2 and (group, rest[1]) in COMMANDS:
            target, args, name = COMMANDS[(group, rest[1])][0], rest[2:], f"initlab {group} {rest[1]}"
        elif group in groups and (len(rest) == 1 and not cmd.fenced or rest[1:2] in (["-h"], ["--help"])):
            return argparse.Namespace()  # the group itself, named in the text, or its --help
        else:
            raise ValueError(f"{cmd.where}: `{cmd.text}`: no such initlab command")
    else:
        module = argv[2]
        from initlab.app.docgen.doc_examples import module_exists

        if not module_exists(module):
            raise ValueError(f"{cmd.where}: `{cmd.text}`: no module {module}")
        mod = importlib.import_module(module)
        source = read_text(mod.__file__) if getattr(mod, "__file__", None) else ""
        if not hasattr(mod, "main") or "argparse" not in source:
            return argparse.Namespace()  # a script without an argparse parser (e.g. the DDP check): it must exist
        target, args, name = f"{module}:main", argv[3:], f"python -m {module}"
    parser = command_parser(target, name)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parsed = parser.parse_args(args)
        _check_run_name(cmd, target, getattr(parsed, "preset", None))
        return parsed
    except SystemExit as exit_:
        message = err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else ""
        if exit_.code in (0, None) and any(a in ("-h", "--help") for a in args):
            return argparse.Namespace()
        short = ("the following arguments are required", "expected one argument", "expected at least one argument")
        if not cmd.fenced and any(words in message for words in short):
            # a reference in the text: it may stop short, but the options it names must exist
            unknown = [a.split("=")[0] for a in args if a.startswith("-")
                       and a.split("=")[0] not in parser._option_string_actions]
            if not unknown:
                return argparse.Namespace()
            message = f"{name} has no option {', '.join(unknown)}"
        raise ValueError(f"{cmd.where}: `{cmd.text}`: {message}") from None


def _check_run_name(cmd, target: str, preset: object) -> None:
    """A ``--preset NAME`` the docs show must name a run of the command's run files (a path is not checked: the docs
    may show a file of the reader's own); argparse cannot check it, since ``--preset`` also takes a path.

    Raises:
        ValueError: naming the page, the command and the unknown run.
    """
    if not isinstance(preset, str) or preset.endswith(".toml") or "/" in preset:
        return
    from initlab.app.experiments import EXPERIMENTS
    from initlab.experiment.record import resolve
    from initlab.runfile import RunFiles

    for exp in EXPERIMENTS:
        if exp.presets and any(c.target == target for c in exp.commands):
            runs = resolve(exp.presets)
            if isinstance(runs, RunFiles) and preset not in runs and preset not in getattr(
                    importlib.import_module(exp.presets.split(":")[0]), "DEPRECATED_PRESETS", {}):
                raise ValueError(f"{cmd.where}: `{cmd.text}`: no run named {preset!r} (docs/runs.md lists them)")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m initlab.app.docgen.cli_docs [ROOT]``: rewrite the command table of ``ROOT/README.md`` (default: the
    current folder) and ``ROOT/docs/commands.md``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m initlab.app.docgen.cli_docs",
                                     description="rewrite the README's command table and docs/commands.md from the CLI's parsers")
    parser.add_argument("root", nargs="?", type=Path, default=Path.cwd(), help="the repository root (default: the current folder)")
    return write_command_docs(parser.parse_args(argv).root)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
