"""The inputs of a run: fingerprints recorded at its start, compared when it is resumed or reused.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from initlab.runs.atomic import atomic_write_json
from initlab.runs.errors import ConfigMismatchError
from initlab.textio import read_json

__all__ = ['INPUTS_FILE', 'FOLDER_DIGEST_OVER', 'fingerprint_file', 'check_inputs']


#: the file beside ``config.json`` that records a run's input fingerprints (not part of the config guard, so run
#: folders written before it existed resume: a missing record, or a missing entry, is accepted and recorded)
INPUTS_FILE = "inputs.json"
#: a folder input with more files than this is recorded as two digests (names and sizes with modification times;
#: names, sizes and contents) instead of one record per file
FOLDER_DIGEST_OVER = 5000


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()


def fingerprint_file(path: str | Path) -> dict[str, Any]:
    """``{"size", "mtime_ns", "sha256"}`` of the file ``path``."""
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": _sha256(Path(path))}


def _folder_files(folder: Path) -> list[Path]:
    """Every file under ``folder`` as a run reads it: through links, to files and to folders alike (a data folder
    whose sub-folder is a link to another disk is read through it, so it is fingerprinted through it); a linked
    folder already visited (a link cycle) is walked once. Named by their paths under ``folder``."""
    out: list[Path] = []
    seen: set[str] = set()
    for root, dirs, names in os.walk(folder, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs.sort()
        out += [Path(root) / n for n in names if not n.startswith(".initlab-") and (Path(root) / n).is_file()]
    return sorted(out)


def _fingerprint(value: Any) -> Any:
    """The record of one input: a file's :func:`fingerprint_file`; a folder's files (relative names) or, past
    :data:`FOLDER_DIGEST_OVER` files, its digests; a string (an already computed fingerprint) as it is."""
    if isinstance(value, (str, int, float)) and not isinstance(value, Path):
        return value
    path = Path(value)
    if path.is_file():
        return {"path": str(path), **fingerprint_file(path)}
    files = _folder_files(path)
    if len(files) > FOLDER_DIGEST_OVER:
        return {"path": str(path), "files": len(files), "stat": _stat_digest(path, files),
                "content": _content_digest(path, files)}
    return {"path": str(path), "files": {str(p.relative_to(path)): fingerprint_file(p) for p in files}}


def _stat_digest(root: Path, files: list[Path]) -> str:
    import hashlib

    h = hashlib.sha256()
    for p in files:
        st = p.stat()
        h.update(f"{p.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return "sha256:" + h.hexdigest()


def _content_digest(root: Path, files: list[Path]) -> str:
    import hashlib

    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.relative_to(root)}\0{p.stat().st_size}\0{_sha256(p)}\n".encode())
    return "sha256:" + h.hexdigest()


def _same_file(saved: dict[str, Any], path: Path) -> str | None:
    """None when ``path`` holds what ``saved`` recorded (same size, and same modification time or, failing that,
    same sha256: a copied or touched file with the same bytes is the same input), else what differs."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "is gone"
    if st.st_size != saved.get("size"):
        return f"size {saved.get('size')} -> {st.st_size} bytes"
    if st.st_mtime_ns == saved.get("mtime_ns"):
        return None
    return None if _sha256(path) == saved.get("sha256") else "content changed (sha256)"


def _input_difference(saved: Any, value: Any) -> tuple[str, str] | None:
    """``(what, how)`` when the input ``value`` differs from its ``saved`` record, else None."""
    if not isinstance(saved, dict):
        now = _fingerprint(value)
        return None if saved == now else ("", f"{saved} -> {now}")
    path = Path(value)
    if "sha256" in saved:
        how = _same_file(saved, path)
        return None if how is None else (str(path), how)
    files = _folder_files(path) if path.is_dir() else []
    rec = saved.get("files")
    if isinstance(rec, dict):
        names = {str(p.relative_to(path)) for p in files}
        for rel in sorted(set(rec) | names):
            if rel not in names:
                return str(path / rel), "is gone"
            if rel not in rec:
                return str(path / rel), "was added"
            how = _same_file(rec[rel], path / rel)
            if how is not None:
                return str(path / rel), how
        return None
    if len(files) != rec:
        return str(path), f"{rec} -> {len(files)} files"
    if _stat_digest(path, files) == saved.get("stat") or _content_digest(path, files) == saved.get("content"):
        return None
    return str(path), f"a file changed (folders over {FOLDER_DIGEST_OVER} files are recorded as digests)"


def check_inputs(root: str | Path, inputs: Mapping[str, Any], *, write: bool = True) -> None:
    """Prove that a resumed or reused run works on the inputs it started on.

    ``inputs`` maps a label (``"data"``, ``"backbone"``, ``"train_source"``, ...) to a file or folder (its
    fingerprint: size, modification time and sha256 of every file, :func:`fingerprint_file`) or to a string (a
    fingerprint computed by the caller, e.g. of the loaded data splits); ``None`` values are skipped. The record is
    ``root/inputs.json`` (:data:`INPUTS_FILE`). An input recorded there must be unchanged: same size, and the same
    modification time or, failing that, the same bytes (a copied or touched file with the same content passes). An
    input without a record (a new run, or a folder written before this record existed) is recorded.

    Raises:
        ConfigMismatchError: an input differs from its record (naming the input, the file and how it differs);
            nothing is written.
    """
    root = Path(root)
    path = root / INPUTS_FILE
    saved: dict[str, Any] = {}
    if path.exists():
        try:
            saved = read_json(path)
        except ValueError:
            raise ConfigMismatchError(f"{path}: unreadable record of the run's inputs; choose another --out or pass "
                                      "--overwrite") from None
    current = {k: v for k, v in inputs.items() if v is not None}
    for label, value in current.items():
        if label in saved:
            diff = _input_difference(saved[label], value)
            if diff is not None:
                where = f" {diff[0]}" if diff[0] else ""
                raise ConfigMismatchError(
                    f"{root}: this run was started on other inputs: {label}{where}: {diff[1]}; resume it on the "
                    "inputs it started on, or choose another --out or pass --overwrite (the old folder is then moved "
                    "aside)")
    new = {k: _fingerprint(v) for k, v in current.items() if k not in saved}
    if write and new:
        atomic_write_json(path, {**saved, **new})
