"""``from_arrays``: an input_fn over in-memory NumPy arrays."""
from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from input_fns import _pipeline


def _num_rows(structure: Any, name: str) -> int:
    lengths = {len(a) for a in tf.nest.flatten(structure)}
    if len(lengths) != 1:
        raise ValueError(f"{name} arrays must all have the same number of rows. "
                         f"Received: row counts {sorted(lengths)}")
    return lengths.pop()


def from_arrays(features: Any, labels: Any = None, *, batch_size: int, shuffle: bool = True,
                num_epochs: int | None = None, seed: int | None = None,
                drop_remainder: bool = True) -> _pipeline.InputFn:
    """Returns an ``input_fn(input_context=None)`` that batches ``features`` and ``labels``.

    Args:
      features: an array or a dict of arrays, rows along the first axis.
      labels: an array, a dict of arrays, or None (prediction).
      batch_size: the global batch. Under a strategy each replica receives
        ``input_context.get_per_replica_batch_size(batch_size)`` rows, and input pipeline
        ``i`` of ``N`` reads rows ``i, i + N, i + 2N, ...``.
      shuffle: shuffle rows: each epoch is a new permutation of the pipeline's rows.
      num_epochs: passes over the data; None repeats forever.
      seed: shuffle seed; with a seed the order is the same in every run.
      drop_remainder: drop a last partial batch, so batch shapes are static.

    Raises:
      ValueError: a bad argument, arrays of different lengths, or (when the input_fn is
        called) fewer rows than input pipelines.
    """
    _pipeline.check_batching(batch_size, num_epochs)
    features = tf.nest.map_structure(np.asarray, features)
    labels = None if labels is None else tf.nest.map_structure(np.asarray, labels)
    data = features if labels is None else (features, labels)
    rows = _num_rows(data, "features and labels")

    def input_fn(input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        _pipeline.check_shard_not_empty(rows, input_context)
        indices = _pipeline.index_batches(
            rows, input_context, batch_size=batch_size, shuffle=shuffle, num_epochs=num_epochs,
            seed=seed, drop_remainder=drop_remainder)
        dataset = indices.map(lambda i: tf.nest.map_structure(lambda a: tf.gather(a, i), data),
                              num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return dataset.prefetch(tf.data.AUTOTUNE)

    return input_fn
