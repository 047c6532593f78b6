"""``initlab lra pretrain|finetune|sweep|listops-generate``: thin argparse layers over the library.

Configs: ``--preset`` picks a run file (:data:`initlab.realdata.lra.config.PRESETS`: a task's Amos et al. 2024
sizes, ``cpu-listops`` or ``toy``; or the path of a run file) giving a frozen
:class:`~initlab.realdata.lra.config.LRAConfig`; ``--set KEY=VALUE`` (repeatable; VALUE parsed as
JSON, else a string) and the named flags are applied as a diff with strict checks. Multi-GPU: launch
the same command with ``accelerate launch -m initlab.app.cli lra ...`` or ``torchrun --nproc_per_node N -m
initlab.app.cli lra ...``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from initlab.experiment.options import add_preset_option, fail, int_at_least, int_list
from initlab.config import derive, parse_overrides
from initlab.runs import check_input_path, check_output_path
from initlab.textio import read_text

__all__ = ["pretrain_main", "finetune_main", "sweep_main", "listops_main", "listops_plateau_main", "fidelity_main"]


def _common(parser: argparse.ArgumentParser, default_out: str) -> None:
    from initlab.realdata.lra.config import PRESETS

    add_preset_option(parser, PRESETS, "cpu-listops", "base config")
    parser.add_argument("--data-dir", default=None, help="task data in its standard layout (ListOps: folder of basic_*.tsv; "
                        "text: aclImdb; retrieval: folder of new_aan_pairs.*.tsv; image: cifar-10-batches-py; pathfinder: "
                        "lra_release or pathfinder32/curv_contour_length_14). Default: generated ListOps / datasets library")
    parser.add_argument("--seed", type=int_at_least(0), default=None,
                        help="seed of init, data order, masking and dropout, an integer >= 0 (default: the preset's); the "
                        "data split does not follow it (split_seed)")
    parser.add_argument("--limit", type=int_at_least(1), default=None, help="cap examples per split (quick runs)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override any LRAConfig field")
    parser.add_argument("--out", type=Path, default=Path(default_out), help=f"output folder (default: {default_out})")
    parser.add_argument("--overwrite", action="store_true", help="redo a finished run (the old folder is moved aside)")
    parser.add_argument("--no-progress", action="store_true", help="no tqdm bars")


def _config(args, extra: dict):
    from initlab.realdata.lra.config import get_preset

    check_input_path(args.data_dir, flag="--data-dir", kind="folder")
    diff = {k: v for k, v in {"data_dir": args.data_dir, "seed": args.seed, "limit": args.limit}.items() if v is not None}
    diff.update({k: v for k, v in extra.items() if v is not None})
    diff.update(parse_overrides(args.set))
    return derive(get_preset(args.preset), **diff)


def pretrain_main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Self-pretrain (masked or causal) on a task's training inputs and keep the best-validation checkpoint."""
    from initlab.realdata.lra.train import pretrain

    p = argparse.ArgumentParser(prog=prog or "initlab lra pretrain", description=pretrain_main.__doc__)
    _common(p, "results/lra/pretrain")
    p.add_argument("--objective", choices=("masked", "causal"), default=None,
                   help="masked: denoising on masked positions; causal: next-token prediction (default: the preset's)")
    p.add_argument("--spt-epochs", type=int_at_least(1), default=None, help="self-pretraining epochs (default: the preset's)")
    p.add_argument("--spt-task", default=None, help="use another task's inputs for SPT (cross-task ablation)")
    p.add_argument("--spt-data-dir", default=None, help="data folder of --spt-task (only with an --spt-task other than the task)")
    p.add_argument("--milestones", type=int_list(1), default=[],
                   help="comma-separated epochs at which to keep the best-so-far checkpoint")
    args = p.parse_args(argv)
    try:
        check_output_path(args.out, flag="--out", kind="folder", overwrite=args.overwrite)
        check_input_path(args.spt_data_dir, flag="--spt-data-dir", kind="folder")
        cfg = _config(args, {"spt_objective": args.objective, "spt_epochs": args.spt_epochs, "spt_task": args.spt_task,
                             "spt_data_dir": args.spt_data_dir})
        if args.spt_data_dir is not None and (cfg.spt_task or cfg.task) == cfg.task:
            raise ValueError(f"--spt-data-dir {args.spt_data_dir}: used only with an --spt-task other than the task "
                             f"({cfg.task}); the task's own inputs are read from --data-dir")
        res = pretrain(cfg, args.out, overwrite=args.overwrite, milestones=args.milestones, progress=not args.no_progress)
    except (ValueError, TypeError, FileNotFoundError, FileExistsError) as err:
        fail(p, err)
    print(json.dumps({k: v for k, v in res.items() if k != "history"}, indent=2))
    return 0


