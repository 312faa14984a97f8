"""Records from files: sharding, interleaving, record indices, and bad-record handling.

Every record travels with the index of its file and its index in that file, so an
error names both. One pass over a file yields its records and then one end marker;
the marker lets a file's checks run when the file is done:

* a TFRecord file whose records do not add up to its size was cut short or is corrupt
  (the reader stops at the first bad record): "raise" fails there, "skip" reports it;
* under "skip", records that fail to decode are dropped and each run of them is
  reported on stderr with the file, the record indices and a count.

Records move in chunks of ``_CHUNK`` (one file's consecutive records) so that this
bookkeeping, sharding and shuffling cost once per chunk, not once per record.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

import tensorflow as tf

from input_fns import _pipeline, _sharding

# ``split(decoded)``: a decoded dict -> ``features`` or ``(features, labels)``.
Split = Callable[[dict[str, tf.Tensor]], Any]
_NO_SIZE = -1
_CHUNK = 256
_BLOCK = 4096
TFRECORD_FRAMING_BYTES = 16  # length (8) + its CRC (4) + data CRC (4)


def message(*parts: Any) -> tf.Tensor:
    """A string tensor joined from strings and numbers (tensors or Python values)."""
    return tf.strings.join([p if isinstance(p, str) or (tf.is_tensor(p) and p.dtype == tf.string)
                            else tf.strings.as_string(p) for p in parts])


def fail_unless(ok: tf.Tensor, make_message: Callable[[], tf.Tensor]) -> tf.Tensor:
    """An op that raises InvalidArgumentError(``make_message()``) when ``ok`` is False.

    The message is built only on failure.
    """

    def fail() -> tf.Tensor:
        assertion = tf.debugging.Assert(False, [make_message()])
        with tf.control_dependencies([assertion]):
            return tf.identity(ok)

    return tf.cond(ok, lambda: tf.identity(ok), fail)


def report(*parts: Any) -> tf.Operation:
    """Prints a line on stderr from inside the pipeline (also when TF logging is quiet)."""
    return tf.print("input_fns:", message(*parts), output_stream=sys.stderr)


class Source:
    """How one file format is read and decoded. Subclasses set the methods below.

    Attributes:
      paths: the files, sorted.
      sizes: their sizes in bytes where a full pass must add up to them, else None.
      sentinel: a record that ``decode_one`` decodes without error (marks a file's end).
    """

    paths: Sequence[str] = ()
    sizes: list[int] | None = None
    sentinel: bytes = b""

    def raw_records(self, path: tf.Tensor) -> tf.data.Dataset:
        """A dataset of this file's records (strings)."""
        raise NotImplementedError

    def record_size(self, records: tf.Tensor) -> tf.Tensor:
        """Bytes each of ``records`` takes in its file (only used when ``sizes`` is set)."""
        return tf.zeros(tf.shape(records), tf.int64)

    def name(self, path: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
        """A record's name in error messages: "PATH record INDEX"."""
        return message(path, " record ", index)

    def decode_one(self, record: tf.Tensor, name: tf.Tensor) -> dict[str, tf.Tensor]:
        """One record -> its features structure (raises on a bad record)."""
        raise NotImplementedError

    def decode_batch(self, records: tf.Tensor, names: tf.Tensor) -> dict[str, tf.Tensor]:
        """A batch of records -> batched features; raises naming the first bad record."""
        raise NotImplementedError


def _indexed_chunks(source: Source, file_index: tf.Tensor, path: tf.Tensor, size: tf.Tensor,
                    on_error: str) -> tf.data.Dataset:
    """Chunks ``(is_end, file_index, index, record)`` [n] of one file, then the end marker.

    Records travel in chunks of ``_CHUNK`` so that the bookkeeping costs once per chunk.
    """
    raw = source.raw_records(path)
    if source.sizes is not None:
        raw = raw.ignore_errors()  # The reader stops at a bad record; the size check tells.
    chunks = raw.batch(_CHUNK).map(lambda records: (False, records)).concatenate(
        tf.data.Dataset.from_tensors((True, tf.constant([source.sentinel]))))

    def step(state: tuple[tf.Tensor, tf.Tensor], element: tuple[tf.Tensor, tf.Tensor]
             ) -> tuple[tuple[tf.Tensor, tf.Tensor], tuple[tf.Tensor, ...]]:
        index, offset = state
        is_end, records = element
        complete = tf.logical_or(tf.logical_not(is_end),
                                 tf.logical_or(tf.equal(size, _NO_SIZE), tf.equal(offset, size)))
        if on_error == "raise":
            check = fail_unless(complete, lambda: message(
                "corrupt or truncated TFRecord file ", path, " at record ", index,
                " (read ", offset, " of ", size, " bytes)"))
        else:
            check = tf.cond(complete, tf.no_op, lambda: report(
                "skipped the rest of ", path, " from record ", index,
                ": the file is corrupt or truncated there"))
        count = tf.size(records, out_type=tf.int64)
        with tf.control_dependencies([check]):
            new_state = (index + count, offset + tf.reduce_sum(source.record_size(records)))
            return new_state, (tf.fill([count], is_end), tf.fill([count], file_index),
                               index + tf.range(count), records)

    start = (tf.constant(0, tf.int64), tf.constant(0, tf.int64))
    return chunks.scan(start, step)


def _skip_bad(source: Source, records: tf.data.Dataset, path: tf.Tensor, shards: int,
              shard_id: int) -> tf.data.Dataset:
    """Decodes each record, dropping and reporting those that fail."""

    def decode(is_end: tf.Tensor, file_index: tf.Tensor, index: tf.Tensor,
               record: tf.Tensor) -> tuple[Any, ...]:
        return is_end, file_index, index, source.decode_one(record, source.name(path, index))

    decoded = records.map(decode).ignore_errors()

    def step(state: tuple[tf.Tensor, tf.Tensor],
             element: tuple[Any, ...]) -> tuple[tuple[tf.Tensor, tf.Tensor], tuple[Any, ...]]:
        expected, skipped = state
        is_end, _, index, _ = element
        missing = tf.maximum((index - expected + shards - 1) // shards, 0)
        total = skipped + missing
        gap = tf.cond(missing > 0, lambda: report(
            "skipped ", missing, " bad record(s) before ", source.name(path, index)), tf.no_op)
        end = tf.cond(tf.logical_and(is_end, total > 0), lambda: report(
            "skipped ", total, " bad record(s) in all of ", path), tf.no_op)
        with tf.control_dependencies([gap, end]):
            return (index + shards, total), element

    start = (tf.constant(shard_id, tf.int64), tf.constant(0, tf.int64))
    return decoded.scan(start, step)


def _file_reader(source: Source, pipelines: tuple[int, int],
                 on_error: str) -> Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.data.Dataset]:
    """``read(file_index, path, size)``: one file's chunks of ``(file_index, index, record)``
    for this pipeline, records decoded under "skip"."""
    shards, shard_id = pipelines

    def own(is_end: tf.Tensor, file_index: tf.Tensor, index: tf.Tensor,
            record: tf.Tensor) -> tuple[tf.Tensor, ...]:
        keep = tf.logical_or(is_end, tf.equal(index % shards, shard_id))
        return tuple(tf.boolean_mask(t, keep) for t in (is_end, file_index, index, record))

    def read(file_index: tf.Tensor, path: tf.Tensor, size: tf.Tensor) -> tf.data.Dataset:
        chunks = _indexed_chunks(source, file_index, path, size, on_error)
        if shards > 1:
            chunks = chunks.map(own)
        if on_error == "skip":
            records = _skip_bad(source, chunks.unbatch(), path, shards, shard_id)
            return records.filter(lambda is_end, *_: tf.logical_not(is_end)).map(
                lambda _, file_index, index, value: (file_index, index, value)).batch(_CHUNK)
        chunks = chunks.filter(lambda is_end, *_: tf.logical_not(tf.reduce_any(is_end)))
        return chunks.map(lambda _, file_index, index, record: (file_index, index, record))

    return read


def read(source: Source, input_context: tf.distribute.InputContext | None, *, shuffle: bool,
         seed: int | None, on_error: str, cycle_length: int = 4) -> tf.data.Dataset:
    """This pipeline's chunks of ``(file_index, index, record)``, decoded under "skip".

    Whole files per pipeline when there are at least as many files as pipelines,
    every N-th record of every file otherwise. File order is shuffled with ``seed``.
    """
    paths, record_level = _sharding.shard_files(source.paths, input_context)
    indices = [source.paths.index(p) for p in paths]
    sizes = source.sizes or [_NO_SIZE] * len(source.paths)
    files = tf.data.Dataset.from_tensor_slices(
        (tf.constant(indices, tf.int64), tf.constant(paths), tf.constant(
            [sizes[i] for i in indices], tf.int64)))
    if shuffle:
        files = files.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True)
    pipelines = _sharding.record_shard(input_context) if record_level else (1, 0)
    records = files.interleave(
        _file_reader(source, pipelines, on_error), cycle_length=min(cycle_length, len(paths)),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    first = files.flat_map(
        lambda _, path, __: source.raw_records(path).skip(pipelines[1]).take(1))
    noun = "file" if len(paths) == 1 else "files"
    return _pipeline.require_records(records, first, (
        f"{_sharding.describe(input_context)} received no records from its {len(paths)} "
        f"{noun} ({', '.join(paths[:3])}{', ...' if len(paths) > 3 else ''}): use fewer input "
        "pipelines or more data"))


def split_label(label: str | None) -> Split:
    """A function ``decoded dict -> features`` or ``(features, labels)``."""

    def split(decoded: dict[str, tf.Tensor]) -> Any:
        if label is None:
            return decoded
        features = dict(decoded)
        return features, features.pop(label)

    return split


def _mixed(chunks: tf.data.Dataset, seed: int | None) -> tf.data.Dataset:
    """Chunks -> blocks of ``_BLOCK`` records, each in a random (seeded) order.

    With chunks already shuffled, this shuffles records without a per-record step.
    """
    def permute(block: tuple[tf.Tensor, ...], key: tf.Tensor) -> tuple[tf.Tensor, ...]:
        order = tf.random.experimental.stateless_shuffle(
            tf.range(tf.shape(block[0])[0]), seed=tf.stack([key, 0]))
        return tuple(tf.gather(t, order) for t in block)

    blocks = chunks.rebatch(_BLOCK)
    return tf.data.Dataset.zip((blocks, tf.data.Dataset.random(seed=seed))).map(permute)


def _batched_records(chunks: tf.data.Dataset, *, shuffle: bool, num_epochs: int | None,
                     seed: int | None, shuffle_buffer: int) -> tf.data.Dataset:
    """Under "raise": shuffle chunks (a buffer of ``shuffle_buffer`` records), then records
    within blocks; batching follows by ``rebatch``."""
    if shuffle:
        chunks = chunks.shuffle(max(shuffle_buffer // _CHUNK, 1), seed=seed)
        chunks = _mixed(chunks, seed)
    return chunks.repeat(num_epochs)


def make_input_fn(source: Source, *, split: Split, batch_size: int, shuffle: bool,
                  num_epochs: int | None, seed: int | None, drop_remainder: bool, on_error: str,
                  shuffle_buffer: int = _pipeline.SHUFFLE_BUFFER) -> _pipeline.InputFn:
    """The input_fn over ``source``; ``split(decoded)`` returns ``features`` or ``(features,
    labels)``."""
    def decode(file_indices: tf.Tensor, indices: tf.Tensor, records: tf.Tensor) -> Any:
        names = source.name(tf.gather(source.paths, file_indices), indices)
        return split(source.decode_batch(records, names))

    def skipping_input_fn(input_context: tf.distribute.InputContext | None = None
                          ) -> tf.data.Dataset:
        records = read(source, input_context, shuffle=shuffle, seed=seed, on_error="skip")
        records = _pipeline.shuffle_and_repeat(
            records.unbatch().map(lambda _, __, value: value), shuffle=shuffle,
            num_epochs=num_epochs, seed=seed, buffer_size=shuffle_buffer)
        batches = _pipeline.batch(records, batch_size, input_context, drop_remainder)
        return batches.map(split, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    def input_fn(input_context: tf.distribute.InputContext | None = None) -> tf.data.Dataset:
        chunks = read(source, input_context, shuffle=shuffle, seed=seed, on_error="raise")
        chunks = _batched_records(chunks, shuffle=shuffle, num_epochs=num_epochs,
                                  seed=seed, shuffle_buffer=shuffle_buffer)
        batches = chunks.rebatch(_sharding.per_replica_batch_size(batch_size, input_context),
                                 drop_remainder=drop_remainder)
        decoded = batches.map(decode, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return decoded.prefetch(tf.data.AUTOTUNE)

    return skipping_input_fn if on_error == "skip" else input_fn
