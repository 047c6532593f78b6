"""Gzip-compressed text files are read transparently by the one reader (initlab.textio), and a folder reader that
looks for ``NAME`` also finds ``NAME.gz``: a gzip file got "not UTF-8 ... use iconv", and a BEIR folder holding
``corpus.jsonl.gz`` got "corpus.jsonl: file not found"."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from initlab import textio

FIX = Path(__file__).parent / "realdata" / "fixtures"


def _gzip(path: Path) -> Path:
    gz = path.with_name(path.name + ".gz")
    gz.write_bytes(gzip.compress(path.read_bytes()))
    path.unlink()
    return gz


def test_read_text_and_open_text_read_gzip(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text("première ligne\nsecond\n", encoding="utf-8")
    gz = _gzip(p)
    assert textio.read_text(gz) == "première ligne\nsecond\n"
    with textio.open_text(gz) as fh:
        assert list(fh) == ["première ligne\n", "second\n"]
    assert textio.read_json(_gzip_json(tmp_path)) == {"a": 1}


def _gzip_json(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"a": 1}))
    return _gzip(p)


def test_gzip_of_non_utf8_text_names_the_file_line_and_gzip(tmp_path):
    p = tmp_path / "b.txt"
    p.write_bytes(b"ok\ncaf\xe9\n")
    gz = _gzip(p)
    with pytest.raises(textio.TextDecodeError, match=r"b\.txt\.gz:2: not UTF-8 text .*gzip"):
        textio.read_text(gz)
    with pytest.raises(textio.TextDecodeError, match=r"b\.txt\.gz:2: not UTF-8 text"):
        with textio.open_text(gz) as fh:
            list(fh)


def test_beir_and_msmarco_folders_with_gzip_files(tmp_path):
    from initlab.realdata.splade import files

    beir = tmp_path / "scifact"
    shutil.copytree(FIX / "splade" / "beir" / "scifact", beir)
    ref = files.load_beir_folder(FIX / "splade" / "beir" / "scifact")
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        _gzip(beir / name)
    got = files.load_beir_folder(beir)
    assert (got.corpus, got.queries, got.qrels) == (ref.corpus, ref.queries, ref.qrels)
    ms = tmp_path / "msmarco"
    shutil.copytree(FIX / "splade" / "msmarco", ms)
    ref = files.load_msmarco_folder(FIX / "splade" / "msmarco")
    for name in ("collection.tsv", "queries.dev.small.tsv", "qrels.dev.small.tsv"):
        _gzip(ms / name)
    got = files.load_msmarco_folder(ms)
    assert (got.corpus, got.queries, got.qrels) == (ref.corpus, ref.queries, ref.qrels)


def test_lra_listops_folder_with_gzip_files(tmp_path):
    from initlab.realdata.lra import data as D

    lo = tmp_path / "listops"
    shutil.copytree(FIX / "lra" / "listops", lo)
    for name in ("basic_train.tsv", "basic_val.tsv", "basic_test.tsv"):
        _gzip(lo / name)
    assert D.load_listops(lo).train.labels.tolist() == D.load_listops(FIX / "lra" / "listops").train.labels.tolist()


def test_diagnose_reads_jsonl_gz_by_its_inner_suffix(tmp_path):
    from initlab.diagnose.data import read_sequences

    p = tmp_path / "d.jsonl"
    p.write_text("".join(json.dumps({"text": f"t {i}", "y": i % 2}) + "\n" for i in range(4)))
    s = read_sequences(_gzip(p), labels="y")
    assert s.fmt == "jsonl" and s.labels == ["0", "1", "0", "1"]
