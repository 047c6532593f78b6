"""The OOD synthetic SPLADE: BM25 anchor, plateau rule, FLOPS scaling, rows for the claims, a tiny run end to end."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from initlab.config import derive
from initlab.synthetic.splade import claims as sc
from initlab.synthetic.splade.domains import EvalSet
from initlab.synthetic.splade.ood import cost
from initlab.synthetic.splade.ood import config as oc
from initlab.synthetic.splade.ood.bm25 import bm25_run, bm25_scores
from initlab.synthetic.splade.ood.evaluate import ndcg_of_run
from initlab.synthetic.splade.ood.runner import rows
from initlab.synthetic.splade.ood.train import PlateauRule


def _toy_set():
    docs = {"a": "apple banana apple", "b": "car road car", "c": "banana split dessert", "d": "road trip map"}
    es = EvalSet("toy", {"q1": "apple", "q2": "road map", "q3": "zebra"}, {"q1": {"a": 2}, "q2": {"d": 2, "b": 1},
                                                                            "q3": {"c": 2}}, list(docs), [0])
    return docs, es


def test_bm25_ranks_the_lexical_match_first_and_scores_a_query_without_known_words_zero():
    docs, es = _toy_set()
    run = bm25_run(es, docs)
    assert max(run["q1"], key=run["q1"].get) == "a" and set(run["q1"]) == {"a"}  # score-0 documents not retrieved
    assert max(run["q2"], key=run["q2"].get) == "d" and set(run["q2"]) == {"b", "d"}
    assert run["q3"] == {}
    m = bm25_scores(es, docs)
    # q1 perfect (1), q2 d then b: ideal order, perfect (1), q3 nothing retrieved (0); halves: q1, q3 / q2
    assert m["ndcg@10"] == pytest.approx(2 / 3) and m["ndcg_select"] == pytest.approx(0.5) and m["ndcg_test"] == pytest.approx(1.0)


def test_ndcg_of_run_counts_an_unretrieved_query_as_zero_and_uses_grades():
    _, es = _toy_set()
    swapped = {"q1": {"a": 1.0}, "q2": {"b": 2.0, "d": 1.0}, "q3": {}}  # the grade-1 document above the grade-2 one
    m = ndcg_of_run(swapped, es)
    ideal = 2 / math.log2(2) + 1 / math.log2(3)  # trec_eval's nDCG: the grade is the gain
    assert m["ndcg_test"] == pytest.approx((1 / math.log2(2) + 2 / math.log2(3)) / ideal)


def test_plateau_rule_waits_for_the_warm_up_and_counts_stale_evaluations():
    r = PlateauRule(patience=2, rel=0.1, start=30)
    # 10: best 5.0; 20: 4.8 not < 4.5 (stale 1); 30: 4.9 (stale 2, past start): stop
    assert [r.update(s, v) for s, v in ((10, 5.0), (20, 4.8), (30, 4.9))] == [False, False, True]
    r = PlateauRule(patience=2, rel=0.1, start=100)
    assert [r.update(s, v) for s, v in ((10, 5.0), (20, 4.8), (30, 4.9), (100, 4.9))] == [False] * 3 + [True]
    r = PlateauRule(patience=2, rel=0.0, start=0)
    assert not any(r.update(s, 10.0 - s) for s in range(10))  # strictly improving: never stops


def test_flops_weights_are_the_real_recipe_at_the_real_vocabulary_and_linear_in_v():
    cfg = oc.BASE
    assert oc.flops_weights(derive(cfg, corpus=derive(cfg.corpus, vocab_size=oc.V_REF))) == pytest.approx((0.01, 0.008))
    a = oc.flops_weights(derive(cfg, corpus=derive(cfg.corpus, vocab_size=2000)))
    b = oc.flops_weights(derive(cfg, corpus=derive(cfg.corpus, vocab_size=8000)))
    assert b[0] == pytest.approx(4 * a[0]) and b[1] == pytest.approx(4 * a[1])


@pytest.mark.parametrize("change, field", [(dict(ks=(2.0, 4.0)), "ks"), (dict(families=("gpt",)), "families"),
                                           (dict(doc_max_len=50), "doc_max_len"), (dict(checkpoints=(0,)), "checkpoints"),
                                           (dict(plateau_rel=1.5), "plateau_rel"), (dict(query_shift=(1.2,)), "query_shift"),
                                           (dict(query_shift=(0.0, 0.0)), "query_shift"),
                                           (dict(query_shift=(0.6,)), "query_shift")])
def test_bad_config_names_the_field(change, field):
    with pytest.raises(ValueError, match=field):
        oc.check_config(dataclasses.replace(oc.BASE, **change))


def _cell(ood_test, id_test, steps, stopped, checkpoints):
    ev = lambda o, i: {"ood_mean": {"ndcg_select": o, "ndcg_test": o, "ndcg@10": o},  # noqa: E731
                       "dev": {"ndcg_select": i, "ndcg_test": i, "ndcg@10": i}, "d_active_dims": 50.0, "q_active_dims": 5.0}
    cps = {str(s): ev(o, o + 0.2) for s, o in checkpoints.items()}
    cps[str(steps)] = ev(ood_test, id_test)
    return {"init_infonce": 5.0, "final_dev_loss": 1.0, "head_frobenius": 10.0, "collapse": [], "failed": None,
            "training": {"steps": steps, "stopped_by": stopped, "checkpoints": cps}, "final": ev(ood_test, id_test)}


def test_rows_read_ood_as_primary_and_fill_lengths_past_the_stop_and_the_claims_use_them():
    cfg = dataclasses.replace(oc.BASE, families=("bert", "modernbert"), ks=(1.0, 4.0), seeds=(0, 1, 2),
                              checkpoints=(150, 300, 600))
    cells = {}
    for s, j in zip(cfg.seeds, (0.0, 0.01, -0.01)):
        cells[oc.cell_name("bert", 1.0, s)] = _cell(0.40 + j, 0.60, 600, "cap", {150: 0.3, 300: 0.35, 600: 0.40 + j})
        cells[oc.cell_name("bert", 4.0, s)] = _cell(0.41 + j, 0.61, 350, "plateau", {150: 0.3, 300: 0.4})
        cells[oc.cell_name("modernbert", 1.0, s)] = _cell(0.20 + j, 0.58, 250, "plateau", {150: 0.1})
        cells[oc.cell_name("modernbert", 4.0, s)] = _cell(0.45 + j, 0.62, 600, "cap", {150: 0.3, 300: 0.4, 600: 0.45 + j})
    r = rows(cfg, cells)
    b4 = next(x for x in r if x["family"] == "bert" and x["k"] == 4.0 and x["seed"] == 0)
    assert b4["ndcg_test"] == 0.41 and b4["id_test"] == 0.61 and b4["stopped_by"] == "plateau" and b4["steps"] == 350
    assert b4["ood_at"] == {"150": 0.3, "300": 0.4, "350": 0.41, "600": 0.41}  # past the stop: the stop's value
    m1 = next(x for x in r if x["family"] == "modernbert" and x["k"] == 1.0 and x["seed"] == 0)
    assert m1["ood_at"]["300"] == 0.2 and m1["ood_at"]["600"] == 0.2
    raw = {"rows": r, "inspect": [], "batch": 32}
    th = cfg.claims
    v = sc.interaction(raw, th)  # modernbert gains 0.25 OOD, bert 0.01: interaction 0.24 on every seed
    assert v.word == "reproduced" and v.estimate == pytest.approx(0.24)
    from initlab.synthetic.splade.ood.decide import id_rows

    w = sc.interaction({**raw, "rows": id_rows(r)}, th)  # in domain: 0.04 vs 0.01: no high-norm-specific gain of 0.05
    assert w.estimate == pytest.approx(0.03) and w.word in ("partly", "not reproduced")


def test_tiny_run_end_to_end(tmp_path):
    from initlab.synthetic.splade.ood.runner import run_ood
    from initlab.textio import read_json

    cfg = derive(oc.PRESETS["tiny"], families=("bert",), ks=(1.0, 4.0), max_steps=12, eval_every=4, checkpoints=(8,),
                 family_backbones={}, query_shift=(0.0, 1.0))
    rd = run_ood(tmp_path / "run", cfg, workers=1, progress=False)
    rep = read_json(rd.root / "results.json")
    assert rep["trained"] == 2 and 0 <= rep["cap_bound"] <= 2 and (rd.root / "DONE").exists()
    shift = {"id@p0", "id@p1", "ood@p0", "ood@p1"}
    for x in rep["rows"]:
        assert 0 <= x["ndcg_test"] <= 1 and 0 <= x["id_test"] <= 1 and x["steps"] <= 12
        assert x["stopped_by"] in ("plateau", "cap") and set(x["ood_at"]) >= {"8"}
        assert set(x["shift_at"]) == shift and all(0 <= v <= 1 for g in shift for v in x["shift_at"][g].values())
    (b,) = rep["bm25"].values()
    assert 0 < b["ood_mean"]["ndcg_test"] <= 1 and b["corpus"]["vocab_size"] == 300
    # BM25 is a lexical match: the queries at synonym rate 0 use the documents' own words, at rate 1 never
    assert b["shift"]["ood@p0"]["ndcg@10"] > b["ood_mean"]["ndcg@10"] > b["shift"]["ood@p1"]["ndcg@10"]
    assert b["shift"]["id@p0"]["ndcg@10"] > b["shift"]["id@p1"]["ndcg@10"]
    assert "OOD synthetic SPLADE" in (rd.root / "summary.md").read_text()
    # the shift axis of the map: domain x synonym rate, in words, and its figure
    from initlab.paper_figs.synthetic_splade_ood_figures import draw_shift
    from initlab.synthetic.splade.ood.map import build_map, map_markdown

    m = build_map([rd.root])
    assert {p["domain"] for p in m["points"]} == {"ood", "id"} | shift and m["runs"][0]["p_synonym"] == 0.6
    text = map_markdown(m)
    assert "| out of domain, synonym rate 1 | bert |" in text and "out of domain, synonym rate 0 " in text
    (sc_,) = m["scales"]  # why there: the natural head and the losses at the start and the stop, per family
    assert sc_["family"] == "bert" and sc_["run"] == "run" and sc_["head_frobenius"] > 0 and sc_["cells"] == 2
    assert sc_["init_infonce_k1"] > 0 and sc_["init_infonce_other"] > 0 and 0 <= sc_["cap_bound"] <= 2
    assert "| run | 300 | 12 | bert |" in text

    assert _drawn(tmp_path, m, draw_shift).name == "splade_ood_shift.png"
    again = run_ood(tmp_path / "run2", cfg, workers=1, progress=False)  # deterministic
    assert read_json(again.root / "results.json")["rows"][0]["ndcg_test"] == rep["rows"][0]["ndcg_test"]
    # a run cut short: the report from the finished cells says so, and holds only their rows
    from initlab.runs import RunDir
    from initlab.synthetic.splade.ood.runner import write_report

    for ext in ("json", "key"):
        (again.root / "cells" / f"{oc.cell_name('bert', 4.0, 0)}.{ext}").unlink()
    (again.root / "DONE").unlink()  # a run cut short never wrote DONE
    part = write_report(RunDir(again.root, resume=True, config=oc.config_record(cfg)), cfg, partial=True)
    assert part["partial"] and part["cells_finished"] == part["cells_planned"] - 1 and len(part["rows"]) == 1
    assert "PARTIAL: 4 of 5 cells finished" in (again.root / "summary.md").read_text()


def _report(V, losses, cap=300):
    """A results.json with bert / modernbert at k in {1, 4}: ``losses[(family, domain)] = {length: loss}``."""
    rows = []
    for fam in ("bert", "modernbert"):
        for k in (1.0, 4.0):
            at = {dom: {str(L): 0.5 + (l if k == 4.0 else 0.0) for L, l in losses[(fam, dom)].items()} for dom in ("ood", "id")}
            rows.append({"family": fam, "k": k, "seed": 0, "ood_at": at["ood"], "ood_select_at": at["ood"],
                         "id_at": at["id"], "id_select_at": at["id"]})
    return {"config": {"corpus": {"vocab_size": V}, "max_steps": cap, "claims": {"high_norm": ["roberta", "modernbert"],
                                                               "normal_norm": ["bert", "albert"]}},
            "rows": rows, "cap_bound": 1, "trained": 4, "bm25": {"bm25_seed=0": {"seed": 0, "ood_mean": {"ndcg_test": 0.4},
                                                                                  "dev": {"ndcg_test": 0.45}}}}


def _save_run(folder, rep):
    """``rep`` written as the ``results.json`` of run folder ``folder`` (made if missing); returns the folder."""
    folder.mkdir(exist_ok=True)
    (folder / "results.json").write_text(json.dumps(rep))
    return folder


def _drawn(folder, m, draw):
    """The map ``m`` saved as ``folder/map.json`` and drawn by ``draw``: its one PNG, checked to hold a picture."""
    (folder / "map.json").write_text(json.dumps(m))
    (png,) = draw(folder)
    assert png.stat().st_size > 10_000
    return png


def test_map_finds_the_region_and_the_nearest_miss(tmp_path):
    from initlab.synthetic.splade.ood.map import build_map

    losses = {("modernbert", "ood"): {100: 0.02, 300: 0.08}, ("modernbert", "id"): {100: 0.01, 300: 0.03},
              ("bert", "ood"): {100: 0.0, 300: 0.01}, ("bert", "id"): {100: 0.06, 300: 0.0}}
    d = _save_run(tmp_path / "run", _report(2048, losses))
    m = build_map([d])
    assert m["exploratory"] and len(m["points"]) == 2 * 2 * 2
    assert [(c["length"], c["domain"]) for c in m["region"]] == [(300, "ood")]  # modernbert loses 0.08, bert 0.01
    assert (m["nearest_miss"]["length"], m["nearest_miss"]["domain"]) == (300, "id")  # gap 0.03: the largest outside
    # k = 4 no longer helps modernbert out of domain at 300 steps: no region, the nearest miss says where it was closest
    losses[("modernbert", "ood")][300] = 0.04
    _save_run(d, _report(2048, losses))
    m = build_map([d])
    assert m["region"] == [] and m["nearest_miss"]["gap"] == pytest.approx(0.03)
    from initlab.synthetic.splade.ood.map import map_markdown

    text = map_markdown(m)
    assert "No map point has every high-norm family (modernbert) losing at least 0.05" in text
    assert "| 2048 | 300 | out of domain | modernbert | 4 | 0.540 | 0.500 | +0.040 |" in text
    from initlab.paper_figs.synthetic_splade_ood_figures import draw_map

    assert _drawn(tmp_path, m, draw_map).name == "splade_ood_map.png"
    with pytest.raises(FileNotFoundError, match="results.json"):
        build_map([tmp_path / "nothing"])


def test_map_over_several_seeds_gives_means_sds_and_region_counts(tmp_path):
    """The map over the map point and the confirmation's seeds: per seed as before, and across seeds the mean and
    sample sd of the loss of k = 1 and on how many seeds a point is in the region."""
    from initlab.synthetic.splade.ood.map import build_map, map_markdown

    base = {("modernbert", "ood"): {100: 0.02, 300: 0.08}, ("modernbert", "id"): {100: 0.10, 300: 0.16},
            ("bert", "ood"): {100: 0.0, 300: 0.01}, ("bert", "id"): {100: 0.0, 300: 0.04}}
    rep = _report(2048, base)
    for seed, shift in ((9201, 0.02), (9202, -0.04)):  # two more seeds: modernbert's OOD loss at 300 moves
        losses = {**base, ("modernbert", "ood"): {100: 0.02, 300: 0.08 + shift}}
        more = _report(2048, losses)["rows"]
        rep["rows"] += [dict(x, seed=seed) for x in more]
        rep["bm25"][f"bm25_seed={seed}"] = {"seed": seed, "ood_mean": {"ndcg_test": 0.4}, "dev": {"ndcg_test": 0.45}}
    d = _save_run(tmp_path / "run", rep)
    m = build_map([d / "results.json"])  # a results.json file is read as its folder
    assert m["runs"][0]["seeds"] == [0, 9201, 9202] and len(m["points"]) == 3 * 2 * 2 * 2
    fam = {(x["length"], x["domain"], x["family"]): x for x in m["across_seeds"]["families"]}
    x = fam[(300, "ood", "modernbert")]
    assert x["seeds"] == [0, 9201, 9202] and x["loss_mean"] == pytest.approx((0.08 + 0.10 + 0.04) / 3)
    assert x["loss_sd"] == pytest.approx(0.0305505, abs=1e-6)  # sample sd of 0.08, 0.10, 0.04
    pts = {(x["length"], x["domain"]): x for x in m["across_seeds"]["points"]}
    assert pts[(300, "ood")]["in_region"] == 2 and pts[(300, "id")]["in_region"] == 3 and pts[(100, "ood")]["in_region"] == 0
    text = map_markdown(m)
    assert "| 2048 | 300 | out of domain | modernbert | 3 | +0.073 ± 0.031 | 0.573 | 0.500 |" in text
    assert "| 2048 | 300 | out of domain | 2 of 3 | +0.063 ± 0.031 |" in text
    assert "2048 ids, 300 steps, out of domain, seed 9202: high-norm loss +0.040, normal-norm +0.010" in text
    from initlab.paper_figs.synthetic_splade_ood_figures import draw_map

    _drawn(tmp_path, m, draw_map)


def test_query_shift_enters_the_cell_keys_only_when_set():
    """Runs made before ``query_shift`` existed keep their keys (it is left out when empty); a run that evaluates
    shifted queries has other cells, and its BM25 cell too."""
    from initlab.synthetic.splade.ood.runner import plan

    c = oc.PRESETS["confirm-v2k"]
    assert "query_shift" not in oc.train_key(c, "bert", 1.0, 9201)["recipe"]
    shifted = derive(c, query_shift=(0.0, 1.0))
    assert oc.train_key(shifted, "bert", 1.0, 9201)["recipe"]["query_shift"] == [0.0, 1.0]
    assert oc.pretrain_key(shifted, "bert", 9201) == oc.pretrain_key(c, "bert", 9201)  # same backbone
    keys = lambda cfg: {x.name: x.key for x in plan(cfg)}  # noqa: E731
    a, b = keys(c), keys(shifted)
    assert a["bm25_seed=9201"] != b["bm25_seed=9201"] and a["bert_k=1_seed=9201"] != b["bert_k=1_seed=9201"]
    assert a["pretrain_bert_seed=9201"] == b["pretrain_bert_seed=9201"]
    s = oc.PRESETS["map-v2k-shift"]
    assert s.query_shift == (0.0, 1.0) and s.corpus == oc.PRESETS["map-v2k"].corpus and s.seeds == (0,)
    long = oc.PRESETS["map-v2k-long"]  # the training-length axis: a 4x cap on the shift run's backbones
    assert long.max_steps == 4 * s.max_steps and oc.pretrain_key(long, "modernbert", 0) == oc.pretrain_key(s, "modernbert", 0)
    # a run folder made before the field existed (its config.json has no query_shift) still resumes
    import tempfile
    from pathlib import Path

    from initlab.config import to_dict
    from initlab.runs import ConfigMismatchError, RunDir

    with tempfile.TemporaryDirectory() as tmp:
        later = ("query_shift", "mlm_text_multiplier", "hard_negatives", "select_k_on", "imposed", "bootstrap", "role",
                 "holm_families")  # the fields added since: a folder of that time has none of them
        old = {k: v for k, v in to_dict(c).items() if k not in later}
        (Path(tmp) / "config.json").write_text(json.dumps(old))
        RunDir(tmp, resume=True, config=oc.config_record(c))
        with pytest.raises(ConfigMismatchError, match="query_shift"):
            RunDir(tmp, resume=True, config=oc.config_record(shifted))
    f4 = oc.PRESETS["map-v2k-fam4"]  # the confirmation's cells are reused: same keys, families added
    assert set(f4.families) == {"bert", "modernbert", "roberta", "albert"}
    assert oc.train_key(f4, "modernbert", 16.0, 9203) == oc.train_key(c, "modernbert", 16.0, 9203)


def test_map_keeps_runs_with_different_caps_apart(tmp_path):
    """Two runs of one vocabulary and seed with different caps (their learning rates decay over different lengths)
    are different map points: grouped apart, labelled with their cap, drawn in their own columns."""
    from initlab.paper_figs.synthetic_splade_ood_figures import draw_map
    from initlab.synthetic.splade.ood.map import build_map, map_markdown

    short = {("modernbert", "ood"): {100: 0.02, 300: 0.08}, ("modernbert", "id"): {100: 0.0, 300: 0.0},
             ("bert", "ood"): {100: 0.0, 300: 0.0}, ("bert", "id"): {100: 0.0, 300: 0.0}}
    long = {**short, ("modernbert", "ood"): {100: 0.0, 300: 0.01, 1200: 0.0}, ("bert", "ood"): {100: 0.0, 300: 0.0, 1200: 0.0}}
    for name, rep in (("short", _report(2048, short, cap=300)), ("long", _report(2048, long, cap=1200))):
        _save_run(tmp_path / name, rep)
    m = build_map([tmp_path / "short", tmp_path / "long"])
    ood300 = [c for c in m["cells"] if c["length"] == 300 and c["domain"] == "ood"]
    assert sorted((c["cap"], c["in_region"]) for c in ood300) == [(300, True), (1200, False)]
    assert [(c["cap"], c["length"]) for c in m["region"]] == [(300, 300)] and [r["cap"] for r in m["runs"]] == [300, 1200]
    text = map_markdown(m)
    assert "| 2048 | 300 (cap 1200) | out of domain | modernbert | 4 | 0.510 | 0.500 | +0.010 |" in text
    assert "2048 ids, 300 (cap 300) steps, out of domain, seed 0" in text
    _drawn(tmp_path, m, draw_map)


def test_map_lengths_are_the_checkpoints_not_a_cells_own_stop():
    """A cell stopped by the plateau rule at 625 steps carries its stop as a length; the other k's cells do not, so
    625 is no map point (its "best k" would be chosen among one k)."""
    from initlab.synthetic.splade.ood.map import map_points

    at = lambda d: {"ood_at": d, "ood_select_at": d, "id_at": d, "id_select_at": d}  # noqa: E731
    rows_ = [{"family": "modernbert", "k": 1.0, "seed": 0, **at({"600": 0.1, "625": 0.2, "1200": 0.2})},
             {"family": "modernbert", "k": 4.0, "seed": 0, **at({"600": 0.3, "1200": 0.3})}]
    rep = {"config": {"corpus": {"vocab_size": 2048}, "max_steps": 1200, "checkpoints": [600, 1200]}, "rows": rows_}
    pts = map_points(rep)
    assert sorted({p["length"] for p in pts}) == [600, 1200] and all(p["k_best"] == 4.0 for p in pts)
    del rep["config"]["checkpoints"]  # an older report: the lengths every cell has
    assert sorted({p["length"] for p in map_points(rep)}) == [600, 1200]


def test_map_refuses_a_seed_held_by_two_runs(tmp_path):
    from initlab.synthetic.splade.ood.map import build_map

    losses = {(f, d): {100: 0.0, 300: 0.0} for f in ("bert", "modernbert") for d in ("ood", "id")}
    for name in ("a", "b"):
        _save_run(tmp_path / name, _report(2048, losses, cap=300))
    with pytest.raises(ValueError, match="a and b both hold vocabulary 2048, cap 300, seed 0, family bert"):
        build_map([tmp_path / "a", tmp_path / "b"])
    assert {p["run"] for p in build_map([tmp_path / "a"])["points"]} == {"a"}


def test_complete_seeds_keep_only_whole_seeds_of_the_grid():
    rows_ = [{"family": f, "k": k, "seed": s, "mode": "tied", "s": 1.0}
             for s in (1, 2) for f in ("bert", "modernbert") for k in (1.0, 4.0, 16.0) if not (s == 2 and k == 16.0)]
    assert sc.complete_seeds(rows_, ("bert", "modernbert"), (1.0, 4.0, 16.0)) == [1]
    assert sc.complete_seeds(rows_, ("bert", "modernbert"), (1.0, 4.0)) == [1, 2]
    raw = sc.on_seeds({"rows": rows_, "inspect": [{"seed": 2}, {"seed": 1}], "batch": 32}, [1])
    assert {r["seed"] for r in raw["rows"]} == {1} and raw["inspect"] == [{"seed": 1}] and raw["batch"] == 32


def test_confirm_preset_is_the_preregistered_design():
    c = oc.PRESETS["confirm-v2k"]
    oc.check_config(c)
    assert c.seeds == (9201, 9202, 9203) and c.ks == (1.0, 4.0, 16.0) and c.families == ("bert", "modernbert")
    assert c.corpus.vocab_size == 2048 and c.max_steps == 300 and c.checkpoints == (100, 200, 300)
    assert c.claims.k_far == 16.0 and c.claims.min_gain == 0.05 and c.eval_every == 25 and c.patience == 3
    from initlab.synthetic.splade.ood.runner import plan

    names = [x.name for x in plan(c)]
    first = names.index("bm25_seed=9202")  # seed by seed: every cell of 9201 before any of 9202
    assert all(n.endswith("seed=9201") for n in names[:first]) and len(names) == 3 * (1 + 2 * 2 + 2 * 3)
    assert names[:6] == ["bm25_seed=9201", "pretrain_bert_seed=9201", "inspect_bert_seed=9201",
                         "pretrain_modernbert_seed=9201", "inspect_modernbert_seed=9201", "modernbert_k=1_seed=9201"]


def test_the_cost_model_follows_the_engine_and_the_family():
    """The fused head's step is costed on its own line (cheaper than the dense head's at every measured V, and its
    share of V smaller); a family not measured takes bert's line; the plan's training cells and cell_seconds use
    the config's engine."""
    from initlab.synthetic.splade.ood import runner

    for V in (2048, 8192, 30000):
        for f in ("bert", "modernbert"):
            assert cost.step_seconds(V, "fused", f) < cost.step_seconds(V, "dense", f)
        assert cost.eval_seconds(V, "fused") < cost.eval_seconds(V, "dense")
    assert cost.STEP_SECONDS["fused"]["bert"][1] < cost.STEP_SECONDS["dense"]["bert"][1]
    assert cost.step_seconds(8192, "fused", "roberta") == cost.step_seconds(8192, "fused", "bert")
    with pytest.raises(ValueError, match="engine"):
        cost.step_seconds(2048, "sparse")
    c = oc.PRESETS["v30k"]
    assert c.engine == "fused"
    est = cost.cell_seconds(c)
    V = c.corpus.vocab_size
    assert est["train_bert"] == pytest.approx(c.max_steps * cost.step_seconds(V, "fused", "bert")
                                              + (len(c.checkpoints) + 1) * cost.eval_seconds(V, "fused"))
    dense = cost.cell_seconds(derive(c, engine="dense"))
    assert est["train_modernbert"] < dense["train_modernbert"] and est["pretrain_bert"] == dense["pretrain_bert"]
    assert est["seed_total"] == pytest.approx(sum(est[f"pretrain_{f}"] + len(c.ks) * est[f"train_{f}"] for f in c.families))
    units = {x.name: x.unit_seconds for x in runner.plan(c)}
    assert units["bert_k=1_seed=0"] == pytest.approx(est["train_bert"] / c.max_steps)
