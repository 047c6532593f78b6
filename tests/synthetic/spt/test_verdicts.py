"""Verdict rules of the synthetic SPT run on hand-made per-seed numbers (one case per verdict)."""

from __future__ import annotations

import math

import pytest

from initlab.synthetic.spt.verdicts import (
    NOT,
    PARTLY,
    REPRODUCED,
    VerdictThresholds,
    all_of,
    equivalence_verdict,
    gain_verdict,
    paired,
    share_verdict,
)

TH = VerdictThresholds(min_gain=0.05, margin=0.03, min_share=0.5)
SCRATCH = [0.50, 0.49, 0.51, 0.50, 0.50]


def test_paired_interval_by_hand():
    p = paired([0.60, 0.62, 0.58, 0.61, 0.59], SCRATCH)  # d = .10, .13, .07, .11, .09
    assert p["mean"] == pytest.approx(0.10)
    sd = math.sqrt(sum((d - 0.10) ** 2 for d in (0.10, 0.13, 0.07, 0.11, 0.09)) / 4)
    half = 2.7764451051977987 * sd / math.sqrt(5)  # t_{0.975, 4}
    assert p["sd"] == pytest.approx(sd) and p["lo"] == pytest.approx(0.10 - half) and p["hi"] == pytest.approx(0.10 + half)
    one = paired([0.6], [0.5])
    assert one["lo"] == -math.inf and one["hi"] == math.inf
    with pytest.raises(ValueError, match="equal-length"):
        paired([0.5, 0.6], [0.5])


def test_gain_verdicts():
    assert gain_verdict(paired([0.60, 0.62, 0.58, 0.61, 0.59], SCRATCH), TH) == REPRODUCED  # +10, interval > 0
    assert gain_verdict(paired([0.52, 0.51, 0.53, 0.52, 0.52], SCRATCH), TH) == PARTLY  # +2: sure but small
    assert gain_verdict(paired([0.90, 0.40, 0.85, 0.45, 0.60], SCRATCH), TH) == PARTLY  # +14 but interval spans 0
    assert gain_verdict(paired([0.49, 0.50, 0.50, 0.51, 0.49], SCRATCH), TH) == NOT


def test_equivalence_verdicts():
    assert equivalence_verdict(paired([0.50, 0.50, 0.51, 0.49, 0.51], SCRATCH), TH) == REPRODUCED
    assert equivalence_verdict(paired([0.56, 0.44, 0.55, 0.45, 0.51], SCRATCH), TH) == PARTLY  # mean ~0, wide
    assert equivalence_verdict(paired([0.60, 0.59, 0.61, 0.60, 0.60], SCRATCH), TH) == NOT


def test_share_verdicts():
    spt = paired([0.90, 0.88, 0.92, 0.90, 0.90], SCRATCH)  # +40
    v, share = share_verdict(paired([0.75, 0.73, 0.77, 0.75, 0.75], SCRATCH), spt, TH)
    assert v == REPRODUCED and share == pytest.approx(0.625)
    v, share = share_verdict(paired([0.58, 0.57, 0.60, 0.58, 0.59], SCRATCH), spt, TH)
    assert v == PARTLY and share == pytest.approx(0.084 / 0.4)
    v, _ = share_verdict(paired([0.50, 0.52, 0.48, 0.50, 0.51], SCRATCH), spt, TH)
    assert v == NOT
    no_gain = paired([0.50, 0.50, 0.51, 0.49, 0.51], SCRATCH)
    v, share = share_verdict(paired([0.75, 0.73, 0.77, 0.75, 0.75], SCRATCH), no_gain, TH)
    assert v == NOT and math.isnan(share)


def test_all_of_and_threshold_checks():
    assert all_of([REPRODUCED, REPRODUCED]) == REPRODUCED
    assert all_of([REPRODUCED, NOT]) == PARTLY and all_of([PARTLY, NOT]) == PARTLY
    assert all_of([NOT, NOT]) == NOT
    with pytest.raises(ValueError):
        all_of([])
    with pytest.raises(ValueError, match="margin"):
        VerdictThresholds(margin=0.0)


def test_verdict_rows_from_cells_and_claims_not_run():
    from initlab.config import derive
    from initlab.synthetic import spt
    from initlab.synthetic.spt.report import NOT_RUN, verdict_rows

    cfg = derive(spt.BASE, seeds=(1, 2, 3, 4, 5))
    accs = {"scratch": SCRATCH, "spt": [0.90, 0.88, 0.92, 0.90, 0.90], "hybrid_qk": [0.58, 0.57, 0.60, 0.58, 0.59],
            "frozen_attn": [0.50, 0.50, 0.51, 0.49, 0.51], "depth2_scratch": SCRATCH, "depth2_spt": [0.70, 0.72, 0.68, 0.71, 0.69]}
    results = {f"ft_{c}": {"kind": "finetune", "seeds": [{"seed": s, "test_acc": a} for s, a in zip(cfg.seeds, v)]} for c, v in accs.items()}
    rows = {r["id"]: r for r in verdict_rows(cfg, results)}
    assert rows["spt_gain"]["verdict"] == REPRODUCED
    assert rows["qk"]["verdict"] == PARTLY and rows["qk"]["share"] == pytest.approx(0.084 / 0.4)
    assert rows["frozen_attn"]["verdict"] == REPRODUCED
    assert rows["depth"]["verdict"] == NOT_RUN and "depth4_spt" in rows["depth"]["missing"]  # never judged on a subset
    assert rows["ffn"]["verdict"] == NOT_RUN and rows["cross_data"]["verdict"] == NOT_RUN
