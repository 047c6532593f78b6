"""The data decide, not names, and every text field is a string: a BEIR text or title that is null or a number is
refused naming the file, the line and the field (never read as "apple None"); recall's relevance level comes from
the data unless a known set's documented convention sets it, which is then printed and recorded; a ':' in a
folder's name is a folder's name."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from initlab.realdata.splade import data, files
from initlab.realdata.splade.evalset import DATA_RECALL_LEVEL, DataPolicyError
from initlab.realdata.splade.evaluate import evaluate_set

from bag_of_words import BagOfWords

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "splade"


def _beir(folder: Path, docs: list[dict], queries: list[dict], qrels: list[tuple]) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{g}\n" for q, d, g in qrels), encoding="utf-8")
    return folder


_GOOD_DOCS = [{"_id": "d0", "title": "", "text": "cat sofa"}, {"_id": "d1", "title": "", "text": "dog"}]
_GOOD_QUERIES = [{"_id": "q0", "text": "cat"}]


@pytest.mark.parametrize("part,bad,line,field,kind", [
    ("corpus", {"_id": "d2", "title": "apple", "text": None}, 3, "text", "null"),
    ("corpus", {"_id": "d2", "text": None}, 3, "text", "null"),
    ("corpus", {"_id": "d2", "title": "", "text": 1984}, 3, "text", "the number 1984"),
    ("corpus", {"_id": "d2", "title": None, "text": "rain"}, 3, "title", "null"),
    ("corpus", {"_id": None, "title": "", "text": "rain"}, 3, "_id", "null"),
    ("corpus", {"_id": 2.5, "title": "", "text": "rain"}, 3, "_id", "the number 2.5"),
    ("queries", {"_id": "q1", "text": None}, 2, "text", "null"),
    ("queries", {"_id": "q1", "text": ["dog"]}, 2, "text", "a list"),
])
def test_a_beir_text_field_that_is_not_a_string_is_refused_naming_file_line_and_field(tmp_path, part, bad, line,
                                                                                          field, kind):
    docs = _GOOD_DOCS + ([bad] if part == "corpus" else [])
    queries = _GOOD_QUERIES + ([bad] if part == "queries" else [])
    folder = _beir(tmp_path / "set", docs, queries, [("q0", "d0", 1)])
    with pytest.raises(DataPolicyError) as err:
        files.load_beir_folder(folder)
    msg = str(err.value)
    assert f"{part}.jsonl:{line}: field {field!r} is {kind}; expected a string" in msg and "\n" not in msg


def test_null_text_never_becomes_the_word_none(tmp_path):
    """The reported case: {"title": "apple", "text": null} was the document "apple None", which tied with the
    right answer to the query "none"."""
    folder = _beir(tmp_path / "set", [{"_id": "d0", "title": "apple", "text": None}, {"_id": "d1", "text": "none"}],
                   [{"_id": "q0", "text": "none"}], [("q0", "d1", 1)])
    with pytest.raises(DataPolicyError, match=r"corpus\.jsonl:1: field 'text' is null"):
        files.load_beir_folder(folder)


def test_integer_ids_and_a_missing_title_are_read(tmp_path):
    folder = _beir(tmp_path / "set", [{"_id": 7, "text": "cat"}, {"_id": "d1", "title": "", "text": "dog"}],
                   [{"_id": 1, "text": "cat"}], [("1", "7", 1)])
    ds = files.load_beir_folder(folder)
    assert ds.corpus == {"7": "cat", "d1": "dog"} and ds.queries == {"1": "cat"}


def test_nanobeir_records_with_a_null_text_are_refused_naming_the_record(monkeypatch):
    import datasets

    parts = {"corpus": [{"_id": "d0", "text": "cat"}, {"_id": "d1", "text": None}],
             "queries": [{"_id": "q0", "text": "cat"}], "qrels": [{"query-id": "q0", "corpus-id": "d0", "score": 1}]}
    monkeypatch.setattr(datasets, "load_dataset", lambda dataset_id, part, split: parts[part])
    with pytest.raises(DataPolicyError, match=r"NanoSciFact corpus record 2: field 'text' is null"):
        data.load_nanobeir("NanoSciFact")


# ------------------------------------------------------------------------------------------ recall's level
def _msmarco_split(tmp_path: Path, split: str) -> Path:
    """The fixture's MS MARCO folder with its dev.small files also under ``split`` (qrels of grade 1 only)."""
    ms = tmp_path / "ms"
    shutil.copytree(FIX / "msmarco", ms)
    for kind in ("queries", "qrels"):
        shutil.copy(ms / f"{kind}.dev.small.tsv", ms / f"{kind}.{split}.tsv")
    return ms


