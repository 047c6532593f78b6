"""The ``initlab`` console script: ``initlab GROUP COMMAND [options]``.

Each command is a thin ``main(argv) -> int`` in its experiment's ``command`` module (the roof's own in
:mod:`initlab.app.commands`), imported only when
the command runs (so ``initlab --help`` stays fast and a missing optional extra only affects the
commands that need it).
"""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import Sequence

# (group, command) -> ("module:function", one-line help). A group with a single command None runs it directly.
COMMANDS: dict[tuple[str, str | None], tuple[str, str]] = {
    ("reproduce", None): ("initlab.app.commands.reproduce:main", "run the CPU reproduction (theorems, synthetic SPT, MLM-head score scale, synthetic SPLADE) and write a report"),
    ("theory", "verify"): ("initlab.theorycheck.verify.command:verify_main", "check the attention-gradient statements (T1-T7) on fresh random cases"),
    ("theory", "score-scale"): ("initlab.theorycheck.score_scale.command:score_scale_main", "tabulate the SPLADE score-scale analysis against the rescaling factor k"),
    ("synthetic", "spt"): ("initlab.synthetic.spt.command:spt_main", "synthetic length-100 self-pretraining experiments"),
    ("synthetic", "run"): ("initlab.synthetic.spt.command:run_main", "deprecated name of synthetic spt, kept for one release"),
    ("synthetic", "splade"): ("initlab.synthetic.splade.phase.command:splade_main", "synthetic SPLADE collapse and recovery under MLM-head rescaling"),
    ("diagnose", None): ("initlab.app.commands.diagnose:main", "before training: is label-only training of a model on your data blind to query-dependent attention, and will self-pretraining help?"),
    ("synthetic", "splade-ood"): ("initlab.synthetic.splade.ood.command:splade_ood_main", "synthetic SPLADE out of domain: multi-domain corpus, BM25, plateau rule (exploratory)"),
    ("mlmhead", "inspect"): ("initlab.app.commands.mlmhead:inspect_main", "MLM-head scale report for a Hugging Face masked-LM checkpoint"),
    ("mlmhead", "rescale"): ("initlab.app.commands.mlmhead:rescale_main", "divide a checkpoint's MLM-head projection by k and save it"),
    ("splade", "train"): ("initlab.realdata.splade.command:train_main", "train one SPLADE model (backbone x k) on MS MARCO"),
    ("splade", "eval"): ("initlab.realdata.splade.command:eval_main", "evaluate a SPLADE checkpoint (MS MARCO dev, TREC DL 2019, BEIR, NanoBEIR)"),
    ("splade", "sweep"): ("initlab.realdata.splade.command:sweep_main", "train and evaluate the backbone x k grid, resumable"),
    ("lra", "pretrain"): ("initlab.realdata.lra.command:pretrain_main", "self-pretrain on a Long Range Arena task's inputs"),
    ("lra", "finetune"): ("initlab.realdata.lra.command:finetune_main", "fine-tune (from scratch or from an SPT checkpoint) on an LRA task"),
    ("lra", "sweep"): ("initlab.realdata.lra.command:sweep_main", "run an LRA ablation preset (SPT epochs, depth, cross-task, frozen, hybrid)"),
    ("lra", "listops-plateau"): ("initlab.realdata.lra.command:listops_plateau_main", "the preregistered CPU ListOps SPT-vs-scratch experiment (plateau budgets)"),
    ("lra", "fidelity"): ("initlab.realdata.lra.command:fidelity_main", "the LRA preset fidelity table against Amos et al. and LRA's configs"),
    ("lra", "listops-generate"): ("initlab.realdata.lra.command:listops_main", "generate ListOps (LRA's generator) as basic_{train,val,test}.tsv"),
}


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