def finetune_main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Fine-tune on labels from scratch or from an SPT checkpoint; report test accuracy at the best validation epoch."""
    from initlab.realdata.lra.train import finetune

    p = argparse.ArgumentParser(prog=prog or "initlab lra finetune", description=finetune_main.__doc__)
    _common(p, "results/lra/finetune")
    p.add_argument("--spt", type=Path, default=None, help="SPT checkpoint: a .safetensors file or a pretrain run folder "
                   "(its spt_best.safetensors). Without it: from scratch")
    p.add_argument("--init-groups", choices=("all", "qk", "qkvo", "ffn"), default=None,
                   help="hybrid init: copy only these SPT weights (default all)")
    p.add_argument("--freeze", default=None, help="comma-separated parameter groups kept at init, e.g. attention")
    p.add_argument("--epochs", type=int_at_least(1), default=None, help="fine-tuning epochs (default: the preset's)")
    args = p.parse_args(argv)
    try:
        check_output_path(args.out, flag="--out", kind="folder", overwrite=args.overwrite)
        ckpt = args.spt
        if ckpt is not None and not ckpt.exists():
            raise FileNotFoundError(f"--spt {ckpt}: no such file or folder (expected spt_best.safetensors or the folder "
                                    "of an initlab lra pretrain run)")
        if ckpt is not None and ckpt.is_dir():
            if not (ckpt / "config.json").is_file():
                raise ValueError(f"--spt {ckpt}: not the folder of an initlab lra pretrain run (no config.json); pass "
                                 "the run folder or its spt_best.safetensors")
            if not (ckpt / "DONE").exists():
                raise ValueError(f"--spt: {ckpt} is an unfinished pretrain run (no DONE); resume it with the same "
                                 "initlab lra pretrain command first, or pass a .safetensors file explicitly")
            ckpt = ckpt / "spt_best.safetensors"
        freeze = None if args.freeze is None else tuple(x.strip() for x in args.freeze.split(",") if x.strip())
        cfg = _config(args, {"init": "spt" if ckpt is not None else "scratch", "init_groups": args.init_groups,
                             "freeze": freeze, "epochs": args.epochs})
        res = finetune(cfg, args.out, ckpt, overwrite=args.overwrite, progress=not args.no_progress)
    except (ValueError, TypeError, FileNotFoundError, FileExistsError) as err:
        fail(p, err)
    print(json.dumps({k: v for k, v in res.items() if k != "history"}, indent=2))
    return 0


def sweep_main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Run an ablation (spt-epochs, depth, cross-task, frozen-attention, hybrid) over seeds, resumably."""
    from initlab.realdata.lra.config import ABLATIONS
    from initlab.realdata.lra.sweep import run_sweep

    p = argparse.ArgumentParser(prog=prog or "initlab lra sweep", description=sweep_main.__doc__)
    _common(p, "results/lra/sweep")
    p.add_argument("--ablation", required=True, choices=sorted(ABLATIONS), help="which ablation grid to run")
    p.add_argument("--seeds", type=int_list(0), default=[0], help="comma-separated seeds (default 0)")
    from initlab.experiment.options import add_executor_options

    add_executor_options(p, gpu=True)
    args = p.parse_args(argv)
    try:
        check_output_path(args.out, flag="--out", kind="folder", overwrite=args.overwrite)
        cfg = _config(args, {})
        rows = run_sweep(args.ablation, cfg, args.out, args.seeds, overwrite=args.overwrite, progress=not args.no_progress,
                         workers=_sweep_workers(args.workers), scheduler=args.scheduler)
    except (ValueError, TypeError, FileNotFoundError, FileExistsError, ImportError) as err:
        fail(p, err)
    for r in rows:
        print(f"{r['condition']:<22} seed {r['seed']}: test acc {r['test_acc']:.4f} (val {r['val_acc']:.4f} @ epoch {r['best_epoch']})")
    print(f"results: {args.out / 'results.csv'}")
    return 0


