"""from_tfrecord and write_tfrecords: round trip, shards, shapes, bad records."""
import numpy as np
import pytest
import tensorflow as tf

import input_fns
from tests.input_fns.util import (assert_disjoint_cover, context, example, labels_seen,
                                  labels_seen_in_graph, record_offsets, shards, write_records)

ROWS = 30
SPEC = {"x": tf.io.FixedLenFeature([3], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64)}


def _arrays():
    return np.arange(ROWS * 3, dtype=np.float32).reshape(ROWS, 3), np.arange(ROWS)


def _written(tmp_path, num_shards):
    x, y = _arrays()
    return input_fns.write_tfrecords({"x": x}, tmp_path / "data", num_shards=num_shards, labels=y)


def _input_fn(paths, spec=SPEC, **kwargs):
    options = dict(label_key="label", batch_size=12, num_epochs=1, drop_remainder=False, seed=5)
    options.update(kwargs)
    return input_fns.from_tfrecord(paths, spec, **options)


def test_write_tfrecords_round_trip_keeps_every_row(tmp_path):
    paths = _written(tmp_path, 3)
    x, y = _arrays()
    seen = {}
    for features, labels in _input_fn(paths)():
        seen.update(zip(labels.numpy().tolist(), features["x"].numpy()))
    assert sorted(seen) == y.tolist()
    np.testing.assert_array_equal(np.stack([seen[i] for i in y]), x)


def test_write_tfrecords_names_shard_files(tmp_path):
    paths = _written(tmp_path, 2)
    assert [p.rsplit("/", 1)[1] for p in paths] == [
        "data-00000-of-00002.tfrecord", "data-00001-of-00002.tfrecord"]


def test_write_tfrecords_from_csv_keeps_columns(tmp_path):
    csv = tmp_path / "in.csv"
    csv.write_text("a,name,label\n0.5,x,1\n1.5,y,0\n")
    paths = input_fns.write_tfrecords(csv, tmp_path / "out", num_shards=1)
    spec = {"a": tf.io.FixedLenFeature([], tf.float32),
            "name": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}
    features, labels = next(iter(_input_fn(paths, spec, shuffle=False)()))
    assert features["a"].numpy().tolist() == [0.5, 1.5]
    assert features["name"].numpy().tolist() == [b"x", b"y"]
    assert labels.numpy().tolist() == [1, 0]


def test_write_tfrecords_pack_features_refuses_string_columns_as_from_csv_does(tmp_path):
    csv = tmp_path / "in.csv"
    csv.write_text("a,name,label\n0.5,x,1\n1.5,y,0\n")
    with pytest.raises(ValueError, match=r"pack_features needs numeric feature columns. "
                                         r"Received: string columns \['name'\]"):
        input_fns.write_tfrecords(csv, tmp_path / "out", num_shards=1, pack_features="x")
    assert not list(tmp_path.glob("out*"))


@pytest.mark.parametrize("num_files", [1, 2, 4])
@pytest.mark.parametrize("num_pipelines", [1, 2, 3, 4])
@pytest.mark.slow
def test_from_tfrecord_shards_are_disjoint_and_cover_records(tmp_path, num_files,
                                                             num_pipelines):
    paths = _written(tmp_path, num_files)
    assert_disjoint_cover(shards(_input_fn(paths), num_pipelines), range(ROWS))


@pytest.mark.parametrize("num_files", [1, 3])
@pytest.mark.slow
def test_from_tfrecord_shards_in_graph_mode_are_disjoint_and_cover_records(tmp_path, num_files):
    input_fn = _input_fn(_written(tmp_path, num_files))
    parts = [labels_seen_in_graph(input_fn, context(2, i)) for i in range(2)]
    assert_disjoint_cover(parts, range(ROWS))


def test_from_tfrecord_per_replica_batch_is_static(tmp_path):
    dataset = _input_fn(_written(tmp_path, 2), num_epochs=None, drop_remainder=True)(
        context(1, 0, 2))
    features, labels = dataset.element_spec
    assert features["x"].shape.as_list() == [6, 3]
    assert labels.shape.as_list() == [6]


def test_from_tfrecord_variable_length_feature_is_sparse(tmp_path):
    path = write_records(tmp_path / "v.tfrecord",
                         [example(ids=list(range(n)), label=[n]) for n in (1, 3, 2)])
    spec = {"ids": tf.io.VarLenFeature(tf.int64), "label": tf.io.FixedLenFeature([], tf.int64)}
    features, labels = next(iter(_input_fn(path, spec, shuffle=False)()))
    dense = tf.sparse.to_dense(features["ids"], default_value=-1).numpy()
    assert dense.tolist() == [[0, -1, -1], [0, 1, 2], [0, 1, -1]]
    assert labels.numpy().tolist() == [1, 3, 2]


@pytest.mark.slow
def test_from_tfrecord_same_seed_same_order(tmp_path):
    paths = _written(tmp_path, 3)
    assert labels_seen(_input_fn(paths, seed=1)) == labels_seen(_input_fn(paths, seed=1))
    assert labels_seen(_input_fn(paths, seed=1)) != labels_seen(_input_fn(paths, seed=2))