@pytest.mark.parametrize("split", ["medline", "needle", "dl19"])
def test_recall_level_comes_from_the_data_not_the_split_name(tmp_path, split):
    """A split whose name holds "dl" on qrels of grade 1 gave R@10 = 0 beside RR@10 = nDCG@10 = 1 (TREC DL's level 2
    applied by name)."""
    ms = _msmarco_split(tmp_path, split)
    ds = data.load_eval_set(f"msmarco:{ms}:{split}")
    assert ds.binary_rel == 1 and ds.binary_rel_source == DATA_RECALL_LEVEL
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: the level fits the data
        row = evaluate_set(_LookupEncoder(ds), ds, top_k=10)
    assert row["RR@10"] == pytest.approx(1.0) and row["R@10"] == pytest.approx(1.0)
    assert row["recall_rel"] == 1 and row["recall_rel_source"] == DATA_RECALL_LEVEL


def test_a_known_sets_documented_level_is_named_recorded_and_checked_against_the_grades(tmp_path):
    dl = data.load_eval_set("trec-dl-2019", data_root=FIX)
    assert dl.binary_rel == 2 and "TREC Deep Learning" in dl.binary_rel_source
    assert data.RECALL_LEVELS[data.MSMARCO_EVAL_IDS["trec-dl-2019"]][0] == 2  # the same set through ir_datasets
    root = tmp_path / "root"
    (root / "msmarco").mkdir(parents=True)
    ms = _msmarco_split(tmp_path, "dl19")
    for f in ms.iterdir():
        shutil.copy(f, root / "msmarco" / f.name)
    with pytest.warns(RuntimeWarning, match=r"recall counts grade >= 2 .* no judgement of the evaluated queries "
                                            r"reaches it \(highest grade 1\)"):
        data.load_eval_set("trec-dl-2019", data_root=root)


def test_the_evaluation_prints_and_records_a_level_taken_from_a_sets_name(tmp_path, checkpoint, capfd):
    from initlab.realdata.splade.sweep import eval_checkpoint

    res = eval_checkpoint(checkpoint, ["trec-dl-2019", "msmarco-dev"], tmp_path / "ev", data_root=str(FIX), top_k=5,
                          batch_size=8)
    rows = {r["set"]: r for r in res["sets"]}
    assert rows["trec-dl-2019"]["recall_rel"] == 2 and "TREC" in rows["trec-dl-2019"]["recall_rel_source"]
    assert rows["msmarco-dev"]["recall_rel"] == 1
    err = capfd.readouterr().err
    assert "note: trec-dl-2019: recall counts grade >= 2 as relevant (TREC Deep Learning" in err
    assert "note: msmarco-dev" not in err


class _LookupEncoder(BagOfWords):
    """The bag-of-words encoder over the words of a set's own texts."""

    def __init__(self, ds):
        words = sorted({w for t in [*ds.corpus.values(), *ds.queries.values()] for w in t.split()})
        self.vocab = {w: j for j, w in enumerate(words)}


# ------------------------------------------------------------------------------------------ ':' in a folder
def test_a_colon_in_a_beir_folder_name_is_part_of_the_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = Path("RUNS") / "runs:2024" / "beir1"
    shutil.copytree(FIX / "beir" / "scifact", folder)
    spec = "beir:RUNS/runs:2024/beir1"
    data.check_eval_spec(spec)  # was: "folder RUNS/runs not found"
    assert data.load_eval_set(spec).corpus == files.load_beir_folder(FIX / "beir" / "scifact").corpus
    assert [p.parent if p.parent.name != "qrels" else p.parent.parent for p in data.local_set_files(spec)] == [
        folder, folder, folder]
    assert data.absolute_spec(spec) == f"beir:{tmp_path / folder}"