def _sweep_workers(workers: int | None) -> int | None:
    """``--workers`` or its default: one per GPU where there are GPUs (the executor pins one to each), else None
    (one per core)."""
    if workers is not None:
        return workers
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else None


def listops_main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Generate ListOps with LRA's generator into basic_{train,val,test}.tsv."""
    from initlab.realdata.lra.config import get_preset
    from initlab.realdata.lra.listops import ListOpsGenConfig, write_listops_tsv

    p = argparse.ArgumentParser(prog=prog or "initlab lra listops-generate", description=listops_main.__doc__)
    p.add_argument("--out", type=Path, required=True, help="folder for basic_*.tsv")
    p.add_argument("--size", choices=("lra", "cpu-listops", "toy"), default="lra",
                   help="lra: 96k/2k/2k, lengths 500-2000 (the LRA release); cpu-listops/toy: short generated sets")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="generator seed, an integer >= 0 (default 0)")
    p.add_argument("--overwrite", action="store_true", help="replace basic_*.tsv files already in --out")
    args = p.parse_args(argv)
    gen = ListOpsGenConfig(seed=args.seed) if args.size == "lra" else derive(get_preset(args.size).listops_gen, seed=args.seed)
    try:
        check_output_path(args.out, flag="--out", kind="folder", overwrite=True)  # a file in the way; no DONE here
        paths = write_listops_tsv(args.out, gen, overwrite=args.overwrite)
    except (FileExistsError, ValueError) as err:
        fail(p, err)
    for k, v in paths.items():
        print(f"{k}: {v}")
    return 0


def listops_plateau_main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """``initlab lra listops-plateau --out DIR``: the preregistered CPU ListOps experiment (resumable)."""
    from initlab.realdata.lra.experiment import run_listops_plateau

    p = argparse.ArgumentParser(prog=prog or "initlab lra listops-plateau",
                                description="Run the preregistered CPU ListOps SPT-vs-scratch experiment (plateau budgets).")
    p.add_argument("--out", type=Path, required=True, help="output folder (an unfinished run resumes)")
    p.add_argument("--seeds", type=int_list(0), default=None, help="comma-separated seeds (default: the preregistered 10,11,12)")
    p.add_argument("--overwrite", action="store_true", help="redo a finished run (the old folder is moved aside)")
    p.add_argument("--progress", action="store_true", help="show progress bars")
    args = p.parse_args(argv)
    try:
        check_output_path(args.out, flag="--out", kind="folder", overwrite=args.overwrite)
        summary = run_listops_plateau(args.out, args.seeds, overwrite=args.overwrite, progress=args.progress)
    except (ValueError, FileExistsError) as err:
        fail(p, err)
    print(read_text(args.out / "summary.md"))
    return 0 if summary.get("seeds") else 1


def fidelity_main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """``initlab lra fidelity [--write PAGE]``: the LRA preset fidelity table vs Amos et al. and LRA's configs."""
    from initlab.realdata.lra.fidelity import render, write_page

    p = argparse.ArgumentParser(prog=prog or "initlab lra fidelity",
                                description="Print the LRA preset fidelity table, or replace it in a markdown page.")
    p.add_argument("--write", type=Path, default=None, help="markdown page holding the table's two marker lines")
    args = p.parse_args(argv)
    if args.write is None:
        print(render())
        return 0
    try:
        check_input_path(args.write, flag="--write", kind="file", what="a markdown page holding the table's marker lines")
        write_page(args.write)
    except (ValueError, FileNotFoundError) as err:
        fail(p, err)
    return 0
