"""Loaders for the real file layouts (MS MARCO TSV, TREC qrels, triples, BEIR jsonl) on fixture files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from initlab.realdata.splade import data
from initlab.realdata.splade import files
from initlab.realdata.splade import triples

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "splade"


def test_msmarco_folder_dev_and_dl19():
    dev = files.load_msmarco_folder(FIX / "msmarco", "dev.small")
    assert len(dev.corpus) == 12 and len(dev.queries) == 8 and dev.binary_rel == 1
    assert dev.qrels["1000"] == {"0": 1}
    dl = files.load_msmarco_folder(FIX / "msmarco", "dl19")
    assert dl.binary_rel == 1 and dl.qrels["2000"] == {"8": 3, "9": 1, "10": 0}  # a split's name sets no level


def test_beir_folder_and_named_sets():
    ds = files.load_beir_folder(FIX / "beir" / "scifact")
    assert ds.corpus["d0"] == "cat the cat sleeps on the warm sofa all day"  # title + " " + text
    assert set(ds.queries) == {f"q{i}" for i in range(0, 12, 2)}  # judged queries only
    assert data.load_eval_set("scifact", data_root=FIX).qrels == ds.qrels
    assert data.load_eval_set("trec-dl-2019", data_root=FIX).binary_rel == 2
    assert data.load_eval_set("nano:NanoSciFact", data_root=FIX).name == "NanoSciFact"
    # BEIR sets drop retrieved documents whose id is the query id (BEIR's default); NanoBEIR and MS MARCO do not
    assert ds.ignore_identical_ids and not data.load_eval_set("nano:NanoSciFact", data_root=FIX).ignore_identical_ids
    assert not data.load_eval_set("msmarco-dev", data_root=FIX).ignore_identical_ids
    assert len(data.BEIR13) == 13 and set(data.BEIR13) == set(data.BEIR13_IDS)
    with pytest.raises(ValueError, match="evaluation set 'bogus'"):
        data.load_eval_set("bogus", data_root=FIX)


def test_text_and_id_triples_agree():
    text = triples.read_triples(FIX / "msmarco" / "triples.train.small.tsv")
    ids = triples.read_triples(FIX / "msmarco" / "qidpidtriples.train.full.2.tsv", collection=FIX / "msmarco" / "collection.tsv",
                            queries=FIX / "msmarco" / "queries.train.tsv")
    assert text == ids and len(text) == 12
    assert len(triples.read_triples(FIX / "msmarco" / "triples.train.small.tsv", limit=3)) == 3
    with pytest.raises(ValueError, match="need the collection and queries"):
        triples.read_triples(FIX / "msmarco" / "qidpidtriples.train.full.2.tsv")
    m = triples.read_margin_triples(FIX / "msmarco" / "bert_cat_ensemble_msmarcopassage_train_scores_ids.tsv",
                                 collection=FIX / "msmarco" / "collection.tsv", queries=FIX / "msmarco" / "queries.train.tsv")
    assert m[0][:3] == text[0] and m[0][3] == pytest.approx(9.5 - 1.0)


def _copy(tmp_path, sub):
    dst = tmp_path / sub
    shutil.copytree(FIX / sub, dst)
    return dst


def test_missing_files_name_the_file_and_layout(tmp_path):
    ms = _copy(tmp_path, "msmarco")
    (ms / "collection.tsv").unlink()
    with pytest.raises(FileNotFoundError, match=r"collection\.tsv.*MS MARCO layout"):
        files.load_msmarco_folder(ms)
    beir = _copy(tmp_path, "beir")
    (beir / "scifact" / "qrels" / "test.tsv").unlink()
    with pytest.raises(FileNotFoundError, match=r"test\.tsv.*BEIR layout"):
        files.load_beir_folder(beir / "scifact")
    with pytest.raises(FileNotFoundError, match="folder not found"):
        files.load_beir_folder(tmp_path / "nope")


@pytest.mark.parametrize("fname,content,pattern", [
    ("collection.tsv", "0\tok\n1 no tab here\n", r"collection\.tsv:2: expected 2 tab-separated columns"),
    ("qrels.dev.small.tsv", "1000 0 0\n", r"qrels\.dev\.small\.tsv:1: expected TREC qrels with 4 columns"),
    ("qrels.dev.small.tsv", "1000 0 0 high\n", r"relevance grade 'high' is not an integer"),
])
def test_malformed_msmarco_files(tmp_path, fname, content, pattern):
    ms = _copy(tmp_path, "msmarco")
    (ms / fname).write_text(content)
    with pytest.raises(ValueError, match=pattern):
        files.load_msmarco_folder(ms)


@pytest.mark.parametrize("fname,content,pattern", [
    ("corpus.jsonl", '{"_id": "d0", "text": "x"}\n{broken\n', r"corpus\.jsonl:2: not JSON"),
    ("queries.jsonl", '{"text": "no id"}\n', r"queries\.jsonl:1: missing key\(s\) \['_id'\]"),
    ("qrels/test.tsv", "q0\td0\t1\n", r"expected header 'query-id<TAB>corpus-id<TAB>score'"),
])
def test_malformed_beir_files(tmp_path, fname, content, pattern):
    beir = _copy(tmp_path, "beir") / "scifact"
    (beir / fname).write_text(content)
    with pytest.raises(ValueError, match=pattern):
        files.load_beir_folder(beir)


def test_malformed_triples(tmp_path):
    p = tmp_path / "triples.tsv"
    p.write_text("q\tpos\n")
    with pytest.raises(ValueError, match=r"triples\.tsv:1: expected 3 tab-separated columns"):
        triples.read_triples(p)
    p.write_text("3000\t0\t99\n")
    with pytest.raises(ValueError, match="id '99' not found"):
        triples.read_triples(p, collection=FIX / "msmarco" / "collection.tsv", queries=FIX / "msmarco" / "queries.train.tsv")


# ---------------------------------------------------------------------------------------------------------
# encodings (initlab.textio): a UTF-8 byte-order mark changes nothing; a non-UTF-8 file is refused by name
# ---------------------------------------------------------------------------------------------------------
def _with_bom(folder: Path) -> Path:
    for p in folder.rglob("*"):
        if p.is_file():
            p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    return folder


def _same_set(a, b):
    assert (a.corpus, a.queries, a.qrels, a.meta) == (b.corpus, b.queries, b.qrels, b.meta)


def test_bom_in_msmarco_files_changes_nothing(tmp_path):
    """collection.tsv, queries.*.tsv and TREC qrels with a byte-order mark: the first id stays "0", not "\\ufeff0"
    (which silently dropped its judgement and lowered RR@10)."""
    ms = _with_bom(_copy(tmp_path, "msmarco"))
    for split in ("dev.small", "dl19"):
        _same_set(files.load_msmarco_folder(ms, split), files.load_msmarco_folder(FIX / "msmarco", split))
    assert "0" in files.read_id_text_tsv(ms / "collection.tsv")
    assert files.read_trec_qrels(ms / "qrels.dev.small.tsv") == files.read_trec_qrels(FIX / "msmarco" / "qrels.dev.small.tsv")


def test_bom_in_beir_files_changes_nothing(tmp_path):
    """corpus.jsonl / queries.jsonl (a BOM made the first line 'not JSON') and qrels/test.tsv (header refused)."""
    beir = _with_bom(_copy(tmp_path, "beir") / "scifact")
    _same_set(files.load_beir_folder(beir), files.load_beir_folder(FIX / "beir" / "scifact"))


def test_bom_in_training_triples_changes_nothing(tmp_path):
    """Text triples (first query text), id triples (a BOM made '\\ufeff3000' non-numeric, so id triples were read
    as text) and margin triples."""
    ms = _with_bom(_copy(tmp_path, "msmarco"))
    ref = triples.read_triples(FIX / "msmarco" / "triples.train.small.tsv")
    assert triples.read_triples(ms / "triples.train.small.tsv") == ref
    assert triples.read_triples(ms / "qidpidtriples.train.full.2.tsv", collection=ms / "collection.tsv",
                                queries=ms / "queries.train.tsv") == ref
    name = "bert_cat_ensemble_msmarcopassage_train_scores_ids.tsv"
    assert (triples.read_margin_triples(ms / name, collection=ms / "collection.tsv", queries=ms / "queries.train.tsv")
            == triples.read_margin_triples(FIX / "msmarco" / name, collection=FIX / "msmarco" / "collection.tsv",
                                           queries=FIX / "msmarco" / "queries.train.tsv"))


@pytest.mark.parametrize("sub,fname", [("msmarco", "collection.tsv"), ("msmarco", "qrels.dev.small.tsv"),
                                       ("beir/scifact", "corpus.jsonl"), ("beir/scifact", "qrels/test.tsv")])
def test_non_utf8_retrieval_file_is_refused_naming_file_and_line(tmp_path, sub, fname):
    folder = _copy(tmp_path, sub)
    p = folder / fname
    lines = p.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b"\n", b"\xe9\n")  # a latin-1 byte on line 2
    p.write_bytes(b"".join(lines))
    load = files.load_msmarco_folder if sub == "msmarco" else files.load_beir_folder
    with pytest.raises(ValueError, match=rf"{p.name}:2: not UTF-8 text \(byte 0xe9"):
        load(folder)
