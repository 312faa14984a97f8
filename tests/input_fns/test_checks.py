"""check_files: the first pass over a bounded sample of from_files data."""
import numpy as np
import pytest
import tensorflow as tf

import input_fns


def _csv(tmp_path, *rows, name="d.csv"):
    path = tmp_path / name
    path.write_text("\n".join(["a,b,label", *rows]) + "\n")
    return str(path)


def _tfrecord(tmp_path, count=10):
    x = np.arange(count * 3, dtype=np.float32).reshape(count, 3)
    return input_fns.write_tfrecords({"x": x}, tmp_path / "r", num_shards=1,
                                     labels=np.arange(count) % 2)[0]


def test_check_files_good_csv_counts_every_record(tmp_path):
    sample = input_fns.check_files(_csv(tmp_path, "1,2,0", "3,4,1", "5,6,2"), num_classes=3)
    assert sample == input_fns.checks.Sample(x_size=2, records=3, complete=True)


def test_check_files_limit_bounds_the_pass(tmp_path):
    rows = ["1,2,0"] * 5 + ["1,2"]  # The ragged row is past the limit.
    sample = input_fns.check_files(_csv(tmp_path, *rows), limit=5)
    assert sample.records == 5 and not sample.complete


@pytest.mark.parametrize("row,message", [
    ("1,2", r"records must have the header's 3 fields\. Received: 2 fields at .*d\.csv line 3"),
    ("1,inf,0", r"records must hold finite numbers \(no NaN or Inf\)\. Received: inf at .*line 3"),
    ("1,2,x", r"records must hold int fields\. Received: 'x' at .*d\.csv line 3"),
    ("1,2,5", r"records must have a label in \[0, 3\)\. Received: label=5 at .*d\.csv line 3"),
])
def test_check_files_bad_csv_row_named_by_line(row, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        input_fns.check_files(_csv(tmp_path, "1,2,0", row), num_classes=3)


def test_check_files_tfrecord_reads_x_size(tmp_path):
    sample = input_fns.check_files(_tfrecord(tmp_path), num_classes=2)
    assert (sample.x_size, sample.records, sample.complete) == (3, 10, True)


def test_check_files_truncated_tfrecord_refused(tmp_path):
    path = _tfrecord(tmp_path)
    with open(path, "r+b") as file:
        file.truncate(file.seek(0, 2) - 3)
    with pytest.raises(ValueError, match=r"must be whole \(the file is corrupt or truncated\)\. "
                                         r"Received: .* at .*record 9"):
        input_fns.check_files(path)


def test_check_files_eval_widths_compare_across_files(tmp_path):
    wide = tmp_path / "w.csv"
    wide.write_text("a,b,c,label\n1,2,3,0\n")
    with pytest.raises(ValueError, match=r"have the 2 values of x of the first record\. "
                                         r"Received: 3 at .*w\.csv line 2"):
        input_fns.check_files([_csv(tmp_path, "1,2,0"), str(wide)])


@pytest.mark.slow
def test_check_files_under_disable_v2_behavior(tmp_path, python_run):
    path = _tfrecord(tmp_path)
    code = ("import tensorflow as tf; tf.compat.v1.disable_v2_behavior()\n"
            "import input_fns\n"
            f"print(input_fns.check_files({path!r}, num_classes=2).records)\n"
            f"print(input_fns.check_files({_csv(tmp_path, '1,2,0')!r}).records)\n")
    done = python_run(["-c", code], timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["10", "1"]


def test_check_files_non_utf8_csv_refused(tmp_path):
    path = tmp_path / "l.csv"
    path.write_bytes(b"a,label\n1,0\n\xe9,1\n")
    with pytest.raises(ValueError, match=r"records must be UTF-8 text\. Received: byte 0xe9 at "
                                         r".*l\.csv after record 1"):
        input_fns.check_files(str(path))


# TF 2.15's CSV reader reads no float field past 31 characters; 2.21 reads any length.
LEGACY_TF = tf.__version__.startswith("2.15.")


def test_check_files_csv_field_past_python_default_limit_named(tmp_path):
    """Python's csv stops at 131,072 characters a field unless told otherwise; the check
    reads on. TensorFlow 2.15 reads no float field that long, so there the check names it;
    2.21 reads it (and so does the check)."""
    path = _csv(tmp_path, "1,2,0", "0" * 140_000 + "1.5,2,0")
    if LEGACY_TF:
        with pytest.raises(ValueError, match=r"records must hold numbers of at most 31 "
                                             r"characters .*Received: a field of 140,003 "
                                             r"characters at .*d\.csv line 3"):
            input_fns.check_files(path)
    else:
        assert input_fns.check_files(path).records == 2


@pytest.mark.slow
def test_check_files_csv_longest_float_field_read_by_tensorflow_too(tmp_path):
    longest = "0" * ((input_fns.checks.MAX_FLOAT_CHARS or 140_003) - 3) + "1.5"
    path = _csv(tmp_path, "3,4,1", f"{longest},2,0")
    assert input_fns.check_files(path).records == 2
    train = input_fns.from_files(path, x_shape=[-1], batch_size=2, shuffle=False, num_epochs=1)
    features, _ = next(iter(train()))
    assert features["x"].numpy()[1].tolist() == [1.5, 2.0]


def test_decode_csv_float_field_past_limit_refused_by_tensorflow():
    """The TensorFlow fact behind ``MAX_FLOAT_CHARS``: TF 2.15 refuses a float field past
    31 characters; TF 2.21 reads any length, and a value past float32's range as inf."""
    def read(field):
        return tf.io.decode_csv([field], [tf.constant([], tf.float32)])[0].numpy()[0]

    assert read("0" * 30 + "1") == 1.0
    if LEGACY_TF:
        assert input_fns.checks.MAX_FLOAT_CHARS == 31
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"is not a valid float"):
            read("0" * 31 + "1")
    else:
        assert input_fns.checks.MAX_FLOAT_CHARS is None
        assert read("0" * 140_000 + "1.5") == 1.5
        assert read("1" * 140_000) == np.inf


@pytest.mark.parametrize("kinds, message", [
    ({"x": "int64", "label": "int64"}, r"records must have 'x' as a non-empty float_list "
                                       r"feature\. Received: int64_list at .*record 0"),
    ({"x": "float", "label": "float"}, r"records must have 'label' as a non-empty int64_list "
                                       r"feature\. Received: float_list at .*record 0"),
])
def test_check_files_tfrecord_feature_of_other_kind_refused(kinds, message, tmp_path):
    def feature(kind):
        if kind == "int64":
            return tf.train.Feature(int64_list=tf.train.Int64List(value=[1, 0, 1]))
        return tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 0.0, 1.0]))

    path = str(tmp_path / "kinds.tfrecord")
    example = tf.train.Example(features=tf.train.Features(
        feature={name: feature(kind) for name, kind in kinds.items()}))
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(example.SerializeToString())
    with pytest.raises(ValueError, match=message):
        input_fns.check_files(path)
