"""The regime levers of the OOD synthetic SPLADE: keys kept at defaults, larger MLM text, BM25 hard negatives,
in-domain selection of k, the imposed-norm arm and its claim, the within-seed bootstrap (against a slow loop)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from initlab.config import derive, to_dict
from initlab.synthetic.splade import claims as sc
from initlab.synthetic.splade.ood import claims as ood_claims
from initlab.synthetic.splade.ood import config as oc
from initlab.synthetic.splade.ood.runner import rows

ROOT = Path(__file__).resolve().parents[4]
TINY_CORPUS = oc.PRESETS["tiny"].corpus


def test_the_new_fields_at_their_defaults_keep_the_saved_runs_config_and_keys():
    """The preregistered run saved before the levers existed: its config (without the fields added since) is what
    config_record writes today, so its folder resumes and its cells keep their keys."""
    saved = json.loads((ROOT / "docs/results/synthetic_splade_ood_confirm/results.json").read_text())["config"]
    c = oc.PRESETS["confirm-v2k"]
    assert oc.config_record(c) == {k: v for k, v in saved.items() if k != "query_shift"}
    for name in ("mlm_text_multiplier", "hard_negatives", "select_k_on", "imposed", "bootstrap", "role",
                 "holm_families"):
        assert name not in oc.config_record(c)
    # report-only fields never enter a cell key; training levers do, and the MLM text enters the backbone's key
    for change in (dict(select_k_on="in_domain"), dict(bootstrap=10), dict(role="exploratory"),
                   dict(imposed=(("bert", "modernbert"),)), dict(holm_families="splade_ood_v8k")):
        d = derive(c, **change)
        assert oc.train_key(d, "bert", 1.0, 9201) == oc.train_key(c, "bert", 1.0, 9201), change
        assert oc.pretrain_key(d, "bert", 9201) == oc.pretrain_key(c, "bert", 9201)
        assert list(oc.config_record(d)) != list(oc.config_record(c))  # the folder records it (a resume checks it)
    neg = derive(c, hard_negatives=1)
    assert oc.train_key(neg, "bert", 1.0, 9201)["recipe"]["hard_negatives"] == 1
    assert oc.pretrain_key(neg, "bert", 9201) == oc.pretrain_key(c, "bert", 9201)
    more = derive(c, mlm_text_multiplier=4)
    assert oc.pretrain_key(more, "bert", 9201)["mlm_text_multiplier"] == 4
    assert oc.train_key(more, "bert", 1.0, 9201) != oc.train_key(c, "bert", 1.0, 9201)
    assert oc.bm25_key(more, 9201) == oc.bm25_key(c, 9201)  # BM25 reads the retrieval corpus only
    imp = derive(c, imposed=(("bert", "modernbert"),))
    k = oc.train_key(imp, "bert", 1.0, 9201, "modernbert")
    assert k["imposed"]["norm_of"] == oc.pretrain_key(c, "modernbert", 9201) and k != oc.train_key(c, "bert", 1.0, 9201)


@pytest.mark.parametrize("change, field", [
    (dict(mlm_text_multiplier=0), "mlm_text_multiplier"), (dict(hard_negatives=-1), "hard_negatives"),
    (dict(select_k_on="dev"), "select_k_on"), (dict(role="final"), "role"), (dict(bootstrap=-2), "bootstrap"),
    (dict(holm_families="spt"), "holm_families"),
    (dict(imposed=(("modernbert", "bert"),)), "imposed"),  # the pair is (normal-norm, high-norm)
    (dict(imposed=(("albert", "modernbert"),)), "imposed"),  # albert is not in the grid's families
])
def test_bad_lever_values_name_the_field(change, field):
    with pytest.raises(ValueError, match=field):
        oc.check_config(derive(oc.PRESETS["confirm-v2k"], **change))


def test_mlm_texts_are_m_times_the_retrieval_text_of_the_same_language():
    from initlab.synthetic.splade.ood.cell import corpus_for, mlm_texts

    cfg = derive(oc.PRESETS["tiny"], mlm_text_multiplier=3)
    corpus = corpus_for(cfg, 0)
    assert mlm_texts(derive(cfg, mlm_text_multiplier=1), 0) is corpus
    t = mlm_texts(cfg, 0)
    n = len(corpus.docs)
    assert len(t.docs) == 3 * n and list(t.docs)[:n] == list(corpus.docs) and t.vocab == corpus.vocab
    extra = [v for key, v in t.docs.items() if key.endswith("u")]
    assert len(extra) == 2 * n and not set(extra) & set(corpus.docs.values())  # new documents, none a copy
    words = {w for v in extra for w in v.split()}
    assert words <= set(corpus.vocab)
    # the same language: each extra document's domain words are its own domain's
    for key, v in t.docs.items():
        if key.endswith("u"):
            assert all(w.startswith("g") or w.startswith(key[:3]) for w in v.split()), key
    assert mlm_texts(cfg, 0).docs == t.docs  # deterministic


def test_bm25_negatives_are_not_relevant_and_rank_high_for_their_query():
    from initlab.synthetic.splade.ood.bm25 import bm25_run
    from initlab.synthetic.splade.domains import EvalSet, make_domain_corpus
    from initlab.synthetic.splade.ood.train import bm25_negatives

    corpus = make_domain_corpus(TINY_CORPUS)
    negs = bm25_negatives(corpus, 2)
    assert len(negs) == len(corpus.train_pairs) and all(len(x) == 2 and x[0] != x[1] for x in negs)
    train = set(corpus.train_domains)
    for (q, src), ns in zip(corpus.train_pairs, negs):
        keys = {c for c, _ in corpus.doc_keys[src]}
        for d in ns:
            assert d != src and corpus.doc_domain[d] in train
            assert not (corpus.doc_domain[d] == corpus.doc_domain[src]
                        and len(keys & {c for c, _ in corpus.doc_keys[d]}) >= 2)
    # the first negative is the best-scoring non-relevant document of the slow reference (a full BM25 ranking)
    pool = [d for d in corpus.docs if corpus.doc_domain[d] in train]
    q, src = corpus.train_pairs[0]
    full = bm25_run(EvalSet("one", {"q": q}, {}, pool, sorted(train)), corpus.docs, top_k=len(pool))["q"]
    keys = {c for c, _ in corpus.doc_keys[src]}
    ranked = [d for d, _ in sorted(full.items(), key=lambda x: (-x[1], x[0]))
              if d != src and not (corpus.doc_domain[d] == corpus.doc_domain[src]
                                   and len(keys & {c for c, _ in corpus.doc_keys[d]}) >= 2)]
    if ranked:
        assert negs[0][0] == ranked[0]
    with pytest.raises(ValueError, match="n, depth"):
        bm25_negatives(corpus, 0)


def test_impose_head_norm_scales_the_untied_head_only():
    from initlab.mlmhead import head_projection, is_tied, rescale_mlm_head
    from initlab.synthetic.splade.families import FamilyConfig, build_family_model
    from initlab.synthetic.splade.ood.cell import impose_head_norm

    model = build_family_model("bert", 60, FamilyConfig(max_len=16), seed=3)
    emb0 = model.get_input_embeddings().weight.detach().clone().double()
    w0 = head_projection(model).detach().clone().double()
    s = impose_head_norm(model, 7.5)
    w = head_projection(model).detach().double()
    assert not is_tied(model) and s == pytest.approx(7.5 / float(w0.norm()))
    assert float(w.norm()) == pytest.approx(7.5, rel=1e-6)
    torch.testing.assert_close(w, w0 * s, rtol=1e-6, atol=0)  # the slow reference: every entry times s
    torch.testing.assert_close(model.get_input_embeddings().weight.detach().double(), emb0, rtol=0, atol=0)
    rescale_mlm_head(model, 4.0, untie=True)  # the grid's k then divides the head only
    assert float(head_projection(model).detach().double().norm()) == pytest.approx(7.5 / 4, rel=1e-6)
    torch.testing.assert_close(model.get_input_embeddings().weight.detach().double(), emb0, rtol=0, atol=0)
    with pytest.raises(ValueError, match="target_frobenius"):
        impose_head_norm(model, float("nan"))


def _ev(o_sel, o_test, dev_all, o_all):
    return {"ood_mean": {"ndcg_select": o_sel, "ndcg_test": o_test, "ndcg@10": o_all},
            "dev": {"ndcg_select": dev_all, "ndcg_test": dev_all, "ndcg@10": dev_all}}


def _c(ev, **more):
    return {"init_infonce": 5.0, "final_dev_loss": 1.0, "collapse": [], "failed": None, **more,
            "training": {"steps": 10, "stopped_by": "cap", "checkpoints": {"10": ev}}, "final": ev}


def test_select_k_on_in_domain_chooses_on_dev_queries_and_tests_on_every_ood_query():
    base = derive(oc.BASE, families=("bert",), ks=(1.0, 4.0), seeds=(0,), checkpoints=(10,), max_steps=10)
    cells = {oc.cell_name("bert", 1.0, 0): _c(_ev(0.9, 0.1, 0.2, 0.3)),
             oc.cell_name("bert", 4.0, 0): _c(_ev(0.1, 0.9, 0.6, 0.5))}
    held = {x["k"]: x for x in rows(base, cells)}
    assert held[1.0]["ndcg_select"] == 0.9 and held[1.0]["ndcg_test"] == 0.1  # halves of the held-out queries
    ind = {x["k"]: x for x in rows(derive(base, select_k_on="in_domain"), cells)}
    assert ind[1.0]["ndcg_select"] == 0.2 and ind[1.0]["ndcg_test"] == 0.3  # all dev queries / all OOD queries
    assert sc.best_k({k: v for k, v in held.items()}) == 1.0 and sc.best_k(ind) == 4.0
    assert ind[1.0]["id_test"] == 0.2 and ind[1.0]["mode"] == "tied"


def _imposed_raw(arm_gain, nat_gain, seeds=(1, 2, 3), jitter=(0.0, 0.01, -0.01)):
    r = []
    for s, j in zip(seeds, jitter):
        for mode, g in (("tied", nat_gain), ("imposed", arm_gain)):
            extra = {"imposed": "modernbert"} if mode == "imposed" else {}
            for k, v in ((1.0, 0.3), (4.0, 0.3 + g + j)):
                r.append({"family": "bert", "mode": mode, "s": 3.0 if extra else 1.0, "k": k, "seed": s,
                          "ndcg_select": v, "ndcg_test": v, **extra})
    return {"rows": r, "inspect": [], "batch": 32}


def test_imposed_interaction_reads_the_imposed_arm_against_its_natural_twin():
    th = sc.SPLADEThresholds()
    v = ood_claims.imposed_interaction(_imposed_raw(0.25, 0.01), th)
    assert v.word == "reproduced" and v.estimate == pytest.approx(0.24)
    w = ood_claims.imposed_interaction(_imposed_raw(0.02, 0.01), th)
    assert w.word in ("not reproduced", "partly") and w.estimate == pytest.approx(0.01)
    none = {"rows": [x for x in _imposed_raw(0.2, 0.0)["rows"] if x["mode"] == "tied"], "inspect": [], "batch": 32}
    assert ood_claims.imposed_interaction(none, th).word == "not run"
    # the imposed rows are not the natural family's: the tied claims ignore them
    only_tied = sc.interaction(none, th)
    assert sc.interaction(_imposed_raw(0.2, 0.0), th).to_dict() == only_tied.to_dict()


def _slow_bootstrap(vecs_by_cell, idx, pick):
    """Reference: for each resample, each cell's OOD mean by explicit loops, then the statistic ``pick``."""
    out = []
    for b in range(idx[0].shape[0]):
        means = {}
        for key, vecs in vecs_by_cell.items():
            per_set = [sum(v[i] for i in ix[b]) / len(ix[b]) for v, ix in zip(vecs, idx)]
            means[key] = sum(per_set) / len(per_set)
        out.append(pick(means))
    return float(np.std(out, ddof=1))


