"""Run folders: atomic writes, resolved configs, finished-run guards, resumable cells.

Conventions every initlab run follows:

* results are written atomically (temporary file in the same folder, then ``os.replace``), so an
  interrupted run never leaves a half-written JSON/CSV behind;
* a finished run folder holds ``DONE``; starting a run into it raises :class:`RunExistsError` unless
  the caller asks to ``overwrite`` (then the folder's old results are moved aside, never mixed);
* long sweeps are made of *cells* (one seed of one condition, one grid point); each finished cell
  writes ``cells/<name>.json`` and a resumed run skips those;
* a live run owns its folder (:func:`run_lock`): a second run into the same folder, started while the first is
  alive, is refused (:class:`RunLockedError`), whether or not it asks to overwrite.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import functools
import inspect
import io
import json
import math
import os
import shutil
import socket
import stat
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from initlab.config import to_dict
from initlab.textio import read_json

__all__ = [
    "RunExistsError",
    "ConfigMismatchError",
    "RunLockedError",
    "RunLock",
    "run_lock",
    "holds_run_folder",
    "lock_path",
    "check_unlocked",
    "process_start_time",
    "LOCK_HEARTBEAT_SECONDS",
    "FOREIGN_LOCK_STALE_SECONDS",
    "NonFiniteError",
    "DivergenceError",
    "check_finite",
    "LossGuard",
    "DIVERGENCE_FACTOR",
    "DIVERGENCE_FLOOR",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_json",
    "atomic_write_csv",
    "save_config",
    "RunDir",
    "check_same_record",
    "fingerprint_file",
    "check_inputs",
    "INPUTS_FILE",
    "check_output_path",
    "OutputPathError",
    "check_input_path",
    "InputPathError",
    "WriteError",
    "disk_cause",
    "write_error",
    "check_writable",
    "unreadable_file",
    "file_where_folder_expected",
    "folder_where_file_expected",
    "torch_threads",
    "cell_file",
    "revive_nonfinite",
    "rank_seed",
    "RANK_STRIDE",
]


class RunExistsError(FileExistsError):
    """The output folder already holds a finished run (``DONE``) and overwrite was not requested."""


class ConfigMismatchError(RunExistsError, ValueError):
    """A resumed run (or one of its cells) was started with a different config than the one saved.

    The one exception of initlab's config guard: it subclasses :class:`RunExistsError` (the base every
    "refuse to mix results" error uses) and ``ValueError`` (what the earlier LRA guard raised), so
    callers catching either keep working.
    """


class RunLockedError(RunExistsError):
    """The run folder is in use by a live run (another process holds its lock, :func:`run_lock`)."""


class NonFiniteError(FloatingPointError):
    """A training loss or gradient became NaN or infinite.

    Attributes:
        where: the training loop (e.g. ``"synthetic SPT pretrain"``).
        step: the optimisation step (0-based) at which the non-finite value appeared.
        what: ``"loss"`` or ``"gradient"``.
        value: the offending value (a float; NaN or +-inf here, finite for :class:`DivergenceError`).
        last_checkpoint: the last checkpoint written with finite weights, or None.

    Instances pickle (a worker process can send one back to its parent).
    """

    def __init__(self, where: str, step: int, what: str = "loss", value: float | None = None,
                 last_checkpoint: str | Path | None = None):
        self.where, self.step, self.what, self.value = where, int(step), what, value
        self.last_checkpoint = None if last_checkpoint is None else str(last_checkpoint)
        super().__init__(self._message())

    def _message(self) -> str:
        ckpt = self.last_checkpoint or "none written"
        return (f"{self.where}: non-finite {self.what} ({self.value}) at step {self.step}; training stopped. "
                f"Last finite checkpoint: {ckpt}. Lower the learning rate or check the inputs.")

    def __reduce__(self):
        return (type(self), (self.where, self.step, self.what, self.value, self.last_checkpoint))

    def with_checkpoint(self, last_checkpoint: str | Path | None) -> "NonFiniteError":
        """The same error naming ``last_checkpoint`` (for loops that look the checkpoint up only on failure)."""
        cls, args = self.__reduce__()
        return cls(*args[:-1], last_checkpoint)


#: The divergence rule (docs/conventions.md, "NaN and divergence policy"): a training loss larger than
#: ``DIVERGENCE_FACTOR`` times its early value stops the run. 10^4 because no training loss of this
#: package grows that much in a run that trains (cross-entropies start near ln(#classes) and a confidently
#: wrong prediction costs tens of nats; the SPLADE totals add FLOPS terms whose weights ramp up from 0: at most
#: 2.7 times the first logged total in the cells of ``initlab synthetic splade --preset quick``), while a run
#: that blew up does (the toy LRA model at lr = 1e3: 3.1 at step 0, 2.4e6 at step 1, then 1e7-1e8, finite on
#: some CPUs and NaN on others).
DIVERGENCE_FACTOR = 1e4
#: The early value is floored at this (loss units; nats for cross-entropies), so a run that starts near
#: zero loss (a resumed or almost solved fine-tuning) is not stopped for rising to a few nats.
DIVERGENCE_FLOOR = 1.0


class DivergenceError(NonFiniteError):
    """A training loss stayed finite but grew past :data:`DIVERGENCE_FACTOR` times its early value.

    A subclass of :class:`NonFiniteError`, so every loop, sweep and command treats it the same way (no
    ``DONE``, no model, exit 1, a sweep cell marked failed). ``what`` is ``"loss"``; ``early`` is the early
    value the rule compared with (floored at :data:`DIVERGENCE_FLOOR`), ``factor`` the rule's factor.
    """

    def __init__(self, where: str, step: int, value: float, early: float, factor: float = DIVERGENCE_FACTOR,
                 last_checkpoint: str | Path | None = None):
        self.early, self.factor = float(early), float(factor)
        super().__init__(where, step, "loss", float(value), last_checkpoint)

    def _message(self) -> str:
        ckpt = self.last_checkpoint or "none written"
        return (f"{self.where}: loss diverged ({self.value:.4g} at step {self.step}, more than {self.factor:g} times "
                f"its early value {self.early:.4g}); training stopped. Last finite checkpoint: {ckpt}. Lower the "
                "learning rate or check the inputs.")

    def __reduce__(self):
        return (type(self), (self.where, self.step, self.value, self.early, self.factor, self.last_checkpoint))


def _as_floats(value: Any) -> list[float]:
    """A Python number or a tensor (any shape) as a list of floats."""
    if hasattr(value, "detach"):
        return [float(v) for v in value.detach().float().reshape(-1).cpu().tolist()]
    return [float(value)]


def check_finite(value: Any, *, where: str, step: int, what: str = "loss",
                 last_checkpoint: str | Path | None = None) -> float:
    """Return ``float(value)`` or raise :class:`NonFiniteError` if it is NaN or infinite.

    ``value`` is a Python number or a 0-d tensor (a loss, or a gradient norm for ``what="gradient"``).
    """
    v = float(value.detach()) if hasattr(value, "detach") else float(value)
    if not math.isfinite(v):
        raise NonFiniteError(where, step, what, v, last_checkpoint)
    return v


class LossGuard:
    """The NaN and divergence guard of one training loop's loss, checked before each optimizer step.

    ``check(loss, step=...)`` raises :class:`NonFiniteError` when any element of ``loss`` is NaN/inf and
    :class:`DivergenceError` when an element exceeds ``factor`` times its *early value*: that element's
    absolute value at the first call (the loss of the weights the run starts from; a resumed run starts a new
    reference), floored at ``floor``. ``loss`` is a number or a tensor of any shape whose elements are
    separate losses (one per ensemble member, say), each with its own early value. The first call fixes the
    shape. Under DDP pass the loss summed over ranks, so every rank reaches the same verdict.

    Args:
        where: the training loop, as named in the error (e.g. ``"LRA SPT listops"``).
        factor: the growth that stops a run (default :data:`DIVERGENCE_FACTOR`); ``None`` checks finiteness only.
        floor: the smallest early value (default :data:`DIVERGENCE_FLOOR`).

    Raises:
        ValueError: ``factor`` not > 1 or ``floor`` not > 0.
    """

    def __init__(self, where: str, *, factor: float | None = DIVERGENCE_FACTOR, floor: float = DIVERGENCE_FLOOR):
        if factor is not None and not (math.isfinite(factor) and factor > 1):
            raise ValueError(f"factor: expected a finite number > 1 or None, got {factor!r}")
        if not (math.isfinite(floor) and floor > 0):
            raise ValueError(f"floor: expected a finite number > 0, got {floor!r}")
        self.where, self.factor, self.floor = where, factor, float(floor)
        self.early: list[float] | None = None

    def verdict(self, value: Any, *, step: int, last_checkpoint: str | Path | None = None) -> NonFiniteError | None:
        """The error :meth:`check` would raise for ``value`` at ``step``, or None (the early value is then set
        if this is the first finite call). For loops that must agree on a verdict before raising (DDP)."""
        vals = _as_floats(value)
        bad = [v for v in vals if not math.isfinite(v)]
        if bad:
            return NonFiniteError(self.where, step, "loss", bad[0], last_checkpoint)
        if self.early is None:
            self.early = [max(abs(v), self.floor) for v in vals]
            return None
        if len(vals) != len(self.early):
            raise ValueError(f"{self.where}: LossGuard got {len(vals)} losses at step {step}, {len(self.early)} at its "
                             "first step")
        if self.factor is not None:
            for v, e in zip(vals, self.early):
                if abs(v) > self.factor * e:
                    return DivergenceError(self.where, step, v, e, self.factor, last_checkpoint)
        return None

    def check(self, value: Any, *, step: int, last_checkpoint: str | Path | None = None) -> float:
        """Return the sum of ``value``'s elements as a float, or raise (see the class docstring)."""
        err = self.verdict(value, step=step, last_checkpoint=last_checkpoint)
        if err is not None:
            raise err
        return float(sum(_as_floats(value)))


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

    The run's process holds the folder's lock (:func:`run_lock`) around its use of a ``RunDir``; the workers that
    save cells into it do not. ``overwrite`` never moves aside a folder that a live run of another process holds.

    Raises:
        RunExistsError: see above.
        RunLockedError: ``overwrite`` would move aside a folder a live run holds.
        OutputPathError: ``root`` exists and is a file (also a ``NotADirectoryError``).
        WriteError: the folder cannot be created or moved aside (read-only file system, full disk, ...).
    """

    def __init__(self, root: str | Path, *, overwrite: bool = False, resume: bool = True, config: Any = None,
                 config_name: str = "config.json"):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise OutputPathError(file_where_folder_expected(self.root, "output folder"))
        finished = (self.root / "DONE").exists()
        nonempty = self.root.exists() and any(self.root.iterdir())
        if (finished or (nonempty and not resume)) and not overwrite:
            what = "a finished run" if finished else "files from another run"
            raise RunExistsError(
                f"{self.root} already holds {what}; choose another --out or pass --overwrite "
                "(the old folder is then moved aside, not deleted)"
            )
        if (finished or nonempty) and overwrite:
            check_unlocked(self.root)  # never move aside the folder of a live run
        try:
            if (finished or nonempty) and overwrite:
                aside = self.root.with_name(f"{self.root.name}.old-{time.strftime('%Y%m%d-%H%M%S')}")
                shutil.move(str(self.root), str(aside))
            self.root.mkdir(parents=True, exist_ok=True)
            (self.root / "cells").mkdir(exist_ok=True)
        except OSError as err:
            wrapped = write_error(err, self.root)
            if wrapped is None:
                raise
            raise wrapped from err
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
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            wrapped = write_error(err, p.parent)
            if wrapped is None:
                raise
            raise wrapped from err
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


# ------------------------------------------------------------------------------------------------
# the run-folder lock: a live run owns its folder
# ------------------------------------------------------------------------------------------------
#: a held lock's file is touched this often (seconds), so a run on another host can tell it is alive
LOCK_HEARTBEAT_SECONDS = 60.0
#: a lock written on another host is stale when its file has not been touched for this long (seconds): ten
#: heartbeats missed. A lock of this host is stale as soon as its process is gone (pid, and its start time).
FOREIGN_LOCK_STALE_SECONDS = 600.0

_HELD: dict[str, "RunLock"] = {}  # the locks this process holds, by lock-file path (re-entrant)
_HELD_GUARD = threading.Lock()


def lock_path(folder: str | Path) -> Path:
    """The lock file of run folder ``folder``: ``.<name>.initlab-lock`` beside it (in its parent), so that moving
    a finished folder aside (``--overwrite``) never moves the lock of the run that does it."""
    folder = Path(os.path.realpath(Path(folder).expanduser()))  # one lock whichever way the folder is spelled
    return folder.parent / f".{folder.name or 'root'}.initlab-lock"


def _ddp_rank() -> int:
    """This process's rank in a torchrun/accelerate job (``RANK``), 0 outside one. Only rank 0 of a job takes and
    checks the lock: the job's processes share its folder by design."""
    try:
        return int(os.environ.get("RANK", "0") or 0)
    except ValueError:
        return 0


