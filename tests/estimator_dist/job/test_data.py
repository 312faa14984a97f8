"""The train CLI on the user's CSV and TFRecord files (--train-data, --eval-data)."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

import input_fns
from tests.train_support import keep_tf_logging, run_main  # noqa: F401

pytestmark = [pytest.mark.usefixtures("keep_tf_logging"), pytest.mark.slow]

_NUM_FEATURES = 10


def _examples(num, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, num)
    x = (rng.normal(size=(num, _NUM_FEATURES)) + 1.5 * labels[:, None]).astype(np.float32)
    return x, labels


def _write_csv(path, x, labels):
    with open(path, "w", encoding="utf-8") as file:
        file.write(",".join(f"f{i}" for i in range(x.shape[1])) + ",label\n")
        for row, label in zip(x, labels):
            file.write(",".join(f"{v:.5f}" for v in row) + f",{label}\n")
    return str(path)


def _serving_x_shape(export_path):
    loaded = tf.saved_model.load(export_path)
    return loaded.signatures["serving_default"].structured_input_signature[1]["x"].shape


def test_train_data_csv_trains_evaluates_exports_its_shape(tmp_path, model_dir, capsys):
    train = _write_csv(tmp_path / "train.csv", *_examples(1024, 0))
    evaluation = _write_csv(tmp_path / "eval.csv", *_examples(512, 1))
    code, out, err = run_main(["--train-data", train, "--eval-data", evaluation, "--param",
                               "num_classes=4", "--max-steps", 150, "--model-dir", model_dir],
                              capsys)
    assert code == 0, err
    accuracy = float(out.split("accuracy ")[1].split()[0])
    assert accuracy > 0.8
    export_path = out.split("export     ")[1].split()[0]
    assert _serving_x_shape(export_path).as_list() == [None, _NUM_FEATURES]
    with open(os.path.join(model_dir, "run.json"), encoding="utf-8") as file:
        record = json.load(file)
    assert record["data"] == {"train": [train], "eval": [evaluation]}


def test_train_data_recorded_run_resumes_without_repeating_it(tmp_path, model_dir, capsys):
    train = _write_csv(tmp_path / "train.csv", *_examples(512, 0))
    code, _, err = run_main(["--train-data", train, "--param", "num_classes=4", "--max-steps",
                             20, "--no-export", "--model-dir", model_dir], capsys)
    assert code == 0, err
    os.remove(train)  # A resume that ignored the record would train on built-in data.
    code, _, err = run_main(["--max-steps", 40, "--model-dir", model_dir], capsys)
    assert code == 2 and "train_data must be CSV or TFRecord files" in err


def test_train_data_tfrecord_shards_under_mirrored(tmp_path, model_dir, capsys):
    x, labels = _examples(1024, 0)
    input_fns.write_tfrecords({"x": x}, str(tmp_path / "train"), num_shards=4, labels=labels)
    code, out, err = run_main(["--train-data", str(tmp_path / "train-*"), "--strategy",
                               "mirrored", "--num-replicas", 2, "--param", "num_classes=4",
                               "--max-steps", 100, "--no-export", "--model-dir", model_dir],
                              capsys)
    assert code == 0, err
    assert float(out.split("accuracy ")[1].split()[0]) > 0.8


def test_train_data_lstm_reads_time_steps_from_columns(tmp_path, model_dir, capsys):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 256)
    x = (rng.normal(size=(256, 12)) + labels[:, None]).astype(np.float32)
    train = _write_csv(tmp_path / "series.csv", x, labels)
    code, out, err = run_main(["--model", "lstm", "--train-data", train, "--max-steps", 10,
                               "--param", "num_classes=2", "--model-dir", model_dir], capsys)
    assert code == 0, err
    export_path = out.split("export     ")[1].split()[0]
    assert _serving_x_shape(export_path).as_list() == [None, None, 1]