def test_seed_bootstrap_matches_a_slow_loop_and_pairs_the_cells():
    from initlab.synthetic.splade.ood.noise import seed_bootstrap, test_positions

    rng = np.random.default_rng(0)
    n = 9  # queries per held-out set; "heldout" keeps the odd positions (4 of them)
    sets = ("ood06", "ood07")
    pq = {key: {s: rng.random(n).round(3).tolist() for s in sets}
          for key in ("bert1", "bert4", "mb1", "mb4", "bm25")}
    pq["mb4"] = {s: [min(1.0, x + 0.3) for x in v] for s, v in pq["mb1"].items()}

    def cell(key):
        ev = {"ood": {s: {"per_query": pq[key][s]} for s in sets}}
        return {"final": ev}

    cells = {"bert_k=1_seed=5": cell("bert1"), "bert_k=4_seed=5": cell("bert4"),
             "modernbert_k=1_seed=5": cell("mb1"), "modernbert_k=4_seed=5": cell("mb4")}
    names = {("bert", 1.0, None): "bert_k=1_seed=5", ("bert", 4.0, None): "bert_k=4_seed=5",
             ("modernbert", 1.0, None): "modernbert_k=1_seed=5", ("modernbert", 4.0, None): "modernbert_k=4_seed=5"}
    r = [{"family": f, "k": k, "seed": 5, "ndcg_select": sel} for (f, k, _), sel in
         zip(names, (0.5, 0.4, 0.2, 0.6))]  # best k: bert 1, modernbert 4
    B = 40
    out = seed_bootstrap(r, cells, {"ood": {s: {"per_query": pq["bm25"][s]} for s in sets}}, 5, ("modernbert",),
                         ("bert",), "heldout", B, names)
    assert out["test_queries"] == 8 and out["resamples"] == B
    rng2 = np.random.default_rng([5, 7001])
    idx = [rng2.integers(4, size=(B, 4)) for _ in sets]
    pos = test_positions(n, "heldout")
    vec = {key: [np.asarray(pq[key][s])[pos] for s in sets] for key in pq}
    slow_int = _slow_bootstrap(vec, idx, lambda m: (m["mb4"] - m["mb1"]) - (m["bert1"] - m["bert1"]))
    assert out["stats"]["interaction"]["sd"] == pytest.approx(slow_int, rel=1e-9)
    assert out["stats"]["gain/bert"] == {"estimate": 0.0, "sd": 0.0}  # best k = 1: no gain, paired: no noise
    slow_ratio = _slow_bootstrap(vec, idx, lambda m: m["mb4"] / m["bm25"])
    best = max(("bert1", "bert4", "mb1", "mb4"), key=lambda key: np.mean([v.mean() for v in vec[key]]))
    assert best == "mb4" and out["stats"]["bm25_ratio"]["cell"] == "modernbert_k=4_seed=5"
    assert out["stats"]["bm25_ratio"]["sd"] == pytest.approx(slow_ratio, rel=1e-9)
    est = np.mean([v.mean() for v in vec["mb4"]]) / np.mean([v.mean() for v in vec["bm25"]])
    assert out["stats"]["bm25_ratio"]["estimate"] == pytest.approx(est, rel=1e-12)
    # cells saved before per-query numbers existed: no statistic, no error
    old = {k: {"final": {"ood": {s: {"ndcg@10": 0.5} for s in sets}}} for k in cells}
    assert seed_bootstrap(r, old, None, 5, ("modernbert",), ("bert",), "heldout", B, names)["stats"] == {}
    with pytest.raises(ValueError, match="resamples"):
        seed_bootstrap(r, cells, None, 5, ("modernbert",), ("bert",), "heldout", 1, names)
    with pytest.raises(ValueError, match="select_k_on"):
        test_positions(4, "both")


