"""One run per model dir: ``MODEL_DIR/.estimator-dist.lock``.

Two runs writing checkpoints, ``run.json`` and events into one model dir would overwrite
each other's files, so ``python -m estimator_dist.train`` holds its model dir while it
runs: ``hold`` creates the lock file, and ``Held.release`` removes it when the run ends
(normally, with an error, on SIGTERM, which the CLI turns into an exception, or through
``process_exit``'s hard exit, which runs no ``finally`` block and releases it first).

The lock must work on shared file systems (NFS and the like) where ``flock`` is absent
or local to one host, so it is a plain file, created whole: its text is written to a
private temporary file first, then put in place with ``os.link``, which fails when the
lock exists, on every POSIX file system (``O_CREAT | O_EXCL`` where links are not
allowed). A reader therefore never sees half a lock, and the temporary file never
outlives the attempt, written or not. In a model dir with a scheme (``gs://``) the same
steps go through TensorFlow's file system, with what it can and cannot promise
(``lock_files``).

A lock is stale, and taken over without asking, when its holder cannot be running:

- on this host, by its process alone, whatever its heartbeat: stale when the pid is gone
  or is another process now (its start, read from ``/proc``, differs from the one the
  lock records: the pid was reused, or the host rebooted). A live holder keeps its lock
  however long it is paused (SIGSTOP, a swapped-out machine);
- on another host, by its heartbeat: the holder refreshes the mtime every
  ``HEARTBEAT_SECONDS`` from one daemon thread, which TensorFlow's long steps do not
  block (they release the GIL); it is stale once older than ``STALE_SECONDS`` by the file
  system's own clock (the mtime a file created there now gets), so the two hosts' clocks
  need not agree. A heartbeat more than ``SKEW_SECONDS`` ahead of that clock cannot be
  judged: it is refused, in one line saying so, rather than waited for.

Anything at the lock's path that is not a lock this package wrote (a FIFO, a symlink, a
directory, a file that does not parse or names no process) is never opened in a way that
could block, and is refused in one line saying it may be removed. A process killed with
SIGKILL leaves its lock behind; the next run takes it over by these rules. Reading a model
dir (``migrate``, ``report``) needs no lock.
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import socket
import threading
import time
import uuid

from estimator_dist import process_exit
from estimator_dist.errors import UsageError
from estimator_dist.job import lock_files

FILENAME = ".estimator-dist.lock"
HEARTBEAT_SECONDS = 30
# Ten missed heartbeats: a holder on another host whose mtime is older has stopped.
STALE_SECONDS = 300
# How far another host's heartbeat may lie ahead of the file system's clock.
SKEW_SECONDS = 60
_MAX_BYTES = 4096
_MAX_PID = 2**31 - 1  # pid_t: a larger number names no process.


def process_start(pid: int) -> str | None:
    """What tells process ``pid`` from a later one with the same pid: the boot's id and
    the process's start (in clock ticks since boot) from ``/proc``; None where there is
    no ``/proc`` or no such process."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as file:
            boot = file.read().strip()
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as file:
            fields = file.read().rpartition(")")[2].split()
    except OSError:
        return None
    return f"{boot}/{fields[19]}" if len(fields) > 19 else None  # Field 22: starttime.


@dataclasses.dataclass(frozen=True)
class Holder:
    """What a lock says about the run holding it."""

    host: str
    pid: int
    started: str  # ISO 8601, UTC.
    token: str  # Tells this lock from a later one of the same host and pid.
    process: str | None = None  # process_start(pid) when the lock was taken.

    def describe(self) -> str:
        return f"pid {self.pid} on host {self.host!r}, running since {self.started}"


@dataclasses.dataclass(frozen=True)
class Found:
    """What is at a lock's path: a ``Holder``, or ``problem``, why it is no lock of ours."""

    holder: Holder | None
    mtime: float
    problem: str = ""
    regular: bool = True  # A regular file (what a lock being written is).


def path(model_dir: str) -> str:
    return os.path.join(model_dir, FILENAME)


def _parse(text: bytes) -> Holder | str:
    """The ``Holder`` a lock's text names, or why it names none."""
    if not text:
        return "it is empty"
    if len(text) > _MAX_BYTES:
        return f"it holds more than {_MAX_BYTES} bytes"
    try:
        fields = json.loads(text.decode("utf-8"))
        holder = Holder(**{name: fields[name] for name in ("host", "pid", "started", "token")},
                        process=fields.get("process"))
    except (ValueError, KeyError, TypeError):
        return "it does not parse as a lock"
    if isinstance(holder.pid, bool) or not isinstance(holder.pid, int) \
            or not 0 < holder.pid <= _MAX_PID:
        return f"its pid {holder.pid!r} names no process"
    if not all(isinstance(value, str) and value
               for value in (holder.host, holder.started, holder.token)) \
            or not isinstance(holder.process, (str, type(None))):
        return "it does not parse as a lock"
    return holder


def _read(lock_path: str) -> Found | None:
    """What is at ``lock_path`` (``Found``); None when nothing is. Never blocks: a path
    that is not a regular file is not opened."""
    entry = lock_files.of(lock_path).read(lock_path, _MAX_BYTES + 1)
    if entry is None:
        return None
    if entry.kind:
        return Found(None, entry.mtime, f"it is {entry.kind}", regular=False)
    parsed = _parse(entry.text)
    if isinstance(parsed, str):
        return Found(None, entry.mtime, parsed)
    return Found(parsed, entry.mtime)


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # Alive, another user's.
        return False
    return False


