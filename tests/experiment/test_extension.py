"""The measure of the experiment records: a new label-only synthetic SPT arm is one entry of the arms table (and, to
show it in a README headline chart, its label and its place in ``HEADLINE`` of the same file), and a new claim is one
claims module's worth (its verdict function, its place in a family, its README row).

The arm is also added for real: one entry in a copy of the package's ``synthetic/spt/arms.py``, after which the arms
and plan tests, run on the copy in a fresh interpreter, pass unchanged. Both are defined here, inside the test, and
added (in memory) to the tables they belong to (``arms.ARMS``; the SPT verdicts
module's ``CLAIMS``, whose entries name their Holm family, and the claims module's ``CLAIM_ROWS``) -- no other file
changes -- and they flow through the
plan, a tiny run in this process, its saved arms and figures, its verdicts and the README claims table and page.

A new experiment with a reproduce stage and a claim is its own package (its record, its claims module, its stage
module; written here as files) and one entry in the list of records: its order key places its stage in the
reproduce registry and its claim in the claims tables, and the architecture test resolves its record's names.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from initlab.app.docgen import claims as docgen
from initlab.config import derive, from_dict
from initlab.evidence import rules
from initlab.evidence.families import Family
from initlab.experiment.rows import Claim, Headline, b, one
from initlab.paper_figs import spt_figures
from initlab.synthetic import spt
from initlab.synthetic.spt import arms
from initlab.synthetic.spt import claims as spt_claims
from initlab.synthetic.spt import claim_verdicts as spt_verdicts
from initlab.synthetic.spt.runner import plan
from initlab.synthetic.spt.tasks import TaskConfig
from initlab.textio import read_json

ROOT = Path(__file__).resolve().parents[2]

# -- the new arm: one entry (the same recipe as scratch, so its numbers must equal scratch's) ----------------------
PLAIN = arms.Arm("plain_scratch")

# -- the new claim: its verdict function, its spec (with its family), its README row -----------------------------------
SAVED = "synthetic_spt_plain/summary.json"


def plain_matches_scratch(raw, th):
    """plain_scratch − scratch test accuracy equivalent to 0 within ± margin (90 % TOST)."""
    if not raw.get("plain_scratch") or not raw.get("scratch"):
        return rules.not_run("equivalence", [c for c in ("plain_scratch", "scratch") if not raw.get(c)])
    d = rules.paired_differences({s: v["test_acc"] for s, v in raw["plain_scratch"].items()},
                                 {s: v["test_acc"] for s, v in raw["scratch"].items()}, "plain_scratch - scratch")
    return rules.equivalence(d, margin=th.margin, tol=th.tol)


SPEC = spt_claims.ClaimSpec("plain_matches_scratch", "a copy of scratch matches scratch", "-",
                            "plain_scratch − scratch", plain_matches_scratch, "secondary")


def _verdict(r):
    s = r[SAVED]
    th = from_dict(spt_claims.SPTThresholds, s["config"]["thresholds"])
    return spt_claims.evaluate_corrected(spt_claims.as_raw(s["summary"]["per_seed"]), th)["plain_matches_scratch"]


ROW = Claim("A label-only copy of scratch matches scratch", "-", "[this test](tests/experiment/test_extension.py)",
            (SAVED,), lambda r: f"{b(_verdict(r).word)}: {one(_verdict(r))}",
            headline=lambda r: Headline(b(_verdict(r).word), one(_verdict(r))))

TINY = derive(spt.BASE, seeds=(0, 1), task=TaskConfig(T=20), n_train=32, n_val=16, n_test=32, d_model=8, d_ff=8,
              batch_size=16, finetune_max_epochs=3, finetune_patience=2, spt_max_epochs=4, spt_window=2,
              spt_sweep_epochs=(1,), depths=(1,), probe_size=4)


@pytest.fixture
def extended(monkeypatch):
    """The arm and the claim added to their tables (and nowhere else)."""
    monkeypatch.setattr(arms, "ARMS", arms.ARMS + (PLAIN,))
    monkeypatch.setattr(spt_verdicts, "CLAIMS", spt_verdicts.CLAIMS + (SPEC,))
    # the families follow from the claims table (built once at import, so rebuilt here for the in-memory entry)
    monkeypatch.setattr(spt_verdicts, "SPT_FAMILIES", spt_verdicts.spt_families(spt_verdicts.CLAIMS))
    monkeypatch.setattr(spt_claims, "CLAIM_ROWS", spt_claims.CLAIM_ROWS + [ROW])


def test_without_the_entries_the_arm_is_unknown():
    with pytest.raises(ValueError, match="plain_scratch"):
        derive(TINY, conditions=("scratch", "plain_scratch"))


def test_a_new_arm_and_a_new_claim_flow_through_plan_run_figures_and_claims(extended, tmp_path):
    cfg = derive(TINY, conditions=("scratch", "plain_scratch"), label_lr=(("scratch", 1e-2), ("plain_scratch", 1e-2)))
    assert "plain_scratch" in spt.LABEL_ONLY or "plain_scratch" in spt.config.label_only_names()
    # the plan: its fine-tuning cells, after the listed arms (it has no place in the claim order)
    ft = [c.args["condition"] for c in plan(cfg) if c.args["kind"] == "finetune"]
    assert ft == ["scratch", "scratch", "plain_scratch", "plain_scratch"]

    # a run (in this process): the arm trains with scratch's recipe, so its numbers are scratch's
    out = tmp_path / "run"
    spt.run(cfg, out, progress=False, draw=spt_figures.make_figures, workers=1)
    m = read_json(out / "metrics.json")
    per = m["summary"]["per_seed"]
    assert [r["test_acc"] for r in per["plain_scratch"]] == [r["test_acc"] for r in per["scratch"]]
    # the figures read the arm's saved row: label-only, grey
    assert {"name": "plain_scratch", "label_only": True, "colour": arms.GREY, "curve_colour": ""} in m["summary"]["arms"]
    assert spt_figures.saved_arms(m)["plain_scratch"]["colour"] == arms.GREY
    assert (out / "spt_accuracy.png").is_file() and (out / "spt_proximity_vs_accuracy.png").is_file()
    # the run's verdict record holds the new claim, computed by its verdict function
    saved = read_json(out / "verdicts.json")
    assert saved["plain_matches_scratch"]["word"] == rules.REPRODUCED  # identical numbers: a zero difference

    # the claims table and page: the saved results plus this run's summary
    results = tmp_path / "results"
    shutil.copytree(ROOT / "docs" / "results", results)
    docgen.collect_spt(out, results / SAVED)
    v = _verdict(docgen.load_results(results, [SAVED]))
    assert v.word == rules.REPRODUCED and v.family == "secondary"  # Holm-corrected within its declared family
    table = docgen.claims_table(results)
    assert f"| A label-only copy of scratch matches scratch | - | {b(v.word)} | {one(v)} |" in table
    page = docgen.claims_page(results)
    assert f"| A label-only copy of scratch matches scratch | - | {b(v.word)}: {one(v)} |" in page
    # and every other row is the README's, unchanged
    ours = next(line for line in table.splitlines() if "copy of scratch" in line)
    assert table.replace(ours + "\n", "") in (ROOT / "README.md").read_text(encoding="utf-8")


def test_a_new_arm_in_a_headline_chart_is_its_label_and_its_place_in_the_same_file(monkeypatch):
    from initlab.app.docgen import headline_figures

    monkeypatch.setattr(arms, "ARMS", arms.ARMS + (arms.Arm("plain_scratch", label="a copy\nof scratch"),))
    monkeypatch.setitem(arms.HEADLINE, "accuracy", arms.HEADLINE["accuracy"] + ("plain_scratch",))
    rows = [{"seed": 0, "test_acc": 0.5}, {"seed": 1, "test_acc": 0.7}]
    saved = {"config": {"seeds": [0, 1], "spt_sweep_epochs": [], "depths": [1]},
             "summary": {"per_seed": {"scratch": rows, "plain_scratch": rows},
                         "conditions": [{"condition": "scratch", "spt": "-"}, {"condition": "plain_scratch", "spt": "-"}]}}
    got = headline_figures.accuracy_data(saved)["conditions"]
    assert [(c["condition"], c["label"], c["label_only"], c["mean"]) for c in got] == [
        ("scratch", "scratch", True, pytest.approx(0.6)), ("plain_scratch", "a copy\nof scratch", True, pytest.approx(0.6))]


# -- a new experiment with a reproduce stage and a claim: its own package (written here as files) and one record ----
DEMO_FILES = {
    "__init__.py": '''
from initlab.experiment.record import Experiment
from initlab.synthetic.demo import claims

EXPERIMENT = Experiment("demo", claims, stages=("initlab.synthetic.demo.stage:STAGE",), order=25)
''',
    "claims.py": '''
from initlab.experiment.rows import Claim, Headline

CLAIM_ROWS = [Claim("The demo experiment's claim", "-", "[this test](tests/experiment/test_extension.py)",
                    verdict_text="**not run**: a demo", headline_text=Headline("**not run**", "a demo"))]
''',
    "stage.py": '''
from initlab.evidence.rules import Verdict
from initlab.experiment.stage import Stage, StageClaim, run_unless_finished
from initlab.runs import atomic_write_text


def demo(out_dir, preset="default", overwrite=False, *, workers=None, scheduler=None):
    return run_unless_finished(out_dir, preset, overwrite, _demo)


def _demo(out_dir, preset, overwrite):
    out_dir.mkdir(parents=True, exist_ok=True)
    md = f"## Demo\\n\\nran preset {preset}\\n"
    atomic_write_text(out_dir / "summary.md", md)
    (out_dir / "DONE").write_text("")
    return md


def estimate(out_dir, preset, workers):
    return (1.0, 2.0)


def stage_claims(out_dir):
    return [StageClaim("the demo holds", Verdict("reproduced", "check", n=3), counted="case")]


STAGE = Stage("demo", demo, estimate, claims=stage_claims)
''',
}


@pytest.fixture
def demo_package(tmp_path, monkeypatch):
    """The demo experiment's package: its files under ``tmp_path/demo`` imported as ``initlab.synthetic.demo``."""
    import importlib.util
    import sys

    folder = tmp_path / "demo"
    folder.mkdir()
    for name, source in DEMO_FILES.items():
        (folder / name).write_text(source.lstrip())
    paths = {"initlab.synthetic.demo": folder / "__init__.py", "initlab.synthetic.demo.claims": folder / "claims.py",
             "initlab.synthetic.demo.stage": folder / "stage.py"}
    for name in ("initlab.synthetic.demo", "initlab.synthetic.demo.claims", "initlab.synthetic.demo.stage"):
        spec = importlib.util.spec_from_file_location(
            name, paths[name], submodule_search_locations=[str(folder)] if name.endswith("demo") else None)
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)
    for name in ("initlab.synthetic.demo.claims", "initlab.synthetic.demo", "initlab.synthetic.demo.stage"):
        module = sys.modules[name]
        module.__spec__.loader.exec_module(module)
    return paths