def process_start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, /proc/PID/stat field 22), or None where unknown:
    with the pid, it names one process, so a pid reused after a reboot or wrap-around is not taken for the run."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
        return raw.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    except OSError:
        return False
    return True


def _lock_record() -> dict[str, Any]:
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "process_start": process_start_time(pid),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": " ".join(sys.argv)[:300]}


def _read_lock(path: Path) -> tuple[dict[str, Any] | None, float | None]:
    """``(record, mtime)`` of lock file ``path``; ``(None, None)`` when it is gone, ``({}, mtime)`` when unreadable."""
    try:
        st = os.stat(path)
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        return None, None
    try:
        rec = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        rec = {}
    return (rec if isinstance(rec, dict) else {}), st.st_mtime


def _stale_reason(rec: dict[str, Any], mtime: float) -> str | None:
    """Why the lock ``rec`` (file touched at ``mtime``) is stale, or None while its run may be alive.

    The rule: a lock of this host is stale when its process is gone (no process with its pid, or one started at
    another time: the pid was reused); a lock of another host (its process cannot be seen from here), or one that
    cannot be read, is stale when its file has not been touched for :data:`FOREIGN_LOCK_STALE_SECONDS` (a live
    run touches it every :data:`LOCK_HEARTBEAT_SECONDS`).
    """
    pid, host = rec.get("pid"), rec.get("host")
    if isinstance(pid, int) and host == socket.gethostname():
        if not _pid_alive(pid):
            return f"its process {pid} is gone"
        start = rec.get("process_start")
        now = process_start_time(pid)
        if start is not None and now is not None and start != now:
            return f"its pid {pid} now belongs to another process"
        return None
    age = time.time() - mtime
    if age > FOREIGN_LOCK_STALE_SECONDS:
        return f"not refreshed for {age / 60:.0f} min (more than {FOREIGN_LOCK_STALE_SECONDS / 60:.0f} min)"
    return None


