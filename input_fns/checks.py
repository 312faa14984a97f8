"""``check_files``: a first pass over a bounded sample of the files ``from_files`` reads.

The input pipeline finds a bad record only when training reaches it. This pass reads
the first ``limit`` records of every file in plain Python, before anything is trained,
and raises on the first record that the pipeline or the model would fail on: a ragged
or non-numeric CSV row, a corrupt or truncated TFRecord, an ``x`` of another size, a
NaN or Inf, a label outside ``[0, num_classes)``. Records past the sample are still
checked by the pipeline itself when it reads them.
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import math
import sys
from typing import Any, Callable, Iterator

import tensorflow as tf

from input_fns import _file_lists, _record_reading

DEFAULT_LIMIT = 1000  # Records read per file.
# The longest float field tf.io.decode_csv reads: 31 characters in TF 2.15 ("... is not a
# valid float" past it, spaces included; int fields have no such limit). TF 2.21 reads float
# fields of any length: None.
MAX_FLOAT_CHARS = 31 if tf.__version__.startswith("2.15.") else None
FLOAT32_MAX = 3.4028234663852886e38
# A record read: where it is (file and line or record), its x values, its label.
Record = tuple[str, list[float], int]


@dataclasses.dataclass(frozen=True)
class Sample:
    """What the pass saw: the size of ``x``, and the records read (``complete``: all)."""

    x_size: int | None
    records: int
    complete: bool


def _fault(rule: str, received: Any, where: str) -> ValueError:
    return ValueError(f"records must {rule}. Received: {received} at {where}")


def _check_x(values: list[float], x_size: int | None, where: str) -> None:
    if x_size is not None and len(values) != x_size:
        raise _fault(f"have the {x_size} values of x of the first record", len(values), where)
    for value in values:
        if not math.isfinite(value):
            raise _fault("hold finite numbers (no NaN or Inf)", value, where)


def _check_label(label: int, num_classes: int | None, where: str) -> None:
    if num_classes is not None and not 0 <= label < num_classes:
        raise _fault(f"have a label in [0, {num_classes})", f"label={label}", where)


def _number(text: str, kind: Callable[[str], Any], where: str) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise _fault(f"hold {'int' if kind is int else 'numeric'} fields",
                     repr(text), where) from None


def _float(text: str, where: str) -> float:
    """A float field that TensorFlow's CSV reader reads too (on TF 2.15 it reads none
    longer than ``MAX_FLOAT_CHARS``), and that float32 holds (a larger one becomes Inf, and
    the loss NaN)."""
    if MAX_FLOAT_CHARS is not None and len(text) > MAX_FLOAT_CHARS:
        raise _fault(f"hold numbers of at most {MAX_FLOAT_CHARS} characters (TensorFlow's CSV "
                     "reader reads no longer ones)", f"a field of {len(text):,} characters",
                     where)
    value = _number(text, float, where)
    if math.isfinite(value) and abs(value) > FLOAT32_MAX:
        raise _fault(f"hold numbers within float32's range (at most {FLOAT32_MAX:.7g} in "
                     "magnitude; larger ones become Inf)", text, where)
    return value


def _unquoted(text: str, where: str) -> str:
    """The pipeline's line check (``csv_files``) takes no quoted number."""
    if text.strip().startswith('"'):
        raise _fault("hold unquoted numbers (the input pipeline reads no quoted number)",
                     repr(text), where)
    return text


@contextlib.contextmanager
def _any_field_size() -> Iterator[None]:
    """Lets Python's csv read fields of any length (its default stops at 131,072
    characters with "field larger than field limit"), so a long field is named."""
    kept = csv.field_size_limit(sys.maxsize)
    try:
        yield
    finally:
        csv.field_size_limit(kept)


