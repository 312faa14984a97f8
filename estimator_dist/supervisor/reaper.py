"""A launcher's tasks end with it, even when it is killed (SIGKILL, the OOM killer).

Each task runs in a process group of its own, so that the launcher's signals reach the
task's own children and a Ctrl-C in the terminal reaches the launcher alone. Nothing the
kernel does when a process dies reaches processes of another group: a killed launcher
would leave every task running, holding its port, its devices and the model dir.
``PR_SET_PDEATHSIG`` would cover the task process alone (not what it starts) and only on
Linux; it also fires when the thread that started the task ends, not the launcher.

So ``Reaper`` starts one small process, in a session of its own, and tells it over a
pipe the group of each task the launcher starts and forgets those it has stopped. When
the pipe closes without a last ``done`` -- the kernel closes the launcher's end however
it died -- that process kills every group it still holds with SIGKILL and exits. It is
plain Python without site packages: no TensorFlow, no numpy, ready in milliseconds.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import IO, cast

_DONE = "done"
_REAPER = f"""
import os, signal, sys
groups = set()
for line in sys.stdin:
    word = line.strip()
    if word == {_DONE!r}:
        sys.exit(0)
    if word.startswith("-"):
        groups.discard(int(word[1:]))
    elif word:
        groups.add(int(word))
for group in groups:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
"""
_CLOSE_SECONDS = 5


def _interpreter() -> str:
    """A Python to run the reaper (standard library only): this one, or where this user
    may not execute it (a venv of another user's Python), the system's."""
    if os.access(sys.executable, os.X_OK):
        return sys.executable
    return shutil.which("python3") or sys.executable


class Reaper:
    """The process that kills the launcher's task groups once the launcher is gone."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [_interpreter(), "-I", "-S", "-c", _REAPER], stdin=subprocess.PIPE,
            start_new_session=True, text=True)

    def _tell(self, word: object) -> None:
        try:
            cast(IO[str], self._process.stdin).write(f"{word}\n")
            cast(IO[str], self._process.stdin).flush()
        except (BrokenPipeError, ValueError):
            pass  # It was killed (or closed): the launcher still stops its tasks itself.

    def watch(self, pid: int) -> None:
        """Kills the group of task ``pid`` (its own group's leader) if the launcher dies."""
        self._tell(pid)

    def forget(self, pid: int) -> None:
        """Task ``pid`` has ended and the launcher reaped it: its group id may be reused."""
        self._tell(-pid)

    def close(self) -> None:
        """The launcher ends normally, its tasks stopped: the reaper exits, killing nothing."""
        self._tell(_DONE)
        try:
            cast(IO[str], self._process.stdin).close()
        except BrokenPipeError:
            pass
        try:
            self._process.wait(_CLOSE_SECONDS)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