def _holder(rec: dict[str, Any]) -> str:
    if not rec:
        return "a run whose lock cannot be read"
    return f"pid {rec.get('pid')} on host {rec.get('host')}, started {rec.get('started')}"


def _locked_error(folder: Path, lp: Path, rec: dict[str, Any], flag: str | None) -> RunLockedError:
    name = f"{flag} {folder}" if flag else str(folder)
    return RunLockedError(
        f"{name}: in use by a live run ({_holder(rec)}; lock {lp}); wait for it to end or choose another "
        f"{flag or 'output folder'} (a lock whose run died is taken over: on this host once its process is gone, "
        f"from another host after {FOREIGN_LOCK_STALE_SECONDS / 60:.0f} min without a refresh)")


class RunLock:
    """The lock of one run folder, held by this process while its run is alive (:func:`run_lock`).

    Under torchrun or accelerate only rank 0 (``RANK``) takes it: the job's ranks share the folder by design.

    The lock is a file beside the folder (:func:`lock_path`) holding ``pid``, ``host``, the process start time,
    ``started`` and the command; it is created atomically (a complete file hard-linked into place, or created
    exclusively where links are not supported), touched every :data:`LOCK_HEARTBEAT_SECONDS` by a daemon thread,
    and removed by :meth:`release`. A stale lock (:func:`_stale_reason`) is taken over with a warning naming its
    holder; taking over is itself exclusive (a ``.break`` file), so two runs starting on one stale lock do not both
    win.
    """

    def __init__(self, folder: str | Path, *, flag: str | None = None):
        self.folder = Path(folder)
        self.path = lock_path(folder)
        self.flag = flag
        self.count = 0
        self.owner = None
        self.created: list[Path] = []  # parent folders the lock had to create (removed again if left empty)
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def _create(self) -> bool:
        """Create the lock file with this process's record; False when one exists."""
        data = json.dumps(_lock_record()).encode("utf-8")
        fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:  # no fsync: a lock emptied by a crash is judged by its age
                fh.write(data)
            try:
                os.link(tmp, self.path)  # atomic, and the file is complete when it appears
                return True
            except FileExistsError:
                return False
            except OSError as err:  # a filesystem without hard links: exclusive create, then write
                if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                    raise
                try:
                    lfd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                except FileExistsError:
                    return False
                with os.fdopen(lfd, "wb") as fh:
                    fh.write(data)
                return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def _break_stale(self, rec: dict[str, Any], mtime: float, why: str) -> None:
        """Remove the stale lock ``rec`` (exclusively: one process takes over); RunLockedError if another process is
        taking it over now or it changed in between."""
        breaker = self.path.with_name(self.path.name + ".break")
        try:
            fd = os.open(breaker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            raise RunLockedError(
                f"{self.flag + ' ' if self.flag else ''}{self.folder}: another run is taking over its stale lock now "
                f"({breaker} exists; if no initlab run is starting there, remove that file)") from None
        try:
            os.close(fd)
            again, mtime2 = _read_lock(self.path)
            if again == rec and mtime2 == mtime:
                os.unlink(self.path)
            elif again is not None:
                raise _locked_error(self.folder, self.path, again, self.flag)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(breaker)
        warnings.warn(f"{self.folder}: took over the lock of an earlier run ({_holder(rec)}), stale: {why}",
                      RuntimeWarning, stacklevel=4)

    def acquire(self) -> "RunLock":
        """Hold the lock (re-entrant in this process); returns ``self``.

        Raises:
            RunLockedError: a live run (another process) holds it.
            WriteError: the lock cannot be written (read-only file system, full disk).
        """
        if _ddp_rank() > 0:  # the job's rank 0 holds it
            return self
        with _HELD_GUARD:
            held = _HELD.get(str(self.path))
            if held is not None and held.owner == os.getpid():
                held.count += 1
                return held
            try:
                self.created = [p for p in (self.path.parent, *self.path.parent.parents) if not p.exists()][::-1]
                self.path.parent.mkdir(parents=True, exist_ok=True)
                for _ in range(3):
                    if self._create():
                        break
                    rec, mtime = _read_lock(self.path)
                    if rec is None:
                        continue  # released in between: try again
                    if rec.get("pid") == os.getpid() and rec.get("host") == socket.gethostname() and \
                            rec.get("process_start") == process_start_time(os.getpid()):
                        break  # ours, from a lock this process did not release (a forked parent's is not ours)
                    why = _stale_reason(rec, mtime)
                    if why is None:
                        raise _locked_error(self.folder, self.path, rec, self.flag)
                    self._break_stale(rec, mtime, why)
                else:
                    rec, _ = _read_lock(self.path)
                    raise _locked_error(self.folder, self.path, rec or {}, self.flag)
            except BaseException as err:
                self._remove_created()  # a refused run leaves no folder behind
                wrapped = write_error(err, self.path) if isinstance(err, OSError) else None
                if wrapped is None:
                    raise
                raise wrapped from err
            self.owner, self.count = os.getpid(), 1
            _HELD[str(self.path)] = self
            self._stop.clear()
            self._beat = threading.Thread(target=self._heartbeat, name=f"initlab lock {self.folder}", daemon=True)
            self._beat.start()
            return self

    def _remove_created(self) -> None:
        """Remove the parent folders the lock created, where they are still empty."""
        for folder in reversed(getattr(self, "created", [])):
            try:
                folder.rmdir()
            except OSError:
                break

    def _heartbeat(self) -> None:
        while not self._stop.wait(LOCK_HEARTBEAT_SECONDS):
            with contextlib.suppress(OSError):
                os.utime(self.path)

    def release(self) -> None:
        """Release one hold; the last removes the lock file (only in the process that took it)."""
        with _HELD_GUARD:
            if self.owner != os.getpid() or self.count <= 0:
                return
            self.count -= 1
            if self.count:
                return
            self._stop.set()
            _HELD.pop(str(self.path), None)
            rec, _ = _read_lock(self.path)
            if rec is not None and rec.get("pid") == os.getpid() and rec.get("host") == socket.gethostname():
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
            self._remove_created()
            self.owner = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


@contextlib.contextmanager
def run_lock(folder: str | Path, *, flag: str | None = None):
    """Hold the lock of run folder ``folder`` for the block: the one guard that keeps two live runs out of one folder.

    Every resumable run takes it before it reads or moves anything in its folder (and so before ``--overwrite``
    moves a finished run aside) and keeps it until it returns; the same process may take it again (nested runs,
    a stage inside ``initlab reproduce``). A second process asking for it while the first is alive gets
    :class:`RunLockedError` (one line: the folder, the holder's pid, host and start time, the lock file); a lock
    whose run died is taken over (:class:`RunLock`).

    Raises:
        RunLockedError, WriteError: see :meth:`RunLock.acquire`.
    """
    lock = RunLock(folder, flag=flag).acquire()
    try:
        yield lock
    finally:
        lock.release()


def holds_run_folder(arg: str):
    """Decorator: the function runs holding the lock of its run-folder argument ``arg`` (:func:`run_lock`), from its
    first line (before it reads, creates or moves anything there) to its return. ``arg`` None: no lock."""
    def deco(fn):
        sig = inspect.signature(fn)
        if arg not in sig.parameters:
            raise TypeError(f"{fn.__qualname__} has no argument {arg!r}")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            bound = sig.bind_partial(*args, **kwargs)
            folder = bound.arguments.get(arg, sig.parameters[arg].default)
            if folder is None or folder is inspect.Parameter.empty:
                return fn(*args, **kwargs)
            with run_lock(folder):
                return fn(*args, **kwargs)
        return wrapper
    return deco


def check_unlocked(folder: str | Path, *, flag: str | None = None) -> None:
    """Refuse (:class:`RunLockedError`) when a live run of another process holds ``folder``'s lock; a stale or
    missing lock, or one held by this process, passes. Takes no lock (the run does, :func:`run_lock`)."""
    if _ddp_rank() > 0:  # a torchrun job's other ranks share rank 0's folder
        return
    lp = lock_path(folder)
    rec, mtime = _read_lock(lp)
    if rec is None:
        return
    held = _HELD.get(str(lp))
    if held is not None and held.owner == os.getpid():
        return
    if rec.get("pid") == os.getpid() and rec.get("host") == socket.gethostname():
        return
    if _stale_reason(rec, mtime) is None:
        raise _locked_error(Path(folder), lp, rec, flag)


# ------------------------------------------------------------------------------------------------
# the inputs of a run: fingerprints recorded at its start, compared when it is resumed or reused
# ------------------------------------------------------------------------------------------------
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
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".initlab-"))


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


