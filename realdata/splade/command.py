"""``initlab splade train|eval|sweep``: thin argparse layers over :mod:`.train`, :mod:`.sweep`.

Any config field can be overridden with ``--set FIELD=VALUE`` (VALUE parsed as JSON, else a string),
on top of ``--preset`` (a run's name: ``quick``, ``default``, ``full``, ``toy`` a deprecated alias of ``quick``; or
the path of a run file; see :mod:`.config`). Output folders follow initlab's one rule (docs/conventions.md): a finished run (``DONE``, or a
finished training) is refused unless ``--overwrite``; an interrupted one resumes under the same config only.
Exit codes: 0 done, 1 a training diverged (NaN/inf; see ``failure.json``), 2 bad arguments or output path.
Multi-GPU: ``torchrun --nproc_per_node N -m initlab.app.cli splade train ...``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from initlab.experiment.options import add_preset_option, fail, int_at_least, positive_float
from initlab.config import derive, parse_overrides
from initlab.realdata.splade.config import (BACKBONES, DEPRECATED_PRESETS, K_VALUES, PRESETS, SpladeTrainConfig,
                                            cell_config, get_preset)
from initlab.runs import NonFiniteError, check_input_path, check_output_path, unreadable_file

__all__ = ["train_main", "eval_main", "sweep_main", "parse_overrides"]



def _common(p: argparse.ArgumentParser) -> None:
    add_preset_option(p, PRESETS, "full", "the recipe (quick: a tiny in-process model, a few CPU steps; default: 20k "
                      "steps; full: the paper recipe; toy: the deprecated name of quick)")
    p.add_argument("--train-source", default=None, help="ir_datasets:<id> or a local triples TSV (text or id triples)")
    p.add_argument("--train-collection", default=None, help="collection.tsv for id triples")
    p.add_argument("--train-queries", default=None, help="queries.train.tsv for id triples")
    p.add_argument("--data-root", default=None, help="local data folder (msmarco/, beir/<name>/, nanobeir/<Name>/) instead of downloads")
    p.add_argument("--trust-remote-code", action="store_true", help="allow hub code (needed for Alibaba-NLP/gte-en-mlm-base)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE", help="override a config field")
    p.add_argument("--overwrite", action="store_true", help="redo a finished run (the old folder is moved aside)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")


def _check_inputs(args) -> None:
    """The input paths of ``splade train|sweep``, before anything runs: ``--data-root`` a folder, the training
    files (``--train-source`` unless ``ir_datasets:<id>``)."""
    check_input_path(args.data_root, flag="--data-root", kind="folder")
    if args.train_source is not None and not args.train_source.startswith("ir_datasets:"):
        check_input_path(args.train_source, flag="--train-source", kind="file", what="a triples TSV, or ir_datasets:<id>")
    check_input_path(args.train_collection, flag="--train-collection", kind="file", what="collection.tsv 'pid<TAB>passage'")
    check_input_path(args.train_queries, flag="--train-queries", kind="file", what="queries.train.tsv 'qid<TAB>query'")


def _unreadable(p: argparse.ArgumentParser, flag: str, path, err: BaseException) -> None:
    """Exit 2 with one line when ``err`` says a checkpoint's weights file is corrupt; return otherwise."""
    from initlab.mlmhead.checkpoint import is_unreadable_weights

    if is_unreadable_weights(err):
        fail(p, unreadable_file(f"{flag} {path}", err, "checkpoint (its weights file could not be read)"))


def _base_config(args) -> SpladeTrainConfig:
    if args.preset in DEPRECATED_PRESETS:
        print(f"note: --preset {args.preset} is deprecated, use --preset {DEPRECATED_PRESETS[args.preset]} (the same "
              "preset); the old name will be removed in the next release", file=sys.stderr)
        args.preset = DEPRECATED_PRESETS[args.preset]
    diff = parse_overrides(args.overrides)
    for field, val in (("train_source", args.train_source), ("train_collection", args.train_collection),
                       ("train_queries", args.train_queries), ("data_root", args.data_root)):
        if val is not None:
            diff[field] = val
    if args.trust_remote_code:
        diff["trust_remote_code"] = True
    return derive(get_preset(args.preset), **diff)


