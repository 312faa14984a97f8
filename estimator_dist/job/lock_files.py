"""The file operations of the model dir's lock (``model_dir_lock``), on the local file
system (``LOCAL``) or on one TensorFlow reaches by a scheme (``REMOTE``, ``remote_files``).

Locally a lock is created whole and exclusively with ``os.link`` (``O_CREAT | O_EXCL``
where links are not allowed), read without ever blocking (a FIFO or a device is never
opened), and refreshed by its mtime. A remote file system offers no exclusive create
through ``tf.io.gfile``: the lock is renamed into place unless one exists and read back,
so two runs that start within the same moment may both pass there; it is refreshed by
rewriting it (an object store keeps no mtime a client can set).
"""
from __future__ import annotations

import dataclasses
import errno
import os
import stat
import time
import uuid
from typing import Protocol

from estimator_dist import remote_files

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symlink"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


@dataclasses.dataclass(frozen=True)
class Entry:
    """What is at a path: its text, or ``kind`` when it is no regular file."""

    mtime: float
    text: bytes = b""
    kind: str = ""  # "a FIFO", "a symlink to 'x'", ...: not read.


class Files(Protocol):
    def read(self, path: str, limit: int) -> Entry | None: ...
    def create(self, path: str, text: str) -> bool: ...
    def refresh(self, path: str, text: str) -> None: ...
    def move(self, source: str, target: str) -> None: ...
    def put_back(self, source: str, target: str) -> None: ...
    def remove(self, path: str) -> None: ...
    def now(self, directory: str) -> float: ...


def _kind(mode: int) -> str:
    return next((name for is_kind, name in _KINDS if is_kind(mode)), "")


def _staged(path: str) -> str:
    return f"{path}.{uuid.uuid4().hex}.tmp"


class _Local:
    def read(self, path: str, limit: int) -> Entry | None:
        try:
            status = os.lstat(path)
            kind = _kind(status.st_mode)
            if kind == "a symlink":
                kind += f" to {os.readlink(path)!r}"
            if kind:
                return Entry(status.st_mtime, kind=kind)
            descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except (FileNotFoundError, NotADirectoryError):
            return None
        with os.fdopen(descriptor, "rb") as file:
            status = os.fstat(descriptor)
            kind = _kind(status.st_mode)  # Replaced since the lstat.
            return Entry(status.st_mtime, b"" if kind else file.read(limit), kind)

    def create(self, path: str, text: str) -> bool:
        staged = _staged(path)
        descriptor = os.open(staged, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                file.write(text)
            os.link(staged, path)
            return True
        except FileExistsError:
            return False
        except OSError as error:
            if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
            return self._create_exclusive(path, text)  # A file system without hard links.
        finally:
            os.remove(staged)

    @staticmethod
    def _create_exclusive(path: str, text: str) -> bool:
        try:
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                file.write(text)
        except OSError:
            os.remove(path)  # Half a lock would refuse the dir.
            raise
        return True

    def refresh(self, path: str, text: str) -> None:
        os.utime(path)

    def move(self, source: str, target: str) -> None:
        os.rename(source, target)

    def put_back(self, source: str, target: str) -> None:
        try:
            os.link(source, target)
        except FileExistsError:
            pass

    def remove(self, path: str) -> None:
        os.remove(path)

    def now(self, directory: str) -> float:
        """The time by the clock that stamps files in ``directory`` (an NFS server's, say):
        the mtime of a file created there now; this host's clock where none can be."""
        probe = _staged(os.path.join(directory, ".estimator-dist.clock"))
        try:
            descriptor = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except OSError:
            return time.time()
        try:
            return os.fstat(descriptor).st_mtime
        finally:
            os.close(descriptor)
            os.remove(probe)


class _Remote:
    def read(self, path: str, limit: int) -> Entry | None:
        found = remote_files.status(path)
        if found is None:
            return None
        if found["dir"]:
            return Entry(found["mtime"], kind="a directory")
        try:
            return Entry(found["mtime"], remote_files.read(path, limit))
        except FileNotFoundError:
            return None

    def create(self, path: str, text: str) -> bool:
        if remote_files.exists(path) or not remote_files.put(path, text, overwrite=False):
            return False
        return remote_files.read(path) == text.encode()  # Another run's, renamed over it.

    def refresh(self, path: str, text: str) -> None:
        remote_files.put(path, text, overwrite=True)

    def move(self, source: str, target: str) -> None:
        remote_files.rename(source, target, overwrite=False)

    def put_back(self, source: str, target: str) -> None:
        try:
            remote_files.rename(source, target, overwrite=False)
        except FileExistsError:
            pass

    def remove(self, path: str) -> None:
        try:
            remote_files.remove(path)
        except FileNotFoundError:
            pass

    def now(self, directory: str) -> float:
        probe = remote_files.staged(f"{directory.rstrip('/')}/.estimator-dist.clock")
        try:
            remote_files.write(probe, b"")
            return remote_files.mtime(probe)
        except OSError:
            return time.time()
        finally:
            self.remove(probe)


LOCAL: Files = _Local()
REMOTE: Files = _Remote()


def of(path: str) -> Files:
    """The files of ``path``: ``REMOTE`` for a path with a scheme, else ``LOCAL``."""
    return REMOTE if remote_files.is_remote(path) else LOCAL