def test_tiny_run_with_every_lever(tmp_path):
    """The levers end to end on the tiny corpus: the imposed arm's head is the high-norm backbone's norm and stays
    untied through training, the report counts cap-bound cells, compares with BM25 and bootstraps every seed."""
    from initlab.synthetic.splade.ood.runner import run_ood
    from initlab.textio import read_json

    cfg = derive(oc.PRESETS["tiny"], families=("bert", "modernbert"), ks=(1.0,), max_steps=6, eval_every=3,
                 checkpoints=(6,), imposed=(("bert", "modernbert"),), mlm_text_multiplier=2, hard_negatives=1,
                 select_k_on="in_domain", role="exploratory", bootstrap=50, holm_families="splade_ood_v8k")
    rd = run_ood(tmp_path / "run", cfg, workers=1, progress=False)
    rep = read_json(rd.root / "results.json")
    assert rep["role"] == "exploratory" and rep["select_k_on"] == "in_domain" and rep["trained"] == 3
    cells = {n: read_json(rd.root / "cells" / f"{n}.json") for n in
             ("bert_k=1_seed=0", "modernbert_k=1_seed=0", "bert-imposed-modernbert_k=1_seed=0")}
    assert cells["bert_k=1_seed=0"]["head_tied"] and not cells["bert-imposed-modernbert_k=1_seed=0"]["head_tied"]
    mb = rep["natural_scale"]["pretrain_modernbert_seed=0"]["head_frobenius"]
    assert cells["bert-imposed-modernbert_k=1_seed=0"]["head_frobenius"] == pytest.approx(mb, rel=1e-5)
    imp = next(x for x in rep["rows"] if x["mode"] == "imposed")
    assert imp["imposed"] == "modernbert" and imp["s"] == pytest.approx(
        mb / rep["natural_scale"]["pretrain_bert_seed=0"]["head_frobenius"], rel=1e-5)
    (a,) = rep["best_vs_bm25"]
    assert a["trained"] == 3 and 0 <= a["cap_bound"] <= 3 and a["ratio"] == pytest.approx(a["splade"] / a["bm25"])
    (b,) = rep["bootstrap"]
    n_ood = cfg.corpus.n_ood_queries * cfg.corpus.n_heldout
    assert b["test_queries"] == n_ood and b["stats"]["bm25_ratio"]["sd"] >= 0
    per = cells["bert_k=1_seed=0"]["final"]["ood"]
    assert all(len(v["per_query"]) == cfg.corpus.n_ood_queries for v in per.values())
    assert all(math.isclose(np.mean(v["per_query"]), v["ndcg@10"], abs_tol=1e-12) for v in per.values())
    assert rep["per_query"]["bert_k=1_seed=0"]["ood"] == {k: v["per_query"] for k, v in per.items()}
    assert set(rep["per_query"]) == {"bm25_seed=0", *cells} and rep["per_query"]["bm25_seed=0"]["dev"]
    holm = rep["verdicts_holm"]
    assert holm["interaction"]["family"] == "primary" and holm["in_domain/interaction"]["family"] == "secondary"
    assert holm["imposed_interaction"]["family"] == "primary" and "out_of_domain" in rep["verdicts_imposed"]
    text = (rd.root / "summary.md").read_text()
    assert "(exploratory)" in text and "bert@modernbert (s = " in text and "imposed-norm interaction" in text
    assert to_dict(cfg)["imposed"] == [["bert", "modernbert"]]


