"""What the library raises where a process could end: a user mistake, a fault of the
machine, or a task told to end; the library never ends the process itself.

Every ``UsageError`` message follows one format: the thing, the rule, and what was
received, e.g. ``num_replicas must be a positive int. Received: num_replicas=0``. The CLI
(``commands.cli.run``) prints each of the three as one line on stderr and exits with
code 2 (``UsageError``), 1 (``EnvironmentFault``) or the ``TaskEnd``'s own.
"""
from __future__ import annotations

import difflib
import errno
import os
from typing import Any, Iterable, Mapping, TypeVar

_Entry = TypeVar("_Entry")


class UsageError(ValueError):
    """A user mistake: a bad argument, flag, file or environment setting."""


def check_positive_int(name: str, value: Any, *, allow_none: bool = False) -> Any:
    """Returns ``value`` if it is a positive int (or None when allowed), else raises."""
    if value is None and allow_none:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a positive int. Received: {name}={value!r}")
    return value


def nearest_hint(word: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'X'?)`` for the closest candidate, or an empty string."""
    near = difflib.get_close_matches(word, candidates, n=1)
    return f" (did you mean {near[0]!r}?)" if near else ""


def entry_of(table: Mapping[Any, _Entry], name: str, value: Any, *,
             listed: str | None = None) -> _Entry:
    """Returns ``table[value]``; an unknown ``value`` raises, listing the valid names
    (``listed``, default: the table's keys)."""
    try:
        return table[value]
    except (KeyError, TypeError):
        listed = ", ".join(table) if listed is None else listed
        raise UsageError(f"{name} must be one of {listed}. Received: {name}={value!r}") from None


def check_existing_dir(name: str, path: Any) -> str:
    """Returns ``path`` if it is an existing directory, else raises."""
    if not isinstance(path, str) or not os.path.isdir(path):
        raise UsageError(f"{name} must be an existing directory. Received: {name}={path!r}")
    return path


def check_writable_path(name: str, path: str | os.PathLike, *, is_dir: bool) -> str:
    """Returns ``path`` if it can be written (as a directory when ``is_dir``, else as a file):
    it is not the other kind, and its nearest existing parent is a writable directory."""
    path = os.path.abspath(path)
    if os.path.exists(path) and os.path.isdir(path) != is_dir:
        kind = "a directory" if is_dir else "a file path"
        raise UsageError(f"{name} must be {kind}. Received: {name}={path!r} (it is "
                         f"{'a file' if is_dir else 'a directory'})")
    existing = path
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing) or not os.access(existing, os.W_OK):
        problem = "is a file" if not os.path.isdir(existing) else "is not writable"
        raise UsageError(f"{name} must be a path that can be written. Received: "
                         f"{name}={path!r} ({existing!r} {problem})")
    return path


def os_fault(name: str, error: OSError, path: str | None = None) -> UsageError | EnvironmentFault:
    """The one-line error for an ``OSError`` while writing ``name`` (at ``path``): the
    machine's fault when the disk is full, else the path's."""
    path = error.filename or path
    where = f"writing {path}" if path else f"writing under {name}"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return EnvironmentFault(f"{name} needs free disk space. Received: {error.strerror} "
                                f"{where}")
    return UsageError(f"{name} must be a path that can be written. Received: "
                      f"{path or name!r} ({error.strerror})")


class EnvironmentFault(Exception):
    """A failure of the machine, not of the user's input (e.g. a full disk): one line on
    stderr and exit code 1."""


class TaskEnd(BaseException):
    """The task was told to end (SIGTERM or SIGINT) where no other handler could stop it,
    e.g. while it waited for its peers.

    A ``BaseException``, as ``KeyboardInterrupt``: an ``except Exception`` meant for errors
    does not swallow a stop.

    Attributes:
      exit_code: the process's exit code, ``128 + signal``.
    """

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code
