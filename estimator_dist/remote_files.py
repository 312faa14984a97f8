"""Paths with a scheme (``gs://``, ``hdfs://``, ``ram://``): files reached through
TensorFlow's file systems (``tf.io.gfile``), never through the local one.

``os.makedirs("gs://bucket/run")`` would make a local directory ``gs:/bucket/run``, so
every write of the package to a model dir (its lock, ``run.json``, the model dir itself)
asks ``is_remote`` first. A scheme this TensorFlow has no file system for (``hdfs://``
without the package that registers it) or one it cannot reach (a bucket behind no
network) is refused in one line by ``check_reachable`` before anything is written.

TensorFlow is imported on first use only (``run_record`` reads a local record without it).
Its errors come back as ``OSError`` (``FileNotFoundError``, ``FileExistsError``), so a
caller handles a local and a remote failure alike.
"""
from __future__ import annotations

import contextlib
import errno
import uuid
from typing import TYPE_CHECKING, Any, Iterator

from estimator_dist.errors import UsageError

if TYPE_CHECKING:
    from types import ModuleType

_ERRNOS = {"NotFoundError": errno.ENOENT, "AlreadyExistsError": errno.EEXIST,
           "PermissionDeniedError": errno.EACCES, "ResourceExhaustedError": errno.ENOSPC}


def is_remote(path: str) -> bool:
    return "://" in path


def scheme(path: str) -> str:
    return path.partition("://")[0]


def _gfile() -> ModuleType:
    import tensorflow as tf  # Late: a local model dir needs no TensorFlow here.

    return tf.io.gfile


def _first_line(error: BaseException) -> str:
    lines = str(getattr(error, "message", error)).strip().splitlines()
    return lines[0] if lines else type(error).__name__


@contextlib.contextmanager
def as_os_errors() -> Iterator[None]:
    """Turns TensorFlow's file errors into the ``OSError`` of the same errno."""
    import tensorflow as tf  # Late: see the module docstring.

    try:
        yield
    except tf.errors.OpError as error:
        code = _ERRNOS.get(type(error).__name__, errno.EIO)
        kind = {errno.ENOENT: FileNotFoundError, errno.EEXIST: FileExistsError}.get(code, OSError)
        raise kind(code, _first_line(error)) from None


def check_reachable(name: str, path: str) -> None:
    """Raises ``UsageError`` unless this TensorFlow has a file system for ``path``'s scheme
    and reaches it."""
    import tensorflow as tf  # Late: see the module docstring.

    try:
        _gfile().exists(path)
    except tf.errors.UnimplementedError:
        raise UsageError(
            f"{name} must be on a file system this TensorFlow has: there is no filesystem "
            f"for scheme {scheme(path)!r} in this TensorFlow (a package such as "
            f"tensorflow-io registers more). Received: {name}={path!r}") from None
    except tf.errors.OpError as error:
        raise UsageError(f"{name} must be reachable. Received: {name}={path!r} "
                         f"({_first_line(error)})") from None


def exists(path: str) -> bool:
    with as_os_errors():
        return bool(_gfile().exists(path))


def isdir(path: str) -> bool:
    with as_os_errors():
        return bool(_gfile().isdir(path))


def makedirs(path: str) -> None:
    with as_os_errors():
        _gfile().makedirs(path)


def read(path: str, limit: int = -1) -> bytes:
    with as_os_errors(), _gfile().GFile(path, "rb") as file:
        return bytes(file.read(limit))


def mtime(path: str) -> float:
    """Seconds since the epoch of ``path``'s last write, as its file system stamps it (0
    where it keeps none, as ``ram://``)."""
    with as_os_errors():
        return int(_gfile().stat(path).mtime_nsec) / 1e9


def remove(path: str) -> None:
    with as_os_errors():
        _gfile().remove(path)


def rename(source: str, target: str, *, overwrite: bool) -> None:
    with as_os_errors():
        _gfile().rename(source, target, overwrite=overwrite)


def staged(path: str) -> str:
    """A fresh temporary path beside ``path``, not named after it (``ram://`` takes a path
    that begins another one for a directory that exists)."""
    directory, _, name = path.rpartition("/")
    return f"{directory}/.tmp-{uuid.uuid4().hex}-{name}"


def write(path: str, data: str | bytes) -> None:
    with as_os_errors(), _gfile().GFile(path, "wb" if isinstance(data, bytes) else "w") as file:
        file.write(data)


def put(path: str, data: str | bytes, *, overwrite: bool) -> bool:
    """Writes ``data`` to a temporary file beside ``path`` and renames it into place
    (``overwrite`` False: False when ``path`` exists); the temporary file goes whatever
    happens. The rename is as whole as the file system makes it (an object store's is a
    copy)."""
    temporary = staged(path)
    try:
        write(temporary, data)
        rename(temporary, path, overwrite=overwrite)
        return True
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(OSError):
            remove(temporary)


def status(path: str) -> dict[str, Any] | None:
    """{"dir": bool, "mtime": float} of ``path``; None when nothing is there."""
    try:
        with as_os_errors():
            found = _gfile().stat(path)
    except FileNotFoundError:
        return None
    return {"dir": bool(found.is_directory), "mtime": int(found.mtime_nsec) / 1e9}
