"""``from_files``: CSV or TFRecord files as a dense feature ``x`` plus an integer label."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import tensorflow as tf

from input_fns import _file_lists, checks, csv_files
from input_fns._pipeline import InputFn
from input_fns.csv_files import from_csv
from input_fns.tfrecords import from_tfrecord

FORMATS = _file_lists.FORMATS


def _check_x_shape(x_shape: Sequence[int]) -> list[int]:
    shape = [int(d) for d in x_shape]
    if any(d == 0 or d < -1 for d in shape) or shape.count(-1) > 1:
        raise ValueError("x_shape must be positive sizes with at most one -1 (inferred). "
                         f"Received: x_shape={list(x_shape)!r}")
    return shape


def _inferred(x_shape: list[int], size: int, where: str) -> list[int]:
    """``x_shape`` with its -1 replaced so that it holds ``size`` values."""
    known = int(np.prod([d for d in x_shape if d != -1]))
    if size % known or (-1 not in x_shape and size != known):
        raise ValueError(f"x_shape must hold the {size} values of x in {where}. "
                         f"Received: x_shape={x_shape}")
    return [size // known if d == -1 else d for d in x_shape]


def _first_record_size(path: str, label: str) -> int:
    """How many values feature ``x`` has in the first record of a TFRecord file."""
    for _, values, _ in checks.tfrecord_records(path, label, limit=1):
        return len(values)
    raise ValueError(f"TFRecord file must hold records. Received: empty file {path}")


def _reshaped(input_fn: InputFn, x_shape: list[int]) -> InputFn:
    def reshaped_input_fn(input_context: tf.distribute.InputContext | None = None
                          ) -> tf.data.Dataset:
        def reshape(features: dict[str, tf.Tensor],
                    labels: tf.Tensor) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
            x = features["x"]
            return {"x": tf.reshape(x, [-1] + x_shape)}, labels

        dataset = input_fn(input_context)
        return dataset.map(reshape, num_parallel_calls=tf.data.AUTOTUNE)

    return reshaped_input_fn


def from_files(file_pattern: _file_lists.FilePattern, file_format: str | None = None, *,
               x_shape: Sequence[int], label: str = "label", batch_size: int, shuffle: bool = True,
               num_epochs: int | None = None, seed: int | None = None, drop_remainder: bool = True,
               on_error: str = "raise") -> InputFn:
    """Returns an ``input_fn(input_context=None)`` yielding ``({"x": x}, labels)``.

    ``x`` is float32 [batch, *x_shape]; labels int64 [batch]. The layout the built-in
    models read, from either format:

    * CSV with a header line: the ``label`` column, and every other column numeric; those
      columns, in file order, are ``x`` flattened (``prod(x_shape)`` columns).
    * TFRecord ``tf.train.Example``: float feature ``x`` of ``prod(x_shape)`` values and
      int64 feature ``label`` (what ``write_tfrecords({"x": x}, ..., labels=y)`` writes).

    Args:
      file_pattern: a path, a glob, or a list of them.
      file_format: "csv" or "tfrecord"; None infers it from the file extensions.
      x_shape: the shape of one example's ``x``, e.g. [16] or [24, 1]; one size may be
        -1, inferred from the number of CSV columns or from the first TFRecord record.
      label: the label column or feature.
      batch_size, shuffle, num_epochs, seed, drop_remainder, on_error: as in
        ``from_tfrecord``.
    """
    paths = _file_lists.expand(file_pattern)
    file_format = file_format or _file_lists.infer_format(paths)
    x_shape = _check_x_shape(x_shape)
    options: dict[str, Any] = dict(batch_size=batch_size, shuffle=shuffle,
                                   num_epochs=num_epochs, seed=seed,
                                   drop_remainder=drop_remainder, on_error=on_error)
    if file_format == "csv":
        columns = csv_files.header_columns(paths, None, True, ",")
        x_shape = _inferred(x_shape, len(columns) - (label in columns), paths[0])
        input_fn = from_csv(paths, label_column=label, column_dtypes={label: tf.int64},
                            pack_features="x", **options)
        return _reshaped(input_fn, x_shape)
    if file_format == "tfrecord":
        if -1 in x_shape:
            x_shape = _inferred(x_shape, _first_record_size(paths[0], label), paths[0])
        spec = {"x": tf.io.FixedLenFeature(x_shape, tf.float32),
                label: tf.io.FixedLenFeature([], tf.int64)}
        return from_tfrecord(paths, spec, label_key=label, **options)
    raise ValueError(f"file_format must be one of {', '.join(FORMATS)}. "
                     f"Received: file_format={file_format!r}")
