"""``from_tfrecord`` and ``write_tfrecords``: ``tf.train.Example`` files in and out."""
from __future__ import annotations

import csv
import os
from typing import Any, Mapping, Sequence

import numpy as np
import tensorflow as tf

from input_fns import _file_lists, _pipeline, _record_reading

_FEATURE_TYPES = (tf.io.FixedLenFeature, tf.io.VarLenFeature, tf.io.FixedLenSequenceFeature)


def _empty_feature(dtype: tf.DType, count: int) -> tf.train.Feature:
    if dtype == tf.string:
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[b""] * count))
    if dtype.is_floating:
        return tf.train.Feature(float_list=tf.train.FloatList(value=[0.0] * count))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[0] * count))


def _sentinel(feature_spec: Mapping[str, Any]) -> bytes:
    """A serialized Example that parses under ``feature_spec``."""
    feature = {}
    for key, spec in feature_spec.items():
        count = int(np.prod(spec.shape)) if isinstance(spec, tf.io.FixedLenFeature) else 0
        feature[key] = _empty_feature(tf.as_dtype(spec.dtype), count)
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _check_spec(feature_spec: Any, label_key: str | None) -> None:
    if not isinstance(feature_spec, dict) or not feature_spec:
        raise ValueError("feature_spec must be a non-empty dict of feature name -> "
                         f"tf.io.FixedLenFeature or VarLenFeature. Received: {feature_spec!r}")
    for key, spec in feature_spec.items():
        if not isinstance(spec, _FEATURE_TYPES):
            names = ", ".join(t.__name__ for t in _FEATURE_TYPES)
            raise ValueError(f"feature_spec[{key!r}] must be one of {names}. "
                             f"Received: {spec!r}")
    if label_key is not None and label_key not in feature_spec:
        raise ValueError(f"label_key must be a key of feature_spec ({sorted(feature_spec)}). "
                         f"Received: label_key={label_key!r}")


class _TFRecordSource(_record_reading.Source):

    def __init__(self, paths: list[str], feature_spec: dict[str, Any]) -> None:
        self.paths = paths
        self.sizes = _file_lists.file_sizes(paths)
        self.sentinel = _sentinel(feature_spec)
        self.feature_spec = feature_spec

    def raw_records(self, path: tf.Tensor) -> tf.data.Dataset:
        return tf.data.TFRecordDataset(path)

    def record_size(self, records: tf.Tensor) -> tf.Tensor:
        return (tf.cast(tf.strings.length(records), tf.int64)
                + _record_reading.TFRECORD_FRAMING_BYTES)

    def decode_one(self, record: tf.Tensor, name: tf.Tensor) -> dict[str, tf.Tensor]:
        return tf.io.parse_single_example(record, self.feature_spec, example_names=name)

    def decode_batch(self, records: tf.Tensor, names: tf.Tensor) -> dict[str, tf.Tensor]:
        return tf.io.parse_example(records, self.feature_spec, example_names=names)


def from_tfrecord(file_pattern: _file_lists.FilePattern, feature_spec: Mapping[str, Any], *,
                  label_key: str | None = None, batch_size: int, shuffle: bool = True,
                  num_epochs: int | None = None, seed: int | None = None,
                  drop_remainder: bool = True, on_error: str = "raise") -> _pipeline.InputFn:
    """Returns an ``input_fn(input_context=None)`` over ``tf.train.Example`` TFRecord files.

    Args:
      file_pattern: a path, a glob, or a list of them.
      feature_spec: feature name -> ``tf.io.FixedLenFeature`` (fixed shape, dense) or
        ``tf.io.VarLenFeature`` (variable length, a ``tf.sparse.SparseTensor``).
      label_key: the feature returned as labels; None returns features only.
      batch_size: the global batch (see ``from_arrays``).
      shuffle: shuffle every epoch: file order, chunks of 256 records (a buffer of
        about 10,000 records), and records within blocks of 4,096.
      num_epochs: passes over the data; None repeats forever.
      seed: with a seed the order is the same in every run.
      drop_remainder: drop a last partial batch, so batch shapes are static.
      on_error: "raise" fails on the first bad record, naming its file and index;
        "skip" drops bad records and reports each run of them on stderr with a count.

    With at least as many files as input pipelines each pipeline reads whole files
    (file i goes to pipeline i mod N); otherwise every pipeline reads every file and
    keeps records i mod N == its id.

    Raises:
      FileNotFoundError: a pattern matches no file.
      ValueError: a bad argument or feature spec.
    """
    _pipeline.check_batching(batch_size, num_epochs)
    _pipeline.check_on_error(on_error)
    _check_spec(feature_spec, label_key)
    source = _TFRecordSource(_file_lists.expand(file_pattern), dict(feature_spec))
    return _record_reading.make_input_fn(
        source, split=_record_reading.split_label(label_key), batch_size=batch_size,
        shuffle=shuffle, num_epochs=num_epochs, seed=seed, drop_remainder=drop_remainder,
        on_error=on_error)


