"""``from_arrays``: an input_fn over in-memory NumPy arrays."""
import numpy as np
import tensorflow as tf

from input_fns import _sharding

_SHUFFLE_BUFFER = 10_000


def _num_rows(structure, name):
    lengths = {len(a) for a in tf.nest.flatten(structure)}
    if len(lengths) != 1:
        raise ValueError(f"{name} arrays must all have the same number of rows. "
                         f"Received: row counts {sorted(lengths)}")
    return lengths.pop()


def from_arrays(features, labels=None, *, batch_size, shuffle=True, num_epochs=None, seed=None,
                drop_remainder=True):
    """Returns an ``input_fn(input_context=None)`` that batches ``features`` and ``labels``.

    Args:
      features: an array or a dict of arrays, rows along the first axis.
      labels: an array, a dict of arrays, or None (prediction).
      batch_size: the global batch. Under a strategy each replica receives
        ``input_context.get_per_replica_batch_size(batch_size)`` rows.
      shuffle: shuffle rows each epoch.
      num_epochs: passes over the data; None repeats forever.
      seed: shuffle seed; with a seed the order is the same in every run.
      drop_remainder: drop a last partial batch, so batch shapes are static.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int. Received: batch_size={batch_size!r}")
    features = tf.nest.map_structure(np.asarray, features)
    labels = None if labels is None else tf.nest.map_structure(np.asarray, labels)
    rows = _num_rows(features if labels is None else (features, labels), "features and labels")

    def input_fn(input_context=None):
        data = features if labels is None else (features, labels)
        dataset = _sharding.shard(tf.data.Dataset.from_tensor_slices(data), input_context)
        if shuffle:
            dataset = dataset.shuffle(min(rows, _SHUFFLE_BUFFER), seed=seed)
        dataset = dataset.repeat(num_epochs)
        dataset = dataset.batch(_sharding.per_replica_batch_size(batch_size, input_context),
                                drop_remainder=drop_remainder)
        return dataset.prefetch(tf.data.AUTOTUNE)

    return input_fn
