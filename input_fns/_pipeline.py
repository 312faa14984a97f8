"""What every source shares: argument checks, shuffle/repeat/batch, and the empty-shard check."""
from __future__ import annotations

from typing import Any, Callable, Mapping

import tensorflow as tf

from input_fns import _sharding

# What every source returns: ``input_fn(input_context=None)``, a dataset of batches.
InputFn = Callable[..., tf.data.Dataset]
SHUFFLE_BUFFER = 10_000
ON_ERROR_MODES = ("raise", "skip")


def check_positive_int(name: str, value: Any, *, allow_none: bool = False) -> Any:
    """Returns ``value`` if it is a positive int (or None when allowed), else raises."""
    if value is None and allow_none:
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int. Received: {name}={value!r}")
    return value


def check_on_error(on_error: str) -> str:
    if on_error not in ON_ERROR_MODES:
        raise ValueError(f"on_error must be one of {', '.join(map(repr, ON_ERROR_MODES))}. "
                         f"Received: on_error={on_error!r}")
    return on_error


def check_batching(batch_size: int, num_epochs: int | None) -> None:
    check_positive_int("batch_size", batch_size)
    check_positive_int("num_epochs", num_epochs, allow_none=True)


def index_batches(num_rows: int, input_context: tf.distribute.InputContext | None, *,
                  batch_size: int, shuffle: bool, num_epochs: int | None, seed: int | None,
                  drop_remainder: bool) -> tf.data.Dataset:
    """Per-replica batches of row indices [b] (int64) for this pipeline's shard of rows.

    Row ``i`` belongs to pipeline ``i mod N``. Each epoch is a full permutation of the
    shard (seeded), and batches are cut across epochs by ``rebatch``: nothing runs once
    per row.
    """
    count, index = _sharding.record_shard(input_context)
    rows = tf.range(index, num_rows, count, dtype=tf.int64)
    keys = tf.data.Dataset.random(seed=seed)
    if num_epochs is not None:
        keys = keys.take(num_epochs)

    def epoch(key: tf.Tensor) -> tf.Tensor:
        if not shuffle:
            return rows
        return tf.random.experimental.stateless_shuffle(rows, seed=tf.stack([key, 0]))

    size = _sharding.per_replica_batch_size(batch_size, input_context)
    return keys.map(epoch).rebatch(size, drop_remainder=drop_remainder)


def shuffle_and_repeat(dataset: tf.data.Dataset, *, shuffle: bool, num_epochs: int | None,
                       seed: int | None, buffer_size: int = SHUFFLE_BUFFER) -> tf.data.Dataset:
    """Shuffles (a new order each epoch, the same sequence of orders for one ``seed``)."""
    if shuffle:
        dataset = dataset.shuffle(buffer_size, seed=seed, reshuffle_each_iteration=True)
    return dataset.repeat(num_epochs)


def batch(dataset: tf.data.Dataset, batch_size: int,
          input_context: tf.distribute.InputContext | None,
          drop_remainder: bool) -> tf.data.Dataset:
    return dataset.batch(_sharding.per_replica_batch_size(batch_size, input_context),
                         drop_remainder=drop_remainder)


def check_shard_not_empty(num_rows: int, input_context: tf.distribute.InputContext | None,
                          what: str = "rows") -> None:
    """Raises when this pipeline's record-level shard of ``num_rows`` is empty."""
    if _sharding.shard_size(num_rows, input_context) == 0:
        raise ValueError(
            f"{_sharding.describe(input_context)} has no data: {num_rows} {what} cannot be "
            f"sharded over more input pipelines. Received: {num_rows} {what}")


def require_records(dataset: tf.data.Dataset, first: tf.data.Dataset,
                    message: str) -> tf.data.Dataset:
    """Fails with ``message`` when ``first`` (a cheap probe of ``dataset``) yields nothing.

    The probe runs once per pass, so an empty shard raises ``tf.errors.InvalidArgumentError``
    at the first step rather than ending training at step 0 or leaving peers waiting.
    """
    peek = first.take(1).map(lambda *_: True).concatenate(tf.data.Dataset.from_tensors(False))

    def check(has_records: tf.Tensor) -> tf.Tensor:
        assertion = tf.debugging.Assert(has_records, [message])
        with tf.control_dependencies([assertion]):
            return tf.identity(has_records)

    return peek.take(1).map(check).flat_map(lambda _: dataset)


def packed_columns(numeric: Mapping[str, bool], label: str | None) -> list[str]:
    """The columns ``pack_features`` stacks: all but ``label``, in order.

    Args:
      numeric: {column name: whether it holds numbers}, in file order.
      label: the label column's name (left out), or None.
    """
    columns = [name for name in numeric if name != label]
    text = [name for name in columns if not numeric[name]]
    if text:
        raise ValueError("pack_features needs numeric feature columns. "
                         f"Received: string columns {text}")
    return columns
