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
import stat
import tempfile
import time
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from initlab.config import to_dict
from initlab.textio import read_json

__all__ = [
    "RunExistsError",
    "ConfigMismatchError",
    "NonFiniteError",
    "check_finite",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_json",
    "atomic_write_csv",
    "save_config",
    "RunDir",
    "check_same_record",
    "check_output_path",
    "OutputPathError",
    "torch_threads",
    "cell_file",
    "revive_nonfinite",
]


class RunExistsError(FileExistsError):
    """The output folder already holds a finished run (``DONE``) and overwrite was not requested."""


class ConfigMismatchError(RunExistsError, ValueError):
    """A resumed run (or one of its cells) was started with a different config than the one saved.

    The one exception of initlab's config guard: it subclasses :class:`RunExistsError` (the base every
    "refuse to mix results" error uses) and ``ValueError`` (what the earlier LRA guard raised), so
    callers catching either keep working.
    """


class NonFiniteError(FloatingPointError):
    """A training loss or gradient became NaN or infinite.

    Attributes:
        where: the training loop (e.g. ``"synthetic SPT pretrain"``).
        step: the optimisation step (0-based) at which the non-finite value appeared.
        what: ``"loss"`` or ``"gradient"``.
        last_checkpoint: the last checkpoint written with finite weights, or None.
    """

    def __init__(self, where: str, step: int, what: str = "loss", value: float | None = None,
                 last_checkpoint: str | Path | None = None):
        self.where, self.step, self.what, self.value = where, int(step), what, value
        self.last_checkpoint = None if last_checkpoint is None else str(last_checkpoint)
        ckpt = self.last_checkpoint or "none written"
        super().__init__(f"{where}: non-finite {what} ({value}) at step {step}; training stopped. "
                         f"Last finite checkpoint: {ckpt}. Lower the learning rate or check the inputs.")


def check_finite(value: Any, *, where: str, step: int, what: str = "loss",
                 last_checkpoint: str | Path | None = None) -> float:
    """Return ``float(value)`` or raise :class:`NonFiniteError` if it is NaN or infinite.

    ``value`` is a Python number or a 0-d tensor (a loss, or a gradient norm for ``what="gradient"``).
    """
    v = float(value.detach()) if hasattr(value, "detach") else float(value)
    if not math.isfinite(v):
        raise NonFiniteError(where, step, what, v, last_checkpoint)
    return v


