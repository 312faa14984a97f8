"""``input_context`` -> shard and per-replica batch size, in one place.

Every source asks this module which part of the data its input pipeline reads and how
big each replica's batch is. Without an ``input_context`` (a plain Estimator input_fn)
there is one pipeline, one replica and the whole batch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence, TypeVar

if TYPE_CHECKING:
    import tensorflow as tf

_Path = TypeVar("_Path")


def _pipelines(input_context: tf.distribute.InputContext | None) -> tuple[int, int]:
    if input_context is None:
        return 1, 0
    return input_context.num_input_pipelines, input_context.input_pipeline_id


def _replicas(input_context: tf.distribute.InputContext | None) -> int:
    return 1 if input_context is None else input_context.num_replicas_in_sync


def describe(input_context: tf.distribute.InputContext | None) -> str:
    """A short name for this pipeline, for error messages: "input pipeline 1 of 2"."""
    count, index = _pipelines(input_context)
    return f"input pipeline {index} of {count}"


def per_replica_batch_size(batch_size: int,
                           input_context: tf.distribute.InputContext | None) -> int:
    """The batch each replica receives for a global ``batch_size``."""
    if input_context is None:
        return batch_size
    return input_context.get_per_replica_batch_size(batch_size)


def shard(dataset: tf.data.Dataset,
          input_context: tf.distribute.InputContext | None) -> tf.data.Dataset:
    """The part of ``dataset`` that this input pipeline reads (all of it without a context)."""
    count, index = _pipelines(input_context)
    if count == 1:
        return dataset
    return dataset.shard(count, index)


def shard_size(num_records: int, input_context: tf.distribute.InputContext | None) -> int:
    """How many of ``num_records`` records ``shard`` gives this pipeline."""
    count, index = _pipelines(input_context)
    return len(range(index, num_records, count))


def shard_files(paths: Sequence[_Path],
                input_context: tf.distribute.InputContext | None) -> tuple[list[_Path], bool]:
    """Returns ``(paths this pipeline reads, whether it must still shard their records)``.

    With at least as many files as pipelines each pipeline reads whole files (file i goes
    to pipeline i mod N); with fewer, every pipeline reads every file and keeps every
    N-th record.
    """
    count, index = _pipelines(input_context)
    if len(paths) >= count:
        return list(paths[index::count]), False
    return list(paths), count > 1


def stream_layout(num_streams: int,
                  input_context: tf.distribute.InputContext | None) -> tuple[int, int, int]:
    """Which time-series streams this pipeline yields, and how it splits them by replica.

    Returns ``(first, per_replica, local_replicas)``: the pipeline owns streams
    ``first .. first + per_replica * local_replicas - 1`` and yields, at every step, one
    element per local replica in replica order, each holding ``per_replica`` consecutive
    streams. A MirroredStrategy hands element ``step * local_replicas + r`` to local
    replica ``r``, so a replica sees the same streams at every step.

    Raises:
      ValueError: ``num_streams`` is not divisible by the number of replicas.
    """
    replicas = _replicas(input_context)
    count, index = _pipelines(input_context)
    if num_streams % replicas:
        raise ValueError(
            f"num_streams must be divisible by the number of replicas ({replicas}) so every "
            f"replica keeps the same streams. Received: num_streams={num_streams}")
    if replicas % count:
        raise ValueError(
            f"the number of replicas ({replicas}) must be divisible by the number of input "
            f"pipelines. Received: num_input_pipelines={count}")
    per_replica = num_streams // replicas
    local_replicas = replicas // count
    return index * local_replicas * per_replica, per_replica, local_replicas


def record_shard(input_context: tf.distribute.InputContext | None) -> tuple[int, int]:
    """``(num_shards, shard_id)`` for record-level sharding of this pipeline."""
    return _pipelines(input_context)
