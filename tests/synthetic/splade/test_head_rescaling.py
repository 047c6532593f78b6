"""Every k of the synthetic SPLADE experiments gives bitwise the weights of the code it replaced.

The functions prefixed ``_frozen`` are the weight arithmetic of the synthetic SPLADE cells as it was before the
cells went through :func:`initlab.mlmhead.rescale_mlm_head` (a frozen copy: do not edit them to make a test pass).
Each test runs the cell's own code path on a tiny backbone of every family (the parts that would train or
evaluate replaced by a stub that records the weights and stops) and compares every tensor bitwise, and the tie
structure (which parameters share storage), with the frozen reference, for every grid point and k of every
preset. Equal weights mean equal cell keys, equal training and equal results.
"""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import pytest
import torch

import initlab.synthetic.splade.families as fam
import initlab.synthetic.splade.ood.cell as oodcell
import initlab.synthetic.splade.phase.cell as phcell
from initlab.mlmhead import K_ATTR, head_projection
from initlab.synthetic.splade.data import SPECIAL_TOKENS
from initlab.synthetic.splade.families import FAMILIES, FamilyConfig, build_family_model
from initlab.synthetic.splade.ood.config import PRESETS as OOD_PRESETS
from initlab.synthetic.splade.phase.config import PRESETS as PHASE_PRESETS, cell_spec, grid

VOCAB = list(SPECIAL_TOKENS) + [f"w{i}" for i in range(30)]
TINY = FamilyConfig(d=16, layers=1, heads=2, ffn=32, albert_embedding=8, max_len=16)


# ------------------------------------------------------------------------------------------------
# the frozen reference (the cells' weight arithmetic before rescale_mlm_head; do not edit)
# ------------------------------------------------------------------------------------------------
@torch.no_grad()
def _frozen_scale_backbone(model, e: float, h: float, tied: bool):
    emb, out = model.get_input_embeddings(), model.get_output_embeddings()
    assert emb.weight.data_ptr() == out.weight.data_ptr()
    if tied:
        assert e == h
        emb.weight.mul_(float(e))
        return model
    out.weight = torch.nn.Parameter(out.weight.detach().clone())
    if getattr(out, "bias", None) is not None:
        out.bias = torch.nn.Parameter(out.bias.detach().clone())
    model.config.tie_word_embeddings = False
    emb.weight.mul_(float(e))
    out.weight.mul_(float(h))
    return model


@torch.no_grad()
def _frozen_posthoc_weights(model, k: float) -> torch.Tensor:
    return model.get_output_embeddings().weight.detach().clone() / k


@torch.no_grad()
def _frozen_hidden_change(model, input_ids, attention_mask, k: float) -> float:
    w = model.get_input_embeddings().weight
    w0 = w.detach().clone()
    model.eval()

    def hidden():
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        return out.hidden_states[-1][attention_mask.bool()].double()

    try:
        h1 = hidden()
        w.div_(float(k))
        hk = hidden()
    finally:
        w.copy_(w0)
    return float((hk - h1).norm() / h1.norm())


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def backbones():
    torch.set_num_threads(1)
    return {f: build_family_model(f, len(VOCAB), TINY, seed=0) for f in FAMILIES}


def _structure(model) -> list[list[str]]:
    """Which parameters share storage (the tie), as sorted groups of names."""
    groups: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        groups.setdefault(p.data_ptr(), []).append(name)
    return sorted(sorted(g) for g in groups.values())


def _assert_same_weights(a, b, what: str) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sorted(sa) == sorted(sb), what
    for name in sa:
        assert sa[name].dtype == sb[name].dtype and torch.equal(sa[name], sb[name]), f"{what}: {name} differs"
    assert _structure(a) == _structure(b), what
    assert a.config.tie_word_embeddings == b.config.tie_word_embeddings, what


class _Stop(Exception):
    pass


# ------------------------------------------------------------------------------------------------
# the phase diagram's cells
# ------------------------------------------------------------------------------------------------
def _phase_points() -> list[tuple[str, str, float, float]]:
    """Every distinct (family, mode, s, k) of every phase-diagram preset."""
    return sorted({(p["family"], p["mode"], p["s"], p["k"]) for cfg in PHASE_PRESETS.values() for p in grid(cfg)})


def _phase_cell_weights(monkeypatch, backbone, spec, cfg):
    """The model ``run_phase_cell`` trains for ``spec``, taken just after it is scaled (before any training)."""
    hf = copy.deepcopy(backbone)
    seen = {}

    def stop(model, *args, **kwargs):
        seen["model"] = model[0].auto_model
        raise _Stop

    monkeypatch.setattr(phcell, "load_encoder", lambda *a, **k: [SimpleNamespace(auto_model=hf)])
    monkeypatch.setattr(phcell, "make_corpus", lambda c: SimpleNamespace(docs={}))
    monkeypatch.setattr(phcell, "batch_features", lambda *a, **k: None)
    monkeypatch.setattr(phcell, "_hidden", lambda *a, **k: torch.ones(2, dtype=torch.float64))
    monkeypatch.setattr(phcell, "measure_init", stop)
    with pytest.raises(_Stop):
        phcell.run_phase_cell("unused", cfg, spec, "unused")
    assert seen["model"] is hf
    return hf


