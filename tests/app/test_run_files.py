"""Every run file resolves to the config its saved results in docs/results were made with, and the commands offer the
named choices only."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from initlab.app import cli
from initlab.app.docgen import runs_doc
from initlab.config import to_dict
from initlab.experiment.record import resolve
from initlab.runfile import RunFiles

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"


def _saved(folder: str, name: str) -> dict[str, Any]:
    rec = json.loads((RESULTS / folder / name).read_text(encoding="utf-8"))
    return rec if name.startswith("config") else rec["config"]  # a run folder's config.json is the record itself


def saved_runs() -> list[tuple[str, str, str, dict[str, Any]]]:
    """``(experiment, run, where, saved config)`` for every run file whose results are in docs/results."""
    out = []
    for exp, runs in runs_doc.run_files():
        for name in runs:
            if exp.name == "synthetic_spt" and (RESULTS / f"synthetic_spt_{name}" / "summary.json").exists():
                out.append((exp.name, name, f"synthetic_spt_{name}/summary.json", _saved(f"synthetic_spt_{name}", "summary.json")))
    # the phase diagram's earlier runs were saved under the names they had then (docs/results/README.md)
    for folder, name in (("default", "imposed-s"), ("confirm", "imposed-s-confirm"),
                         ("confirm-input", "imposed-s-confirm-input"), ("explore", "explore"), ("full", "full")):
        out.append(("synthetic_splade", name, f"synthetic_splade_{folder}/phase.json",
                    _saved(f"synthetic_splade_{folder}", "phase.json")))
    ood = [("synthetic_splade_ood_confirm", "results.json", "confirm-v2k"),
           ("synthetic_splade_ood_map", "results_v2k.json", "map-v2k"),
           ("synthetic_splade_ood_confirm_v8k_imposed", "config.json", "confirm-v8k-imposed"),
           ("synthetic_splade_ood_reproduce_first", "config.json", "reproduce-first"),
           ("synthetic_splade_ood_confirm_cap100", "config.json", "confirm-v2k-cap100"),
           ("synthetic_splade_ood_reproduce_cap100", "config.json", "reproduce-cap100")]
    ood += [("synthetic_splade_ood_map_axes", p.name, p.stem) for p in (RESULTS / "synthetic_splade_ood_map_axes").glob("map-*.json")]
    ood += [("synthetic_splade_ood_regime", p.name, p.stem.split("_", 1)[1])
            for p in (RESULTS / "synthetic_splade_ood_regime").glob("*_*.json") if p.name.startswith(("config_", "results_"))]
    out += [("synthetic_splade_ood", name, f"{folder}/{file}", _saved(folder, file)) for folder, file, name in ood
            if (RESULTS / folder / file).exists()]
    # the theory stage's saved report (initlab reproduce --preset default)
    out.append(("theory_verify", "default", "theory_verify.json",
                json.loads((RESULTS / "theory_verify.json").read_text(encoding="utf-8"))["config"]))
    return out


def record(exp: str, cfg: Any, saved: dict[str, Any]) -> dict[str, Any]:
    """The config as a run of ``exp`` saves it: :func:`initlab.config.to_dict`; an OOD run folder's ``config.json``
    (:func:`initlab.synthetic.splade.ood.config.config_record`) leaves out an empty ``query_shift``, which its
    report's copy keeps."""
    rec = to_dict(cfg)
    if exp == "synthetic_splade_ood" and "query_shift" not in saved:
        from initlab.synthetic.splade.ood.config import config_record

        rec = config_record(cfg)
    return rec


#: fields the config gained after a saved run, where the run's file sets them off their default to keep what the run
#: did then, and why (every other field added since must be at its default)
ADDED_OFF_DEFAULT = {
    ("synthetic_splade", "imposed-s"): {"posthoc_ks": "post-training rescales came later; () runs none, as then"},
    ("synthetic_splade", "imposed-s-confirm"): {"posthoc_ks": "as imposed-s"},
    ("synthetic_splade", "imposed-s-confirm-input"): {"posthoc_ks": "as imposed-s"},
}


def differences(saved: Any, now: Any, default: Any, path: str = "") -> tuple[list[str], list[str], list[str]]:
    """``(changed, added, removed)``: the dotted fields whose saved value differs from the resolved one, those the
    config gained since the run (with a value other than the default), those it lost since."""
    if not (isinstance(saved, dict) and isinstance(now, dict)):
        return ([path] if saved != now else []), [], []
    changed, added, removed = [], [], []
    for k in sorted(set(saved) | set(now)):
        p = f"{path}.{k}" if path else k
        d = default.get(k) if isinstance(default, dict) else None
        if k not in now:
            removed.append(p)
        elif k not in saved:
            if now[k] != d:
                added.append(p)
        else:
            c, a, r = differences(saved[k], now[k], d, p)
            changed, added, removed = changed + c, added + a, removed + r
    return changed, added, removed