def _ks(text: str) -> list[float]:
    try:
        ks = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not ks or any(k <= 0 for k in ks):
        raise argparse.ArgumentTypeError(f"expected positive numbers, got {text!r}")
    return ks


def _diverged(p: argparse.ArgumentParser, err: NonFiniteError) -> int:
    print(f"{p.prog}: error: {err}", file=sys.stderr)
    return 1


def train_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    p = argparse.ArgumentParser(prog=prog or "initlab splade train",
                                description="Train one SPLADE model (backbone x k) and save a safetensors checkpoint; resumable.")
    p.add_argument("--backbone", required=True,
                   help=f"short name ({', '.join(BACKBONES)}), hub id or model folder; 'tiny' with --preset quick")
    p.add_argument("--k", type=positive_float, required=True, help="MLM-head rescaling factor (W_head / k before training)")
    p.add_argument("--out", type=Path, required=True, help="output folder of the run")
    p.add_argument("--eval", action="store_true", help="evaluate after training (the config's eval sets)")
    _common(p)
    args = p.parse_args(argv)
    from initlab.realdata.splade.sweep import resolve_eval_sets, run_cell
    from initlab.realdata.splade.train import leave_process_group, train_splade

    try:
        check_output_path(args.out, flag="--out", kind="folder", overwrite=args.overwrite)
        _check_inputs(args)
        cfg = cell_config(_base_config(args), args.backbone, args.k)
        if args.eval:
            if not resolve_eval_sets(cfg):
                raise ValueError(f"--eval: preset {args.preset} has no evaluation sets (eval_sets empty, beir and "
                                 "nanobeir off); add e.g. --set 'eval_sets=[\"msmarco-dev\"]' --data-root DIR, or drop --eval")
            res = run_cell(cfg, args.out, overwrite=args.overwrite, progress=not args.no_progress)
        else:
            res = train_splade(cfg, args.out, overwrite=args.overwrite, progress=not args.no_progress)
            res = {k: v for k, v in res.items() if k != "config"}
        leave_process_group()  # torchrun: every rank leaves the group together before exiting
    except NonFiniteError as err:
        return _diverged(p, err)
    except (ValueError, TypeError, OSError) as err:  # OSError: missing file, no network, existing run
        fail(p, err)
    except Exception as err:  # a corrupt backbone checkpoint; anything else is a bug and keeps its traceback
        _unreadable(p, "--backbone", args.backbone, err)
        raise
    if res:
        print(json.dumps(res, indent=2, default=str))
    return 0


