"""A run is a file: a named base plus the values it changes, each with its reason beside it.

Every preset of an experiment is one small TOML file in its ``runs/`` folder (read with the standard library's
``tomllib``), in the manner of nanoGPT's ``config/train_shakespeare_char.py``::

    purpose = "the preregistered confirmatory run: fresh seeds, seed counts from the power computation"
    base = "tuned"

    [seeds]
    why = "the preregistered confirmatory seeds (fresh: no earlier run of this project used them)"
    value = [8201, 8202, 8203, 8204, 8205, 8206, 8207, 8208]

``purpose`` is the file's one-line purpose (the generated page ``docs/runs.md`` lists it); ``base`` names the config
the file starts from: ``"defaults"`` (the config class's own defaults) or another run file of the same experiment
(by its name, from any of its folders). Every other key is a field the file changes, a table with exactly ``why``
(the reason, a non-empty string) and ``value`` (in the JSON form of :func:`initlab.config.to_dict`: lists for tuples,
tables for nested configs). A nested config's field is changed alone by a dotted table (``[corpus.n_dev_queries]``):
the rest of that nested config stays the base's. TOML has no null, so a file cannot set a field to ``None``.

The folders of one experiment (:class:`RunFiles`):

* ``runs/*.toml``: the named choices, what a user runs (``quick``, ``default``, ``full`` and the confirmatory
  runs); ``--help``, the README and docs/commands.md list these only;
* ``runs/explore/*.toml``: exploratory runs (lab-notebook entries: selections, pilots, regime explorations);
* ``runs/archive/*.toml``: superseded runs, kept so their saved results can be re-run;
* ``runs/bases/*.toml``: bases other runs start from (not runs of their own).

A run's name is its file name without ``.toml``, unique across the folders. ``--preset`` takes a name or the path of
such a file (:meth:`RunFiles.resolve`). The resolved config is built by :func:`initlab.config.from_dict`, so an
unknown field or a value of the wrong type is refused naming the file and the field.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Iterator, Mapping, TypeVar

from initlab.config import from_dict, to_dict
from initlab.textio import read_text

__all__ = ["RunFile", "RunFiles", "RunFileError", "FOLDERS", "KINDS", "read_run_file"]

C = TypeVar("C")

#: the folders of an experiment's ``runs/`` and what each holds: (sub-folder, kind); the top folder holds the
#: named choices
FOLDERS: tuple[tuple[str, str], ...] = (("", "named"), ("explore", "exploratory"), ("archive", "archived"),
                                        ("bases", "base"))
#: the kinds of run file, in the order the generated page lists them
KINDS: tuple[str, ...] = tuple(kind for _, kind in FOLDERS)
#: the keys of a run file that are not fields
_HEAD = ("purpose", "base")


class RunFileError(ValueError):
    """A run file that cannot be used: not TOML, a missing ``purpose``/``base``, a change without its reason, an
    unknown field or a value of the wrong type. The message names the file (and the field)."""


@dataclass(frozen=True)
class RunFile:
    """One parsed run file: ``name`` (the file name without ``.toml``), ``path``, ``kind`` (one of :data:`KINDS`),
    ``purpose``, ``base``, and ``changes``: dotted field name -> ``(value, why)``, in file order."""

    name: str
    path: Path
    kind: str
    purpose: str
    base: str
    changes: tuple[tuple[str, Any, str], ...]


def _leaves(table: Mapping[str, Any], prefix: str, path: Path) -> Iterator[tuple[str, Any, str]]:
    """The changes of a parsed run file: ``(dotted field, value, why)`` for every table holding ``why`` and
    ``value``; a table holding neither is a nested config's fields."""
    for key, entry in table.items():
        name = prefix + key
        if not isinstance(entry, dict):
            raise RunFileError(f"{path}: {name}: expected a table with 'why' and 'value' (the new value and its reason), "
                               f"got {type(entry).__name__} {entry!r}")
        if "value" in entry or "why" in entry:
            extra = sorted(set(entry) - {"value", "why"})
            if extra or "value" not in entry or "why" not in entry:
                raise RunFileError(f"{path}: {name}: expected exactly the keys 'why' and 'value', got {sorted(entry)}")
            if not isinstance(entry["why"], str) or not entry["why"].strip():
                raise RunFileError(f"{path}: {name}: 'why' must be a non-empty string (the reason for the value)")
            yield name, entry["value"], entry["why"]
        else:
            yield from _leaves(entry, name + ".", path)


