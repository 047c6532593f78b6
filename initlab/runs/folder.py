"""A run folder (:class:`RunDir`): the resolved config beside the results, the config guard, resumable cells.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from initlab.config import to_dict
from initlab.runs.atomic import atomic_write_csv, atomic_write_json, atomic_write_text, json_default, save_config, write_error
from initlab.runs.errors import ConfigMismatchError, RunExistsError
from initlab.runs.lock import check_unlocked
from initlab.runs.paths import OutputPathError, file_where_folder_expected
from initlab.textio import read_json

__all__ = ['RunDir', 'cell_file', 'check_same_record']


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
    return json.loads(json.dumps(cfg, default=json_default))


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
    want = json.loads(json.dumps(record, default=json_default))
    if saved != want:
        keys = sorted(k for k in set(saved) | set(want) if saved.get(k) != want.get(k)) if isinstance(saved, dict) else []
        raise ConfigMismatchError(
            f"{path.parent} holds results of a different {what} (differs in: {', '.join(keys) or 'content'}); "
            "choose another --out or pass --overwrite (the old folder is then moved aside)"
        )