def test_every_phase_cell_has_the_weights_of_the_frozen_reference(monkeypatch, backbones):
    points = _phase_points()
    assert {m for _, m, _, _ in points} == {"tied", "k_output", "s_output"} and len(points) > 100
    cfg = PHASE_PRESETS["quick"]
    for family, mode, s, k in points:
        spec = cell_spec(family, mode, s, k, 0)
        got = _phase_cell_weights(monkeypatch, backbones[family], spec, cfg)
        want = _frozen_scale_backbone(copy.deepcopy(backbones[family]), spec.e, spec.h, spec.tied)
        _assert_same_weights(got, want, f"{family} {mode} s={s:g} k={k:g}")


POSTHOC_KS = (4.0, 16.0, 64.0)


def _run_posthoc(monkeypatch, hf, observe) -> tuple[list, list[dict]]:
    """Run :func:`posthoc_rescales` on ``hf`` at :data:`POSTHOC_KS` with a stub evaluation that records
    ``observe(model)`` under each factor; returns what was observed and the rows."""
    seen = []

    def evaluate(model, corpus, cfg, return_vectors):
        seen.append(observe(model[0].auto_model))
        z = torch.zeros(2, 3)
        return {key: 0.0 for key in ("ndcg@10", "ndcg_select", "ndcg_test", "q_active_dims", "d_active_dims",
                                     "finite_vectors")}, z, z, torch.zeros(2, 2)

    monkeypatch.setattr(phcell, "evaluate", evaluate)
    monkeypatch.setattr(phcell, "collapse_verdict", lambda *a, **k: SimpleNamespace(reasons=[], stats={}))
    rows = phcell.posthoc_rescales([SimpleNamespace(auto_model=hf)], SimpleNamespace(vocab=VOCAB),
                                   SimpleNamespace(posthoc_ks=POSTHOC_KS))
    return seen, rows


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("tied", [True, False])
def test_posthoc_rescales_see_the_frozen_reference_weights_and_restore_them(monkeypatch, backbones, family, tied):
    hf = copy.deepcopy(backbones[family])
    _frozen_scale_backbone(hf, 2.0 if tied else 1.0, 2.0 if tied else 0.5, tied)
    before = copy.deepcopy(hf)
    seen, rows = _run_posthoc(monkeypatch, hf, lambda m: (head_projection(m).detach().clone(),
                                                          m.get_input_embeddings().weight.detach().clone()))
    assert [r["k"] for r in rows] == list(POSTHOC_KS) and len(seen) == 3
    for (head, emb), k in zip(seen, POSTHOC_KS):
        ref = _frozen_posthoc_weights(before, k)
        assert torch.equal(head, ref)
        # tied: the input embeddings are the head (divided too); untied: left alone
        assert torch.equal(emb, ref if tied else before.get_input_embeddings().weight)
    _assert_same_weights(hf, before, "restored")
    assert getattr(hf.config, K_ATTR, None) == getattr(before.config, K_ATTR, None)


@pytest.mark.parametrize("family", FAMILIES)
def test_hidden_change_equals_the_frozen_reference_and_restores_the_weights(backbones, family):
    hf = copy.deepcopy(backbones[family])
    tok = fam.family_tokenizer(family, VOCAB)
    enc = tok(["w1 w2 w3 w4", "w5 w6 w7", "w8 w9 w10 w11 w12"], padding=True, return_tensors="pt")
    for k in (2.0, 16.0):
        want = _frozen_hidden_change(copy.deepcopy(hf), enc["input_ids"], enc["attention_mask"], k)
        got = fam.hidden_change(hf, enc["input_ids"], enc["attention_mask"], k)
        assert got == want and math.isfinite(got)
    _assert_same_weights(hf, backbones[family], "restored")
    assert not hasattr(hf.config, K_ATTR)  # nothing recorded: natural_scale's backbone is saved after it


# ------------------------------------------------------------------------------------------------
# the out-of-domain experiment's cells
# ------------------------------------------------------------------------------------------------
def _ood_points() -> list[tuple[str, float]]:
    return sorted({(f, float(k)) for cfg in OOD_PRESETS.values() for f in cfg.families for k in cfg.ks})


