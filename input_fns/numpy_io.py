"""``numpy_input_fn`` / ``pandas_input_fn``: the ``tf.estimator.inputs`` functions as Datasets.

``tf.compat.v1.estimator.inputs.numpy_input_fn`` and ``pandas_input_fn`` build
queue-runner tensors, which no distribution strategy can split. These take the same
arguments and return an ``input_fn(input_context=None)`` built on ``from_arrays``: a
``tf.data.Dataset`` that each input pipeline shards and batches per replica.

One difference, the same as ``from_arrays``: ``batch_size`` is the **global** batch. On
one device that is what the originals give; under a strategy each replica receives
``input_context.get_per_replica_batch_size(batch_size)`` rows. The last batch of a
finite pass may be short, as with the originals. ``queue_capacity`` and ``num_threads``
are accepted for the originals' signature and not used: tf.data sizes its own buffers.
"""
from __future__ import annotations

from typing import Any, cast

import numpy as np

from input_fns._pipeline import InputFn
from input_fns.arrays import from_arrays


def _check_shuffle(shuffle: Any) -> None:
    if not isinstance(shuffle, bool):
        raise TypeError(f"shuffle must be explicitly set as a bool. Received: shuffle={shuffle!r}")


def numpy_input_fn(x: Any, y: Any = None, batch_size: int = 128, num_epochs: int | None = 1,
                   shuffle: bool | None = None, queue_capacity: int = 1000,
                   num_threads: int = 1) -> InputFn:
    """Returns an ``input_fn(input_context=None)`` over NumPy arrays, like the original.

    Args:
      x: an array or a dict of arrays (features), rows along the first axis.
      y: an array or a dict of arrays (labels), or None.
      batch_size: the global batch (see the module docstring).
      num_epochs: passes over the data; None repeats forever.
      shuffle: a bool, required as in the original.
      queue_capacity, num_threads: accepted, unused.

    Raises:
      TypeError: ``shuffle`` is not a bool.
      ValueError: a bad ``batch_size`` or ``num_epochs``, or arrays of different lengths.
    """
    del queue_capacity, num_threads  # tf.data sizes its own buffers.
    _check_shuffle(shuffle)
    return from_arrays(x, y, batch_size=batch_size, shuffle=cast(bool, shuffle),
                       num_epochs=num_epochs, drop_remainder=False)


def _columns(frame: Any) -> dict[str, np.ndarray] | np.ndarray:
    if hasattr(frame, "columns"):
        return {str(name): np.asarray(frame[name]) for name in frame.columns}
    return np.asarray(frame)


def pandas_input_fn(x: Any, y: Any = None, batch_size: int = 128, num_epochs: int | None = 1,
                    shuffle: bool | None = None, queue_capacity: int = 1000, num_threads: int = 1,
                    target_column: str = "target") -> InputFn:
    """Returns an ``input_fn(input_context=None)`` over a DataFrame, like the original.

    Features are a dict with one entry per column of ``x``; labels are ``y`` (a Series, or
    a dict of columns for a DataFrame), matched to ``x`` by index as in the original.

    Args:
      x: a ``pandas.DataFrame``.
      y: a ``pandas.Series`` or ``DataFrame`` whose index matches ``x``'s, or None.
      batch_size, num_epochs, shuffle, queue_capacity, num_threads: as ``numpy_input_fn``.
      target_column: must not name a column of ``x`` when ``y`` is given (as the original).

    Raises:
      ValueError: ``y``'s index differs from ``x``'s, or ``target_column`` is a column of x.
    """
    _check_shuffle(shuffle)
    if y is not None:
        if target_column in x.columns:
            raise ValueError(f"target_column must not name a column of x. Received: "
                             f"target_column={target_column!r}")
        if not np.array_equal(x.index, y.index):
            raise ValueError("y's index must match x's index. Received: different indexes")
        y = _columns(y)
    return numpy_input_fn(_columns(x), y, batch_size=batch_size, num_epochs=num_epochs,
                          shuffle=shuffle, queue_capacity=queue_capacity,
                          num_threads=num_threads)
