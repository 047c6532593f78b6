"""The measure of the experiment records: a new label-only synthetic SPT arm is one entry of the arms table, and a new
claim is one claims module's worth (its verdict function, its place in a family, its README row).

Both are defined here, inside the test, and added to the tables they belong to (``arms.ARMS``; the SPT claims
module's ``CLAIMS``, ``SPT_FAMILIES`` and ``CLAIM_ROWS``) -- no other file changes -- and they flow through the
plan, a tiny run in this process, its saved arms and figures, its verdicts and the README claims table and page.
"""

from __future__ import annotations

import dataclasses
import shutil
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
from initlab.synthetic.spt.plan import plan
from initlab.synthetic.spt.tasks import TaskConfig
from initlab.textio import read_json

ROOT = Path(__file__).resolve().parents[2]

# -- the new arm: one entry (the same recipe as scratch, so its numbers must equal scratch's) ----------------------
PLAIN = arms.Arm("plain_scratch")

# -- the new claim: its verdict function, its spec, its family, its README row ----------------------------------------
SAVED = "synthetic_spt_plain/summary.json"


def plain_matches_scratch(raw, th):
    """plain_scratch − scratch test accuracy equivalent to 0 within ± margin (90 % TOST)."""
    if not raw.get("plain_scratch") or not raw.get("scratch"):
        return rules.not_run("equivalence", [c for c in ("plain_scratch", "scratch") if not raw.get(c)])
    d = rules.paired_differences({s: v["test_acc"] for s, v in raw["plain_scratch"].items()},
                                 {s: v["test_acc"] for s, v in raw["scratch"].items()}, "plain_scratch - scratch")
    return rules.equivalence(d, margin=th.margin, tol=th.tol)


SPEC = spt_claims.ClaimSpec("plain_matches_scratch", "a copy of scratch matches scratch", "-",
                            "plain_scratch − scratch", plain_matches_scratch)


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
    monkeypatch.setattr(spt_claims, "CLAIMS", spt_claims.CLAIMS + (SPEC,))
    fams = tuple(dataclasses.replace(f, claims=f.claims + (SPEC.id,)) if f.name == "secondary" else f
                 for f in spt_claims.SPT_FAMILIES)
    monkeypatch.setattr(spt_claims, "SPT_FAMILIES", fams)
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