def _live_here(holder: Holder) -> bool:
    """Whether this host's process that ``holder`` names still runs (the same process,
    where both it and this host's ``/proc`` tell)."""
    if holder.pid != os.getpid() and _process_gone(holder.pid):
        return False
    now = process_start(holder.pid)
    return holder.process is None or now is None or now == holder.process


_REMOVE = "remove it if no run is using {model_dir!r}"


def _not_a_lock(model_dir: str, found: Found) -> UsageError:
    return UsageError(
        f"model_dir's lock must be a lock file estimator_dist.train wrote; "
        f"{_REMOVE.format(model_dir=model_dir)}. Received: {path(model_dir)!r}: "
        f"{found.problem}")


def _skewed(model_dir: str, holder: Holder, ahead: float) -> UsageError:
    return UsageError(
        f"model_dir's lock must have a heartbeat at most {SKEW_SECONDS} s ahead of the file "
        f"system's clock to be judged (the clocks of host {holder.host!r} and the file "
        f"system disagree); {_REMOVE.format(model_dir=model_dir)}. Received: "
        f"{path(model_dir)!r} of {holder.describe()}, its heartbeat {ahead:.0f} s ahead")


def refusal(model_dir: str, holder: Holder | None) -> UsageError:
    """The one-line error for a model dir held by a live run."""
    who = holder.describe() if holder is not None else "a run whose lock came and went"
    return UsageError(
        f"model_dir must not be in use by another run (one run per model dir); wait for it "
        f"to end or use another --model-dir (a lock whose run is gone is taken over "
        f"without asking, on another host after {STALE_SECONDS} s without a heartbeat). "
        f"Received: model_dir={model_dir!r} held by {who} ({path(model_dir)})")


def _judge(model_dir: str, found: Found) -> bool:
    """Whether the lock ``found`` is stale: its holder cannot be running (see the module
    docstring). Raises when it is no lock of ours (``_not_a_lock``), is live
    (``refusal``) or cannot be judged (``_skewed``)."""
    holder = found.holder
    if holder is None:
        raise _not_a_lock(model_dir, found)
    if holder.host == socket.gethostname():
        if not _live_here(holder):
            return True
    else:
        ahead = found.mtime - lock_files.of(model_dir).now(model_dir)
        if ahead < -STALE_SECONDS:
            return True
        if ahead > SKEW_SECONDS:
            raise _skewed(model_dir, holder, ahead)
    raise refusal(model_dir, holder)


def check_free(model_dir: str) -> None:
    """Raises (``refusal`` and its kin) unless ``model_dir`` is free or its lock stale;
    changes nothing."""
    try:
        found = _read(path(model_dir))
    except OSError:
        return  # A model dir that cannot be read is named by its own check.
    if found is not None:
        _judge(model_dir, found)


def _take_over(lock_path: str, judged: Found) -> bool:
    """Moves the stale lock ``judged`` (as ``_read`` returned it) aside; a lock another
    run put there since is put back. Returns whether the stale one went."""
    files = lock_files.of(lock_path)
    aside = os.path.join(os.path.dirname(lock_path), f".estimator-dist.stale-{uuid.uuid4().hex}")
    try:
        files.move(lock_path, aside)
    except FileNotFoundError:
        return True  # Another run moved it first.
    moved = _read(aside)
    if moved is not None and moved.holder != judged.holder:
        files.put_back(aside, lock_path)  # Not the lock judged stale: a live run's.
        files.remove(aside)
        return False
    files.remove(aside)
    return True


class Held:
    """A lock this process holds; ``release`` (idempotent, from any thread, and run by
    ``process_exit``'s hard exit) stops the heartbeat and removes the lock if it is still
    this one."""

    def __init__(self, model_dir: str, holder: Holder, text: str) -> None:
        self.path = path(model_dir)
        self.holder = holder
        self._text = text
        self._files = lock_files.of(self.path)
        self._stop = threading.Event()
        self._releasing = threading.Lock()
        self._heartbeat = threading.Thread(target=self._beat, name="model-dir-lock",
                                           daemon=True)
        self._heartbeat.start()
        self._forget = process_exit.before_hard_exit(self.release)

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                self._files.refresh(self.path, self._text)
            except OSError:
                return  # Removed under the run (or the disk went): nothing to refresh.

    def release(self) -> None:
        with self._releasing:
            if self._stop.is_set():
                return
            self._stop.set()
            self._forget()
            self._heartbeat.join(timeout=5)
            found = _read(self.path)
            if found is not None and found.holder == self.holder:
                self._files.remove(self.path)

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _new_holder() -> Holder:
    return Holder(socket.gethostname(), os.getpid(),
                  datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  uuid.uuid4().hex, process_start(os.getpid()))


def hold(model_dir: str, attempts: int = 3) -> Held:
    """Takes the lock of the existing ``model_dir``; returns a ``Held``.

    Raises:
      UsageError: a live run holds it (``refusal``), or something that is no lock of this
        package's is in its place.
      OSError: the lock cannot be written.
    """
    lock_path = path(model_dir)
    holder = _new_holder()
    text = json.dumps(dataclasses.asdict(holder), sort_keys=True) + "\n"
    found = None
    for attempt in range(attempts):
        if lock_files.of(lock_path).create(lock_path, text):
            return Held(model_dir, holder, text)
        found = _read(lock_path)
        if found is None:
            continue  # Released between the two calls.
        if found.holder is None and found.regular and attempt + 1 < attempts:
            time.sleep(0.2)  # Half written where links are not allowed: read it again.
            continue
        if _judge(model_dir, found):
            _take_over(lock_path, found)
    raise refusal(model_dir, found.holder if found is not None else None)
