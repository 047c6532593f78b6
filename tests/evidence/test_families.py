"""initlab.evidence.families: Holm within declared claim families. The correction is statsmodels' Holm (not
hand-written), each decided word carries the p-value of its own decision (property-tested against the interval
rule it came from), and the corrected words follow edits of the raw per-seed numbers, never saved words."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from initlab.config import from_dict
from initlab.evidence import families, rules
from initlab.synthetic.spt import claims as spt_claims
from initlab.synthetic.splade import claims as sc
from initlab.synthetic.splade.ood import claims as ood_claims
from initlab.evidence.rules import INCONCLUSIVE, NOT, PARTLY, REPRODUCED

ROOT = Path(__file__).resolve().parents[2]
TH = spt_claims.SPTThresholds()


def test_holm_is_statsmodels_holm():
    from statsmodels.stats.multitest import multipletests

    p = [0.01, 0.04, 0.03, 0.005, 0.2]
    reject, adj = families.holm(p)
    want = multipletests(p, alpha=0.05, method="holm")
    assert reject == list(want[0]) and adj == pytest.approx(list(want[1]))
    # by hand for this case: sorted 0.005, 0.01, 0.03, 0.04, 0.2 against 0.05/5, /4, /3, /2, /1 -> two rejections
    assert reject == [True, False, False, True, False]
    assert families.holm([]) == ([], [])
    with pytest.raises(ValueError, match="p_values"):
        families.holm([0.1, float("nan")])


def test_every_claim_is_in_exactly_one_declared_family():
    ids = lambda claims: [c.id for c in claims]  # noqa: E731
    for want, fams in ((ids(spt_claims.CLAIMS), spt_claims.SPT_FAMILIES), (ids(sc.CLAIMS), sc.SPLADE_FAMILIES),
                       (ids(sc.CLAIMS), ood_claims.SPLADE_OOD_FAMILIES),
                       (ids(ood_claims.OOD_CLAIMS) + [f"in_domain/{c}" for c in ids(ood_claims.OOD_CLAIMS)], ood_claims.SPLADE_OOD_V8K_FAMILIES)):
        declared = [c for f in fams for c in f.claims]
        assert sorted(declared) == sorted(want) and len(set(declared)) == len(declared)
        assert [f.name for f in fams] == ["primary", "secondary"] and len(fams[0].claims) <= 5
    with pytest.raises(KeyError, match="no declared family"):
        families.family_of(spt_claims.SPT_FAMILIES, "nope")


samples = st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=3, max_size=10)


def _check_at(rule, p: float, word: str) -> None:
    """Just above α = p (a narrower interval) the rule still decides; just below (a wider one) the word is lost
    (a narrower interval may decide more, e.g. "not reproduced" -> "partly", so only "decided" is asserted there)."""
    assert rule(min(p * (1 + 1e-6), 0.49)) != INCONCLUSIVE
    assert rule(p * (1 - 1e-6)) != word


@settings(max_examples=150, deadline=None)
@given(d=samples, delta=st.floats(0.01, 0.5))
def test_gain_p_value_is_the_level_at_which_the_word_changes(d, delta):
    assume(np.std(d) > 1e-3)
    v = rules.gain(d, min_gain=delta, tol=0.0)
    if v.word == INCONCLUSIVE:
        assert math.isnan(v.p_value)
        return
    assert v.p_value <= 0.05 + 1e-12
    assume(1e-9 < v.p_value < 0.45)
    _check_at(lambda a: rules.gain(d, min_gain=delta, tol=0.0, level=1 - a).word, v.p_value, v.word)


@settings(max_examples=150, deadline=None)
@given(d=samples, margin=st.floats(0.05, 0.8))
def test_equivalence_p_value_is_the_level_at_which_the_word_changes(d, margin):
    assume(np.std(d) > 1e-3)
    v = rules.equivalence(d, margin=margin, tol=0.0)
    if v.word == INCONCLUSIVE:
        return
    assert v.p_value <= 0.05 + 1e-12
    assume(1e-9 < v.p_value < 0.2)
    _check_at(lambda a: rules.equivalence(d, margin=margin, tol=0.0, alpha=a).word, v.p_value, v.word)


@settings(max_examples=150, deadline=None)
@given(a=samples, b=samples, share=st.floats(0.1, 0.9))
def test_share_p_value_is_the_level_at_which_the_word_changes(a, b, share):
    n = min(len(a), len(b))
    a, b = a[:n], [x + 0.5 for x in b[:n]]
    assume(np.std(a) > 1e-3 and np.std(b) > 1e-3)
    v = rules.share(a, b, min_share=share, tol=0.0)
    if v.word == INCONCLUSIVE:
        return
    assert v.p_value <= 0.05 + 1e-12
    assume(1e-9 < v.p_value < 0.45)
    _check_at(lambda al: rules.share(a, b, min_share=share, tol=0.0, level=1 - al).word, v.p_value, v.word)


def raw(**conds):
    return {name: {s: {"test_acc": x, "prox_start": 0.05, "prox_end": 0.05} for s, x in enumerate(accs)}
            for name, accs in conds.items()}


SCRATCH = [0.50, 0.52, 0.49, 0.51, 0.50]


def _with_noise(base, mean, sd, seed):
    e = np.random.default_rng(seed).standard_normal(len(base))
    e = (e - e.mean()) / e.std(ddof=1)
    return [b + mean + sd * x for b, x in zip(base, e)]


def test_corrected_words_follow_edits_of_the_raw_numbers():
    # secondary family: few_epochs decided "not reproduced" at an uncorrected p of about 0.034; with two strong claims
    # and an inconclusive one (frozen_attn, p = 1) in the family, Holm compares it with 0.05 / 2 and takes it back
    r = raw(scratch=SCRATCH, spt=_with_noise(SCRATCH, 0.40, 0.02, 1), spt_e10=_with_noise(SCRATCH, 0.08, 0.09, 2),
            hybrid_qkvo=_with_noise(SCRATCH, 0.30, 0.02, 3), hybrid_qk=_with_noise(SCRATCH, 0.28, 0.02, 4),
            frozen_attn=_with_noise(SCRATCH, 0.0, 0.06, 5))
    u, c = spt_claims.evaluate_all(r, TH), spt_claims.evaluate_corrected(r, TH)
    assert (u["few_epochs"].word, c["few_epochs"].word) == (NOT, INCONCLUSIVE) and u["frozen_attn"].word == INCONCLUSIVE
    assert c["few_epochs"].uncorrected == NOT and c["few_epochs"].p_adjusted > 0.05 >= u["few_epochs"].p_value
    assert c["few_epochs"].seeds_to_decide is not None and c["few_epochs"].family == "secondary"
    assert (c["qkvo"].word, c["qk"].word) == (REPRODUCED, REPRODUCED)  # strong: they survive
    # edit the raw numbers: less seed noise on spt_e10 -> the word survives the correction
    r2 = copy.deepcopy(r)
    r2["spt_e10"] = raw(x=_with_noise(SCRATCH, 0.08, 0.01, 2))["x"]
    assert spt_claims.evaluate_corrected(r2, TH)["few_epochs"].word == spt_claims.few_epochs(r2, TH).word != INCONCLUSIVE
    # edit another claim of the family: without the inconclusive frozen_attn, Holm's last step is 0.05 -> it survives
    r3 = {k: v for k, v in r.items() if k != "frozen_attn"}
    assert spt_claims.evaluate_corrected(r3, TH)["few_epochs"].word == NOT
    # an all-of claim is recombined from its corrected parts; primary and secondary do not mix
    r4 = raw(scratch=SCRATCH, spt=_with_noise(SCRATCH, 0.40, 0.02, 1), cross_count=_with_noise(SCRATCH, 0.40, 0.02, 5),
             cross_iid=_with_noise(SCRATCH, 0.12, 0.05, 6), frozen_attn=_with_noise(SCRATCH, 0.0, 0.06, 5))
    cu, cc = spt_claims.evaluate_all(r4, TH)["cross_data"], spt_claims.evaluate_corrected(r4, TH)["cross_data"]
    assert cu.word == REPRODUCED and 0.025 < cu.parts[1].p_value < 0.05
    assert [p.word for p in cc.parts] == [REPRODUCED, INCONCLUSIVE] and cc.word == INCONCLUSIVE
    r4["cross_iid"] = raw(x=_with_noise(SCRATCH, 0.14, 0.03, 6))["x"]  # a clearer i.i.d. gain: the whole claim decides
    assert spt_claims.evaluate_corrected(r4, TH)["cross_data"].word == REPRODUCED
    assert spt_claims.evaluate_corrected(r4, TH)["spt_gain"].family == "primary"


def test_partly_word_flips_under_holm_and_back():
    r = raw(scratch=SCRATCH, spt=_with_noise(SCRATCH, 0.40, 0.02, 1), hybrid_qkvo=_with_noise(SCRATCH, 0.12, 0.05, 7),
            hybrid_qk=_with_noise(SCRATCH, 0.12, 0.05, 8), hybrid_ffn=_with_noise(SCRATCH, 0.12, 0.05, 9))
    u, c = spt_claims.evaluate_all(r, TH), spt_claims.evaluate_corrected(r, TH)
    assert u["qkvo"].word == PARTLY and 0.0 < u["qkvo"].p_value <= 0.05
    assert c["qkvo"].word == (PARTLY if c["qkvo"].p_adjusted <= 0.05 else INCONCLUSIVE)
    r["hybrid_qkvo"] = raw(x=_with_noise(SCRATCH, 0.12, 0.005, 7))["x"]
    assert spt_claims.evaluate_corrected(r, TH)["qkvo"].word == PARTLY


def test_saved_full_runs_recomputed_under_holm():
    """The saved confirmatory runs: the uncorrected words are the saved record's; Holm takes back exactly the words
    whose adjusted p exceeds 0.05 (SPT: qk and both parts of cross_data; SPLADE: both fix rows)."""
    s = json.loads((ROOT / "docs/results/synthetic_spt_full/summary.json").read_text())
    th = from_dict(spt_claims.SPTThresholds, s["config"]["thresholds"])
    r = spt_claims.as_raw(s["summary"]["per_seed"])
    c = spt_claims.evaluate_corrected(r, th)
    changed = {k for k, v in c.items() if v.uncorrected and v.word != v.uncorrected and k in s["verdicts"]}
    assert changed == {"qk", "cross_data"}  # of the claims the run recorded (a claim added since may change too)
    for k in ("spt_gain", "spt_gain_matched", "depth", "few_epochs", "qkvo"):
        assert c[k].word == s["verdicts"][k]["word"]
    # the record still matches its numbers, uncorrected
    rules.check_record(s["verdicts"], {k: v for k, v in spt_claims.evaluate_all(r, th).items() if k in s["verdicts"]}, "full")
    phase = json.loads((ROOT / "docs/results/synthetic_splade_full/phase.json").read_text())
    th2 = from_dict(sc.SPLADEThresholds, phase["config"]["claims"])
    raw2 = sc.as_raw(phase)
    c2 = sc.evaluate_corrected(raw2, th2)
    assert c2["rescaling_fixes"].word == INCONCLUSIVE and sc.evaluate_all(raw2, th2)["rescaling_fixes"].word == PARTLY
    assert c2["over_rescaling"].word == REPRODUCED
    # edit raw numbers: modernbert's nDCG at its recommended k raised by 0.1 on every seed -> its part decides again
    for row in raw2["rows"]:
        if row["family"] == "modernbert" and row["mode"] == "tied" and float(row["s"]) == 1.0:
            k = sc.rule_k(raw2, "inspect", "modernbert", int(row["seed"]))
            if float(row["k"]) == k and k != 1.0:
                row["ndcg_test"] = row["ndcg_test"] + 0.1
    part = [p for p in sc.evaluate_corrected(raw2, th2)["rescaling_fixes"].parts if p.reason.startswith("modernbert")][0]
    assert part.word == REPRODUCED and part.p_adjusted <= 0.05


@pytest.mark.parametrize("page, module, fams", [("synthetic_spt.md", spt_claims, "SPT_FAMILIES"),
                                                ("synthetic_splade.md", sc, "SPLADE_FAMILIES"),
                                                ("synthetic_splade_ood.md", ood_claims, "SPLADE_OOD_FAMILIES"),
                                                ("synthetic_splade_ood.md", ood_claims, "SPLADE_OOD_V8K_FAMILIES")])
def test_the_docs_render_the_declared_families(page, module, fams):
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    assert families.families_markdown(getattr(module, fams)) in text, (
        f"docs/{page}: paste python -c 'from initlab.evidence import families; from {module.__name__} import {fams}; "
        f"print(families.families_markdown({fams}))'")


# --- seeds_for_words: the power computation behind a fresh run's seed count ---
@settings(max_examples=25, deadline=None)
@given(mean=st.floats(0.1, 0.6), sd=st.floats(0.01, 0.2), m=st.integers(1, 6))
def test_seeds_for_words_is_the_noncentral_t_power_at_holms_strictest_step(mean, sd, m):
    """The planned count reaches the power (statsmodels' one-sided t power at alpha / m / 2, the two-sided interval's
    side) and one seed fewer does not."""
    from statsmodels.stats.power import TTestPower

    rng = np.random.default_rng(0)
    d = mean + sd * rng.standard_normal(6)
    v = rules.gain(list(d), min_gain=0.05, tol=0.002)
    assume(v.word == REPRODUCED)
    vs = {f"c{i}": v for i in range(m)}
    (plan, *_) = families.seeds_for_words(vs, tuple(vs), power=0.9)
    assert plan.alpha == pytest.approx(0.05 / m)

    def power(n):
        return TTestPower().power(effect_size=(v.estimate - 0.05 - 0.002) / v.sd, nobs=n, alpha=plan.alpha / 2,
                                  alternative="larger")
    assert plan.seeds is not None and power(plan.seeds) >= 0.9 - 1e-9
    assert plan.achieved == pytest.approx(power(plan.seeds), abs=1e-6)
    if plan.seeds > 2:
        assert power(plan.seeds - 1) < 0.9


def test_seeds_for_words_plans_the_side_of_the_saved_word_and_skips_undecided_leaves():
    below = rules.share([0.01, 0.02, 0.015, 0.012], [0.4, 0.45, 0.42, 0.43], min_share=0.5, tol=0.01)
    undecided = rules.equivalence([0.01, -0.03, 0.04], margin=0.02, tol=0.002)
    above = rules.gain([0.4, 0.45, 0.43], min_gain=0.05, tol=0.002)
    both = rules.all_of([above, undecided])
    assert below.word in (NOT, PARTLY) and undecided.word == INCONCLUSIVE
    plans = families.seeds_for_words({"a": below, "b": both, "c": rules.not_run("gain", ["x"])}, ("a", "b", "c"))
    assert [(p.claim, p.part) for p in plans] == [("a", 0), ("b", 0), ("b", 1)]  # a not-run claim is no leaf
    assert all(p.alpha == pytest.approx(0.05 / 3) for p in plans)
    assert plans[0].threshold == 0.5 and plans[0].seeds is not None and plans[2].seeds is None
    with pytest.raises(KeyError, match="'z'"):
        families.seeds_for_words({"a": below}, ("a", "z"))
    with pytest.raises(ValueError, match="power"):
        families.seeds_for_words({"a": below}, ("a",), power=1.0)
