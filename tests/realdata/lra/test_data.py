"""LRA loaders on tiny fixtures in each real layout (no network), and their error messages."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from initlab.realdata.lra import data as D
from initlab.realdata.lra import splits as S
from initlab.realdata.lra import tokens as T

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "lra"


def ids_to_listops(ids):
    return [T.LISTOPS_TOKENS[i - T.N_SPECIAL] for i in ids]


def test_lra_listops_fixture_parses():
    td = D.load_task("listops", FIX / "listops")
    assert (td.vocab_size, td.max_len, td.n_classes) == (2 + 17, 2000, 10)
    assert td.train.labels.tolist() == [9, 3, 4] and td.val.labels.tolist() == [3] and td.test.labels.tolist() == [5, 7]
    first = td.train.tokens[0, : td.train.lengths[0]].tolist()
    assert ids_to_listops(first) == "[MAX 2 9 [MIN 4 7 0 ] ]".split()  # parentheses dropped
    assert td.train.tokens.dtype == torch.int16 and (td.train.tokens[1, td.train.lengths[1]:] == T.PAD_ID).all()
    with_parens = T.encode_listops("( ( [SM 5 ) ] )", keep_parens=True)
    assert ids_to_listops(with_parens) == ["(", "(", "[SM", "5", ")", "]", ")"]


def test_lra_listops_errors_name_file_and_layout(tmp_path):
    with pytest.raises(FileNotFoundError, match="basic_train.tsv.*Source"):
        D.load_listops(tmp_path)
    for name in ("train", "val", "test"):
        (tmp_path / f"basic_{name}.tsv").write_text("Input\tOutput\n[MAX 1 ]\t1\n")
    with pytest.raises(ValueError, match=r"basic_train.tsv: expected header 'Source<TAB>Target'"):
        D.load_listops(tmp_path)
    (tmp_path / "basic_train.tsv").write_text("Source\tTarget\n( [MAX 1 ] )\t1\n( [FOO 1 ] )\t1\n")
    with pytest.raises(ValueError, match=r"basic_train.tsv:3: unknown ListOps token '\[FOO'"):
        D.load_listops(tmp_path)
    (tmp_path / "basic_train.tsv").write_text("Source\tTarget\n( [MAX 1 ] )\t12\n")
    with pytest.raises(ValueError, match=r"basic_train.tsv:2: Target 12 outside 0..9"):
        D.load_listops(tmp_path)


def test_lra_text_aclimdb_fixture_parses_bytes():
    td = D.load_task("text", FIX / "aclImdb", split_seed=0)
    assert (td.vocab_size, td.max_len, td.n_classes) == (258, 4096, 2)
    assert len(td.train) + len(td.val) == 4 and len(td.val) == 1 and len(td.test) == 2
    raw = (FIX / "aclImdb" / "train" / "pos" / "0_9.txt").read_bytes()
    want = [b + 2 for b in raw]
    rows = [td.train.tokens[i, : td.train.lengths[i]].tolist() for i in range(len(td.train))]
    rows += [td.val.tokens[0, : td.val.lengths[0]].tolist()]
    assert want in rows  # UTF-8 bytes (the e-acute is two tokens)
    assert sorted(td.test.labels.tolist()) == [0, 1]
    short = D.load_text(FIX / "aclImdb", max_len=5)
    assert short.train.tokens.shape[1] == 5 and int(short.train.lengths.max()) == 5


def test_lra_text_from_hf_columns_without_network():
    import datasets

    ds = datasets.Dataset.from_dict({"text": ["good", "bad movie"], "label": [1, 0]})
    texts, labels = D.imdb_from_hf(ds)
    assert texts == ["good", "bad movie"] and labels == [1, 0]
    with pytest.raises(ValueError, match="missing column 'label'"):
        D.imdb_from_hf(datasets.Dataset.from_dict({"text": ["x"]}))
    with pytest.raises(ValueError, match=r"imdb split record 2: field 'text' is null; expected a string"):
        D.imdb_from_hf(datasets.Dataset.from_dict({"text": ["good", None], "label": [1, 0]}))


def test_lra_text_missing_folder_names_layout(tmp_path):
    (tmp_path / "train" / "pos").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"train/neg: not found; expected layout: aclImdb"):
        D.load_text(tmp_path)


def test_lra_retrieval_aan_fixture_parses_pairs():
    td = D.load_task("retrieval", FIX / "aan")
    assert td.pair and td.train.tokens.shape[:2] == (3, 2) and td.train.lengths.shape == (3, 2)
    assert td.train.labels.tolist() == [1, 0, 1] and len(td.val) == 1 and len(td.test) == 1
    doc = bytes(t - 2 for t in td.train.tokens[0, 1, : td.train.lengths[0, 1]].tolist()).decode()
    assert doc == "A statistical parser is described ."
    assert td.max_len == 4000


def test_lra_retrieval_malformed_row(tmp_path):
    for s in ("train", "eval", "test"):
        (tmp_path / f"new_aan_pairs.{s}.tsv").write_text("1\ta\tb\tonly four columns\n")
    with pytest.raises(ValueError, match=r"new_aan_pairs.train.tsv:1: expected 5 tab-separated columns, got 4"):
        D.load_retrieval(tmp_path)


def _write_cifar(folder: Path, n: int = 4, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    batches = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, n).tolist()
        with open(folder / name, "wb") as fh:  # the official files are protocol-2 pickles of numpy arrays
            pickle.dump({b"batch_label": b"fixture", b"labels": labels, b"data": data, b"filenames": [b"x.png"] * n}, fh, protocol=2)
        batches[name] = (data, labels)
    return batches


def test_lra_cifar_batches_fixture_grayscale(tmp_path):
    batches = _write_cifar(tmp_path / "cifar-10-batches-py")
    td = D.load_task("image", tmp_path, split_seed=0)
    assert (td.vocab_size, td.max_len, td.n_classes) == (258, 1024, 10)
    assert len(td.train) + len(td.val) == 20 and len(td.test) == 4
    data, labels = batches["test_batch"]
    r, g, b = (data[0, k * 1024 : (k + 1) * 1024].astype(np.float64) for k in range(3))  # channel-major rows
    # tf.image.rgb_to_grayscale on uint8 (LRA): x / 255, weighted sum, back to uint8 by truncating gray * 255.5
    ref = (0.2989 * r + 0.5870 * g + 0.1140 * b) / 255.0 * 255.5
    want = np.floor(ref).astype(int) + 2
    got = np.asarray(td.test.tokens[0].tolist())
    frac = ref - np.floor(ref)
    safe = (frac > 1e-4) & (frac < 1 - 1e-4)  # away from integer boundaries, float32 vs float64 cannot differ
    assert safe.mean() > 0.99 and (got[safe] == want[safe]).all() and np.abs(got - want).max() <= 1
    assert td.test.labels.tolist() == labels and (td.test.lengths == 1024).all()
    # truncation, not rounding: (2, 0, 0) -> 0.598 -> 0; white stays 255 although the weights sum to 0.9999
    px = np.array([[2, 0, 0], [255, 255, 255], [1, 1, 1], [10, 20, 30], [0, 0, 0]], dtype=np.uint8)
    assert T.grayscale(px).tolist() == [0, 255, 1, 18, 0]


def test_lra_cifar_refuses_non_numpy_pickle(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    folder = tmp_path / "cifar-10-batches-py"
    _write_cifar(folder)
    with open(folder / "data_batch_1", "wb") as fh:
        pickle.dump({b"data": Evil(), b"labels": [0]}, fh)
    with pytest.raises(ValueError, match=r"data_batch_1: not a readable CIFAR-10 python batch.*builtins.print"):
        D.load_image(folder)


def test_lra_cifar_from_hf_images_without_network():
    import datasets
    from PIL import Image

    rgb = np.random.default_rng(1).integers(0, 256, (2, 32, 32, 3), dtype=np.uint8)
    ds = datasets.Dataset.from_dict({"img": [Image.fromarray(a) for a in rgb], "label": [3, 7]})
    gray, labels = D.cifar_from_hf(ds)
    assert gray.shape == (2, 1024) and labels.tolist() == [3, 7]
    assert gray[1].tolist() == T.grayscale(rgb[1]).reshape(-1).tolist()


def _write_pathfinder(root: Path, n: int = 10, as_npy_array: bool = False) -> list[tuple[np.ndarray, int]]:
    from PIL import Image

    base = root / "lra_release" / "pathfinder32" / "curv_contour_length_14"
    (base / "metadata").mkdir(parents=True)
    (base / "imgs" / "0").mkdir(parents=True)
    rng = np.random.default_rng(0)
    rows, items = [], []
    for i in range(n):
        img = rng.integers(0, 256, (32, 32), dtype=np.uint8)
        Image.fromarray(img, mode="L").save(base / "imgs" / "0" / f"sample_{i}.png")
        label = i % 2
        rows.append(["imgs/0", f"sample_{i}.png", str(i), str(label), "32", "1.5", "14"])
        items.append((img, label))
    if as_npy_array:
        np.save(base / "metadata" / "0.npy", np.array(rows))
    else:  # the LRA release: whitespace-separated text lines despite the .npy name
        (base / "metadata" / "0.npy").write_text("".join(" ".join(r) + "\n" for r in rows))
    return items


@pytest.mark.parametrize("as_npy_array", [False, True])
def test_lra_pathfinder_fixture_split_80_10_10(tmp_path, as_npy_array):
    items = _write_pathfinder(tmp_path, 10, as_npy_array)
    td = D.load_task("pathfinder", tmp_path / "lra_release", split_seed=0)
    assert (len(td.train), len(td.val), len(td.test)) == (8, 1, 1)
    assert td.max_len == 1024 and td.n_classes == 2
    pix = {tuple((img.reshape(-1).astype(int) + 2).tolist()): y for img, y in items}
    for split in (td.train, td.val, td.test):
        for i in range(len(split)):
            assert pix[tuple(split.tokens[i].tolist())] == int(split.labels[i])
    again = D.load_pathfinder(tmp_path, split_seed=0)
    assert torch.equal(again.test.tokens, td.test.tokens)
    other = D.load_pathfinder(tmp_path, split_seed=1)
    assert not torch.equal(other.train.tokens, td.train.tokens)


def test_lra_splits_follow_the_split_seed_not_the_run_seed(tmp_path):
    # regression: the Pathfinder 80/10/10 split and the Text/Image hold-outs were drawn with the run seed
    from dataclasses import replace

    from initlab.realdata.lra.config import PRESETS
    TOY = PRESETS["toy"]
    from initlab.realdata.lra.runtime import load_data
    from initlab.realdata.lra.splits import split_fingerprint

    _write_pathfinder(tmp_path / "pf", 20)
    _write_cifar(tmp_path / "img" / "cifar-10-batches-py", n=10)
    for task, folder in (("pathfinder", tmp_path / "pf"), ("image", tmp_path / "img"), ("text", FIX / "aclImdb")):
        cfg = replace(TOY, task=task, data_dir=str(folder), listops_gen=None)
        prints = {seed: split_fingerprint(load_data(replace(cfg, seed=seed))) for seed in (0, 1, 7)}
        assert len(set(prints.values())) == 1, task  # every run seed: the same split
        assert split_fingerprint(load_data(replace(cfg, split_seed=1))) != prints[0], task  # the split seed moves it
    with pytest.raises(ValueError, match="split_seed"):
        replace(TOY, split_seed=-1)


def test_split_fingerprint_names_the_examples_of_each_split(tmp_path):
    from dataclasses import replace

    from initlab.realdata.lra.config import PRESETS
    TOY = PRESETS["toy"]
    from initlab.realdata.lra.runtime import load_data
    from initlab.realdata.lra.splits import split_fingerprint

    td = D.load_task("text", FIX / "aclImdb", split_seed=0)
    fp = split_fingerprint(td)
    assert fp.startswith("sha256:") and len(fp) == 7 + 16 and split_fingerprint(D.load_task("text", FIX / "aclImdb")) == fp
    swapped = S.TaskData(td.name, td.vocab_size, td.max_len, td.n_classes, td.val, td.train, td.test)
    assert split_fingerprint(swapped) != fp  # same examples, other splits
    assert split_fingerprint(D.load_task("text", FIX / "aclImdb", max_len=5)) != fp  # other length
    # generated ListOps: in memory (what fine-tuning checks before writing) == written and read back (what it trains on)
    assert split_fingerprint(load_data(TOY)) == split_fingerprint(load_data(TOY, out=tmp_path))
    assert split_fingerprint(load_data(TOY)) != split_fingerprint(load_data(replace(TOY, limit=10)))


def test_lra_pathfinder_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no metadata/ folder found; expected layout: lra_release/pathfinder32"):
        D.load_pathfinder(tmp_path)
    _write_pathfinder(tmp_path, 3)
    base = tmp_path / "lra_release" / "pathfinder32" / "curv_contour_length_14"
    (base / "imgs" / "0" / "sample_1.png").unlink()
    with pytest.raises(FileNotFoundError, match="sample_1.png: not found"):
        D.load_pathfinder(tmp_path)
    (base / "metadata" / "0.npy").write_text("imgs/0 sample_0.png\n")
    with pytest.raises(ValueError, match=r"0.npy:1: expected >= 4 columns"):
        D.load_pathfinder(tmp_path)


def test_lra_load_task_rejects_unknown_and_missing_dir():
    with pytest.raises(ValueError, match="task: expected one of"):
        D.load_task("pathx")
    with pytest.raises(ValueError, match="data_dir: task 'retrieval' needs a local folder"):
        D.load_task("retrieval")


def test_lra_iter_batches_ranks_disjoint_and_equal():
    split = S.split_from_sequences([[3]] * 11, [0] * 11, 10)
    shares = [torch.cat(list(S.iter_batches(split, 2, shuffle=True, seed=0, epoch=1, rank=r, world=2))) for r in (0, 1)]
    assert len(shares[0]) == len(shares[1]) == 5 and not set(shares[0].tolist()) & set(shares[1].tolist())


# ---------------------------------------------------------------------------------------------------------
# encodings (initlab.textio): a UTF-8 byte-order mark changes nothing; a non-UTF-8 file is refused by name
# ---------------------------------------------------------------------------------------------------------
def _copy_with_bom(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        if p.is_file():
            p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    return dst


def _same_task(a, b):
    for name in ("train", "val", "test"):
        sa, sb = getattr(a, name), getattr(b, name)
        assert torch.equal(sa.tokens, sb.tokens) and torch.equal(sa.lengths, sb.lengths) and torch.equal(sa.labels, sb.labels)


@pytest.mark.parametrize("task,sub", [("listops", "listops"), ("retrieval", "aan"), ("text", "aclImdb")])
def test_lra_bom_in_text_files_changes_nothing(tmp_path, task, sub):
    """ListOps (the header became '\\ufeffSource' and was refused), AAN (the first label '\\ufeff1' was refused)
    and IMDB reviews (the three BOM bytes became the review's first three tokens)."""
    marked = _copy_with_bom(FIX / sub, tmp_path / sub)
    _same_task(D.load_task(task, marked, split_seed=0), D.load_task(task, FIX / sub, split_seed=0))


def test_lra_bom_in_pathfinder_metadata_changes_nothing(tmp_path):
    _write_pathfinder(tmp_path / "plain", 10)
    _write_pathfinder(tmp_path / "marked", 10)
    meta = tmp_path / "marked" / "lra_release" / "pathfinder32" / "curv_contour_length_14" / "metadata" / "0.npy"
    meta.write_bytes(b"\xef\xbb\xbf" + meta.read_bytes())  # the first folder was '\ufeffimgs/0': not found
    _same_task(D.load_pathfinder(tmp_path / "marked", split_seed=0), D.load_pathfinder(tmp_path / "plain", split_seed=0))


@pytest.mark.parametrize("task,sub,fname,line", [("listops", "listops", "basic_train.tsv", 2),
                                                 ("retrieval", "aan", "new_aan_pairs.train.tsv", 2),
                                                 ("text", "aclImdb", "train/pos/0_9.txt", 1)])
def test_lra_non_utf8_file_is_refused_naming_file_and_line(tmp_path, task, sub, fname, line):
    import shutil

    folder = tmp_path / sub
    shutil.copytree(FIX / sub, folder)
    p = folder / fname
    lines = p.read_bytes().splitlines(keepends=True)
    lines[line - 1] = lines[line - 1].rstrip(b"\n") + b"\xe9" + (b"\n" if lines[line - 1].endswith(b"\n") else b"")
    p.write_bytes(b"".join(lines))
    with pytest.raises(ValueError, match=rf"{Path(fname).name}:{line}: not UTF-8 text \(byte 0xe9"):
        D.load_task(task, folder, split_seed=0)
