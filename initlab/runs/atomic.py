"""Atomic writes (JSON, CSV, text, bytes, the resolved config) and the one-line error of a disk that refuses them.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

from initlab.config import to_dict

__all__ = ['current_umask', 'WriteError', 'DISK_ERRNOS', 'disk_cause', 'write_error', 'check_writable', 'atomic_write_bytes', 'atomic_write_text', 'json_default', 'revive_nonfinite', 'atomic_write_json', 'atomic_write_csv', 'save_config']


def current_umask() -> int:
    """The process umask (read from /proc where available, else by setting and restoring it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # pragma: no cover - non-Linux fallback
    os.umask(mask)
    return mask


def _normal_write_mode(path: Path) -> int:
    """The permission bits a plain ``open(path, "w")`` would leave: those of the file it replaces, or
    ``0o666 & ~umask`` for a new file (``tempfile.mkstemp`` alone would give 0600)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return 0o666 & ~current_umask()


class WriteError(OSError):
    """Writing an output failed because the disk refused it (full, read-only, over quota, no permission).

    The message is one line, ``"PATH: cannot write (CAUSE)"`` (the commands print it and exit 2); ``errno`` is the
    underlying error number. An ``OSError``, so code catching the raw error keeps working.
    """

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.errno = code


#: error numbers of a write the disk refused, and their wording in messages
DISK_ERRNOS: dict[int, str] = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EFBIG: "file too large",
}
#: how libraries that do not raise ``OSError`` word the same causes (safetensors' and torch's writers)
_DISK_WORDS = (("no space left on device", errno.ENOSPC), ("os error 28", errno.ENOSPC),
               ("disk quota exceeded", errno.EDQUOT), ("os error 122", errno.EDQUOT),
               ("read-only file system", errno.EROFS), ("os error 30", errno.EROFS),
               ("permission denied", errno.EACCES), ("os error 13", errno.EACCES))


def disk_cause(err: BaseException) -> tuple[str, int] | None:
    """``(wording, errno)`` when ``err`` says the disk refused a write (:data:`DISK_ERRNOS`: an ``OSError`` with that
    number, or another library's error naming the cause), else None."""
    for e in (err, err.__cause__, err.__context__):
        if isinstance(e, OSError) and e.errno in DISK_ERRNOS:
            return DISK_ERRNOS[e.errno], e.errno
    text = str(err).lower()
    for words, code in _DISK_WORDS:
        if words in text:
            return DISK_ERRNOS[code], code
    return None


def write_error(err: BaseException, what: str | Path) -> WriteError | None:
    """The one-line :class:`WriteError` ``"WHAT: cannot write (CAUSE)"`` for ``err`` when the disk refused a write
    (:func:`disk_cause`), else None; raise it ``from err``."""
    if isinstance(err, WriteError):
        return err
    cause = disk_cause(err)
    if cause is None:
        return None
    return WriteError(f"{what}: cannot write ({cause[0]})", cause[1])


def _nearest_folder(path: Path) -> Path:
    """``path`` if it is a folder, else its nearest existing ancestor folder."""
    for p in (path, *path.parents):
        if p.is_dir():
            return p
    return Path(".")


def check_writable(path: str | Path, *, flag: str, kind: str = "folder") -> None:
    """Check that the output ``path`` can be written, before any work starts, by writing and removing a one-byte
    probe file (``.initlab-write-probe-*``) in the folder that will hold it: ``path`` itself for an existing
    folder, else its nearest existing ancestor (the folder a run creates its folders in), or the parent of a file.

    Raises:
        WriteError: ``"FLAG PATH: cannot write in FOLDER (CAUSE)"`` (read-only file system, no space left on device,
            disk quota exceeded, permission denied).
    """
    path = Path(path)
    folder = _nearest_folder(path if kind == "folder" else (path.parent if str(path.parent) else Path(".")))
    try:
        if shutil.disk_usage(folder).free == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(folder))
        fd, probe = tempfile.mkstemp(prefix=".initlab-write-probe-", dir=folder)
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as err:
        cause = disk_cause(err)
        why = cause[0] if cause else (err.strerror or str(err)).lower()
        raise WriteError(f"{flag} {path}: cannot write in {folder} ({why})", err.errno) from None


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file + ``os.replace``); parents are created.

    The file gets the permissions a normal write would give (those of the file it replaces, else
    ``0o666`` minus the umask), not the 0600 of a private temporary file.

    Raises:
        WriteError: the disk refused the write (full, read-only, ...): one line naming ``path`` and the cause; no
            temporary file is left.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = _normal_write_mode(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            os.fchmod(fd, mode)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
    except OSError as err:
        wrapped = write_error(err, path)
        if wrapped is None:
            raise
        raise wrapped from err
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically.

    A path whose bytes are not UTF-8 (a folder named in another encoding) reaches Python as text holding lone
    surrogates (``"runs\udcff"``); in a CSV cell or a report it is written as that escape (``runs\\udcff``), so the
    file stays UTF-8 and readable, instead of the write failing (JSON writes the same escape by itself)."""
    return atomic_write_bytes(path, text.encode("utf-8", errors="backslashreplace"))


def json_default(obj: Any) -> Any:
    try:
        import numpy as np

        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:  # pragma: no cover
        pass
    try:
        import torch

        if isinstance(obj, torch.Tensor):
            return obj.detach().cpu().tolist()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _sanitize(obj: Any) -> Any:
    """Replace non-finite floats by strings ("nan", "inf", "-inf") so the JSON stays standard."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: _sanitize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_sanitize(v) for v in obj]
    return obj


def revive_nonfinite(obj: Any) -> Any:
    """The inverse of what :func:`atomic_write_json` does to non-finite floats: the strings ``"nan"``, ``"inf"``
    and ``"-inf"`` (in mappings and lists, at any depth) become floats again."""
    if isinstance(obj, str) and obj in ("nan", "inf", "-inf"):
        return float(obj)
    if isinstance(obj, dict):
        return {k: revive_nonfinite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [revive_nonfinite(v) for v in obj]
    return obj


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as indented, standard JSON atomically (NaN/inf become strings)."""
    text = json.dumps(_sanitize(json.loads(json.dumps(obj, default=json_default))), indent=2, sort_keys=False)
    return atomic_write_text(path, text + "\n")


def atomic_write_csv(path: str | Path, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> Path:
    """Write ``rows`` (a list of mappings) as CSV atomically; columns default to first-seen key order."""
    if columns is None:
        columns = []
        for row in rows:
            for key in row:
                if key not in columns:
                    columns.append(key)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row)
    return atomic_write_text(path, buf.getvalue())


def save_config(cfg: Any, path: str | Path) -> Path:
    """Write the resolved config ``cfg`` (a config dataclass) as JSON, atomically, and return the path.

    The file holds ``{"config_class": <class name>, "config": to_dict(cfg)}``; read it back with
    :func:`initlab.config.load_config`.
    """
    return atomic_write_json(path, {"config_class": type(cfg).__name__, "config": to_dict(cfg)})