def test_the_saved_runs_are_found():
    names = {(e, n) for e, n, _, _ in saved_runs()}
    assert ("synthetic_spt", "full") in names and ("synthetic_spt", "causal-tuned") in names
    assert ("synthetic_splade", "imposed-s-confirm-input") in names and ("synthetic_splade_ood", "confirm-v8k-imposed") in names
    assert ("synthetic_splade_ood", "explore-v8k-seeds") in names and ("theory_verify", "default") in names
    assert ("synthetic_splade_ood", "reproduce-first") in names
    assert len(names) >= 35


@pytest.mark.parametrize("exp, name, where, saved", saved_runs(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_run_file_resolves_to_the_config_saved_beside_its_results(exp, name, where, saved):
    """The resolved config equals the saved one field by field (so every cell key does too). A field the config gained
    after the run must be at its default (or listed in ADDED_OFF_DEFAULT); a field it lost since is only allowed for
    an archived run."""
    runs = next(r for e, r in runs_doc.run_files() if e.name == exp)
    now = record(exp, runs[name], saved)
    changed, added, removed = differences(saved, now, record(exp, runs.cls(), saved))
    assert not changed, f"{where}: {name} resolves to other values of {changed}"
    assert set(added) == set(ADDED_OFF_DEFAULT.get((exp, name), {})), f"{where}: {name} sets fields added since: {added}"
    assert not removed or runs.files()[name].kind == "archived", f"{where}: fields removed since: {removed}"


def test_every_run_file_of_every_experiment_resolves():
    """No run file is broken: each resolves (its base, its fields, its values), and each has a reason per value."""
    count = 0
    for exp, runs in runs_doc.run_files():
        for name, f in runs.files().items():
            if f.kind != "base":
                assert isinstance(runs[name], runs.cls), (exp.name, name)
            assert all(why.strip() for _, _, why in f.changes) and f.purpose, f.path
            count += 1
    assert count >= 48


def test_docs_runs_md_is_generated_from_the_run_files():
    committed = (ROOT / "docs" / "runs.md").read_text(encoding="utf-8")
    assert committed == runs_doc.render_page(), "docs/runs.md is stale: run `python -m initlab.app.docgen.runs_doc`"
    for exp, runs in runs_doc.run_files():
        for name, f in runs.files().items():
            assert f"| `{name}` |" in committed and f.purpose.split()[0] in committed, name


def _help(argv: list[str]) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit):
        cli.main(argv)
    return buf.getvalue()


@pytest.mark.parametrize("argv", [["synthetic", "spt", "--help"], ["synthetic", "splade", "--help"],
                                  ["synthetic", "splade-ood", "--help"]])
def test_help_offers_the_named_choices_only(argv):
    """At most six named presets in ``--help``, and no exploratory or archived run name there."""
    text = " ".join(_help(argv).split())
    exp = next(e for e, _ in runs_doc.run_files() if any(c.group == argv[0] and c.name == argv[1] for c in e.commands))
    runs = resolve(exp.presets)
    assert isinstance(runs, RunFiles) and 1 <= len(runs.named()) <= 6
    assert f"one of {', '.join(runs.named())} (default:" in text
    hidden = [n for n in runs if n not in runs.named()]
    assert hidden and not [n for n in hidden if f" {n} " in f" {text.replace(',', ' ')} "], hidden


#: the configs the Python presets gave before they became run files (``to_dict`` of each, written from those presets
#: before they were removed), for the experiments with no config saved in docs/results
FORMER = Path(__file__).with_name("data") / "former_presets.json"


def _former_runs() -> list[tuple[str, str, Any, dict[str, Any]]]:
    """``(experiment, run, its run files, the former preset's config)`` for every preset of :data:`FORMER`."""
    runs = {exp.name: presets for exp, presets in runs_doc.run_files()}
    former = json.loads(FORMER.read_text(encoding="utf-8"))
    return [(exp, name, runs[exp], saved) for exp, by_name in former.items() for name, saved in by_name.items()]


@pytest.mark.parametrize("exp, name, runs, former", _former_runs(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_former_python_preset_is_a_run_file_with_the_same_config(exp, name, runs, former):
    """Where no config is saved in docs/results, each run file resolves to exactly the config its former Python preset
    gave, field by field (nested fields included), so every cell key stays the same."""
    assert to_dict(runs[name]) == former, f"{exp} {name}: {differences(former, to_dict(runs[name]), {})}"



def test_the_saved_lra_run_names_its_run_file():
    """The saved CPU ListOps summary records its run by name only (no config): that name is a run file, whose config is
    the former preset's (the test above)."""
    from initlab.realdata.lra.config import PRESETS

    preset = json.loads((RESULTS / "lra_listops_summary.json").read_text(encoding="utf-8"))["preset"]
    assert preset == "cpu-listops-plateau" and PRESETS.files()[preset].kind == "named"
    assert preset in json.loads(FORMER.read_text(encoding="utf-8"))["lra_listops"]
