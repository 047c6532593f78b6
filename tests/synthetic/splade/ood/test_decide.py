"""The preregistered confirmation at 8192 ids with the imposed-norm arm: its power count, its fresh seeds, its cell
order, its claims (no word before the seeds are complete) and a run resumed from a fresh clone of a repository
holding part of it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from initlab.config import derive
from initlab.synthetic.splade.ood import config as oc
from initlab.synthetic.splade.ood import decide as dc

ROOT = Path(__file__).resolve().parents[4]
CFG = oc.PRESETS[dc.PRESET]


def test_the_seed_count_is_the_smallest_with_power_for_every_primary_claim():
    primary = [r for r in dc.power_rows(len(CFG.seeds)) if r["contrast"] in dc.FAMILIES[0].claims]
    assert {r["contrast"] for r in primary} == set(dc.FAMILIES[0].claims)
    assert max(r["seeds"] for r in primary) == len(CFG.seeds) == 8
    assert all(r[f"power_at_{len(CFG.seeds)}"] >= 0.8 for r in primary)
    assert any(r["power_at_7"] < 0.8 for r in dc.power_rows(7) if r["contrast"] in dc.FAMILIES[0].claims)
    # the two imposed contrasts' smallest effects lie below the threshold: they are "excludes 0" claims
    for r in primary:
        assert (r["as"] == "beyond 0.05") == (r["smallest"] > CFG.claims.min_gain + CFG.claims.tol)
    assert "| family_interaction |" in dc.power_markdown()


def _saved_seeds() -> set[int]:
    seeds: set[int] = set()

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k in ("seeds", "seed") and isinstance(v, (int, list)):
                    seeds.update(x for x in ([v] if isinstance(v, int) else v) if isinstance(x, int))
                walk(v)
        elif isinstance(o, list):
            for x in o:
                walk(x)

    for f in (ROOT / "docs" / "results").rglob("*.json"):
        if "synthetic_splade_ood_confirm_v8k_imposed" not in f.parts:
            walk(json.loads(f.read_text()))
    return seeds


def test_the_preset_is_the_exploration_setting_on_fresh_seeds_with_primary_families_first():
    explore = oc.PRESETS["explore-v8k-imposed"]
    assert not set(CFG.seeds) & _saved_seeds() and not set(CFG.seeds) & {6061, 6062, *range(9801, 9813)}
    for f in ("bert", "modernbert"):  # the exploration's recipe, cell for cell: only the seed differs
        assert oc.train_key(CFG, f, 4.0, 9821) == oc.train_key(derive(explore, seeds=(9821,)), f, 4.0, 9821)
    assert oc.train_key(CFG, "bert", 1.0, 9821, "modernbert") == oc.train_key(explore, "bert", 1.0, 9821, "modernbert")
    assert CFG.select_k_on == "in_domain" and CFG.role == "confirmatory" and CFG.corpus.vocab_size == 8192
    from initlab.synthetic.splade.ood.runner import plan

    names = [c.name for c in plan(CFG)]
    late = [i for i, n in enumerate(names) if n.split("_")[0] in ("roberta", "albert")
            or n.split("_")[1] in ("roberta", "albert")]
    assert late and min(late) > max(i for i, n in enumerate(names) if i not in late)  # primary cells first
    assert all(c.artifact == c.args["folder"] for c in plan(CFG) if c.name.startswith("pretrain_"))
    with pytest.raises(ValueError, match="late_families"):
        oc.check_config(derive(CFG, late_families=("bert",)))  # a family of the imposed arm is never late


def test_excludes_zero_is_partly_at_best():
    assert dc.excludes_zero([0.03, 0.04, 0.035, 0.05], tol=0.002, why="w").word == "partly"
    assert dc.excludes_zero([-0.03, -0.04, -0.035, -0.05], tol=0.002, why="w").word == "not reproduced"
    assert dc.excludes_zero([0.03, -0.04, 0.01, -0.02], tol=0.002, why="w").word == "inconclusive"


def _rows(seeds, families=("bert", "modernbert", "roberta", "albert"), imposed=True):
    """Rows with known contrasts: modernbert gains 0.08 from k = 4, bert 0, the imposed arm 0.04 (and loses 0.03
    at k = 1); roberta and albert gain 0; a little seed noise."""
    gain = {"bert": 0.0, "modernbert": 0.08, "roberta": 0.0, "albert": 0.0}
    out = []
    for s in seeds:
        arms = [(f, None) for f in families] + ([("bert", "modernbert")] if imposed else [])
        for i, (f, hi) in enumerate(arms):
            e = 0.004 * ((s * 7 + 3 * i) % 5 - 2)
            for k in (1.0, 4.0, 16.0):
                g = (0.04 + e if hi else gain[f] + e) if k == 4.0 else 0.0
                base = 0.30 - (0.03 + e / 2 if hi else 0.0)
                out.append({"family": f, "mode": "imposed" if hi else "tied", "k": k, "seed": s, "s": 2.0 if hi else 1.0,
                            **({"imposed": hi} if hi else {}), "ndcg_select": 0.5 + g, "ndcg_test": base + g,
                            "id_select": 0.5 + g, "id_test": 0.5 + g, "stopped_by": "plateau", "failed": False})
    return out


def test_no_word_before_the_seeds_are_complete_and_the_words_after():
    cfg = oc.config_record(CFG)
    bm25 = {f"bm25_seed={s}": {"ood_mean": {"ndcg@10": 0.4}} for s in CFG.seeds}
    part = dc.decide(cfg, _rows(CFG.seeds[:7]), bm25)
    assert part["primary"] is None and part["gate"] is None and part["secondary"] is None
    assert len(part["numbers"]["family_interaction"]) == 7  # numbers, no word
    primary = dc.decide(cfg, _rows(CFG.seeds[:7]) + _rows(CFG.seeds[7:], ("bert", "modernbert")), bm25)
    assert primary["primary"] is not None and primary["secondary"] is None
    assert primary["primary"]["family_interaction"]["word"] == "reproduced"
    assert primary["primary"]["imposed_loss"]["word"] == "partly"
    assert primary["primary"]["imposed_recovery"]["word"] == "partly"
    assert primary["share"]["estimate"] == pytest.approx(0.5, abs=0.1)
    assert primary["gate"]["outcome"] == "in the seed's regime"  # modernbert at k = 4: about 0.95 of BM25
    assert primary["cap"]["holds"]
    done = dc.decide(cfg, _rows(CFG.seeds), bm25)
    assert set(done["secondary"]) == set(dc.FAMILIES[1].claims)
    assert done["secondary"]["four_family_interaction"]["estimate"] == pytest.approx(0.04, abs=0.01)


def test_the_gate_reads_the_dev_selected_cell_against_bm25():
    rows = _rows([1, 2, 3], ("bert", "modernbert"))
    low = dc.regime_gate(rows, {f"bm25_seed={s}": {"ood_mean": {"ndcg@10": 0.6}} for s in (1, 2, 3)}, [1, 2, 3])
    assert low["outcome"] == "outside the seed's regime" and all(p["k"] == 4.0 for p in low["per_seed"])


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": str(cwd)})


def test_a_partly_committed_run_resumes_in_a_fresh_clone(tmp_path):
    """Seed 0 finished and committed, seed 1 not started: the clone runs seed 1 only (rebuilding no backbone of
    seed 0), writes no word until seed 1 is complete, and the words then appear."""
    from initlab.synthetic.splade.ood.runner import run_ood
    from initlab.textio import read_json

    cfg = derive(oc.PRESETS["tiny"], ks=(1.0, 4.0), max_steps=8, eval_every=4, checkpoints=(8,), seeds=(0, 1),
                 imposed=(("bert", "modernbert"),), role="confirmatory", holm_families="splade_ood_v8k_imposed",
                 bootstrap=0)
    repo = tmp_path / "repo"
    run = Path("docs/results/run")
    run_ood(repo / run, derive(cfg, seeds=(0,)), workers=1, progress=False)  # seed 0's cells, as a first session
    first = {p.name: p.read_bytes() for p in (repo / run / "cells").iterdir()}
    for p in (repo / run).iterdir():  # keep what the repository keeps: the config and the cell results
        if p.name not in ("cells",):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    (repo / run / "config.json").write_text(json.dumps(oc.config_record(cfg)))
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "seed 0")
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(repo), str(clone))
    assert not (clone / run / "backbone").exists()
    rd = run_ood(clone / run, cfg, workers=1, progress=False)
    after = {p.name: p.read_bytes() for p in (clone / run / "cells").iterdir()}
    assert all(after[n] == b for n, b in first.items())  # seed 0 not rerun
    assert not (clone / run / "backbone" / "bert_seed=0").exists()  # nor its backbone rebuilt
    assert (clone / run / "backbone" / "bert_seed=1").exists()
    rep = read_json(rd.root / "results.json")
    pre = rep["preregistered"]
    assert pre["primary_complete"] == [0, 1] and pre["primary"] is not None and rep["verdicts"] == {}
    # the same folder with seed 1 cut short: numbers, no word
    from initlab.runs import RunDir
    from initlab.synthetic.splade.ood.runner import write_report

    for ext in ("json", "key"):
        (rd.root / "cells" / f"{oc.cell_name('bert', 4.0, 1, 'modernbert')}.{ext}").unlink()
    (rd.root / "DONE").unlink()
    part = write_report(RunDir(rd.root, resume=True, config=oc.config_record(cfg)), cfg, partial=True)
    assert part["preregistered"]["primary"] is None and part["preregistered"]["primary_complete"] == [0]
    assert "No claim word" in (rd.root / "summary.md").read_text()


def test_the_readme_rows_take_the_words_only_when_complete_in_the_regime_and_converged():
    from initlab.app.docgen.claims import load_results
    from initlab.synthetic.splade.ood import claims as oclaims

    saved = load_results(ROOT / "docs" / "results")
    saved.pop(dc.RESULTS, None)
    before = oclaims.degradation_row(saved), oclaims.fix_row(saved), oclaims.degradation_headline(saved)

    def with_run(rows, bm25=0.4):
        rep = {"config": oc.config_record(CFG), "rows": rows,
               "bm25": {f"bm25_seed={s}": {"ood_mean": {"ndcg@10": bm25}} for s in CFG.seeds}}
        return {**saved, dc.RESULTS: rep}

    done = with_run(_rows(CFG.seeds))
    row = oclaims.degradation_row(done)
    assert row.startswith("8192-id confirmation with the imposed-norm arm (seeds 9821-9828")
    assert "family interaction **reproduced**" in row and "imposed loss **partly**" in row
    assert row.endswith(before[0])  # the earlier confirmation kept beside it
    assert "Secondary (Holm within its family): four family interaction" in row
    # every primary cell finished, roberta and albert not yet: the primary words, no secondary word
    primary_only = oclaims.degradation_row(with_run(_rows(CFG.seeds[:7]) + _rows(CFG.seeds[7:], ("bert", "modernbert"))))
    assert "family interaction **reproduced**" in primary_only and "Secondary" not in primary_only
    assert "imposed recovery **partly**" in oclaims.fix_row(done)
    h = oclaims.degradation_headline(done)
    assert h.word.endswith("(8192-id confirmation)") and h.estimate.endswith(f"earlier: {before[2].word}")
    # not yet complete, outside the regime, or over the cap: the rows do not change
    capped = [dict(x, stopped_by="cap") if x["k"] == 16.0 else x for x in _rows(CFG.seeds)]
    for r in (with_run(_rows(CFG.seeds[:7])), with_run(_rows(CFG.seeds), bm25=0.9), with_run(capped)):
        assert (oclaims.degradation_row(r), oclaims.fix_row(r), oclaims.degradation_headline(r)) == before


def test_the_committed_cells_resume_under_todays_plan():
    """The run folder in docs/results resumes on a fresh clone only while its config and every committed cell's key
    are what today's preset resolves to."""
    from initlab.synthetic.splade.ood.runner import plan

    folder = ROOT / "docs" / "results" / "synthetic_splade_ood_confirm_v8k_imposed"
    assert json.loads((folder / "config.json").read_text()) == oc.config_record(CFG)
    cells = {c.name: c for c in plan(CFG)}
    saved = {p.stem: json.loads(p.read_text()) for p in (folder / "cells").glob("*.key")}
    assert saved and set(saved) <= set(cells)
    for name, key in saved.items():  # as the run folder compares them (a JSON record of the key)
        assert key == json.loads(json.dumps(cells[name].key)), name
