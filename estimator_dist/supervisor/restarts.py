"""The launcher's restarts of a cluster: when it restarts, how long it waits first, and
what it says (which task died, the wait, where training resumes).

Training resumes from the model dir's newest checkpoint (``checkpoint_step``, read without
TensorFlow). The model dir comes from the command's ``--model-dir`` flag; without one (a
config file, a bucket path) the line says "the last checkpoint".

How often it restarts, as Kubernetes restarts a crashing container (CrashLoopBackOff):
the launcher waits ``FIRST_WAIT_SECONDS`` before the first restart, twice as long before
each next one, up to ``MAX_WAIT_SECONDS``, and back to the first wait after a run that
lasted ``RESET_AFTER_SECONDS``. A run that fails within ``START_SECONDS`` of its start
without a new checkpoint failed at start; after ``START_FAILURES`` of those in a row the
launcher stops restarting, since a command that cannot start (a typo, a missing file)
fails the same way each time. ``--max-restarts`` is at most ``MAX_RESTARTS``.
"""
from __future__ import annotations

import signal
from typing import Sequence

from estimator_dist.checkpoint_step import newest_step

FIRST_WAIT_SECONDS = 1
MAX_WAIT_SECONDS = 60
RESET_AFTER_SECONDS = 600
START_SECONDS = 30
START_FAILURES = 3
MAX_RESTARTS = 100

_MODEL_DIR_FLAG = "--model-dir"


def model_dir_of(command: Sequence[str]) -> str | None:
    """The value of ``--model-dir DIR`` or ``--model-dir=DIR`` in ``command``, else None."""
    for i, arg in enumerate(command):
        if arg == _MODEL_DIR_FLAG and i + 1 < len(command):
            return command[i + 1]
        if arg.startswith(_MODEL_DIR_FLAG + "="):
            return arg.split("=", 1)[1]
    return None


def describe_exit(code: int) -> str:
    """``exit code 3``, or ``exit code -9 (SIGKILL)`` for a process a signal ended."""
    if code < 0:
        try:
            return f"exit code {code} ({signal.Signals(-code).name})"
        except ValueError:
            pass
    return f"exit code {code}"


def stop_signal(code: int) -> int | None:
    """SIGTERM or SIGINT when a task's exit ``code`` says one stopped it (killed by it, or
    ``128 + signal`` from its handler, as the train command exits), else None."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        if code in (-signum, 128 + signum):
            return signum
    return None


class Backoff:
    """The waits between restarts: ``FIRST_WAIT_SECONDS``, doubling up to
    ``MAX_WAIT_SECONDS``; a run of ``RESET_AFTER_SECONDS`` or more starts over."""

    def __init__(self) -> None:
        self._wait = FIRST_WAIT_SECONDS

    def next_wait(self, run_seconds: float) -> int:
        """The wait before restarting a run that lasted ``run_seconds``."""
        if run_seconds >= RESET_AFTER_SECONDS:
            self._wait = FIRST_WAIT_SECONDS
        wait, self._wait = self._wait, min(2 * self._wait, MAX_WAIT_SECONDS)
        return wait


def failed_at_start(run_seconds: float, step_before: int | None, step_after: int | None) -> bool:
    """Whether a failed run failed at start: within ``START_SECONDS``, with no newer
    checkpoint (steps as ``newest_step`` reads them; None: unknown, so no progress)."""
    progressed = (step_before is not None and step_after is not None
                  and step_after > step_before)
    return run_seconds < START_SECONDS and not progressed


def restart_line(task_name: str, why: str, restart: int, max_restarts: int, wait: float,
                 model_dir: str | None) -> str:
    """The one line the launcher prints when it restarts the cluster: the task and ``why``
    (``failed with exit code 3``), the restart's number, the wait before it, the step."""
    step = newest_step(model_dir)
    where = "the last checkpoint" if step is None else f"step {step}"
    return (f"launch: {task_name} {why}; restarting every task in {wait} s ({restart} of "
            f"{max_restarts}), resuming from {where}")
