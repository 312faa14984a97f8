"""``from_csv``: an input_fn over CSV files with named, typed columns."""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import tensorflow as tf

from input_fns import _file_lists, _pipeline, _record_reading

_DTYPES = {tf.float32: "0", tf.float64: "0", tf.int32: "0", tf.int64: "0", tf.string: ""}
_NUMBER = {
    "float": r"\s*[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|(?i:inf|infinity|nan))\s*",
    "int": r"\s*[-+]?\d+\s*",
}
_QUOTED = r'"(?:[^"]|"")*"'


def _kind(dtype: tf.DType) -> str:
    if dtype == tf.string:
        return "string"
    return "float" if dtype.is_floating else "int"


def _line_pattern(dtypes: Sequence[tf.DType], delim: str) -> str:
    """A regex that a line matches exactly when ``decode_csv`` can decode it."""
    delim = re.escape(delim)
    string = rf'(?:{_QUOTED}|[^"{delim}]*)'
    return delim.join(string if _kind(d) == "string" else _NUMBER[_kind(d)] for d in dtypes)


def _read_header(path: str, delim: str) -> list[str]:
    try:
        with tf.io.gfile.GFile(path, "r") as stream:
            line = stream.readline().rstrip("\r\n")
    except UnicodeDecodeError as error:  # Its own message names no file.
        raise ValueError(f"CSV header of {path} must be UTF-8 text. Received: byte "
                         f"{error.object[error.start]:#04x} at offset {error.start}") from None
    return [name.strip().strip('"') for name in line.split(delim)] if line else []


def header_columns(paths: Sequence[str], column_names: Sequence[str] | None, header: bool,
                   delim: str) -> list[str]:
    """The columns, checked against every file's header line when ``header``."""
    if not header:
        if not column_names:
            raise ValueError("column_names must be given when header=False. "
                             f"Received: column_names={column_names!r}")
        return list(column_names)
    names = list(column_names) if column_names else _read_header(paths[0], delim)
    for path in paths:
        found = _read_header(path, delim)
        missing = [n for n in names if n not in found]
        if missing or len(found) != len(names):
            raise ValueError(
                f"CSV header of {path} must list the columns {names}. Received: {found} "
                f"(missing: {missing})")
    return names


def _check_dtypes(names: list[str], column_dtypes: Mapping[str, Any] | None,
                  label_column: str | None) -> list[tf.DType]:
    if label_column is not None and label_column not in names:
        raise ValueError(f"label_column must be one of the columns {names}. "
                         f"Received: label_column={label_column!r}")
    column_dtypes = dict(column_dtypes or {})
    unknown = sorted(set(column_dtypes) - set(names))
    if unknown:
        raise ValueError(f"column_dtypes must name columns of {names}. Received: {unknown}")
    dtypes = [tf.as_dtype(column_dtypes.get(name, tf.float32)) for name in names]
    for name, dtype in zip(names, dtypes):
        if dtype not in _DTYPES:
            raise ValueError(f"column_dtypes[{name!r}] must be one of "
                             f"{sorted(d.name for d in _DTYPES)}. Received: {dtype.name}")
    return dtypes


