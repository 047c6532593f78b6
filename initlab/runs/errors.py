"""The errors that refuse to mix results: a finished run, another config, a live run in the folder.
"""

from __future__ import annotations



__all__ = ['RunExistsError', 'ConfigMismatchError', 'RunLockedError']


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