def file_where_folder_expected(path: str | Path, flag: str | None = None) -> str:
    """The one wording, everywhere, for a file given where a folder is expected (input or output):
    ``"--flag PATH: is a file; expected a folder"``."""
    return f"{flag + ' ' if flag else ''}{path}: is a file; expected a folder"


def folder_where_file_expected(path: str | Path, flag: str | None = None) -> str:
    """The one wording for a folder given where a file is expected: ``"--flag PATH: is a folder; expected a file"``."""
    return f"{flag + ' ' if flag else ''}{path}: is a folder; expected a file"


class OutputPathError(ValueError, NotADirectoryError):
    """An output path (``--out`` / ``--json``) that no run may write to (see :func:`check_output_path`).

    Also a ``NotADirectoryError`` (what :class:`RunDir` raised for a file in the way before)."""


class InputPathError(ValueError):
    """An input path (``--data-dir``, ``--texts``, a results folder, ...) that is missing or of the wrong kind
    (see :func:`check_input_path`)."""


def check_input_path(path: str | Path | None, *, flag: str, kind: str = "folder", what: str | None = None) -> Path | None:
    """The one input-path rule: ``path`` must exist and be a ``kind`` ("folder" or "file").

    ``what`` describes the expected content in the message (e.g. ``"a folder written by initlab reproduce"``).
    Returns ``Path(path)`` (None for None).

    Raises:
        InputPathError: ``path`` is missing, or a file where a folder is expected (or the reverse), with the
            wording of :func:`file_where_folder_expected` / :func:`folder_where_file_expected`.
        ValueError: unknown ``kind``.
    """
    if path is None:
        return None
    if kind not in ("folder", "file"):
        raise ValueError(f"kind: expected 'file' or 'folder', got {kind!r}")
    path = Path(path)
    tail = f" ({what})" if what else ""
    if not path.exists():
        raise InputPathError(f"{flag} {path}: no such {kind}{tail}")
    if kind == "folder" and not path.is_dir():
        raise InputPathError(file_where_folder_expected(path, flag) + tail)
    if kind == "file" and path.is_dir():
        raise InputPathError(folder_where_file_expected(path, flag) + tail)
    return path