def _ood_cell_weights(monkeypatch, backbone, family, k, cfg):
    """The model ``ood.cell.run_cell`` trains for (family, k), taken just after it is rescaled."""
    hf = copy.deepcopy(backbone)
    seen = {}

    def stop(model, corpus, cfg):
        seen["model"] = model[0].auto_model
        raise _Stop

    monkeypatch.setattr(oodcell, "load_encoder", lambda *a, **kw: [SimpleNamespace(auto_model=hf)])
    monkeypatch.setattr(oodcell, "corpus_for", lambda *a, **kw: None)
    monkeypatch.setattr(oodcell, "shift_sets_for", lambda *a, **kw: ())
    monkeypatch.setattr(oodcell, "initial_infonce", stop)
    with pytest.raises(_Stop):
        oodcell.run_cell("unused", cfg, family, k, 0, "unused")
    assert seen["model"] is hf
    return hf


def test_every_ood_cell_has_the_weights_of_the_frozen_reference(monkeypatch, backbones):
    points = _ood_points()
    assert {k for _, k in points} >= {1.0, 4.0, 16.0}
    cfg = next(iter(OOD_PRESETS.values()))
    for family, k in points:
        got = _ood_cell_weights(monkeypatch, backbones[family], family, k, cfg)
        want = _frozen_scale_backbone(copy.deepcopy(backbones[family]), 1.0 / k, 1.0 / k, tied=True)
        _assert_same_weights(got, want, f"ood {family} k={k:g}")


# ------------------------------------------------------------------------------------------------
# the cells run the shipped tool
# ------------------------------------------------------------------------------------------------
def _spy(monkeypatch, module=None) -> list[tuple[float, bool]]:
    """Record every ``(k, untie)`` passed to ``rescale_mlm_head`` as read from ``module`` (default
    :mod:`initlab.mlmhead`, where the cells read it), still calling the real function."""
    import initlab.mlmhead as mlmhead

    module = mlmhead if module is None else module
    calls: list[tuple[float, bool]] = []
    real = module.rescale_mlm_head

    def spy(model, k, *, untie=False):
        calls.append((float(k), bool(untie)))
        return real(model, k, untie=untie)

    monkeypatch.setattr(module, "rescale_mlm_head", spy)
    return calls


@pytest.mark.parametrize("mode,s,k,untie", [("tied", 16.0, 4.0, False), ("k_output", 16.0, 4.0, True),
                                            ("k_output", 1.0, 1.0, False), ("s_output", 16.0, 64.0, True)])
def test_a_phase_cell_divides_by_its_k_with_rescale_mlm_head(monkeypatch, backbones, mode, s, k, untie):
    calls = _spy(monkeypatch)
    hf = _phase_cell_weights(monkeypatch, backbones["bert"], cell_spec("bert", mode, s, k, 0), PHASE_PRESETS["quick"])
    assert calls == [(k, untie)] and getattr(hf.config, K_ATTR) == k


def test_an_ood_cell_divides_by_its_k_with_rescale_mlm_head(monkeypatch, backbones):
    calls = _spy(monkeypatch)
    hf = _ood_cell_weights(monkeypatch, backbones["roberta"], "roberta", 16.0, next(iter(OOD_PRESETS.values())))
    assert calls == [(16.0, False)] and getattr(hf.config, K_ATTR) == 16.0


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("tied", [True, False])
def test_posthoc_rescales_divide_with_rescale_mlm_head_and_give_the_frozen_outputs(monkeypatch, backbones, family,
                                                                                    tied):
    """The post-hoc factors go through the shipped tool (:func:`initlab.mlmhead.rescaled`, which calls
    ``rescale_mlm_head``), once per factor and without untying, and the model evaluated under each factor gives
    bitwise the logits of the frozen arithmetic (the trained weights with ``W_head / k``)."""
    import initlab.mlmhead.heads as heads

    calls = _spy(monkeypatch, heads)  # what initlab.mlmhead.rescaled calls
    hf = copy.deepcopy(backbones[family])
    _frozen_scale_backbone(hf, 2.0 if tied else 1.0, 2.0 if tied else 0.5, tied)
    hf.eval()
    before = copy.deepcopy(hf)
    ids = torch.tensor([[2, 7, 8, 9, 3], [2, 10, 11, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]])
    def output_logits(m):
        with torch.no_grad():
            return m(input_ids=ids, attention_mask=mask).logits

    seen, _ = _run_posthoc(monkeypatch, hf, output_logits)
    assert calls == [(4.0, False), (16.0, False), (64.0, False)]
    for logits, k in zip(seen, POSTHOC_KS):
        ref = copy.deepcopy(before)
        with torch.no_grad():
            ref.get_output_embeddings().weight.copy_(_frozen_posthoc_weights(before, k))
            want = ref(input_ids=ids, attention_mask=mask).logits
        assert torch.equal(logits, want), f"{family} tied={tied} k={k:g}"
    _assert_same_weights(hf, before, "restored")
