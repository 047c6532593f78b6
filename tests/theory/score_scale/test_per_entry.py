"""The per-entry, per-position-class Gaussian logit model (initlab.theory.score_scale.per_entry) against a Monte
Carlo of the model itself, and its reduction to the i.i.d. model."""

from __future__ import annotations

import math

import pytest
import torch

from initlab.theory.score_scale import closed_form as ss
from initlab.theory.score_scale import per_entry as pe
from initlab.theory.score_scale.splade_terms import splade_term_weights


def _model(V: int = 150, seed: int = 0):
    """Bias, per-class means and sds of the head part for 3 classes ([CLS], [SEP], text tokens), heterogeneous."""
    g = torch.Generator().manual_seed(seed)
    b = torch.randn(V, generator=g, dtype=torch.float64) * 0.8 - 0.6
    mu = torch.randn(3, V, generator=g, dtype=torch.float64) * 1.5 - 1.0
    mu[1] += 1.5  # the [SEP] class active for many entries, as in the trained BERT-like backbones
    tau = torch.rand(3, V, generator=g, dtype=torch.float64) * 1.2 + 0.1
    tau[0, :10] = 0.0  # degenerate entries: the step 1[k b + mu <= 0]
    return b, mu, tau


def _simulate(b, mu, tau, lengths, k, draws, seed):
    """Logits z = b + y / k of texts [CLS] text... [SEP] with y ~ N(mu_c, tau_c^2) independent over tokens; returns
    the SPLADE term weights of every draw ``(draws, n, V)``."""
    g = torch.Generator().manual_seed(seed)
    n, T, V = len(lengths), max(lengths), b.numel()
    cls = torch.full((n, T), 2, dtype=torch.long)  # text tokens
    cls[:, 0] = 0
    mask = torch.zeros(n, T, dtype=torch.bool)
    for i, L in enumerate(lengths):
        cls[i, L - 1] = 1
        mask[i, :L] = True
    out = []
    for _ in range(draws):
        y = mu[cls] + tau[cls] * torch.randn(n, T, V, generator=g, dtype=torch.float64)
        out.append(splade_term_weights(b + y / k, mask))
    counts = torch.stack([torch.ones(n), torch.ones(n), torch.tensor(lengths, dtype=torch.float64) - 2], 1)
    return torch.stack(out), counts


@pytest.mark.parametrize("k", [1.0, 4.0, 32.0])
def test_active_dims_and_flops_match_a_monte_carlo_of_the_model(one_thread, k):
    b, mu, tau = _model()
    lengths = [3, 7, 12, 20, 5, 9]
    draws = 400
    a, counts = _simulate(b, mu, tau, lengths, k, draws, seed=1)
    p = pe.pooled_active_probability(b, mu, tau, counts, k)  # (n, V)
    freq = (a > 0).double().mean(0)  # (n, V)
    # every (text, entry) probability within 6 binomial standard errors (plus the degenerate steps exactly)
    se = (p * (1 - p) / draws).sqrt()
    assert bool(((freq - p).abs() <= 6 * se + 1e-12).all())
    dims = pe.expected_active_dims(b, mu, tau, counts, k)
    se_dims = ((p * (1 - p)).sum(1) / draws).sqrt()
    assert bool(((a > 0).double().sum(2).mean(0) - dims).abs().le(6 * se_dims + 1e-12).all())
    assert torch.allclose(dims, p.sum(1), rtol=1e-12)
    # FLOPS: queries (the first 3 texts) against documents (the others), independent draws
    q_act, d_act = (a[:, :3] > 0).double(), (a[:, 3:] > 0).double()
    flops_draws = (q_act.mean(1) * torch.roll(d_act, 1, dims=0).mean(1)).sum(1)  # q of draw r with d of draw r-1
    th = pe.expected_flops(p[:3], p[3:])
    assert abs(float(flops_draws.mean()) - th) <= 6 * float(flops_draws.std()) / math.sqrt(draws) + 1e-12


def test_reduces_to_the_iid_model():
    V, mu, sigma, b, L = 40, 0.3, 2.0, -1.0, 17
    for k in (1.0, 8.0):
        f64 = dict(dtype=torch.float64)
        dims = pe.expected_active_dims(torch.full((V,), b, **f64), torch.full((1, V), mu, **f64),
                                       torch.full((1, V), sigma, **f64), torch.tensor([[float(L)]]), k)
        # i.i.d. model at mu_k = b + mu / k, sigma_k = sigma / k (closed_form.logit_params)
        mu_k, s_k = ss.logit_params(b, mu, sigma, k)
        assert float(dims[0]) == pytest.approx(V * ss.pooled_active_fraction(mu_k, s_k, L), rel=1e-12)


def test_rescaled_checkpoint_gets_the_same_prediction():
    """Dividing the head by 16 and predicting at k = 1 is the same as predicting the original at k = 16: the model
    is stated in b (not divided) and y (divided), so identical weights give identical predictions."""
    b, mu, tau = _model(seed=3)
    counts = torch.tensor([[1.0, 1.0, 10.0], [1.0, 1.0, 3.0]])
    assert torch.allclose(pe.expected_active_dims(b, mu, tau, counts, 16.0),
                          pe.expected_active_dims(b, mu / 16, tau / 16, counts, 1.0), rtol=1e-12)


def test_entry_moments_and_classes():
    ids = torch.tensor([[2, 7, 8, 3, 0], [2, 9, 3, 0, 0]])
    mask = ids != 0
    cls = pe.token_classes(ids, special_ids=[0, 2, 3])
    assert cls.tolist() == [[2, -1, -1, 3, 0], [2, -1, 3, 0, 0]]
    g = torch.Generator().manual_seed(0)
    z = torch.randn(2, 5, 4, generator=g, dtype=torch.float64)
    bias = torch.tensor([0.5, -1.0, 0.0, 2.0], dtype=torch.float64)
    mom = pe.EntryMoments(bias, 4)
    mom.add(z[:1], cls[:1], mask[:1])
    mom.add(z[1:], cls[1:], mask[1:])
    classes, mu, tau = mom.fit()
    assert classes == [-1, 2, 3]
    text = torch.cat([z[0, 1:3], z[1, 1:2]]) - bias
    assert torch.allclose(mu[0], text.mean(0)) and torch.allclose(tau[0], text.std(0))
    with pytest.raises(ValueError, match="expected"):
        mom.add(z[..., :3], cls, mask)
    with pytest.raises(ValueError, match="no tokens"):
        pe.EntryMoments(None, 4).fit()
    with pytest.raises(ValueError, match="k: expected"):
        pe.pooled_active_probability(bias, mu, tau, torch.ones(1, 3), 0.0)
