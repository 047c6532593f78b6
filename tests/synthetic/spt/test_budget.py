"""The budget rules: SPT early stopping on validation loss, fine-tuning plateau, validation selection."""

from __future__ import annotations

import math

import pytest

from initlab.synthetic.spt.budget import budget_from_curve, moving_average, plateau_epoch
from initlab.synthetic.spt.ensemble import best_epoch_rule, select_on_validation


def test_early_stopping_rule():
    losses = [3.0, 2.5, 2.2, 2.1, 2.15, 2.12, 2.2, 2.3, 2.0]
    assert best_epoch_rule(losses, patience=3, max_epochs=100) == (3, 6)  # 4, 5, 6 fail to beat 2.1
    assert best_epoch_rule(losses, patience=10, max_epochs=5) == (3, 5)  # max epochs reached first
    assert best_epoch_rule([1.0, 1.0, 1.0], patience=2, max_epochs=9) == (0, 2)  # equal is no improvement
    with pytest.raises(ValueError, match="do not reach"):
        best_epoch_rule([3.0, 2.0, 1.0], patience=2, max_epochs=9)
    with pytest.raises(ValueError, match="patience"):
        best_epoch_rule(losses, patience=0, max_epochs=9)


def test_validation_selects_never_test():
    val = [0.50, 0.60, 0.70, 0.70, 0.65]
    test = [0.99, 0.10, 0.55, 0.90, 0.99]
    assert select_on_validation(val, test) == 2  # best validation, earliest on ties; test is ignored
    with pytest.raises(ValueError):
        select_on_validation(val, test[:3])


def test_plateau_rule():
    rising = [math.nan] + [0.5 + 0.01 * e for e in range(1, 41)]  # +1 point per epoch: never flat
    assert plateau_epoch(rising) is None
    assert budget_from_curve(rising, max_epochs=40) == (40, None)
    flat_after_20 = [math.nan] + [0.5 + 0.02 * min(e, 20) for e in range(1, 61)]
    p = plateau_epoch(flat_after_20)
    a = moving_average(flat_after_20[1:])
    assert a[p - 1] - a[p - 11] < 0.01 <= a[p - 2] - a[p - 12]  # first epoch whose 10-epoch gain < 1 point
    assert budget_from_curve(flat_after_20, max_epochs=100) == (10 * math.ceil(p / 10), p)