def test_a_colon_in_an_msmarco_folder_name_with_and_without_a_split(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(FIX / "msmarco", "ms:2024")
    for spec, split in (("msmarco:ms:2024", "dev.small"), ("msmarco:ms:2024:dl19", "dl19")):
        data.check_eval_spec(spec)
        assert data.local_folder_spec(spec) == ("msmarco", Path("ms:2024"), split)
        assert data.load_eval_set(spec).qrels == files.load_msmarco_folder(FIX / "msmarco", split).qrels
        assert all(p.parent == Path("ms:2024") for p in data.local_set_files(spec))
    assert data.absolute_spec("msmarco:ms:2024:dl19") == f"msmarco:{tmp_path / 'ms:2024'}:dl19"
    with pytest.raises(FileNotFoundError, match=r"neither folder nope:2024 nor folder nope \(with split '2024'\)"):
        data.check_eval_spec("msmarco:nope:2024")


def test_a_sweeps_relative_inputs_are_made_absolute_before_its_cells_leave_the_client(tmp_path, monkeypatch):
    """A Dask worker resolves a relative path in its own working directory: every local input of a SPLADE sweep's
    cells is absolute (the client's), hub ids and ir_datasets sources are left as they are."""
    from initlab.config import derive
    from initlab.realdata.splade.config import get_preset
    from initlab.realdata.splade.sweep import absolute_inputs

    monkeypatch.chdir(tmp_path)
    shutil.copytree(FIX / "beir" / "scifact", "sets:1/scifact")
    Path("bb").mkdir()
    cfg = derive(get_preset("quick"), train_source="triples.tsv", train_collection="c.tsv", train_queries="q.tsv",
                 data_root="root", tiny_model="", backbone="bb",
                 eval_sets=("beir:sets:1/scifact", "msmarco-dev", "ir_datasets:beir/scifact/test"))
    got = absolute_inputs(cfg)
    assert (got.train_source, got.train_collection, got.train_queries, got.data_root, got.backbone) == tuple(
        str(tmp_path / n) for n in ("triples.tsv", "c.tsv", "q.tsv", "root", "bb"))
    assert got.eval_sets == (f"beir:{tmp_path / 'sets:1' / 'scifact'}", "msmarco-dev", "ir_datasets:beir/scifact/test")
    hub = absolute_inputs(derive(cfg, backbone="bert-base-uncased", train_source="ir_datasets:msmarco-passage/x"))
    assert hub.backbone == "bert-base-uncased" and hub.train_source == "ir_datasets:msmarco-passage/x"


def test_a_set_in_a_folder_whose_name_is_not_utf8_is_evaluated_and_written(tmp_path, checkpoint):
    """A BEIR folder named in another encoding: its name (a lone surrogate in Python) is the set's name, and the
    results CSV could not be written (UnicodeEncodeError after the evaluation); it is written as an escape now."""
    import os

    from initlab.realdata.splade.sweep import eval_checkpoint
    from initlab.textio import read_text

    folder = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"set\xff"))
    shutil.copytree(FIX / "beir" / "scifact", folder)
    res = eval_checkpoint(checkpoint, [f"beir:{folder}"], tmp_path / "ev", top_k=5, batch_size=8)
    assert res["sets"][0]["set"] == "set\udcff"
    assert "set\\udcff" in read_text(tmp_path / "ev" / "results.csv") and (tmp_path / "ev" / "DONE").exists()


def test_a_folder_named_like_a_known_set_is_not_averaged_into_that_collection():
    """The NanoBEIR mean took every set whose name started with "Nano": a ``beir:FOLDER`` called ``NanoFoo`` joined it.
    A row counts toward a collection by the ``--sets`` name it was evaluated under."""
    from initlab.realdata.splade.evaluate import summarise

    def row(set_, spec, ndcg):
        return {"set": set_, "spec": spec, "RR@10": ndcg, "nDCG@10": ndcg, "flops": 1.0, "n_queries": 3}

    s = summarise([row("NanoSciFact", "nano:NanoSciFact", 0.5), row("NanoMine", "beir:/data/NanoMine", 0.0),
                   row("msmarco-dev", "msmarco:/data/ms:dev", 0.9)])
    assert s["nanobeir_nDCG@10"] == pytest.approx(0.5) and "msmarco_dev_RR@10" not in s
    assert set(s["sets"]) == {"NanoSciFact", "NanoMine", "msmarco-dev"}
    old = summarise([{k: v for k, v in row("NanoSciFact", "", 0.5).items() if k != "spec"}])  # saved before "spec"
    assert old["nanobeir_nDCG@10"] == pytest.approx(0.5)
