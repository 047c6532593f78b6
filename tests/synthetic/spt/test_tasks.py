"""Tests of initlab.synthetic.spt.tasks: the stated properties of the generators."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from initlab.synthetic.spt.metrics import count_classifier_accuracy, token_counts
from initlab.nn.masking import mask_tokens
from initlab.synthetic.spt.tasks import MASK_ID, N_SPECIAL, TaskConfig, make_task, vocab_size

CFG = TaskConfig()
V = vocab_size(CFG)


@pytest.fixture(scope="module")
def local_data():
    return make_task("local", 2000, 1), make_task("local", 2000, 2)


@pytest.fixture(scope="module")
def count_data():
    return make_task("count", 2000, 1), make_task("count", 2000, 2)


@pytest.mark.parametrize("name", ["local", "count", "iid", "pairs"])
def test_shapes_ranges_balance_determinism(name):
    x, y = make_task(name, 101, 7)
    assert x.shape == (101, 100) and x.dtype == torch.long and y.shape == (101,)
    assert int(x.min()) >= N_SPECIAL and int(x.max()) < V
    assert int(y.sum()) == 50
    x2, y2 = make_task(name, 101, 7)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    x3, _ = make_task(name, 101, 8)
    assert not torch.equal(x, x3)


def _unigram_gap(x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """Max over tokens of |f_1 - f_0| (class-conditional unigram frequencies), and a conservative 5-sigma
    bound from the per-sequence spread of the frequencies (sequences are the independent units)."""
    c = token_counts(x, V)[:, N_SPECIAL:] / x.shape[1]  # (n, K) per-sequence frequencies
    y = y.numpy()
    gap = np.abs(c[y == 1].mean(0) - c[y == 0].mean(0))
    se = np.sqrt(c[y == 1].var(0) / (y == 1).sum() + c[y == 0].var(0) / (y == 0).sum())
    return float(gap.max()), float((5 * se).max())


def test_local_unigram_frequencies_equal_across_classes(local_data):
    (x, y), _ = local_data
    gap, bound = _unigram_gap(x, y)
    assert gap < bound


def test_unigram_check_detects_the_count_task(count_data):
    """The same check fails on the count task, so it can fail."""
    (x, y), _ = count_data
    gap, bound = _unigram_gap(x, y)
    assert gap > 3 * bound


def test_count_classifier_at_chance_on_local_and_solves_count(local_data, count_data):
    (xtr, ytr), (xte, yte) = local_data
    acc_local = count_classifier_accuracy(xtr, ytr, xte, yte, V)
    assert abs(acc_local - 0.5) < 0.05  # 2000 test sequences: 1 sd = 0.011
    (xtr, ytr), (xte, yte) = count_data
    assert count_classifier_accuracy(xtr, ytr, xte, yte, V) > 0.9


def test_local_label_is_in_the_direction_of_steps(local_data):
    """Steps between adjacent distinct tokens are +1 mod K in class 1 and -1 in class 0 about
    signal_frac of the time (plus the uniform jumps' 1/(K-1)); a local rule decides the label."""
    (x, y), _ = local_data
    K = CFG.n_content
    d = (x[:, 1:] - x[:, :-1]) % K
    change = d != 0
    up = ((d == 1) & change).sum(1).float() / change.sum(1).float()
    down = ((d == K - 1) & change).sum(1).float() / change.sum(1).float()
    expect = CFG.signal_frac + (1 - CFG.signal_frac) / (K - 1)
    assert abs(float(up[y == 1].mean()) - expect) < 0.02
    assert abs(float(down[y == 0].mean()) - expect) < 0.02
    rule = (up > down).long()  # the local rule: direction of the majority of steps
    assert float((rule == y).float().mean()) > 0.95


def test_local_inputs_are_locally_correlated(local_data):
    """A token equals its neighbour far more often than chance (runs): masked tokens are predictable."""
    (x, _), _ = local_data
    same = float((x[:, 1:] == x[:, :-1]).float().mean())
    assert same > 0.5  # mean run 3: about 2/3; i.i.d. tokens: 1/16
    xi, _ = make_task("iid", 500, 0)
    assert float((xi[:, 1:] == xi[:, :-1]).float().mean()) < 0.1


def test_reversal_symmetry_of_local():
    """Reversed class-1 sequences have the statistics of class-0 sequences (the bag-symmetry argument)."""
    x, y = make_task("local", 2000, 3)
    K = CFG.n_content
    rev = x[y == 1].flip(1)
    d_rev = ((rev[:, 1:] - rev[:, :-1]) % K == K - 1).float().mean()
    d_0 = ((x[y == 0][:, 1:] - x[y == 0][:, :-1]) % K == K - 1).float().mean()
    assert abs(float(d_rev - d_0)) < 0.01


@given(st.floats(0.05, 0.9), st.integers(0, 1000))
def test_mask_tokens(rate, seed):
    x, _ = make_task("iid", 16, seed, TaskConfig(T=30))
    pad = torch.ones_like(x, dtype=torch.bool)
    pad[:, 25:] = False
    g = torch.Generator().manual_seed(seed)
    inp, masked = mask_tokens(x, rate, g, pad_mask=pad, mask_id=MASK_ID, at_least_one=True)
    assert masked.any() and not masked[:, 25:].any()
    assert torch.all(inp[masked] == MASK_ID) and torch.equal(inp[~masked], x[~masked])
    inp2, masked2 = mask_tokens(x, rate, torch.Generator().manual_seed(seed), pad_mask=pad, mask_id=MASK_ID, at_least_one=True)
    assert torch.equal(inp, inp2) and torch.equal(masked, masked2)


def test_bad_inputs():
    with pytest.raises(ValueError, match="name"):
        make_task("nope", 3, 0)
    with pytest.raises(ValueError, match="n"):
        make_task("local", 0, 0)
    with pytest.raises(ValueError, match="even"):
        make_task("pairs", 3, 0, TaskConfig(T=11))
    with pytest.raises(ValueError, match="signal_frac"):
        TaskConfig(signal_frac=1.5)
    with pytest.raises(ValueError, match="ratio"):
        mask_tokens(torch.zeros(2, 3, dtype=torch.long), 0.0, torch.Generator(), mask_id=MASK_ID)  # noqa
