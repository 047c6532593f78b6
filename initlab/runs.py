"""Run folders: atomic writes, resolved configs, finished-run guards, resumable cells.

Conventions every initlab run follows:

* results are written atomically (temporary file in the same folder, then ``os.replace``), so an
  interrupted run never leaves a half-written JSON/CSV behind;
* a finished run folder holds ``DONE``; starting a run into it raises :class:`RunExistsError` unless
  the caller asks to ``overwrite`` (then the folder's old results are moved aside, never mixed);
* long sweeps are made of *cells* (one seed of one condition, one grid point); each finished cell
  writes ``cells/<name>.json`` and a resumed run skips those.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

__all__ = [
    "RunExistsError",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_json",
    "atomic_write_csv",
    "RunDir",
    "check_same_record",
    "torch_threads",
]


class RunExistsError(FileExistsError):
    """The output folder already holds a finished run (``DONE``) and overwrite was not requested."""


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file + ``os.replace``); parents are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
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
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def _json_default(obj: Any) -> Any:
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


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as indented, standard JSON atomically (NaN/inf become strings)."""
    text = json.dumps(_sanitize(json.loads(json.dumps(obj, default=_json_default))), indent=2, sort_keys=False)
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


class RunDir:
    """An output folder for one run.

    Args:
        root: the folder (created if missing).
        overwrite: if the folder holds a finished run, move it aside to ``<root>.old-<timestamp>``
            and start fresh. Without it a finished run raises :class:`RunExistsError`.
        resume: keep finished cells of an unfinished run (default). ``False`` with an unfinished,
            non-empty folder raises :class:`RunExistsError` too.

    Raises:
        RunExistsError: see above.
        NotADirectoryError: ``root`` exists and is a file.
    """

    def __init__(self, root: str | Path, *, overwrite: bool = False, resume: bool = True):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise NotADirectoryError(f"output path {self.root} exists and is not a folder")
        finished = (self.root / "DONE").exists()
        nonempty = self.root.exists() and any(self.root.iterdir())
        if (finished or (nonempty and not resume)) and not overwrite:
            what = "a finished run" if finished else "files from another run"
            raise RunExistsError(
                f"{self.root} already holds {what}; choose another --out or pass --overwrite "
                "(the old folder is then moved aside, not deleted)"
            )
        if (finished or nonempty) and overwrite:
            aside = self.root.with_name(f"{self.root.name}.old-{time.strftime('%Y%m%d-%H%M%S')}")
            shutil.move(str(self.root), str(aside))
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "cells").mkdir(exist_ok=True)

    # -- files -------------------------------------------------------------------------------
    def path(self, *parts: str) -> Path:
        p = self.root.joinpath(*parts)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def write_config(self, cfg: Any, name: str = "config.json") -> Path:
        from initlab.config import save_config

        return save_config(cfg, self.root / name)

    def write_json(self, name: str, obj: Any) -> Path:
        return atomic_write_json(self.root / name, obj)

    def write_csv(self, name: str, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> Path:
        return atomic_write_csv(self.root / name, rows, columns)

    # -- resumable cells ----------------------------------------------------------------------
    def _cell_path(self, name: str) -> Path:
        safe = "".join(c if (c.isalnum() or c in "-_.=") else "_" for c in name)
        return self.root / "cells" / f"{safe}.json"

    def has_cell(self, name: str) -> bool:
        return self._cell_path(name).exists()

    def load_cell(self, name: str) -> Any:
        return json.loads(self._cell_path(name).read_text())

    def save_cell(self, name: str, result: Any) -> Path:
        return atomic_write_json(self._cell_path(name), result)

    def cells(self) -> Iterable[str]:
        return sorted(p.stem for p in (self.root / "cells").glob("*.json"))

    def mark_done(self) -> None:
        atomic_write_text(self.root / "DONE", time.strftime("%Y-%m-%dT%H:%M:%S") + "\n")

    @property
    def done(self) -> bool:
        return (self.root / "DONE").exists()


def check_same_record(path: str | Path, record: Mapping[str, Any], what: str = "config") -> None:
    """Refuse to mix results: if ``path`` (a JSON file) exists and holds something other than ``record``,
    raise :class:`RunExistsError` naming the differing keys; if it is missing, do nothing.

    ``record`` is compared after a JSON round trip (tuples become lists). A file written by
    :func:`initlab.config.save_config` is compared through its ``"config"`` entry.
    """
    path = Path(path)
    if not path.exists():
        return
    try:
        saved = json.loads(path.read_text())
    except json.JSONDecodeError:
        raise RunExistsError(f"{path}: unreadable {what} record; choose another --out or pass --overwrite") from None
    if isinstance(saved, dict) and "config" in saved and "config_class" in saved:
        saved = saved["config"]
    want = json.loads(json.dumps(record, default=_json_default))
    if saved != want:
        keys = sorted(k for k in set(saved) | set(want) if saved.get(k) != want.get(k)) if isinstance(saved, dict) else []
        raise RunExistsError(
            f"{path.parent} holds results of a different {what} (differs in: {', '.join(keys) or 'content'}); "
            "choose another --out or pass --overwrite (the old folder is then moved aside)"
        )


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block with ``torch.set_num_threads(n)`` and restore the previous count afterwards.

    The CPU runs use few intra-op threads on purpose: on small tensors extra threads only add
    synchronisation cost (measured on 2 shared cores: a ``(3, 6, 6)`` softmax took 20 ms instead of
    5 us, an SPT training step 13x longer).
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