def unreadable_file(path: str | Path, err: BaseException, expected: str) -> ValueError:
    """The one-line error for a file that exists but cannot be parsed (empty, truncated, another format):
    ``"PATH: not a readable EXPECTED (first line of the parser's message)"`` (text files: :mod:`initlab.textio`). Returned, to be raised
    ``from None`` (the parser's traceback says nothing the message does not)."""
    detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return ValueError(f"{path}: not a readable {expected} ({detail})")


def check_output_path(path: str | Path | None, *, flag: str, kind: str = "folder", overwrite: bool = False) -> Path | None:
    """The one output-path rule of every initlab command, checked before any work starts.

    * ``kind="file"`` (``--json PATH``, a single result file): the parent folder must already exist
      (no folders are created for a file); ``PATH`` must not be a folder; an existing file is replaced
      only with ``overwrite`` (else :class:`RunExistsError`).
    * ``kind="folder"`` (``--out DIR``, a run folder): ``DIR`` must not be an existing file; missing
      folders are created when the run starts; a folder a live run holds (:func:`run_lock`) is refused, with
      ``overwrite`` or not; a finished run in it (``DONE``) is refused unless ``overwrite``, which moves the old
      folder aside (:class:`RunDir`).

    * Both: the folder that will hold the output is checked writable (:func:`check_writable`: a probe file).

    Returns ``Path(path)`` (None for None).

    Raises:
        OutputPathError: a folder where a file is expected, a file where a folder is expected, or a
            missing parent folder of a file.
        RunExistsError: the file exists, or the folder holds a finished run, and not ``overwrite``.
        RunLockedError: a live run of another process holds the folder.
        WriteError: the output cannot be written there (read-only file system, full disk, no permission).
        ValueError: unknown ``kind``.
    """
    if path is None:
        return None
    path = Path(path)
    if kind == "file":
        if path.is_dir():
            raise OutputPathError(folder_where_file_expected(path, flag))
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            raise OutputPathError(f"{flag} {path}: folder {parent} does not exist (create it first; initlab "
                                  "creates folders only for run folders, not for single files)")
        if path.exists() and not overwrite:
            raise RunExistsError(f"{flag} {path}: file exists; choose another path or pass --overwrite to replace it")
    elif kind == "folder":
        if path.exists() and not path.is_dir():
            raise OutputPathError(file_where_folder_expected(path, flag) + f" (choose another {flag})")
        for up in path.parents:  # a file in the way of a folder to be created
            if up.exists() and not up.is_dir():
                raise OutputPathError(f"{flag} {path}: cannot be created, " + file_where_folder_expected(up))
        check_unlocked(path, flag=flag)  # a live run in it: refused, with --overwrite or not
        if (path / "DONE").exists() and not overwrite:
            raise RunExistsError(f"{flag} {path}: already holds a finished run; choose another {flag} or pass "
                                 "--overwrite (the old folder is then moved aside, not deleted)")
    else:
        raise ValueError(f"kind: expected 'file' or 'folder', got {kind!r}")
    check_writable(path, flag=flag, kind=kind)  # a read-only or full disk: refused now, not after hours of work
    return path


#: The rank offset of per-rank seeds: a golden-ratio constant, so that rank offsets (mod 2^32) land far from the
#: small offsets between epochs and seeds.
RANK_STRIDE = 0x9E3779B1


def rank_seed(seed: int, rank: int) -> int:
    """The seed of DDP process ``rank`` for a run seeded with ``seed``: ``(seed + rank * RANK_STRIDE) mod 2**32``.

    Rank 0 keeps ``seed`` (mod 2^32), so single-process runs are unchanged; every other rank gets its own random
    stream (dropout masks differ across GPUs even where their batches have the same shape), deterministic for a
    given ``(seed, rank)``. Mod 2^32 because torch's CPU generator keeps only the low 32 bits of a seed
    (``torch.manual_seed(2**32)`` equals ``torch.manual_seed(0)``), so an offset of ``rank * 2**32`` would change
    nothing.
    """
    return (int(seed) + int(rank) * RANK_STRIDE) % 2**32


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
