"""The one text reader (:mod:`initlab.textio`): UTF-8, a leading byte-order mark dropped, clear errors; and a
source scan that no package module reads a text file any other way."""

from __future__ import annotations

import ast
import codecs
import csv
import tomllib
from pathlib import Path

import pytest

from initlab.textio import TextDecodeError, decode_text, open_text, read_json, read_text

ROOT = Path(__file__).resolve().parents[1]
BOM = codecs.BOM_UTF8


def test_leading_bom_is_dropped_and_only_there(tmp_path):
    p = tmp_path / "a.tsv"
    p.write_bytes(BOM + "0\tcaf\u00e9\n1\tx\ufeffy\n".encode())
    assert read_text(p) == "0\tcaf\u00e9\n1\tx\ufeffy\n"  # a mark inside the file is data, kept
    with open_text(p) as fh:
        assert list(fh) == ["0\tcaf\u00e9\n", "1\tx\ufeffy\n"]
    assert decode_text(BOM + b"{}", "x") == "{}"
    q = tmp_path / "c.json"
    q.write_bytes(BOM + b'{"a": 1}')
    assert read_json(q) == {"a": 1}


def test_csv_reader_sees_the_same_rows_with_and_without_bom(tmp_path):
    plain, marked = tmp_path / "p.tsv", tmp_path / "m.tsv"
    body = b"Source\tTarget\r\n[MAX 1 ]\t1\r\n"
    plain.write_bytes(body)
    marked.write_bytes(BOM + body)
    rows = []
    for p in (plain, marked):
        with open_text(p, newline="") as fh:
            rows.append(list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)))
    assert rows[0] == rows[1] == [["Source", "Target"], ["[MAX 1 ]", "1"]]


def test_undecodable_bytes_name_the_file_line_and_offset(tmp_path):
    p = tmp_path / "latin1.tsv"
    p.write_bytes(BOM + b"0\tok\n1\tok\n2\tcaf\xe9\n")  # cp1252/latin-1 e-acute, not UTF-8
    offset = len(BOM) + len(b"0\tok\n1\tok\n2\tcaf")
    for read in (read_text, lambda path: list(open_text(path)), lambda path: open_text(path).read()):
        with pytest.raises(TextDecodeError, match=rf"latin1.tsv:3: not UTF-8 text \(byte 0xe9 at byte offset {offset}"):
            read(p)
    assert issubclass(TextDecodeError, ValueError)  # the CLIs turn it into a one-line error, exit 2


def test_utf16_and_utf32_files_are_named(tmp_path):
    for codec, name in (("utf-16", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32")):
        p = tmp_path / f"{codec}.txt"
        data = "0\tx\n".encode(codec)
        if codec == "utf-16-be":
            data = codecs.BOM_UTF16_BE + data
        p.write_bytes(data)
        with pytest.raises(TextDecodeError, match=rf"{codec}.txt: the file is {name}"):
            read_text(p)
        with pytest.raises(TextDecodeError, match=rf"the file is {name}"):
            open_text(p)


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_text(tmp_path / "none.txt")
    with pytest.raises(FileNotFoundError):
        open_text(tmp_path / "none.txt")


# ---------------------------------------------------------------------------------------------------------
# every text read of the package goes through initlab.textio
# ---------------------------------------------------------------------------------------------------------
def _package_files() -> list[Path]:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    return sorted({p for folder in cfg.values() for p in (ROOT / folder).rglob("*.py")})


def _text_reads(src: str, label: str) -> list[str]:
    """Calls that open or read a file as text without initlab.textio: ``x.read_text(...)``, ``x.open(...)``
    and ``open(...)`` without a binary mode (``Image.open``, ``os.open`` (a file descriptor, bytes only) and reads of
    ``/proc`` are not text files)."""
    bad = []
    for node in ast.walk(ast.parse(src, filename=label)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        mode = next((a for a in node.args[1:2]), None) or next((k.value for k in node.keywords if k.arg == "mode"), None)
        binary = isinstance(mode, ast.Constant) and isinstance(mode.value, str) and ("b" in mode.value or "w" in mode.value)
        first = node.args[0] if node.args else None
        proc = isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("/proc/")
        if isinstance(f, ast.Attribute) and f.attr == "read_text":
            bad.append(f"{label}:{node.lineno}: .read_text()")
        elif isinstance(f, ast.Attribute) and f.attr == "open" and not (isinstance(f.value, ast.Name) and f.value.id in ("Image", "os")) and not binary:
            bad.append(f"{label}:{node.lineno}: .open()")
        elif isinstance(f, ast.Name) and f.id == "open" and not binary and not proc:
            bad.append(f"{label}:{node.lineno}: open()")
    return bad


def test_every_text_file_is_read_through_textio():
    files = [p for p in _package_files() if p.name != "textio.py"]
    assert any(p.name == "files.py" for p in files) and any(p.name == "data.py" for p in files)
    bad = [b for p in files for b in _text_reads(p.read_text(), str(p.relative_to(ROOT)))]
    assert not bad, "text read without initlab.textio (use read_text / read_json / open_text):\n" + "\n".join(bad)


def test_the_scan_catches_a_plain_text_read():
    """Mutation: the scan must report each form it looks for, and accept binary reads and writes."""
    src = ("from pathlib import Path\n"
           "def f(p):\n"
           "    a = Path(p).read_text()\n"
           "    b = open(p, encoding='utf-8').read()\n"
           "    with Path(p).open() as fh:\n"
           "        pass\n"
           "    c = open(p, 'rb').read()\n"
           "    d = open('/proc/self/status', encoding='ascii')\n")
    assert sorted(r.split(": ", 1)[1] for r in _text_reads(src, "fake.py")) == [".open()", ".read_text()", "open()"]