def eval_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    p = argparse.ArgumentParser(prog=prog or "initlab splade eval",
                                description="Evaluate a SPLADE safetensors checkpoint (exact top-k, ir_measures, FLOPS).")
    p.add_argument("--model", type=Path, required=True, help="checkpoint folder (<run>/model)")
    p.add_argument("--sets", default="msmarco-dev,trec-dl-2019,beir13,nanobeir",
                   help="comma-separated: msmarco-dev, trec-dl-2019, beir13, nanobeir, a BEIR name, nano:<Name>, "
                        "ir_datasets:<id>, msmarco:<folder>[:split], beir:<folder>")
    p.add_argument("--out", type=Path, required=True, help="output folder for results.json|csv (a new folder per evaluation)")
    p.add_argument("--data-root", default="", help="local data folder instead of downloads")
    p.add_argument("--top-k", type=int_at_least(1), default=1000, help="documents retrieved per query, exactly (default 1000)")
    p.add_argument("--batch-size", type=int_at_least(1), default=128, help="texts per encoding batch (default 128)")
    p.add_argument("--trust-remote-code", action="store_true", help="allow hub code (needed for Alibaba-NLP/gte-en-mlm-base)")
    p.add_argument("--seismic", action="store_true", help="also retrieve approximately with pyseismic-lsr; report its recall vs exact")
    p.add_argument("--head-engine", choices=("fused", "dense"), default="fused",
                   help="SPLADE head while encoding: fused (no texts x tokens x vocabulary logits; default) or dense "
                        "(sentence-transformers' own path); the same vectors")
    p.add_argument("--overwrite", action="store_true", help="redo a finished evaluation (the old folder is moved aside)")
    args = p.parse_args(argv)
    from initlab.realdata.splade.data import BEIR13, NANOBEIR_NAMES
    from initlab.realdata.splade.sweep import eval_checkpoint

    names: list[str] = []
    for s in (x.strip() for x in args.sets.split(",") if x.strip()):
        names += list(BEIR13) if s == "beir13" else [f"nano:{n}" for n in NANOBEIR_NAMES] if s == "nanobeir" else [s]
    if not names:
        p.error("argument --sets: expected at least one evaluation set")
    try:
        check_output_path(args.out, flag="--out", kind="folder", overwrite=args.overwrite)
        check_input_path(args.model, flag="--model", kind="folder", what="a checkpoint folder written by initlab splade train")
        check_input_path(args.data_root or None, flag="--data-root", kind="folder")
        res = eval_checkpoint(args.model, names, args.out, data_root=args.data_root, top_k=args.top_k,
                              batch_size=args.batch_size, overwrite=args.overwrite, trust_remote_code=args.trust_remote_code,
                              approx=args.seismic, engine=args.head_engine)
    except (ValueError, TypeError, OSError) as err:  # OSError: missing file, no network, existing run
        fail(p, err)
    except Exception as err:  # a corrupt checkpoint; anything else is a bug and keeps its traceback
        _unreadable(p, "--model", args.model, err)
        raise
    print(json.dumps(res["summary"], indent=2, default=str))
    if res["summary"]["collapsed"]:
        print("WARNING: collapsed representations: " + "; ".join(res["summary"]["collapse_reasons"]), file=sys.stderr)
    return 0


def sweep_main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    p = argparse.ArgumentParser(prog=prog or "initlab splade sweep",
                                description="Train + evaluate the backbone x k grid; finished cells are skipped.")
    p.add_argument("--backbones", default=None,
                   help=f"comma-separated short names or hub ids (default: {','.join(BACKBONES)}; gte only with --trust-remote-code)")
    p.add_argument("--ks", type=_ks, default=list(K_VALUES), help="comma-separated rescaling factors (default 1,2,4,8,16,32)")
    p.add_argument("--out", type=Path, required=True, help="output folder of the sweep (one subfolder per cell)")
    _common(p)
    from initlab.experiment.options import add_executor_options

    add_executor_options(p, gpu=True)
    args = p.parse_args(argv)
    from initlab.realdata.splade.sweep import run_sweep

    if args.backbones is None:
        backbones = [b for b in BACKBONES if args.trust_remote_code or b != "gte"]
        if not args.trust_remote_code:
            print("note: gte (Alibaba-NLP/gte-en-mlm-base, hub code) left out; add --trust-remote-code to include it")
    else:
        backbones = [b.strip() for b in args.backbones.split(",") if b.strip()]
    try:
        check_output_path(args.out, flag="--out", kind="folder", overwrite=args.overwrite)
        _check_inputs(args)
        rows = run_sweep(_base_config(args), args.out, backbones=backbones, ks=args.ks, overwrite=args.overwrite,
                         progress=not args.no_progress, workers=args.workers, scheduler=args.scheduler)
    except (ValueError, TypeError, OSError, ImportError) as err:  # OSError: missing file, no network, existing run
        fail(p, err)
    for r in rows:
        if r.get("status") == "failed":
            print(f"{r['cell']:<40} FAILED: {r['error']}")
        else:
            print(f"{r['cell']:<40} nano nDCG@10 {r.get('nanobeir_nDCG@10')}  collapsed {r.get('collapsed')}")
    failed = [r["cell"] for r in rows if r.get("status") == "failed"]
    if failed:
        print(f"{p.prog}: {len(failed)} cell(s) diverged: {', '.join(failed)}; the sweep is not marked DONE "
              "(rerun to retry them)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(train_main())
