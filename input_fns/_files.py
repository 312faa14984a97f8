"""File lists: expand patterns, fail early and by name on a missing file."""
import tensorflow as tf


def _as_list(file_pattern):
    if isinstance(file_pattern, (str, bytes)) or hasattr(file_pattern, "__fspath__"):
        return [file_pattern]
    return list(file_pattern)


def expand(file_pattern):
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
        paths.extend(matches)
    return paths


def file_sizes(paths):
    return [tf.io.gfile.stat(path).length for path in paths]
