"""One rule for relevance grades in every qrels reader: an integer (``1.0`` is 1); a fractional grade is refused
in one line naming the file and line (or record), never truncated (the BEIR reader read 0.5 as 0 and 1.5 as 1)."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import pytest

from initlab.realdata.splade import data, files

FIX = Path(__file__).parents[1] / "fixtures" / "splade"


def _copy(tmp_path, sub):
    dst = tmp_path / sub
    shutil.copytree(FIX / sub, dst)
    return dst


def _rewrite_grade(path: Path, line: int, grade: str, sep: str) -> None:
    lines = path.read_text().splitlines()
    parts = lines[line - 1].split(sep)
    parts[-1] = grade
    lines[line - 1] = sep.join(parts)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("grade", ["0.5", "1.5"])
def test_beir_fractional_grade_is_refused_naming_file_and_line(tmp_path, grade):
    beir = _copy(tmp_path, "beir") / "scifact"
    qrels = beir / "qrels" / "test.tsv"
    _rewrite_grade(qrels, 3, grade, "\t")
    with pytest.raises(ValueError, match=rf"test\.tsv:3: relevance grade '{grade}' is a fractional value") as err:
        files.load_beir_folder(beir)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("grade", ["0.5", "1.5"])
def test_trec_fractional_grade_is_refused_the_same_way(tmp_path, grade):
    ms = _copy(tmp_path, "msmarco")
    _rewrite_grade(ms / "qrels.dev.small.tsv", 2, grade, " " if " " in (ms / "qrels.dev.small.tsv").read_text() else "\t")
    with pytest.raises(ValueError, match=rf"qrels\.dev\.small\.tsv:2: relevance grade '{grade}' is a fractional value"):
        files.load_msmarco_folder(ms)


def test_integer_grades_written_with_a_decimal_point_read_alike_in_both_readers(tmp_path):
    """``1.0`` is the integer 1 in every reader (the TREC reader refused it, the BEIR reader accepted it)."""
    ms = _copy(tmp_path, "msmarco")
    q = ms / "qrels.dev.small.tsv"
    ref = files.read_trec_qrels(q)
    q.write_text("".join(" ".join(ln.split()[:3] + [ln.split()[3] + ".0"]) + "\n" for ln in q.read_text().splitlines() if ln.strip()))
    assert files.read_trec_qrels(q) == ref
    beir = _copy(tmp_path, "beir") / "scifact"
    t = beir / "qrels" / "test.tsv"
    ref = files.load_beir_folder(beir).qrels
    head, *rows = t.read_text().splitlines()
    t.write_text("\n".join([head] + [r + ".0" for r in rows if r.strip()]) + "\n")
    assert files.load_beir_folder(beir).qrels == ref


def test_non_numeric_grade_is_refused_in_every_reader(tmp_path):
    beir = _copy(tmp_path, "beir") / "scifact"
    _rewrite_grade(beir / "qrels" / "test.tsv", 2, "high", "\t")
    with pytest.raises(ValueError, match=r"test\.tsv:2: relevance grade 'high' is not an integer"):
        files.load_beir_folder(beir)


def _fake_ir_datasets(monkeypatch, relevance):
    Doc = types.SimpleNamespace
    ds = types.SimpleNamespace(
        docs_iter=lambda: iter([Doc(doc_id="d0", text="a b", title=""), Doc(doc_id="d1", text="c d", title="")]),
        queries_iter=lambda: iter([Doc(query_id="q0", text="a")]),
        qrels_iter=lambda: iter([Doc(query_id="q0", doc_id="d0", relevance=1), Doc(query_id="q0", doc_id="d1", relevance=relevance)]))
    monkeypatch.setitem(sys.modules, "ir_datasets", types.SimpleNamespace(load=lambda _id: ds))


def test_ir_datasets_fractional_grade_is_refused_naming_the_record(monkeypatch):
    _fake_ir_datasets(monkeypatch, 0.5)
    with pytest.raises(ValueError, match=r"ir_datasets beir/x qrels record 2: relevance grade 0\.5 is a fractional value"):
        data.load_ir_datasets("beir/x")
    _fake_ir_datasets(monkeypatch, 2.0)
    assert data.load_ir_datasets("beir/x").qrels == {"q0": {"d0": 1, "d1": 2}}


def test_nanobeir_dataset_fractional_grade_is_refused_naming_the_record(monkeypatch):
    rows = {"corpus": [{"_id": "d0", "text": "a"}, {"_id": "d1", "text": "b"}], "queries": [{"_id": "q0", "text": "a"}],
            "qrels": [{"query-id": "q0", "corpus-id": "d0", "score": 1}, {"query-id": "q0", "corpus-id": "d1", "score": 1.5}]}
    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=lambda _id, part, split: rows[part]))
    with pytest.raises(ValueError, match=r"NanoSciFact qrels record 2: relevance grade 1\.5 is a fractional value"):
        data.load_nanobeir("NanoSciFact")
