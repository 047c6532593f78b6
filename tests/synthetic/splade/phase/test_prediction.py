"""The model check of inspect's predicted active dims on MLM-pretrained backbones (python -m initlab.app.docgen.prediction_check)."""

from __future__ import annotations

import json

import pytest

from initlab.app.docgen import prediction_check
from initlab.config import derive
from initlab.synthetic.splade.phase import config as phc
from initlab.synthetic.splade.phase import prediction as P
from initlab.synthetic.splade.data import CorpusConfig
from initlab.synthetic.splade.families import FamilyConfig

TINY = derive(
    phc.BASE,
    corpus=CorpusConfig(n_topics=3, topic_words=4, n_background=5, n_entities=20, n_docs=18, doc_len=8,
                        entities_per_doc=2, n_train_queries=48, n_dev_queries=6),
    backbone=FamilyConfig(d=16, layers=1, heads=2, ffn=32, albert_embedding=8, max_len=16, mlm_steps=3, mlm_batch=8),
    families=("bert",), doc_max_len=12,
)


def test_prediction_rows_tied_and_untied(tmp_path):
    rows = P.prediction_rows(tmp_path, TINY, n_texts=8, ks=(1.0, 4.0))
    assert [(r["head"], r["k"]) for r in rows] == [("tied", 1.0), ("tied", 4.0), ("untied", 1.0), ("untied", 4.0)]
    by = {(r["head"], r["k"]): r for r in rows}
    assert by[("untied", 4.0)]["dH/H"] == 0.0 and by[("tied", 4.0)]["dH/H"] > 0.0
    # the model and the i.i.d. value at k = 1 do not depend on the tie (same weights, same pass)
    assert by[("tied", 1.0)]["per_entry"] == pytest.approx(by[("untied", 1.0)]["per_entry"])
    assert by[("tied", 1.0)]["iid"] == pytest.approx(by[("untied", 1.0)]["iid"])
    for r in rows:
        assert 0 < r["measured"] <= r["vocab"] and 0 < r["per_entry"] <= r["vocab"] and 0 < r["iid"] <= r["vocab"]
    assert 0.0 <= by[("tied", 1.0)]["special_share"] <= 1.0
    for r in rows:  # the exploratory and assumption checks: active dims, bounded like the measured value
        assert 0 < r["text_effect"] <= r["vocab"]
        assert (r["empirical"] is None) == (r["k"] != 1.0) == (r["shuffled"] is None)
    one = by[("untied", 1.0)]
    assert 0 < one["empirical"] <= one["vocab"] and 0 < one["shuffled"] <= one["vocab"]
    table = P.format_rows(rows)
    assert table.count("\n") == 1 + len(rows) and "| bert | untied | 4 |" in table


def test_prediction_check_cli_refuses_an_existing_json_before_work(tmp_path, capsys):
    out = tmp_path / "rows.json"
    out.write_text("{}")
    assert prediction_check.main(["--json", str(out)]) == 2
    assert "--json" in capsys.readouterr().err and json.loads(out.read_text()) == {}
