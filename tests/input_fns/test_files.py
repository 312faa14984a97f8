"""from_files: the built-in models' layout from CSV or TFRecord files."""
import os

import numpy as np
import pytest
import tensorflow as tf

import estimator_dist
import input_fns
import model_fns


def _data():
    x = np.arange(24, dtype=np.float32).reshape(6, 2, 2) / 10
    return x, np.arange(6) % 3


def _csv(tmp_path, x, y):
    path = tmp_path / "train.csv"
    rows = [",".join(map(str, row.tolist() + [label])) for row, label in zip(x.reshape(6, -1), y)]
    path.write_text("x0,x1,x2,x3,label\n" + "\n".join(rows) + "\n")
    return str(path)


def _first_batch(input_fn):
    features, labels = next(iter(input_fn()))
    return features["x"].numpy(), labels.numpy()


@pytest.mark.slow
def test_from_files_csv_and_tfrecord_give_same_batches(tmp_path):
    x, y = _data()
    records = input_fns.write_tfrecords({"x": x}, tmp_path / "train", num_shards=1, labels=y)
    options = dict(x_shape=[2, 2], batch_size=6, shuffle=False, num_epochs=1)
    from_csv = _first_batch(input_fns.from_files([_csv(tmp_path, x, y)], **options))
    from_records = _first_batch(input_fns.from_files(records, **options))
    np.testing.assert_allclose(from_csv[0], x)
    np.testing.assert_allclose(from_records[0], x)
    assert from_csv[1].tolist() == from_records[1].tolist() == y.tolist()


def test_from_files_batch_shape_is_static(tmp_path):
    x, y = _data()
    dataset = input_fns.from_files([_csv(tmp_path, x, y)], x_shape=[2, 2], batch_size=2)()
    assert dataset.element_spec[0]["x"].shape.as_list() == [2, 2, 2]


def test_from_files_unknown_extension_raises(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("")
    with pytest.raises(ValueError, match=r"file_format must be given \(csv, tfrecord\)"):
        input_fns.from_files([str(path)], x_shape=[1], batch_size=1)


@pytest.mark.parametrize("file_format", ["csv", "tfrecord"])
def test_from_files_infers_minus_one_in_x_shape(tmp_path, file_format):
    x, y = _data()
    if file_format == "csv":
        paths = [_csv(tmp_path, x, y)]
    else:
        paths = input_fns.write_tfrecords({"x": x}, tmp_path / "train", num_shards=1, labels=y)
    input_fn = input_fns.from_files(paths, x_shape=[-1, 1], batch_size=2, drop_remainder=False)
    assert input_fn().element_spec[0]["x"].shape.as_list() == [None, 4, 1]


def test_from_files_x_shape_not_matching_columns_raises(tmp_path):
    x, y = _data()
    with pytest.raises(ValueError, match=r"x_shape must hold the 4 values of x in .*train.csv. "
                                         r"Received: x_shape=\[3\]"):
        input_fns.from_files([_csv(tmp_path, x, y)], x_shape=[3], batch_size=2)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("file_format", ["csv", "tfrecord"])
@pytest.mark.slow
def test_from_files_trains_dense_model_under_mirrored(tmp_path, model_dir, file_format):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    if file_format == "csv":
        path = tmp_path / "train.csv"
        rows = [",".join(map(str, r.tolist() + [label])) for r, label in zip(x, y)]
        path.write_text("a,b,c,d,label\n" + "\n".join(rows) + "\n")
        paths = [str(path)]
    else:
        paths = input_fns.write_tfrecords({"x": x}, tmp_path / "train", num_shards=2, labels=y)
    config = estimator_dist.make_run_config("mirrored", num_replicas=2, model_dir=model_dir,
                                            tf_random_seed=1)
    params = {"hidden_units": [8], "num_classes": 2, "learning_rate": 0.1}
    estimator = tf.estimator.Estimator(model_fns.dense_classifier_model_fn, config=config,
                                       params=params)
    estimator.train(input_fns.from_files(paths, x_shape=[4], batch_size=16, seed=0),
                    max_steps=20)
    metrics = estimator.evaluate(input_fns.from_files(
        paths, x_shape=[4], batch_size=16, shuffle=False, num_epochs=1))
    assert metrics["global_step"] == 20
    assert metrics["accuracy"] > 0.7


def test_from_files_reads_csv_converted_with_pack_features(tmp_path):
    x, y = _data()
    records = input_fns.write_tfrecords(_csv(tmp_path, x, y), tmp_path / "converted",
                                        num_shards=2, pack_features="x")
    features, labels = _first_batch(input_fns.from_files(
        records, x_shape=[2, 2], batch_size=6, shuffle=False, num_epochs=1))
    np.testing.assert_allclose(features, x)
    assert labels.tolist() == y.tolist()


@pytest.mark.parametrize("make, kind", [
    (lambda path: os.symlink("/dev/zero", path), "a character device"),
    (os.mkfifo, "a named pipe"),
    (os.mkdir, "a directory"),
])
def test_from_files_path_not_regular_file_refused(make, kind, tmp_path):
    path = str(tmp_path / "data.csv")
    make(path)
    with pytest.raises(ValueError, match=rf"file_pattern must match regular files\. Received: "
                                         rf"'.*data\.csv' \({kind}\)"):
        input_fns.from_files(path, x_shape=[-1], batch_size=2)


def test_from_files_garbage_tfrecord_refused_before_reading(tmp_path):
    path = tmp_path / "garbage.tfrecord"
    path.write_bytes(np.random.RandomState(0).bytes(5000))
    with pytest.raises(ValueError, match=r"records must be whole \(the file is corrupt or "
                                         r"truncated\)\. Received: a bad record after byte 0"):
        input_fns.from_files(str(path), x_shape=[-1], batch_size=2)


def test_from_files_tfrecord_dataset_garbage_is_data_loss(tmp_path):
    """What ``from_files`` met before it read the first record in Python: TensorFlow's
    DataLossError from the tf.data reader."""
    path = tmp_path / "garbage.tfrecord"
    path.write_bytes(np.random.RandomState(0).bytes(5000))
    with pytest.raises(tf.errors.DataLossError, match=r"corrupted record at 0"):
        next(iter(tf.data.TFRecordDataset(str(path))))