def read_run_file(path: str | Path, kind: str = "named") -> RunFile:
    """Parse the run file ``path`` (no resolution: the base and the fields are checked by :meth:`RunFiles.resolve`).

    Raises:
        RunFileError: not UTF-8 TOML, no one-line ``purpose`` or no ``base`` string, a change that is not a table of
            ``why`` and ``value`` (naming the file and the field).
    """
    path = Path(path)
    try:
        data = tomllib.loads(read_text(path))
    except (tomllib.TOMLDecodeError, ValueError) as err:
        raise RunFileError(f"{path}: not a readable run file ({str(err).splitlines()[0]})") from None
    for key in _HEAD:
        if not isinstance(data.get(key), str) or not data[key].strip() or "\n" in data[key]:
            raise RunFileError(f"{path}: expected '{key}' = a one-line string ({'its one-line purpose' if key == 'purpose' else 'the config it starts from: defaults or a run name'})")
    changes = tuple(_leaves({k: v for k, v in data.items() if k not in _HEAD}, "", path))
    return RunFile(path.stem, path, kind, data["purpose"].strip(), data["base"].strip(), changes)


def _set(tree: dict[str, Any], dotted: str, value: Any, path: Path) -> None:
    parts = dotted.split(".")
    node = tree
    for i, part in enumerate(parts[:-1]):
        if not isinstance(node.get(part), dict):
            raise RunFileError(f"{path}: {'.'.join(parts[:i + 1])}: not a nested config, so {dotted} is no field")
        child = dict(node[part])
        node[part] = child
        node = child
    node[parts[-1]] = value