def test_a_new_experiment_reaches_the_reproduce_registry_and_the_claims_tables(demo_package, tmp_path, monkeypatch):
    """Its record, added to the list of records, places its stage and its claim by its ``order`` (25: after SPT,
    before the score scale) with no edit of the roof: the registry, ``initlab reproduce`` and the claims tables."""
    import sys

    from initlab.app import stages
    from initlab.app.experiments import EXPERIMENTS

    demo = sys.modules["initlab.synthetic.demo"].EXPERIMENT
    records = (*EXPERIMENTS, demo)  # the one entry a new experiment adds to initlab.app.experiments
    registry = stages.registry(records)
    assert [s.name for s in registry] == ["theory", "spt", "demo", "score_scale", "splade", "splade_in_domain",
                                          "lra_listops"]
    assert [s.name for s in stages.REGISTRY] == ["theory", "spt", "score_scale", "splade", "splade_in_domain",
                                                 "lra_listops"]  # untouched

    # initlab reproduce runs it from the derived registry: its summary in the report, its claim in the verdict lines
    monkeypatch.setattr(stages, "STAGES", {s.name: s for s in registry if not s.optional})
    report = stages.run_reproduce(tmp_path / "out", preset="quick", stages=["demo"], speed=1.0).read_text()
    assert "## Demo" in report and "ran preset quick" in report
    assert stages.verdict_summary(tmp_path / "out", ["demo"]) == ["the demo holds: reproduced; 3 cases checked"]

    # the claims tables: its row after the SPT rows, before the score scale's (which has none) and LRA's
    experiments = docgen.claim_experiments(records)
    assert [e.name for e in experiments] == ["theory_verify", "synthetic_spt", "demo", "lra_listops",
                                             "synthetic_splade", "synthetic_splade_ood", "realdata_splade",
                                             "diagnose_validation"]
    monkeypatch.setattr(docgen, "EXPERIMENTS", experiments)
    rows = [c.claim for c in docgen.all_claims()]
    last_spt = max(i for i, c in enumerate(docgen.all_claims()) if c in spt_claims.CLAIM_ROWS)
    assert rows.index("The demo experiment's claim") == last_spt + 1
    table = docgen.claims_table(ROOT / "docs" / "results")
    assert "| The demo experiment's claim | - | **not run** | a demo | [this test](tests/experiment/test_extension.py) |" in table


