"""File lists: expand patterns, fail early and by name on a missing or irregular file."""
from __future__ import annotations

import os
import stat
from typing import Any, Sequence, Union, cast

import tensorflow as tf

# What names the files: a path, a glob, or a list of them.
FilePattern = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]]
FORMATS = ("csv", "tfrecord")
_EXTENSIONS = {".csv": "csv", ".tfrecord": "tfrecord", ".tfrecords": "tfrecord"}
# A local path's kind, when it is not a regular file, by its stat mode test.
_IRREGULAR = (("a directory", stat.S_ISDIR), ("a named pipe", stat.S_ISFIFO),
              ("a character device", stat.S_ISCHR), ("a block device", stat.S_ISBLK),
              ("a socket", stat.S_ISSOCK))


def _as_list(file_pattern: FilePattern) -> list[Any]:
    if isinstance(file_pattern, (str, bytes)) or hasattr(file_pattern, "__fspath__"):
        return [file_pattern]
    return list(file_pattern)


def expand(file_pattern: FilePattern) -> list[str]:
    """Returns the sorted files that ``file_pattern`` (a path, glob or list of them) names.

    Raises:
      FileNotFoundError: a pattern matches no file, naming that pattern.
      ValueError: no pattern at all.
    """
    patterns = [str(p) for p in _as_list(file_pattern)]
    if not patterns:
        raise ValueError(f"file_pattern must name at least one file. Received: {file_pattern!r}")
    paths = []
    for pattern in patterns:
        matches = sorted(tf.io.gfile.glob(pattern))
        if not matches:
            raise FileNotFoundError(f"file_pattern matched no file. Received: {pattern!r}")
        for path in matches:
            _check_regular(path)
        paths.extend(matches)
    return paths


def _check_regular(path: str) -> None:
    """Raises unless a local ``path`` is a regular file (or a link to one).

    A named pipe blocks its reader, and a device such as ``/dev/zero`` never ends.
    Remote paths (``gs://...``) are left to their file system.
    """
    if "://" in path:
        return
    mode = os.stat(path).st_mode
    for kind, test in _IRREGULAR:
        if test(mode):
            raise ValueError(f"file_pattern must match regular files. Received: {path!r} "
                             f"({kind})")


def file_sizes(paths: Sequence[str]) -> list[int]:
    return [tf.io.gfile.stat(path).length for path in paths]


def infer_format(paths: Sequence[str | os.PathLike]) -> str:
    """The one format (``FORMATS``) the files' extensions name."""
    formats = {_EXTENSIONS.get(os.path.splitext(str(p))[1].lower()) for p in paths}
    if len(formats) != 1 or None in formats:
        raise ValueError(
            f"file_format must be given ({', '.join(FORMATS)}) unless every file ends in one "
            f"of {', '.join(sorted(_EXTENSIONS))}. Received: {list(map(str, paths))[:3]}")
    return cast(str, formats.pop())  # None was refused above.