def _feature(values: Any) -> tf.train.Feature:
    values = np.asarray(values).reshape(-1)
    if values.dtype.kind == "f":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    if values.dtype.kind in "iub":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    if values.dtype.kind in "SUO":
        data = [v.encode() if isinstance(v, str) else bytes(v) for v in values]
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=data))
    raise ValueError(f"arrays must hold numbers, bools or strings. Received: dtype={values.dtype}")


def _column(values: Sequence[str]) -> np.ndarray:
    """CSV strings -> int64 if all are ints, else float32 if all are numbers, else strings."""
    for convert, dtype in ((int, np.int64), (float, np.float32)):
        try:
            return np.asarray([convert(v) for v in values], dtype=dtype)
        except ValueError:
            continue
    return np.asarray(values, dtype=object)


def _read_csv(path: str) -> dict[str, np.ndarray]:
    with open(path, newline="", encoding="utf-8") as stream:
        rows = list(csv.reader(stream))
    if not rows:
        raise ValueError(f"CSV file must have a header line. Received: empty file {path!r}")
    header, body = rows[0], rows[1:]
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise ValueError(f"CSV rows must have {len(header)} fields like the header of "
                             f"{path}. Received: {len(row)} fields at line {number}")
    return {name: _column([row[i] for row in body]) for i, name in enumerate(header)}


def _packed_columns(columns: dict[str, np.ndarray], name: str,
                    label_key: str) -> dict[str, np.ndarray]:
    """All columns but ``label_key`` stacked, in order, into one float32 column ``name``."""
    numeric = {key: values.dtype.kind in "iuf" for key, values in columns.items()}
    features = _pipeline.packed_columns(numeric, label_key)
    packed = {name: np.stack([columns[key] for key in features], axis=1).astype(np.float32)}
    if label_key in columns:
        packed[label_key] = columns[label_key]
    return packed


def _write_shards(columns: dict[str, np.ndarray], output_prefix: str | os.PathLike,
                  num_shards: int) -> list[str]:
    lengths = {len(v) for v in columns.values()}
    if len(lengths) != 1:
        raise ValueError("arrays must all have the same number of rows. "
                         f"Received: row counts {sorted(lengths)}")
    directory = os.path.dirname(os.fspath(output_prefix))
    if directory:
        os.makedirs(directory, exist_ok=True)
    paths = []
    for shard, rows in enumerate(np.array_split(np.arange(lengths.pop()), num_shards)):
        path = f"{os.fspath(output_prefix)}-{shard:05d}-of-{num_shards:05d}.tfrecord"
        with tf.io.TFRecordWriter(path) as writer:
            for row in rows:
                feature = {key: _feature(values[row]) for key, values in columns.items()}
                example = tf.train.Example(features=tf.train.Features(feature=feature))
                writer.write(example.SerializeToString())
        paths.append(path)
    return paths


def write_tfrecords(data: Mapping[str, Any] | str | os.PathLike, output_prefix: str | os.PathLike,
                    *, num_shards: int, labels: Any = None, label_key: str = "label",
                    pack_features: str | None = None) -> list[str]:
    """Writes ``tf.train.Example`` records into ``num_shards`` files; returns their paths.

    Args:
      data: a dict of arrays (rows along the first axis; each row is stored flattened),
        or the path of a CSV file with a header line (integer columns become int64,
        numeric ones float, the rest bytes).
      output_prefix: files are ``{output_prefix}-00000-of-0000N.tfrecord`` and so on.
      num_shards: how many files; consecutive rows go to the same file.
      labels: an array stored under ``label_key`` (arrays only).
      label_key: the feature name of ``labels`` (for a CSV: its label column).
      pack_features: for a CSV, a feature name: store every column but ``label_key``, in
        file order, as this one float feature (the layout ``from_files`` reads).

    Read them back with ``from_tfrecord(paths, feature_spec, label_key=...)`` where each
    feature is ``tf.io.FixedLenFeature(array.shape[1:], dtype)``.
    """
    _pipeline.check_positive_int("num_shards", num_shards)
    if not isinstance(data, (str, os.PathLike)):
        if pack_features is not None:
            raise ValueError("pack_features applies to a CSV file only; stack the arrays "
                             f"instead. Received: pack_features={pack_features!r}")
        columns = {key: np.asarray(value) for key, value in dict(data).items()}
        if labels is not None:
            columns[label_key] = np.asarray(labels)
        return _write_shards(columns, output_prefix, num_shards)
    if labels is not None:
        raise ValueError("labels must be None when data is a CSV file (its label is a "
                         "column). Received: labels of type " + type(labels).__name__)
    columns = _read_csv(os.fspath(data))
    if pack_features is not None:
        columns = _packed_columns(columns, pack_features, label_key)
    return _write_shards(columns, output_prefix, num_shards)