class _CSVSource(_record_reading.Source):

    def __init__(self, paths: list[str], names: list[str], dtypes: list[tf.DType], header: bool,
                 delim: str) -> None:
        self.paths = paths
        self.names = names
        self.dtypes = dtypes
        self.header = header
        self.delim = delim
        self.sentinel = delim.join(_DTYPES[dtype] for dtype in dtypes).encode()
        self.pattern = _line_pattern(dtypes, delim)

    def raw_records(self, path: tf.Tensor) -> tf.data.Dataset:
        return tf.data.TextLineDataset(path).skip(int(self.header))

    def name(self, path: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
        return _record_reading.message(path, " line ", index + 1 + int(self.header))

    def _decode(self, records: tf.Tensor) -> dict[str, tf.Tensor]:
        required = [tf.constant([], dtype) for dtype in self.dtypes]  # no default value
        values = tf.io.decode_csv(records, required, field_delim=self.delim)
        return dict(zip(self.names, values))

    def decode_one(self, record: tf.Tensor, name: tf.Tensor) -> dict[str, tf.Tensor]:
        del name  # decode_csv names no record; "skip" reports the file and line itself.
        return self._decode(record)

    def decode_batch(self, records: tf.Tensor, names: tf.Tensor) -> dict[str, tf.Tensor]:
        ok = tf.strings.regex_full_match(records, self.pattern)

        def explain() -> tf.Tensor:
            first = tf.argmin(tf.cast(ok, tf.int32))
            return _record_reading.message("bad CSV record at ", names[first], ": ",
                                           self._reason(records[first]), ". Received: ",
                                           records[first])

        with tf.control_dependencies([_record_reading.fail_unless(tf.reduce_all(ok), explain)]):
            return self._decode(tf.identity(records))

    def _reason(self, record: tf.Tensor) -> tf.Tensor:
        """Why ``record`` (a line that does not match ``pattern``) cannot be decoded."""
        fields = tf.strings.split(tf.strings.regex_replace(record, _QUOTED, "q"), self.delim)
        count = tf.size(fields)
        padded = tf.concat([fields, tf.fill([len(self.names)], "")], 0)[:len(self.names)]
        bad = tf.zeros([len(self.names)], tf.bool)
        for kind, pattern in _NUMBER.items():
            mask = [_kind(d) == kind for d in self.dtypes]
            if any(mask):
                bad |= tf.constant(mask) & ~tf.strings.regex_full_match(padded, pattern)
        column = tf.argmax(tf.cast(bad, tf.int32))
        field = tf.strings.join(["column ", tf.gather(self.names, column), " is not a valid ",
                                 tf.gather([d.name for d in self.dtypes], column)])
        return tf.where(
            tf.equal(count, len(self.names)),
            tf.where(tf.reduce_any(bad), field, "its quoting is malformed"),
            tf.strings.join([f"expected {len(self.names)} fields, found ",
                             tf.strings.as_string(count)]))

def from_csv(file_pattern: _file_lists.FilePattern, *, column_names: Sequence[str] | None = None,
             column_dtypes: Mapping[str, Any] | None = None, label_column: str | None = None,
             header: bool = True, field_delim: str = ",", batch_size: int, shuffle: bool = True,
             num_epochs: int | None = None, seed: int | None = None, drop_remainder: bool = True,
             on_error: str = "raise", pack_features: str | None = None) -> _pipeline.InputFn:
    """Returns an ``input_fn(input_context=None)`` over CSV files.

    Features are a dict of one tensor per column, [batch] each; labels the
    ``label_column`` (None: features only).

    Args:
      file_pattern: a path, a glob, or a list of them.
      column_names: the columns in file order; default: the first file's header line.
        With ``header`` every file's header must list exactly these columns.
      column_dtypes: column name -> dtype (float32, float64, int32, int64, string);
        unnamed columns are float32. Every field is required: an empty or non-numeric
        field in a numeric column is a bad record.
      label_column: the column returned as labels.
      header: whether each file starts with a header line.
      field_delim: the field separator. Numeric fields must not be quoted.
      batch_size, shuffle, num_epochs, seed, drop_remainder, on_error: as in
        ``from_tfrecord``; errors name the file and its line number.
      pack_features: a feature name: stack the numeric feature columns, in file order,
        into this one float32 feature [batch, columns] instead of one feature per column.

    Raises:
      FileNotFoundError: a pattern matches no file.
      ValueError: a bad argument, or a file whose header lacks a column.
    """
    _pipeline.check_batching(batch_size, num_epochs)
    _pipeline.check_on_error(on_error)
    paths = _file_lists.expand(file_pattern)
    names = header_columns(paths, column_names, header, field_delim)
    dtypes = _check_dtypes(names, column_dtypes, label_column)
    source = _CSVSource(paths, names, dtypes, header, field_delim)
    split = _record_reading.split_label(label_column)
    if pack_features is not None:
        numeric = {n: d != tf.string for n, d in zip(names, dtypes)}
        columns = _pipeline.packed_columns(numeric, label_column)
        split = _packed(split, columns, pack_features)
    return _record_reading.make_input_fn(
        source, split=split, batch_size=batch_size, shuffle=shuffle,
        num_epochs=num_epochs, seed=seed, drop_remainder=drop_remainder, on_error=on_error)


def _packed(split: _record_reading.Split, columns: list[str], name: str) -> _record_reading.Split:
    """``split`` followed by stacking ``columns`` into one feature ``name``."""

    def pack(decoded: dict[str, tf.Tensor]) -> Any:
        result = split(decoded)
        features = result[0] if isinstance(result, tuple) else result
        packed = {name: tf.stack([tf.cast(features[c], tf.float32) for c in columns], axis=-1)}
        return (packed, result[1]) if isinstance(result, tuple) else packed

    return pack