def test_from_tfrecord_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"matched no file. Received: .*nope-\*"):
        _input_fn(str(tmp_path / "nope-*"))


def test_from_tfrecord_label_key_not_in_spec_raises(tmp_path):
    with pytest.raises(ValueError, match=r"label_key must be a key of feature_spec"):
        _input_fn(_written(tmp_path, 1), label_key="target")


def _bad_file(tmp_path, bad):
    good = [example(x=[float(i)] * 3, label=[i]) for i in range(6)]
    return write_records(tmp_path / "bad.tfrecord", good[:3] + [bad] + good[4:])


@pytest.mark.parametrize("bad, reason", [
    (example(x=[1, 2, 3], label=[3]), "Data types don't match"),  # int64 where float
    (example(x=[1.0, 2.0], label=[3]), "Number of float values != expected"),  # ragged
    (example(label=[3]), "Feature: x .* is required"),  # missing feature
], ids=["wrong_dtype", "ragged", "missing_feature"])
def test_from_tfrecord_bad_record_raises_naming_file_and_index(tmp_path, bad, reason):
    input_fn = _input_fn(_bad_file(tmp_path, bad), shuffle=False)
    with pytest.raises(tf.errors.InvalidArgumentError, match=rf"bad.tfrecord record 3.*{reason}"):
        labels_seen(input_fn)


def _corrupt(path, record, byte=20):
    data = bytearray(open(path, "rb").read())
    data[record_offsets(path)[record] + byte] ^= 0xFF
    open(path, "wb").write(bytes(data))


def test_from_tfrecord_corrupt_record_raises_naming_file_and_index(tmp_path):
    [path] = _written(tmp_path, 1)
    _corrupt(path, 4)
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"corrupt or truncated TFRecord file .*data-00000-of-00001"
                             r".tfrecord at record 4"):
        labels_seen(_input_fn(path, shuffle=False))


def test_from_tfrecord_corrupt_record_in_graph_mode_raises(tmp_path):
    [path] = _written(tmp_path, 1)
    _corrupt(path, 4)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"at record 4"):
        labels_seen_in_graph(_input_fn(path, shuffle=False))


def test_from_tfrecord_truncated_file_raises_naming_file_and_index(tmp_path):
    [path] = _written(tmp_path, 1)
    cut = record_offsets(path)[7] + 5
    open(path, "r+b").truncate(cut)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"at record 7"):
        labels_seen(_input_fn(path, shuffle=False))


@pytest.mark.slow
def test_from_tfrecord_skip_drops_bad_records_and_reports_count(tmp_path, capfd):
    bad = example(x=[1.0], label=[3])
    good = [example(x=[float(i)] * 3, label=[i]) for i in range(8)]
    path = write_records(tmp_path / "bad.tfrecord", good[:2] + [bad, bad] + good[4:7] + [bad])
    seen = labels_seen(_input_fn(path, shuffle=False, on_error="skip"))
    assert seen == [0, 1, 4, 5, 6]
    err = capfd.readouterr().err
    assert "skipped 2 bad record(s) before" in err and "bad.tfrecord record 4" in err
    assert "skipped 3 bad record(s) in all of" in err


@pytest.mark.slow
def test_from_tfrecord_skip_in_graph_mode_drops_bad_records(tmp_path):
    bad = example(x=[1.0], label=[3])
    good = [example(x=[float(i)] * 3, label=[i]) for i in range(5)]
    path = write_records(tmp_path / "bad.tfrecord", good[:2] + [bad] + good[3:])
    assert labels_seen_in_graph(_input_fn(path, shuffle=False, on_error="skip")) == [0, 1, 3, 4]


@pytest.mark.slow
def test_from_tfrecord_skip_reports_corrupt_rest_of_file(tmp_path, capfd):
    [path] = _written(tmp_path, 1)
    _corrupt(path, 4)
    assert labels_seen(_input_fn(path, shuffle=False, on_error="skip")) == [0, 1, 2, 3]
    assert "skipped the rest of" in capfd.readouterr().err


def test_from_tfrecord_on_error_unknown_raises(tmp_path):
    with pytest.raises(ValueError, match=r"on_error must be one of 'raise', 'skip'. "
                                         r"Received: on_error='ignore'"):
        _input_fn(_written(tmp_path, 1), on_error="ignore")


@pytest.mark.slow
def test_from_tfrecord_empty_shard_raises_instead_of_ending(tmp_path):
    path = write_records(tmp_path / "two.tfrecord",
                         [example(x=[float(i)] * 3, label=[i]) for i in range(2)])
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"input pipeline 2 of 3 received no records from its 1 file"):
        labels_seen(_input_fn(path, batch_size=3), context(3, 2))


@pytest.mark.slow
def test_from_tfrecord_empty_shard_in_graph_mode_raises(tmp_path):
    path = write_records(tmp_path / "one.tfrecord", [example(x=[0.0] * 3, label=[0])])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"input pipeline 1 of 2 received"):
        labels_seen_in_graph(_input_fn(path, batch_size=2), context(2, 1))