def test_the_architecture_check_resolves_the_new_records_names(demo_package):
    """The demo record's stage name resolves under the architecture test's check; a name that does not resolve (a
    stage module without ``STAGE``) is caught."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("architecture_check", ROOT / "tests" / "test_architecture.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    mods = {**check._modules(), **demo_package}
    assert ("initlab.synthetic.demo", "initlab.synthetic.demo.stage", "STAGE") in {
        (h, m, f) for h, _, _, m, f in check.named_calls(mods)}
    assert [b for b in check.unresolved_named_calls(mods) if "demo" in b] == []
    broken = demo_package["initlab.synthetic.demo.stage"]
    broken.write_text(broken.read_text().replace("STAGE = Stage(", "OTHER = Stage("))
    bad = [b for b in check.unresolved_named_calls(mods) if "demo" in b]
    assert len(bad) == 1 and "names STAGE, which initlab.synthetic.demo.stage does not define" in bad[0]


# -- the same, for real: a copy of the package with one more entry in its arms table (or its claims table) -----------
NEW_ARM = '    Arm("plain_scratch"),  # a new label-only arm: one entry\n'
NEW_CLAIM = ('    ClaimSpec("mech_hybrid_qk", "hybrid_qk recovers most of spt\'s gain (mechanism)", "-", "share",\n'
             '              mechanism("hybrid_qk", "scratch", "spt"), "secondary"),  # a new claim: one entry\n')


def _copy_with_entry(tmp_path: Path, module: str, table: str, entry: str) -> tuple[Path, dict[str, str]]:
    """A copy of the repository's code, tests and docs with ``entry`` added at the end of the table that opens with
    ``table`` in the copy's ``module`` (the real files stay as they are), and the environment whose ``python`` imports
    the copy's ``initlab`` (a folder ``initlab`` of links laid out as the installed namespace, first on
    ``PYTHONPATH``)."""
    copy = tmp_path / "repo"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("initlab", "synthetic", "theory", "realdata", "paper_figs", "tests"):
        shutil.copytree(ROOT / folder, copy / folder, ignore=skip)
    shutil.copytree(ROOT / "docs", copy / "docs", ignore=shutil.ignore_patterns("figures", "results"))
    (copy / "docs" / "results").symlink_to(ROOT / "docs" / "results")  # read only; large
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, copy / name)
    path = copy / module
    text = path.read_text(encoding="utf-8")
    end = text.index("\n)\n", text.index(table))
    path.write_text(text[:end + 1] + entry + text[end + 1:], encoding="utf-8")
    pkg = tmp_path / "pkg" / "initlab"
    pkg.mkdir(parents=True)
    for entry_ in (copy / "initlab").iterdir():
        (pkg / entry_.name).symlink_to(entry_)
    for name in ("synthetic", "theory", "realdata", "paper_figs"):
        (pkg / name).symlink_to(copy / name)
    env = {**os.environ, "PYTHONPATH": str(pkg.parent), "PYTHONDONTWRITEBYTECODE": "1"}
    return copy, env


def _copy_with_new_arm(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    return _copy_with_entry(tmp_path, "synthetic/spt/arms.py", "ARMS: tuple[Arm, ...] = (", NEW_ARM)


def _pytest(copy: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    # -P: the copy's root is not put first on sys.path (its initlab/ alone lacks the experiment folders)
    return subprocess.run([sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=copy,
                          env=env, capture_output=True, text=True)


def _probe(copy: Path, env: dict, code: str) -> dict:
    """Run ``code`` in a fresh interpreter on the copy and return the JSON its last line prints; its ``file`` (a module
    it imported) must lie in the copy, not in the real files. ``-P``: the copy's root is not put first on sys.path
    (its initlab/ alone lacks the experiment folders)."""
    got = subprocess.run([sys.executable, "-P", "-c", code], cwd=copy, env=env, capture_output=True, text=True)
    assert got.returncode == 0, got.stderr
    seen = json.loads(got.stdout.strip().splitlines()[-1])
    assert Path(seen["file"]).resolve().is_relative_to(copy.resolve())  # the copy, not the real files
    return seen


@pytest.mark.skipif(sys.platform == "win32", reason="links")
def test_a_new_arm_is_one_entry_in_a_copy_of_the_real_files(tmp_path):
    """Edit a copy of the real arms table (one entry), then, in a fresh interpreter on the copy: the arm is a condition
    with scratch's recipe, label-only and grey, and the arms and plan tests pass unchanged (they check properties of the
    table, not a copy of it; the former copy-pinning arms tests failed 16 cases on this edit)."""
    copy, env = _copy_with_new_arm(tmp_path)
    probe = ("import json\nfrom initlab.synthetic.spt import arms, config\n"
             "spec = config.condition_spec(config.BASE)\n"
             "print(json.dumps({'file': arms.__file__, 'spec': spec.get('plain_scratch') == spec['scratch'],"
             " 'label_only': 'plain_scratch' in config.LABEL_ONLY,"
             " 'colour': [a.colour for a in arms.ARMS if a.name == 'plain_scratch']}))\n")
    seen = _probe(copy, env, probe)
    assert seen == {**seen, "spec": True, "label_only": True, "colour": [arms.GREY]}
    tests = ["tests/synthetic/spt/test_arms.py", "tests/synthetic/spt/test_plan.py"]
    run = subprocess.run([sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *tests], cwd=copy,
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "passed" in run.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="links")
def test_a_new_claim_is_one_entry_in_a_copy_of_the_real_files(tmp_path):
    """Edit a copy of the real SPT claims table (one ``ClaimSpec`` entry naming its family), then, in a fresh
    interpreter on the copy: the claim is in its declared Holm family and judged with the others, and the claims,
    words and family tests pass unchanged, but for the two checks that docs/synthetic_spt.md shows what the code
    prints: its declared families and its comparison table of the saved runs both gain the claim, so the page is
    updated with it (the families test names the command whose output to paste; the table is what
    ``initlab.synthetic.spt.claims.spt_comparison_table`` prints)."""
    copy, env = _copy_with_entry(tmp_path, "synthetic/spt/claim_verdicts.py", "CLAIMS: tuple[ClaimSpec, ...] = (",
                                 NEW_CLAIM)
    probe = ("import json\nfrom initlab.synthetic.spt import claim_verdicts as v, claims as c\n"
             "vs = c.evaluate_corrected({}, v.SPTThresholds())\n"
             "print(json.dumps({'file': v.__file__, 'families': [f.name for f in c.SPT_FAMILIES if 'mech_hybrid_qk' in "
             "f.claims], 'judged': vs['mech_hybrid_qk'].family}))\n")
    seen = _probe(copy, env, probe)
    assert seen == {**seen, "families": ["secondary"], "judged": "secondary"}
    tests = ["tests/evidence/test_families.py", "tests/synthetic/spt/test_claims.py",
             "tests/synthetic/spt/test_claim_words.py", "tests/synthetic/spt/test_reproduce_preset.py"]
    run = _pytest(copy, env, *tests)
    failed = sorted(line.split(" ")[1] for line in run.stdout.splitlines() if line.startswith("FAILED"))
    assert failed == [
        "tests/evidence/test_families.py::test_the_docs_render_the_declared_families[synthetic_spt.md-"
        "initlab.synthetic.spt.claims-SPT_FAMILIES]",
        "tests/synthetic/spt/test_claim_words.py::test_an_exploratory_column_carries_no_confirmatory_word"], (
        run.stdout[-3000:] + run.stderr[-2000:])
    assert "paste python -c" in run.stdout and "passed" in run.stdout
