"""No silently wrong SPLADE result: evaluation-data policy, ties, near-constant collapse, NaN stop, lengths,
and the command-line rules (required arguments, finished folders, output paths).

Retrieval checks use a bag-of-words stand-in model (exact, instant); training checks use the quick preset's
tiny in-process BERT on the fixture files."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
import torch

from initlab.realdata.splade.command import eval_main, train_main
from initlab.realdata.splade import data
from initlab.realdata.splade import evalset
from initlab.realdata.splade import files
from initlab.realdata.splade.evaluate import evaluate_set, summarise

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "splade"
TRIPLES = str(FIX / "msmarco" / "triples.train.small.tsv")
QUICK = ["--preset", "quick", "--backbone", "tiny", "--k", "1", "--no-progress", "--train-source", TRIPLES]


class BagOfWords:
    """Stand-in for a SPLADE SparseEncoder: term weight = word count (or one constant vector if ``constant``)."""

    device = torch.device("cpu")

    def __init__(self, constant: bool = False):
        self.vocab: dict[str, int] = {}
        self.constant = constant

    def _encode(self, texts, **kwargs):
        rows = []
        for t in texts:
            v = torch.zeros(512)
            for w in (["same"] if self.constant else re.findall(r"[a-z0-9]+", t.lower())):
                v[self.vocab.setdefault(w, len(self.vocab))] += 1.0
            rows.append(v)
        return torch.stack(rows).to_sparse()

    encode_query = encode_document = _encode


def _beir(folder: Path, corpus: list[tuple[str, str]], queries: list[tuple[str, str]], qrels: list[str]) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": "", "text": t}) + "\n" for i, t in corpus))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(q + "\n" for q in qrels))
    return folder


# ------------------------------------------------------------------------------------------------
# evaluation data
# ------------------------------------------------------------------------------------------------
def test_judged_queries_without_text_are_not_averaged_in_as_zero(tmp_path):
    ms = tmp_path / "msmarco"
    shutil.copytree(FIX / "msmarco", ms)
    lines = (ms / "queries.dev.small.tsv").read_text().splitlines()
    (ms / "queries.dev.small.tsv").write_text("\n".join(lines[:4]) + "\n")  # qrels keep all 8 queries
    with pytest.warns(RuntimeWarning, match="4 judged queries not in the queries file.*1004"):
        cut = files.load_msmarco_folder(ms, "dev.small")
    assert len(cut.queries) == 4 and set(cut.qrels) == set(cut.queries)
    row = evaluate_set(BagOfWords(), cut, top_k=10)
    assert row["n_queries"] == 4 and row["n_queries_judged"] == 8 and row["judged_queries_without_text"] == 4
    # the value on those 4 queries: the same measure on the full set's rows of those queries
    full = files.load_msmarco_folder(FIX / "msmarco", "dev.small")
    four = evalset.RetrievalSet("four", full.corpus, {q: full.queries[q] for q in cut.queries},
                             {q: full.qrels[q] for q in cut.queries})
    ref = evaluate_set(BagOfWords(), four, top_k=10)
    assert row["RR@10"] == pytest.approx(ref["RR@10"]) and row["RR@10"] > 0
    assert row["nDCG@10"] == pytest.approx(ref["nDCG@10"])


@pytest.mark.parametrize("fname, line, word", [
    ("corpus.jsonl", json.dumps({"_id": "d0", "title": "", "text": "another copy"}), "document id 'd0'"),
    ("queries.jsonl", json.dumps({"_id": "q0", "text": "another copy"}), "query id 'q0'"),
    ("qrels/test.tsv", "q0\td0\t0", "judgement of query 'q0' for document 'd0'"),
])
def test_duplicate_ids_are_refused_with_file_and_line(tmp_path, fname, line, word):
    folder = tmp_path / "scifact"
    shutil.copytree(FIX / "beir" / "scifact", folder)
    n = len((folder / fname).read_text().splitlines())
    with open(folder / fname, "a") as fh:
        fh.write(line + "\n")
    with pytest.raises(ValueError, match=rf"{re.escape(fname)}:{n + 1}: duplicate {re.escape(word)} \(first at .*{re.escape(fname)}:\d+\)"):
        files.load_beir_folder(folder)


def test_duplicate_ids_in_msmarco_files_are_refused(tmp_path):
    ms = tmp_path / "msmarco"
    shutil.copytree(FIX / "msmarco", ms)
    with open(ms / "qrels.dev.small.tsv", "a") as fh:
        fh.write("1001 0 1 0\n")  # a second judgement of (1001, 1): last copy must not win
    with pytest.raises(ValueError, match=r"qrels.dev.small.tsv:9: duplicate judgement of query '1001'"):
        files.load_msmarco_folder(ms, "dev.small")
    shutil.copy(FIX / "msmarco" / "qrels.dev.small.tsv", ms / "qrels.dev.small.tsv")
    with open(ms / "collection.tsv", "a") as fh:
        fh.write("3\tanother passage\n")
    with pytest.raises(ValueError, match=r"collection.tsv:\d+: duplicate id '3'"):
        files.load_msmarco_folder(ms, "dev.small")


def test_judged_documents_missing_from_the_corpus_are_reported(tmp_path):
    folder = tmp_path / "scifact"
    shutil.copytree(FIX / "beir" / "scifact", folder)
    with open(folder / "qrels" / "test.tsv", "a") as fh:
        fh.write("q0\tnope-doc\t1\n")
    with pytest.warns(RuntimeWarning, match="1 judged document id.*not in the corpus.*nope-doc"):
        ds = files.load_beir_folder(folder)
    assert ds.meta["judged_docs_not_in_corpus"] == 1 and ds.qrels["q0"]["nope-doc"] == 1  # kept: never retrieved


# ------------------------------------------------------------------------------------------------
# ties: every measure sees our order (descending score, then ascending document index)
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("relevant, rr, ndcg", [
    ("d1", 1.0, 1.0),                            # relevant document first among three tied ones
    ("d2", 1 / 2, 1 / math.log2(3)),             # second
    ("d3", 1 / 3, 1 / math.log2(4)),             # third: the tied non-relevant d1, d2 come first
])
def test_tied_documents_are_ranked_by_ascending_index_for_every_measure(tmp_path, relevant, rr, ndcg):
    same = "the red fox jumps over the lazy dog"
    folder = _beir(tmp_path / "ties", [("d0", "ocean waves at night"), ("d1", same), ("d2", same), ("d3", same)],
                   [("q0", "red fox jumps")], [f"q0\t{relevant}\t1"])
    row = evaluate_set(BagOfWords(), files.load_beir_folder(folder), top_k=10)
    assert row["RR@10"] == pytest.approx(rr) and row["nDCG@10"] == pytest.approx(ndcg)


# ------------------------------------------------------------------------------------------------
# near-constant collapse and the eval summary
# ------------------------------------------------------------------------------------------------
def test_near_constant_model_is_flagged_and_a_healthy_one_is_not():
    ds = data.load_eval_set("scifact", data_root=FIX)
    with pytest.warns(RuntimeWarning, match="near-constant"):
        row = evaluate_set(BagOfWords(constant=True), ds, top_k=10)
    assert row["collapsed"] and row["same_ranking_share"] == 1.0 and row["mean_doc_cosine"] == pytest.approx(1.0)
    assert 1.0 <= row["d_active"] < 2  # active dims alone look healthy: only the new rules catch it
    healthy = evaluate_set(BagOfWords(), ds, top_k=10)
    assert not healthy["collapsed"] and healthy["same_ranking_share"] < 0.9


def test_summary_of_a_folder_set_holds_its_numbers_not_nan(tmp_path):
    ds = files.load_beir_folder(FIX / "beir" / "scifact", name="beir:scifact")
    row = evaluate_set(BagOfWords(), ds, top_k=10)
    s = summarise([row])
    assert s["sets"]["beir:scifact"]["nDCG@10"] == pytest.approx(row["nDCG@10"]) and row["nDCG@10"] > 0
    assert not any(isinstance(v, float) and math.isnan(v) for v in s.values())
    assert "msmarco_dev_RR@10" not in s  # no NaN placeholder for a set that was not evaluated


# ------------------------------------------------------------------------------------------------
# training: NaN stop, lengths, required arguments, finished folders
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("factor, words", [(float("nan"), "non-finite loss (nan) at step 3"),
                                           (1e6, "loss diverged")])
def test_diverging_training_stops_names_step_and_checkpoint_and_writes_no_result(tmp_path, capsys, monkeypatch,
                                                                                 factor, words):
    from safetensors.torch import load_file

    from splade_loss_injection import multiply_loss

    multiply_loss(factor, at_step=3, setattr_=monkeypatch.setattr)  # NaN, or 10^6 times the loss, from step 3 on
    out = tmp_path / "nan"
    rc = train_main(QUICK + ["--out", str(out), "--set", "save_steps=1"])
    err = capsys.readouterr().err
    assert rc == 1
    assert words in err and "at step 3" in err and "Last finite checkpoint:" in err
    fail = json.loads((out / "failure.json").read_text())
    assert fail["status"] == "failed" and fail["step"] == 3 and fail["what"] == "loss"
    assert not (out / "DONE").exists() and not (out / "model").exists() and not (out / "train_results.json").exists()
    ckpt = Path(fail["last_checkpoint"])
    assert ckpt.name == f"checkpoint-{fail['step'] - 1}"
    for name, t in load_file(ckpt / "model.safetensors").items():
        assert torch.isfinite(t).all(), name  # the named checkpoint holds finite weights


def test_lengths_beyond_the_backbone_positions_are_refused_before_writing(tmp_path, capsys):
    out = tmp_path / "long"
    with pytest.raises(SystemExit) as exc:
        train_main(QUICK + ["--out", str(out), "--set", "doc_max_length=200"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "doc_max_length 200" in err and "usable length 128" in err
    assert not out.exists()


def test_command_line_rules_of_splade_train(tmp_path, capsys):
    out = tmp_path / "run"
    for argv, word in [
        (["--k", "1", "--out", str(out)], "--backbone"),                                  # required
        (["--backbone", "bert", "--out", str(out)], "--k"),                               # required
        (QUICK[:2] + ["--backbone", "./nope-model", "--k", "1", "--out", str(out)], "tiny in-process"),
        (QUICK + ["--out", str(out), "--eval"], "no evaluation sets"),                     # would print NaN
    ]:
        with pytest.raises(SystemExit) as exc:
            train_main(argv)
        assert exc.value.code == 2 and word in capsys.readouterr().err
        assert not out.exists()
    with pytest.warns(FutureWarning, match="deprecated"):
        from initlab.realdata.splade.config import get_preset

        assert get_preset("toy") == get_preset("quick")


def test_finished_folders_are_refused_and_failed_eval_leaves_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    assert train_main(QUICK + ["--out", str(out), "--set", "max_steps=2"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:  # a finished training is not returned as if it had run
        train_main(QUICK + ["--out", str(out), "--set", "max_steps=2"])
    assert exc.value.code == 2 and "already holds a finished training" in capsys.readouterr().err
    ev = tmp_path / "ev"
    args = ["--model", str(out / "model"), "--out", str(ev), "--data-root", str(FIX), "--top-k", "10"]
    assert eval_main(args + ["--sets", "scifact"]) == 0
    summary = json.loads((ev / "results.json").read_text())["summary"]
    assert set(summary["sets"]) == {"scifact"} and (ev / "DONE").exists()
    with pytest.raises(SystemExit) as exc:  # other --sets into the same folder: refused, results kept
        eval_main(args + ["--sets", "msmarco-dev"])
    assert exc.value.code == 2 and "finished run" in capsys.readouterr().err
    assert set(json.loads((ev / "results.json").read_text())["summary"]["sets"]) == {"scifact"}
    bad = tmp_path / "bad_eval"
    with pytest.raises(SystemExit):
        eval_main(["--model", str(out / "model"), "--out", str(bad), "--data-root", str(FIX), "--sets", "beir:/no/such"])
    assert "not found" in capsys.readouterr().err and not bad.exists()
    # length policy at evaluation: a checkpoint whose document length exceeds its position table is refused
    long = tmp_path / "long_model"
    shutil.copytree(out / "model", long)
    cfg = json.loads((long / "sentence_bert_config.json").read_text())
    (long / "sentence_bert_config.json").write_text(json.dumps({**cfg, "document_length": 200}))
    with pytest.raises(SystemExit):
        eval_main(["--model", str(long), "--out", str(bad), "--data-root", str(FIX), "--sets", "scifact"])
    assert "document_length 200" in capsys.readouterr().err and not bad.exists()


def test_changed_config_resume_of_a_sweep_is_refused(tmp_path):
    from initlab.config import derive
    from initlab.realdata.splade.config import PRESETS
    from initlab.realdata.splade.sweep import run_sweep
    from initlab.runs import ConfigMismatchError, RunDir

    base = derive(PRESETS["quick"], train_source=TRIPLES, data_root=str(FIX), eval_sets=("scifact",))
    RunDir(tmp_path / "sweep", config=derive(base, max_steps=2))  # an interrupted sweep of another config
    with pytest.raises(ConfigMismatchError, match="differs in: max_steps"):
        run_sweep(base, tmp_path / "sweep", backbones=["tiny"], ks=[1], progress=False)
    assert not (tmp_path / "sweep" / "tiny-bert__k1").exists()  # nothing trained


def test_ir_datasets_duplicates_are_refused(monkeypatch):
    import sys
    import types
    from collections import namedtuple

    Doc, Query, Qrel = namedtuple("Doc", "doc_id text"), namedtuple("Query", "query_id text"), namedtuple("Qrel", "query_id doc_id relevance")

    def fake(docs, queries, qrels):
        ds = types.SimpleNamespace(docs_iter=lambda: iter(docs), queries_iter=lambda: iter(queries), qrels_iter=lambda: iter(qrels))
        monkeypatch.setitem(sys.modules, "ir_datasets", types.SimpleNamespace(load=lambda _id: ds))

    docs, queries = [Doc("d0", "a"), Doc("d1", "b")], [Query("q0", "a")]
    fake(docs, queries, [Qrel("q0", "d0", 1)])
    assert data.load_ir_datasets("x/y").qrels == {"q0": {"d0": 1}}
    fake(docs + [Doc("d0", "c")], queries, [Qrel("q0", "d0", 1)])
    with pytest.raises(ValueError, match=r"docs record 3: duplicate document id 'd0' \(first at .*record 1\)"):
        data.load_ir_datasets("x/y")
    fake(docs, queries, [Qrel("q0", "d0", 1), Qrel("q0", "d0", 0)])
    with pytest.raises(ValueError, match="qrels record 2: duplicate judgement"):
        data.load_ir_datasets("x/y")


@pytest.mark.slow
def test_diverging_ddp_training_stops_every_process_at_the_same_step(tmp_path):
    # 2 gloo processes: the non-finite verdict is all-reduced, so no process hangs in the next all-reduce
    import os
    import subprocess
    import sys

    out = tmp_path / "ddp_nan"
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    script = str(Path(__file__).with_name("splade_loss_injection.py"))  # NaN loss from step 3 on, every rank
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
           script, "nan", "3", "splade", "train", "--out", str(out)] + QUICK + [
           "--set", "save_steps=1"]
    proc = subprocess.run(cmd, cwd=Path(__file__).resolve().parents[3], env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode != 0
    assert proc.stderr.count("non-finite loss (nan) at step 3") >= 2  # both ranks name the step
    fail = json.loads((out / "failure.json").read_text())
    assert fail["step"] == 3 and not (out / "DONE").exists() and not (out / "model").exists()


@pytest.mark.slow
def test_ddp_training_draws_its_own_dropout_masks_on_each_rank(tmp_path):
    # the Trainer seeds every process with the same seed; each rank must then draw its own dropout stream
    import os
    import subprocess
    import sys

    probes = []
    for run in ("a", "b"):
        env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        script = str(Path(__file__).with_name("splade_loss_injection.py"))
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
               script, "probe", str(tmp_path / f"probe_{run}"), "splade", "train", "--out",
               str(tmp_path / run)] + QUICK + ["--set", "max_steps=1"]
        proc = subprocess.run(cmd, cwd=Path(__file__).resolve().parents[3], env=env, capture_output=True, text=True,
                              timeout=400)
        assert proc.returncode == 0, proc.stderr[-3000:]
        probes.append([torch.load(tmp_path / f"probe_{run}.{r}") for r in (0, 1)])
    assert not torch.equal(probes[0][0], probes[0][1])  # ranks differ ...
    assert all(torch.equal(a, b) for a, b in zip(probes[0], probes[1]))  # ... and each is deterministic


def test_sweep_records_a_diverged_cell_as_failed_and_goes_on(tmp_path, monkeypatch):
    from initlab.config import derive
    from initlab.realdata.splade import sweep
    from initlab.realdata.splade.config import PRESETS
    from initlab.runs import NonFiniteError

    calls = []

    def fake_cell(cfg, out, progress=True):
        calls.append(cfg.k)
        if cfg.k == 2.0:
            raise NonFiniteError("SPLADE training", 3, "loss", float("nan"), None)
        return {"cell": sweep.cell_name(cfg), "backbone": cfg.backbone, "k": cfg.k, "status": "finished"}

    monkeypatch.setattr(sweep, "run_cell", fake_cell)
    base = derive(PRESETS["quick"], train_source=TRIPLES, data_root=str(FIX), eval_sets=("scifact",))
    rows = sweep.run_sweep(base, tmp_path / "sw", backbones=["tiny"], ks=[1, 2, 4], progress=False)
    assert calls == [1.0, 2.0, 4.0]  # went on after the failure
    assert [r["status"] for r in rows] == ["finished", "failed", "finished"] and "step 3" in rows[1]["error"]
    assert not (tmp_path / "sw" / "DONE").exists()  # not finished: a rerun retries the failed cell only
    assert json.loads((tmp_path / "sw" / "summary.json").read_text())[1]["status"] == "failed"
    calls.clear()
    monkeypatch.setattr(sweep, "run_cell", lambda cfg, out, progress=True: calls.append(cfg.k) or
                        {"cell": sweep.cell_name(cfg), "k": cfg.k, "backbone": cfg.backbone, "status": "finished"})
    rows = sweep.run_sweep(base, tmp_path / "sw", backbones=["tiny"], ks=[1, 2, 4], progress=False)
    assert calls == [2.0] and (tmp_path / "sw" / "DONE").exists()