class RunFiles(Mapping[str, C], Generic[C]):
    """Every run file of one experiment (its ``runs/`` folder, :data:`FOLDERS`): a mapping name -> resolved config.

    ``cls`` is the experiment's frozen config dataclass; base ``"defaults"`` is ``cls()``. Configs are resolved on
    first use and kept. Iterating gives every runnable name (named, exploratory, archived; not the bases).

    Raises:
        RunFileError: the folder holds two run files of one name (on first use).
    """

    def __init__(self, cls: type[C], folder: str | Path):
        self.cls, self.folder = cls, Path(folder)
        self._files: dict[str, RunFile] | None = None
        self._resolved: dict[Path, C] = {}
        self._set: dict[str, C] = {}  # configs set in memory under a name (tests: a tiny run as "quick")

    # -- the files -----------------------------------------------------------------------------
    def files(self) -> dict[str, RunFile]:
        """name -> :class:`RunFile`, every file of every folder (named first, then by :data:`FOLDERS`, by name)."""
        if self._files is None:
            files: dict[str, RunFile] = {}
            for sub, kind in FOLDERS:
                for path in sorted((self.folder / sub).glob("*.toml")):
                    if path.stem in files:
                        raise RunFileError(f"{path}: a run named {path.stem!r} exists already ({files[path.stem].path})")
                    files[path.stem] = read_run_file(path, kind)
            self._files = files
        return self._files

    def named(self) -> tuple[str, ...]:
        """The named choices (the top folder), in the order quick (or tiny), default, full, then by name."""
        first = ("quick", "tiny", "default", "full")
        names = [n for n, f in self.files().items() if f.kind == "named"]
        return tuple(sorted(names, key=lambda n: (first.index(n) if n in first else len(first), n)))

    def of_kind(self, kind: str) -> tuple[str, ...]:
        """The names of the run files of ``kind`` (one of :data:`KINDS`)."""
        return tuple(n for n, f in self.files().items() if f.kind == kind)

    # -- resolving -----------------------------------------------------------------------------
    def resolve(self, preset: str | Path) -> C:
        """The config of a run file given by name (any folder but ``bases/``) or by path (a ``.toml`` file).

        Raises:
            RunFileError: an unknown name (naming the named choices), a missing file, a base that is neither
                ``defaults`` nor a run of this experiment, a cycle of bases, an unknown field or a value of the
                wrong type (naming the file and the field).
        """
        text = str(preset)
        if text.endswith(".toml") or "/" in text or "\\" in text:
            path = Path(text)
            if not path.is_file():
                raise RunFileError(f"--preset {text}: no such run file")
            try:
                return self._config(read_run_file(path, "file"), ())
            except RunFileError as err:  # the message names the argument, then the file and the field
                msg = str(err)
                raise RunFileError(f"--preset {msg}" if msg.startswith(f"{path}: ") else f"--preset {text}: {msg}") from None
        if text in self._set:
            return self._set[text]
        run = self.files().get(text)
        if run is None or run.kind == "base":
            raise RunFileError(f"--preset {text}: expected one of {', '.join(self.named())}, another run's name "
                               "(docs/runs.md lists them) or the path of a run file (.toml)")
        return self._config(run, ())

    def _config(self, run: RunFile, seen: tuple[Path, ...]) -> C:
        key = run.path.resolve()
        if key in self._resolved:
            return self._resolved[key]
        if key in seen:
            raise RunFileError(f"{run.path}: base {run.base!r}: a cycle of bases ({' -> '.join(str(p) for p in seen)})")
        if run.base == "defaults":
            base = self.cls()
        elif run.base in self.files():
            base = self._config(self.files()[run.base], (*seen, key))
        else:
            raise RunFileError(f"{run.path}: base {run.base!r}: expected 'defaults' or a run of {self.folder}")
        merged = to_dict(base)
        for dotted, value, _ in run.changes:
            _set(merged, dotted, value, run.path)
        try:
            cfg = from_dict(self.cls, merged)
        except (TypeError, ValueError) as err:
            raise RunFileError(f"{run.path}: {err}") from None
        self._resolved[key] = cfg
        return cfg

    def base(self, name: str) -> C:
        """The config of the base ``name`` (a file of ``runs/bases/``, or any run).

        Raises:
            KeyError: no run file of that name.
        """
        if name not in self.files():
            raise KeyError(f"{self.folder}: no run file named {name!r}")
        return self._config(self.files()[name], ())

    # -- the mapping ---------------------------------------------------------------------------
    def __getitem__(self, name: str) -> C:
        if name in self._set:
            return self._set[name]
        run = self.files().get(name)
        if run is None or run.kind == "base":
            raise KeyError(name)
        return self._config(run, ())

    def __iter__(self) -> Iterator[str]:
        names = [*self.named(), *self.of_kind("exploratory"), *self.of_kind("archived")]
        return iter(names + [n for n in self._set if n not in names])

    def __setitem__(self, name: str, cfg: C) -> None:
        """Use ``cfg`` under ``name`` in this process (it shadows a file of that name; no file is written): how a test
        runs a command's ``quick`` at a tiny size."""
        if not isinstance(cfg, self.cls):
            raise TypeError(f"{name}: expected a {self.cls.__name__}, got {type(cfg).__name__}")
        self._set[name] = cfg

    def __delitem__(self, name: str) -> None:
        del self._set[name]

    def __len__(self) -> int:
        return len(list(iter(self)))

    def __repr__(self) -> str:
        return f"RunFiles({self.cls.__name__}, {self.folder})"

