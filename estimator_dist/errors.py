"""The one error type for user mistakes.

Every message follows one format: the thing, the rule, and what was received, e.g.
``num_replicas must be a positive int. Received: num_replicas=0``. The CLI prints a
``UsageError`` as one line on stderr and exits with code 2.
"""
import os


class UsageError(ValueError):
    """A user mistake: a bad argument, flag, file or environment setting."""


def check_positive_int(name, value, *, allow_none=False):
    """Returns ``value`` if it is a positive int (or None when allowed), else raises."""
    if value is None and allow_none:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a positive int. Received: {name}={value!r}")
    return value


def check_existing_dir(name, path):
    """Returns ``path`` if it is an existing directory, else raises."""
    if not isinstance(path, str) or not os.path.isdir(path):
        raise UsageError(f"{name} must be an existing directory. Received: {name}={path!r}")
    return path
