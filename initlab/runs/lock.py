"""The run-folder lock: a live run owns its folder (docs/conventions.md, "A live run owns its folder").
"""

from __future__ import annotations

import contextlib
import errno
import functools
import inspect
import json
import os
import socket
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from initlab.runs.atomic import write_error
from initlab.runs.errors import RunLockedError

__all__ = ['RunLock', 'run_lock', 'holds_run_folder', 'lock_path', 'check_unlocked', 'process_start_time', 'LOCK_HEARTBEAT_SECONDS', 'FOREIGN_LOCK_STALE_SECONDS']


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


def _process_state(pid: int) -> str | None:
    """The state letter of process ``pid`` (/proc/PID/stat field 3: ``R``, ``S``, ``Z`` for a zombie, ...), or None
    where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
        return raw.rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _pid_alive(pid: int) -> bool:
    """Process ``pid`` is running. A killed process that its parent has not reaped yet (a zombie: a run stopped by
    ``kill -9`` or ``timeout`` under a parent still running) answers ``kill(pid, 0)`` but runs nothing: not alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return _process_state(pid) not in ("Z", "X")
    except OSError:
        return False
    return _process_state(pid) not in ("Z", "X")


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
        taking it over now or it changed in between. The take-over file (``.break``) holds its process's record, so
        one left by a process killed while taking over is itself judged by :func:`_stale_reason` and removed."""
        breaker = self.path.with_name(self.path.name + ".break")
        for _ in range(2):
            try:
                fd = os.open(breaker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                break
            except FileExistsError:
                other, bmtime = _read_lock(breaker)
                dead = None if other is None else _stale_reason(other, bmtime)
                if other is not None and dead is None:
                    raise RunLockedError(
                        f"{self.flag + ' ' if self.flag else ''}{self.folder}: another run is taking over its stale lock "
                        f"now ({_holder(other)}; {breaker})") from None
                if other is not None:  # a take-over cut short by its process's death
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(breaker)
        else:
            raise RunLockedError(f"{self.flag + ' ' if self.flag else ''}{self.folder}: another run is taking over its "
                                 f"stale lock now ({breaker})")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(json.dumps(_lock_record()).encode("utf-8"))
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