def _csv_records(path: str, label: str, limit: int) -> Iterator[Record]:
    """Yields (where, x values, label) of the first ``limit`` rows of a CSV file."""
    with tf.io.gfile.GFile(path, "r") as stream, _any_field_size():
        # Quotes kept as they are: the pipeline reads no quoted number, so none may pass.
        rows = csv.reader(stream, quoting=csv.QUOTE_NONE)
        header = [name.strip().strip('"') for name in next(rows, [])]
        if label not in header:
            raise _fault(f"follow a header with a {label!r} column", header, f"{path} line 1")
        if header.count(label) > 1:
            raise _fault(f"follow a header with one {label!r} column", header, f"{path} line 1")
        if len(header) < 2:
            raise _fault(f"have a column of x besides {label!r}", header, f"{path} line 1")
        column = header.index(label)
        for number, row in enumerate(rows, start=2):
            if number - 1 > limit:
                return
            where = f"{path} line {number}"
            if len(row) != len(header):
                raise _fault(f"have the header's {len(header)} fields", f"{len(row)} fields",
                             where)
            values = [_float(_unquoted(v, where), where) for i, v in enumerate(row)
                      if i != column]
            yield where, values, _number(_unquoted(row[column], where), int, where)


def tfrecord_records(path: str, label: str, limit: int) -> Iterator[Record]:
    """Yields (where, x values, label) of the first ``limit`` records of a TFRecord file."""
    size, offset = _file_lists.file_sizes([path])[0], 0
    # A plain Python reader: works with and without v2 behavior (eager) enabled.
    records = tf.compat.v1.io.tf_record_iterator(path)
    for index in range(limit + 1):
        where = f"{path} record {index}"
        try:
            record = next(records)
        except StopIteration:
            break
        except tf.errors.OpError:
            raise _fault("be whole (the file is corrupt or truncated)",
                         f"a bad record after byte {offset}", where) from None
        if index == limit:
            return
        offset += len(record) + _record_reading.TFRECORD_FRAMING_BYTES
        try:
            feature = tf.train.Example.FromString(record).features.feature
        except Exception:  # protobuf's DecodeError, which protobuf does not export.
            raise _fault("be tf.train.Example protos", "undecodable bytes", where) from None
        if "x" not in feature or label not in feature:
            raise _fault(f"have features x and {label!r}", sorted(feature), where)
        check_feature_kinds(feature, label, where)
        labels = feature[label].int64_list.value
        if len(labels) != 1:
            raise _fault(f"have one int64 {label!r}", list(labels), where)
        yield where, list(feature["x"].float_list.value), labels[0]
    if offset != size:
        raise _fault("be whole (the file is corrupt or truncated)",
                     f"{offset} of {size} bytes readable", f"{path} record {index}")


def check_feature_kinds(feature: Any, label: str, where: str) -> None:
    """Raises unless ``x`` is a non-empty float list and ``label`` an int64 list (the
    pipeline parses them so, and fails on any other kind only once training reads it)."""
    for name, kind in (("x", "float_list"), (label, "int64_list")):
        found = feature[name].WhichOneof("kind")
        if found != kind or (name == "x" and not feature[name].float_list.value):
            raise _fault(f"have {name!r} as a non-empty {kind} feature",
                         found or "an empty feature", where)


_READERS = {"csv": _csv_records, "tfrecord": tfrecord_records}


def check_files(file_pattern: _file_lists.FilePattern, file_format: str | None = None, *,
                label: str = "label", num_classes: int | None = None,
                limit: int = DEFAULT_LIMIT) -> Sample:
    """Reads the first ``limit`` records of each file in the layout of ``from_files``;
    returns a ``Sample``.

    Args:
      file_pattern, file_format, label: as in ``from_files``.
      num_classes: labels must be in [0, num_classes); None: any int.
      limit: records read per file.

    Raises:
      FileNotFoundError: a pattern matches no file.
      ValueError: the first bad record, naming its file and line or record index.
    """
    paths = _file_lists.expand(file_pattern)
    read_records = _READERS[file_format or _file_lists.infer_format(paths)]
    x_size, count, complete = None, 0, True
    for path in paths:
        read = 0
        try:
            for where, values, value in read_records(path, label, limit):
                _check_x(values, x_size, where)
                _check_label(value, num_classes, where)
                x_size = len(values) if x_size is None else x_size
                read += 1
        except UnicodeDecodeError as error:
            raise _fault("be UTF-8 text", f"byte {error.object[error.start]:#04x}",
                         f"{path} after record {read}") from None
        count += read
        complete = complete and read < limit
    return Sample(x_size, count, complete)
