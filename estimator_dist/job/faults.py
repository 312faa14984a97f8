"""Failures turned into one-line user errors: a model dir a symlink spoils, a loss that
is no longer finite, and what fails during training that is the data's (a bad record
past the checked sample) or the disk's (full; the partial writes are removed)."""
from __future__ import annotations

import errno
import os
import re
import shutil
from typing import TYPE_CHECKING

from estimator_dist.errors import EnvironmentFault, UsageError, os_fault

if TYPE_CHECKING:
    from estimator_dist.job.settings import RunSettings

_DATA_FAULTS = ("bad CSV record at ", "corrupt or truncated TFRecord file ", "Name: ")
_DISK_FULL = "No space left on device"
# What TensorFlow leaves when a write fails part-way (a full disk): atomic writes
# "NAME.tmp<uuid>" (checkpoint state, events), a checkpoint's shard staging directory
# "PREFIX_temp" and its bundle's "*.tempstate<n>", and an export's "temp-<time>" directory.
_PARTIAL_FILE = re.compile(r".*(\.tmp[0-9a-f]{32}|\.tempstate\d+)$")
_PARTIAL_DIR = re.compile(r".*_temp$|^temp-\d+$")


def path_fault(path: str) -> str | None:
    """Why ``path`` (or a directory above it) cannot be a directory, when a symlink is the
    cause, in words; else None. ``makedirs`` reports a symlink loop as "File exists"."""
    while path and path != os.path.dirname(path):
        if os.path.islink(path) and not os.path.exists(path):
            try:
                os.stat(path)
            except OSError as error:
                kind = "a symlink loop" if error.errno == errno.ELOOP else "a dangling symlink"
                return f"{path!r} is {kind}: {error.strerror}"
        path = os.path.dirname(path)
    return None


def nan_error(step: int | None, settings: RunSettings) -> UsageError:
    data = (" or check the data past the first records checked for NaN or Inf"
            if settings.train_data else "")
    return UsageError(
        f"loss must stay finite; training stopped at step {step} and the checkpoints from "
        "before it are kept (try a smaller learning rate, e.g. --param learning_rate=0.001"
        f"{data}). Received: loss=nan")


def remove_partial_writes(model_dir: str) -> None:
    """Removes the files of writes that failed part-way under ``model_dir``; whole
    checkpoints, events and exports stay."""
    for root, dirs, files in os.walk(model_dir):
        for name in [d for d in dirs if _PARTIAL_DIR.match(d)]:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            dirs.remove(name)
        for name in files:
            if _PARTIAL_FILE.match(name):
                os.remove(os.path.join(root, name))


def runtime_fault(error: BaseException, settings: RunSettings) -> Exception | None:
    """A one-line error for a failure during training that is the data's or the disk's,
    else None."""
    if isinstance(error, OSError):
        fault = os_fault("model_dir", error, settings.model_dir)
        return fault if isinstance(fault, EnvironmentFault) else None
    text = str(getattr(error, "message", error))
    if _DISK_FULL in text:
        return EnvironmentFault(
            "model_dir needs free disk space; the checkpoints saved so far are kept (free "
            f"space and run again to resume). Received: {_DISK_FULL} under {settings.model_dir}")
    found = [(line, line.find(m)) for line in text.splitlines() for m in _DATA_FAULTS
             if m in line]
    if not found or not settings.train_data:
        return None
    line, at = found[0]
    return UsageError(f"train_data and eval_data must hold valid records; the checkpoints "
                      f"saved so far are kept. Received: {line[at:].rstrip(']')[:300]}")
