"""The input and output path rules of every command: one wording for a path of the wrong kind, checked first.
"""

from __future__ import annotations

from pathlib import Path

from initlab.runs.atomic import check_writable
from initlab.runs.errors import RunExistsError
from initlab.runs.lock import check_unlocked

__all__ = ['file_where_folder_expected', 'folder_where_file_expected', 'OutputPathError', 'InputPathError', 'check_input_path', 'unreadable_file', 'check_output_path']


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