def _current_umask() -> int:
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
        return 0o666 & ~_current_umask()


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file + ``os.replace``); parents are created.

    The file gets the permissions a normal write would give (those of the file it replaces, else
    ``0o666`` minus the umask), not the 0600 of a private temporary file.
    """
    path = Path(path)
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


def save_config(cfg: Any, path: str | Path) -> Path:
    """Write the resolved config ``cfg`` (a config dataclass) as JSON, atomically, and return the path.

    The file holds ``{"config_class": <class name>, "config": to_dict(cfg)}``; read it back with
    :func:`initlab.config.load_config`.
    """
    return atomic_write_json(path, {"config_class": type(cfg).__name__, "config": to_dict(cfg)})


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

    def __init__(self, root: str | Path, *, overwrite: bool = False, resume: bool = True, config: Any = None,
                 config_name: str = "config.json"):
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
        self.config_record: dict[str, Any] | None = None
        if config is not None:
            self.bind_config(config, config_name)

    # -- the config guard -------------------------------------------------------------------
    def bind_config(self, cfg: Any, name: str = "config.json") -> Path:
        """Tie this run to ``cfg`` (a config dataclass or a JSON-able mapping).

        A fresh folder gets ``name`` written (resolved config as JSON); a resumed one must hold the same
        config, else :class:`ConfigMismatchError` names the differing keys and nothing is written.
        """
        record = _config_record(cfg)
        path = self.root / name
        check_same_record(path, record, what="config")
        if not path.exists():
            if is_dataclass(cfg):
                self.write_config(cfg, name)
            else:
                atomic_write_json(path, record)
        self.config_record = record
        return path

    # -- files -------------------------------------------------------------------------------
    def path(self, *parts: str) -> Path:
        p = self.root.joinpath(*parts)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def write_config(self, cfg: Any, name: str = "config.json") -> Path:
        return save_config(cfg, self.root / name)

    def write_json(self, name: str, obj: Any) -> Path:
        return atomic_write_json(self.root / name, obj)

    def write_csv(self, name: str, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> Path:
        return atomic_write_csv(self.root / name, rows, columns)

    # -- resumable cells ----------------------------------------------------------------------
    def _cell_path(self, name: str) -> Path:
        return cell_file(self.root, name)

    def has_cell(self, name: str, key: Any = None) -> bool:
        """True if cell ``name`` is finished. With ``key`` (the cell's own config, JSON-able), a finished
        cell computed under another key raises :class:`ConfigMismatchError` instead of being reused."""
        path = self._cell_path(name)
        if not path.exists():
            return False
        if key is not None:
            self._check_cell_key(name, path, key)
        return True

    def load_cell(self, name: str, key: Any = None) -> Any:
        """The saved result of cell ``name`` (checked against ``key`` as in :meth:`has_cell`)."""
        path = self._cell_path(name)
        if key is not None:
            self._check_cell_key(name, path, key)
        return read_json(path)

    def save_cell(self, name: str, result: Any, key: Any = None) -> Path:
        """Write the result of cell ``name`` atomically; with ``key``, record the cell's config beside it
        (``cells/<name>.key``) so a resume under another config is refused."""
        if key is not None:
            atomic_write_json(self._key_path(name), _config_record(key))
        return atomic_write_json(self._cell_path(name), result)

    def _key_path(self, name: str) -> Path:
        return self._cell_path(name).with_suffix(".key")

    def _check_cell_key(self, name: str, path: Path, key: Any) -> None:
        want = _config_record(key)
        kpath = self._key_path(name)
        saved = read_json(kpath) if kpath.exists() else None
        if saved != want:
            keys = (sorted(k for k in set(saved) | set(want) if saved.get(k) != want.get(k))
                    if isinstance(saved, dict) and isinstance(want, dict) else [])
            raise ConfigMismatchError(
                f"{self.root}: cell {name!r} was computed under a different config "
                f"(differs in: {', '.join(keys) or 'no saved config'}); choose another --out or pass --overwrite "
                "(the old folder is then moved aside)")

    def cells(self) -> Iterable[str]:
        return sorted(p.stem for p in (self.root / "cells").glob("*.json"))

    def mark_done(self) -> None:
        atomic_write_text(self.root / "DONE", time.strftime("%Y-%m-%dT%H:%M:%S") + "\n")

    @property
    def done(self) -> bool:
        return (self.root / "DONE").exists()


def cell_file(root: str | Path, name: str) -> Path:
    """Where :class:`RunDir` ``root`` keeps the result of cell ``name`` (``cells/<name>.json``, the name with
    characters other than letters, digits and ``-_.=`` replaced by ``_``); reading it creates nothing."""
    safe = "".join(c if (c.isalnum() or c in "-_.=") else "_" for c in name)
    return Path(root) / "cells" / f"{safe}.json"


def _config_record(cfg: Any) -> Any:
    """A config dataclass or mapping as plain JSON data (tuples become lists)."""
    if is_dataclass(cfg) and not isinstance(cfg, type):
        cfg = to_dict(cfg)
    return json.loads(json.dumps(cfg, default=_json_default))


def check_same_record(path: str | Path, record: Mapping[str, Any], what: str = "config") -> None:
    """Refuse to mix results: if ``path`` (a JSON file) exists and holds something other than ``record``,
    raise :class:`RunExistsError` naming the differing keys; if it is missing, do nothing.

    ``record`` is compared after a JSON round trip (tuples become lists). A file written by
    :func:`save_config` is compared through its ``"config"`` entry.
    """
    path = Path(path)
    if not path.exists():
        return
    try:
        saved = read_json(path)
    except ValueError:  # not JSON, or not UTF-8
        raise ConfigMismatchError(f"{path}: unreadable {what} record; choose another --out or pass --overwrite") from None
    if isinstance(saved, dict) and "config" in saved and "config_class" in saved:
        saved = saved["config"]
    want = json.loads(json.dumps(record, default=_json_default))
    if saved != want:
        keys = sorted(k for k in set(saved) | set(want) if saved.get(k) != want.get(k)) if isinstance(saved, dict) else []
        raise ConfigMismatchError(
            f"{path.parent} holds results of a different {what} (differs in: {', '.join(keys) or 'content'}); "
            "choose another --out or pass --overwrite (the old folder is then moved aside)"
        )


class OutputPathError(ValueError):
    """An output path (``--out`` / ``--json``) that no run may write to (see :func:`check_output_path`)."""


def check_output_path(path: str | Path | None, *, flag: str, kind: str = "folder", overwrite: bool = False) -> Path | None:
    """The one output-path rule of every initlab command, checked before any work starts.

    * ``kind="file"`` (``--json PATH``, a single result file): the parent folder must already exist
      (no folders are created for a file); ``PATH`` must not be a folder; an existing file is replaced
      only with ``overwrite`` (else :class:`RunExistsError`).
    * ``kind="folder"`` (``--out DIR``, a run folder): ``DIR`` must not be an existing file; missing
      folders are created when the run starts; a finished run in it (``DONE``) is refused unless
      ``overwrite``, which moves the old folder aside (:class:`RunDir`).

    Returns ``Path(path)`` (None for None).

    Raises:
        OutputPathError: a folder where a file is expected, a file where a folder is expected, or a
            missing parent folder of a file.
        RunExistsError: the file exists, or the folder holds a finished run, and not ``overwrite``.
        ValueError: unknown ``kind``.
    """
    if path is None:
        return None
    path = Path(path)
    if kind == "file":
        if path.is_dir():
            raise OutputPathError(f"{flag} {path}: is a folder; expected a file path")
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            raise OutputPathError(f"{flag} {path}: folder {parent} does not exist (create it first; initlab "
                                  "creates folders only for run folders, not for single files)")
        if path.exists() and not overwrite:
            raise RunExistsError(f"{flag} {path}: file exists; choose another path or pass --overwrite to replace it")
    elif kind == "folder":
        if path.exists() and not path.is_dir():
            raise OutputPathError(f"{flag} {path}: exists and is a file; expected a folder (choose another {flag})")
        for up in path.parents:  # a file in the way of a folder to be created
            if up.exists() and not up.is_dir():
                raise OutputPathError(f"{flag} {path}: {up} is a file, so the folder cannot be created")
        if (path / "DONE").exists() and not overwrite:
            raise RunExistsError(f"{flag} {path}: already holds a finished run; choose another {flag} or pass "
                                 "--overwrite (the old folder is then moved aside, not deleted)")
    else:
        raise ValueError(f"kind: expected 'file' or 'folder', got {kind!r}")
    return path


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
