"""Run folders: atomic writes, resolved configs, finished-run guards, resumable cells.

One idea per module, every public name re-exported here (``from initlab.runs import X``):
:mod:`~initlab.runs.errors` (the refusals), :mod:`~initlab.runs.atomic` (atomic writes, disk errors),
:mod:`~initlab.runs.guards` (non-finite and divergence), :mod:`~initlab.runs.lock` (the live-run lock),
:mod:`~initlab.runs.inputs` (input fingerprints), :mod:`~initlab.runs.paths` (input and output path rules),
:mod:`~initlab.runs.folder` (:class:`RunDir`), :mod:`~initlab.runs.processes` (per-rank seeds, torch threads).

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

from initlab.runs.atomic import (DISK_ERRNOS, WriteError, atomic_write_bytes, atomic_write_csv, atomic_write_json,
                                  atomic_write_text, check_writable, current_umask, disk_cause, json_default,
                                  revive_nonfinite, save_config, write_error)
from initlab.runs.errors import ConfigMismatchError, RunExistsError, RunLockedError
from initlab.runs.folder import RunDir, cell_file, check_same_record
from initlab.runs.guards import (DIVERGENCE_FACTOR, DIVERGENCE_FLOOR, DivergenceError, LossGuard, NonFiniteCheckpointError,
                                 NonFiniteError, check_finite, check_finite_tensors, nonfinite_tensors)
from initlab.runs.inputs import FOLDER_DIGEST_OVER, INPUTS_FILE, check_inputs, fingerprint_file
from initlab.runs.lock import (FOREIGN_LOCK_STALE_SECONDS, LOCK_HEARTBEAT_SECONDS, RunLock, check_unlocked,
                               holds_run_folder, lock_path, process_start_time, run_lock)
from initlab.runs.paths import (InputPathError, OutputPathError, check_input_path, check_output_path,
                                file_where_folder_expected, folder_where_file_expected, unreadable_file)
from initlab.runs.processes import RANK_STRIDE, rank_seed, torch_threads

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
    "NonFiniteCheckpointError",
    "nonfinite_tensors",
    "check_finite_tensors",
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
    "DISK_ERRNOS",
    "current_umask",
    "json_default",
    "FOLDER_DIGEST_OVER",
]
