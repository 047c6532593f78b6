"""initlab.experiment.text: an interval end is printed with as many digits as it takes to stay on the same side of
its rule's decision points and of 0 (property-tested with hypothesis), and the two cases that hid their decision."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from initlab.evidence import rules
from initlab.experiment import text

UNITS = {"points": 100.0, "share": 1.0, "mass": 1.0, "ndcg": 1.0, "nats": 1.0}


def _side(a: float, m: float) -> int:
    return (a > m) - (a < m)


@given(x=st.floats(-2.0, 2.0, allow_nan=False), marks=st.lists(st.floats(-1.0, 1.0, allow_nan=False), max_size=4),
       unit=st.sampled_from(sorted(UNITS)))
def test_printed_end_stays_on_the_side_of_every_mark_and_of_zero(x, marks, unit):
    out = text.number(x, unit, marks)
    shown = float(out) / UNITS[unit]
    scale = UNITS[unit]
    for m in list(marks) + ([0.0] if marks else []):  # 0 is a mark whenever a rule's marks are given
        if abs(scale * (x - m)) >= 10.0 ** -text.MAX_DECIMALS:  # farther from the mark than the last printable digit
            assert _side(float(out), scale * m) == _side(scale * x, scale * m), (x, m, out)
    # never fewer than the unit's default decimals, never a signed zero, and the number is the rounded x
    default = {"points": 1, "share": 2, "mass": 3, "ndcg": 3, "nats": 2}[unit]
    decimals = len(out.split(".")[1])
    assert default <= decimals <= text.MAX_DECIMALS
    assert abs(shown - x) <= 0.5 * 10.0 ** -decimals / scale + 1e-12
    assert not (out.startswith("-") and float(out) == 0)


@given(x=st.floats(-2.0, 2.0, allow_nan=False), unit=st.sampled_from(sorted(UNITS)))
def test_no_marks_prints_the_default_format(x, unit):
    default = {"points": 1, "share": 2, "mass": 3, "ndcg": 3, "nats": 2}[unit]
    assert len(text.number(x, unit).split(".")[1]) == default


def test_the_two_ends_that_hid_their_decision():
    # frozen attention - scratch (full run): 90 % TOST upper end -0.03 points printed "+0.0" before
    v = rules.Verdict("inconclusive", "equivalence", estimate=-0.036, lo=-0.072, hi=-0.0003, level=0.9, n=8,
                      thresholds=(-0.03, 0.03), tol=0.002)
    assert text.interval(v, "points") == "[-7.20, -0.03]"  # both ends with the decimals the closer one needs
    assert text.estimate(v, "points") == "-3.60"
    # roberta's "fix" row: upper end 0.04774 decided against min_gain - tol = 0.048; printed "+0.048" before
    w = rules.Verdict("not reproduced", "gain", estimate=0.017, lo=-0.014, hi=0.04774, n=5, thresholds=(0.0, 0.05),
                      tol=0.002)
    assert text.interval(w, "ndcg") == "[-0.0140, +0.0477]"
    assert text.estimate(w, "ndcg") == "+0.0170"
    assert text.number(math.inf, "points") == "n/a"
    with pytest.raises(ValueError, match="unit"):
        text.number(0.1, "percent")


def test_a_zero_width_equivalence_reads_degenerate_not_its_word():
    v = rules.Verdict("reproduced", "equivalence", estimate=0.0, lo=0.0, hi=0.0, level=0.9, n=3,
                      thresholds=(-0.03, 0.03), tol=0.002)
    assert text.degenerate(v)
    out = text.describe(v, "ndcg")
    assert out.startswith("**degenerate**: +0.000 [+0.000, +0.000]") and "**reproduced**" not in out
    assert "zero-width interval" in out
    w = rules.Verdict("reproduced", "equivalence", estimate=0.0, lo=-0.01, hi=0.01, level=0.9, n=3,
                      thresholds=(-0.03, 0.03), tol=0.002)
    assert not text.degenerate(w) and text.describe(w, "ndcg").startswith("**reproduced**")