def test_confirm_v8k_is_the_preregistered_design():
    """The preset docs/synthetic_splade_ood.md preregisters (8192 ids, 12 fresh seeds, four families and the
    imposed arm, cap 1200, 600 test queries, in-domain selection, the fused head, the v8k Holm families)."""
    from initlab.synthetic.splade.ood.cost import cell_seconds
    from initlab.synthetic.splade.ood.runner import plan

    c = oc.PRESETS["confirm-v8k"]
    oc.check_config(c)
    assert c.corpus.vocab_size == 8192 and c.seeds == tuple(range(9801, 9813)) and c.ks == (1.0, 4.0, 16.0)
    assert set(c.families) == {"bert", "albert", "roberta", "modernbert"} and c.imposed == (("bert", "modernbert"),)
    assert c.max_steps == 1200 and c.eval_every == 25 and c.patience == 3 and c.plateau_rel == 0.01
    assert c.corpus.n_ood_queries * c.corpus.n_heldout == 600 and c.select_k_on == "in_domain"
    assert c.mlm_text_multiplier == 4 and all(oc.backbone_for(c, f).mlm_steps == 8000 for f in c.families)
    assert c.engine == "fused" and c.role == "confirmatory" and c.holm_families == "splade_ood_v8k"
    assert c.claims.min_gain == 0.05 and c.claims.k_far == 16.0 and c.hard_negatives == 0
    used = {s for p in oc.PRESETS.values() if p is not c and p.role != "confirmatory" for s in p.seeds}
    assert not set(c.seeds) & (used | {9201, 9202, 9203})  # fresh seeds
    names = [x.name for x in plan(c)]
    assert len(names) == 12 * (1 + 2 * 4 + 15) and "bert-imposed-modernbert_k=16_seed=9812" in names
    cost = cell_seconds(c)
    cells = 3 * sum(cost[f"train_{f}"] for f in c.families) + 3 * cost["train_bert"]  # 4 families x 3 k, the imposed arm's 3
    assert cost["seed_total"] == pytest.approx(sum(cost[f"pretrain_{f}"] for f in c.families) + cells)



def test_seeds_for_power_is_the_noncentral_t_count():
    from scipy import stats

    from initlab.synthetic.splade.ood.noise import seeds_for_power

    def slow_power(n, sd, effect, threshold, alpha):  # reference: the noncentral t directly
        df = n - 1
        return 1 - stats.nct.cdf(stats.t.ppf(1 - alpha, df), df, (effect - threshold) * math.sqrt(n) / sd)

    for sd, effect in ((0.049, 0.10), (0.025, 0.10), (0.03, 0.2)):
        n = seeds_for_power(sd, effect, 0.05, 0.0125)
        assert slow_power(n, sd, effect, 0.05, 0.0125) >= 0.8 > slow_power(n - 1, sd, effect, 0.05, 0.0125)
    assert seeds_for_power(0.049, 0.10, 0.05, 0.0125) == 12  # the preregistration's count
    with pytest.raises(ValueError, match="effect"):
        seeds_for_power(0.05, 0.05, 0.05, 0.0125)
