"""One run per model dir: ``MODEL_DIR/.estimator-dist.lock``.

Two runs writing checkpoints, ``run.json`` and events into one model dir would overwrite
each other's files, so ``python -m estimator_dist.train`` holds its model dir while it
runs: ``hold`` creates the lock file, and ``Held.release`` removes it when the run ends
(normally, with an error, or on SIGTERM, which the CLI turns into an exception).

The lock must work on shared file systems (NFS and the like) where ``flock`` is absent
or local to one host, so it is a plain file, created whole: its text is written to a
private temporary file first, then put in place with ``os.link``, which fails when the
lock exists, on every POSIX file system (``O_CREAT | O_EXCL`` where links are not
allowed). A reader therefore never sees half a lock.

A lock is stale, and taken over without asking, when its holder cannot be running:

- on this host, the process it names is gone;
- on any host, its mtime is older than ``STALE_SECONDS``. The holder refreshes the mtime
  every ``HEARTBEAT_SECONDS`` from one daemon thread, which TensorFlow's long steps do
  not block (they release the GIL).

A process killed with SIGKILL leaves its lock behind; the next run takes it over by one
of these rules. Reading a model dir (``migrate``, ``report``) needs no lock.
"""
from __future__ import annotations

import dataclasses
import datetime
import errno
import json
import os
import socket
import threading
import time
import uuid

from estimator_dist.errors import UsageError

FILENAME = ".estimator-dist.lock"
HEARTBEAT_SECONDS = 30
# Ten missed heartbeats: a holder on another host whose mtime is older has stopped.
STALE_SECONDS = 300


@dataclasses.dataclass(frozen=True)
class Holder:
    """What a lock says about the run holding it."""

    host: str
    pid: int
    started: str  # ISO 8601, UTC.
    token: str  # Tells this lock from a later one of the same host and pid.

    def describe(self) -> str:
        return f"pid {self.pid} on host {self.host!r}, running since {self.started}"


def path(model_dir: str) -> str:
    return os.path.join(model_dir, FILENAME)


def _read(lock_path: str) -> tuple[Holder | None, float] | None:
    """(Holder or None when the text does not parse, mtime); None when there is no lock."""
    try:
        with open(lock_path, "rb") as file:
            text = file.read(4096)
            mtime = os.fstat(file.fileno()).st_mtime
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        fields = json.loads(text.decode("utf-8"))
        holder = Holder(str(fields["host"]), int(fields["pid"]), str(fields["started"]),
                        str(fields["token"]))
    except (ValueError, KeyError, TypeError):
        holder = None
    return holder, mtime


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # Alive, another user's.
        return False
    return False


def _stale(holder: Holder | None, mtime: float, now: float | None = None) -> bool:
    """Whether the lock's holder cannot be running (see the module docstring)."""
    if (now or time.time()) - mtime > STALE_SECONDS:
        return True
    return (holder is not None and holder.host == socket.gethostname()
            and holder.pid != os.getpid() and _process_gone(holder.pid))


def refusal(model_dir: str, holder: Holder | None) -> UsageError:
    """The one-line error for a model dir held by a live run."""
    who = holder.describe() if holder is not None else "a run whose lock does not parse"
    return UsageError(
        f"model_dir must not be in use by another run (one run per model dir); wait for it "
        f"to end or use another --model-dir (a lock whose run is gone is taken over "
        f"without asking, on another host after {STALE_SECONDS} s without a heartbeat). "
        f"Received: model_dir={model_dir!r} held by {who} ({path(model_dir)})")


def check_free(model_dir: str) -> None:
    """Raises ``refusal`` when a live run holds ``model_dir``; reads only."""
    try:
        found = _read(path(model_dir))
    except OSError:
        return  # A model dir that cannot be read is named by its own check.
    if found is not None and not _stale(*found):
        raise refusal(model_dir, found[0])


def _create(lock_path: str, text: str) -> bool:
    """Puts ``text`` at ``lock_path`` whole; False when a lock is there already."""
    staged = f"{lock_path}.{uuid.uuid4().hex}.tmp"
    with open(staged, "x", encoding="utf-8") as file:
        file.write(text)
    try:
        os.link(staged, lock_path)
        return True
    except FileExistsError:
        return False
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        return _create_exclusive(lock_path, text)  # A file system without hard links.
    finally:
        os.remove(staged)


def _create_exclusive(lock_path: str, text: str) -> bool:
    try:
        descriptor = os.open(lock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)
    return True


def _take_over(lock_path: str, judged: tuple[Holder | None, float]) -> bool:
    """Moves the stale lock ``judged`` (as ``_read`` returned it) aside; a lock another
    run put there since is put back. Returns whether the stale one went."""
    aside = f"{lock_path}.stale-{uuid.uuid4().hex}"
    try:
        os.rename(lock_path, aside)
    except FileNotFoundError:
        return True  # Another run moved it first.
    moved = _read(aside)
    if moved is not None and moved[0] != judged[0]:
        try:
            os.link(aside, lock_path)  # Not the lock judged stale: a live run's.
        except FileExistsError:
            pass
        os.remove(aside)
        return False
    os.remove(aside)
    return True


class Held:
    """A lock this process holds; ``release`` (idempotent) stops the heartbeat and removes
    the lock if it is still this one."""

    def __init__(self, model_dir: str, holder: Holder) -> None:
        self.path = path(model_dir)
        self.holder = holder
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, name="model-dir-lock",
                                           daemon=True)
        self._heartbeat.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                os.utime(self.path)
            except OSError:
                return  # Removed under the run (or the disk went): nothing to refresh.

    def release(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._heartbeat.join(timeout=5)
        found = _read(self.path)
        if found is not None and found[0] == self.holder:
            os.remove(self.path)

    def __enter__(self) -> Held:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def hold(model_dir: str, attempts: int = 3) -> Held:
    """Takes the lock of the existing ``model_dir``; returns a ``Held``.

    Raises:
      UsageError: a live run holds it (``refusal``).
      OSError: the lock cannot be written.
    """
    lock_path = path(model_dir)
    holder = Holder(socket.gethostname(), os.getpid(),
                    datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    uuid.uuid4().hex)
    text = json.dumps(dataclasses.asdict(holder), sort_keys=True) + "\n"
    for _ in range(attempts):
        if _create(lock_path, text):
            return Held(model_dir, holder)
        found = _read(lock_path)
        if found is None:
            continue  # Released between the two calls.
        if not _stale(*found):
            raise refusal(model_dir, found[0])
        _take_over(lock_path, found)
    raise refusal(model_dir, (_read(lock_path) or (None,))[0])
