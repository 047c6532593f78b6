"""The ``initlab`` console script: ``initlab GROUP COMMAND [options]``.

Each command is a thin ``main(argv) -> int`` in its experiment's ``command`` module (the roof's own in
:mod:`initlab.app.commands`), imported only when
the command runs (so ``initlab --help`` stays fast and a missing optional extra only affects the
commands that need it). The command table (:data:`COMMANDS`) is built from the experiments' records
(:data:`initlab.app.experiments.EXPERIMENTS`, each naming its commands) and the roof's own (:data:`ROOF_COMMANDS`).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import Sequence

from initlab.app.experiments import EXPERIMENTS
from initlab.experiment.record import Command, Experiment

#: the roof's own commands, each after the record whose commands it follows in the usage (None: before them all)
ROOF_COMMANDS: tuple[tuple[str | None, Command], ...] = (
    (None, Command("reproduce", None, "initlab.app.commands.reproduce:main", "run the CPU reproduction (theorems, synthetic SPT, MLM-head score scale, synthetic SPLADE) and write a report")),
    ("synthetic_splade", Command("diagnose", None, "initlab.app.commands.diagnose:main", "before training: is label-only training of a model on your data blind to query-dependent attention, and will self-pretraining help?")),
    ("synthetic_splade_ood", Command("mlmhead", "inspect", "initlab.app.commands.mlmhead:inspect_main", "MLM-head scale report for a Hugging Face masked-LM checkpoint")),
    ("synthetic_splade_ood", Command("mlmhead", "rescale", "initlab.app.commands.mlmhead:rescale_main", "divide a checkpoint's MLM-head projection by k and save it")),
)


def command_table(records: Sequence[Experiment], roof: Sequence[tuple[str | None, Command]] = ROOF_COMMANDS
                  ) -> dict[tuple[str, str | None], tuple[str, str]]:
    """``(group, command) -> ("module:function", one-line help)``, in usage order: the roof commands placed before
    all (``None``), then each record's commands (:attr:`initlab.experiment.record.Experiment.commands`) followed
    by the roof commands placed after that record.

    Raises:
        ValueError: two commands with one ``(group, command)``, a group that is both run directly and has
            subcommands, or a roof command placed after a record that is not in ``records``.
    """
    names = {r.name for r in records}
    lost = [after for after, _ in roof if after is not None and after not in names]
    if lost:
        raise ValueError(f"roof commands placed after unknown experiment(s) {lost}; expected names from {sorted(names)}")
    table: dict[tuple[str, str | None], tuple[str, str]] = {}

    def put(c: Command) -> None:
        if (c.group, c.name) in table:
            raise ValueError(f"command {c.group} {c.name or ''}: defined twice")
        table[(c.group, c.name)] = (c.target, c.help)

    for c in [c for after, c in roof if after is None]:
        put(c)
    for r in records:
        for c in r.commands:
            put(c)
        for c in [c for after, c in roof if after == r.name]:
            put(c)
    direct = {g for g, c in table if c is None}
    both = sorted(g for g, c in table if c is not None and g in direct)
    if both:
        raise ValueError(f"command group(s) {both}: run directly and with subcommands")
    return table


#: (group, command) -> ("module:function", one-line help). A group with a single command None runs it directly.
COMMANDS: dict[tuple[str, str | None], tuple[str, str]] = command_table(EXPERIMENTS)


def _usage(only_group: str | None = None) -> str:
    lines = ["usage: initlab COMMAND [options]    (initlab COMMAND --help for its options)", "", "commands:"]
    for (group, cmd), (_, help_) in COMMANDS.items():
        if only_group is not None and group != only_group:
            continue
        name = group if cmd is None else f"{group} {cmd}"
        lines.append(f"  {name:<22} {help_}")
    return "\n".join(lines)


def _resolve(argv: Sequence[str]) -> tuple[str, list[str], str]:
    if not argv:
        raise SystemExit(_usage())
    group = argv[0]
    if (group, None) in COMMANDS:
        return COMMANDS[(group, None)][0], list(argv[1:]), group
    cmds = [c for (g, c) in COMMANDS if g == group]
    if not cmds:
        raise SystemExit(f"initlab: unknown command {group!r}\n\n{_usage()}")
    if len(argv) >= 2 and argv[1] in ("-h", "--help"):
        print(_usage(group))
        raise SystemExit(0)
    if len(argv) < 2 or (group, argv[1]) not in COMMANDS:
        got = repr(argv[1]) if len(argv) > 1 else "nothing"
        raise SystemExit(f"initlab {group}: expected one of {', '.join(cmds)}; got {got}\n\n{_usage()}")
    return COMMANDS[(group, argv[1])][0], list(argv[2:]), f"{group} {argv[1]}"


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    return f"{category.__name__}: {message}\n"


def _print_paths_as_given() -> None:
    """Let stdout and stderr print a path whose bytes are not UTF-8 as its bytes (``surrogateescape``, what Python
    decoded it with), as ``ls`` does: under a UTF-8 locale they are strict, and a run failed on its last line
    (``wrote PATH``) after its work was done."""
    for stream in (sys.stdout, sys.stderr):
        if (getattr(stream, "encoding", "") or "").lower().replace("-", "") == "utf8" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="surrogateescape")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if argv and argv[0] == "--version":
        from initlab import __version__

        print(f"initlab {__version__}")
        return 0
    from initlab.runs import InputPathError, NonFiniteError, OutputPathError, RunExistsError, write_error

    warnings.formatwarning = _one_line_warning  # a run's warnings read as messages, not source excerpts
    _print_paths_as_given()
    target, rest, prog = _resolve(argv)
    module_name, func_name = target.split(":")
    module = importlib.import_module(module_name)
    func = getattr(module, func_name)
    try:
        return int(func(rest, prog=f"initlab {prog}") or 0)
    except NonFiniteError as err:  # a diverged training: no DONE was written; exit 1 like a failed check
        print(f"initlab {prog}: error: {err}", file=sys.stderr)
        return 1
    except (RunExistsError, OutputPathError, InputPathError) as err:  # the path rules (docs/conventions.md)
        print(f"initlab {prog}: error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # a write the disk refused (full, read-only): one line naming the path, exit 2
        wrapped = write_error(err, getattr(err, "filename", None) or "an output file")
        if wrapped is None:
            raise
        print(f"initlab {prog}: error: {wrapped}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Ctrl-C: no traceback. Finished cells and checkpoints are kept; the same command resumes.
        print(f"\ninitlab {prog}: interrupted; finished parts are kept, rerun the same command to resume",
              file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
