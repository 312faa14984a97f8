"""Iris-shaped data and input_fns as tensorflow/models ``samples/core/get_started/iris_data.py``
writes them (its CSV download replaced by seeded synthetic rows of the same columns)."""
import json
import os

import numpy as np
import pandas as pd
import tensorflow.compat.v1 as tf

CSV_COLUMN_NAMES = ["SepalLength", "SepalWidth", "PetalLength", "PetalWidth", "Species"]
SPECIES = ["Setosa", "Versicolor", "Virginica"]


def _rows(count, seed):
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 3, size=count)
    centres = np.array([[5.0, 3.4, 1.5, 0.2], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]])
    features = centres[labels] + 0.3 * rng.randn(count, 4)
    frame = pd.DataFrame(features.astype(np.float32), columns=CSV_COLUMN_NAMES[:-1])
    return frame, pd.Series(labels, name="Species")


def load_data():
    """Returns (train_x, train_y), (test_x, test_y): DataFrames of features, Series of ids."""
    return _rows(120, 0), _rows(32, 1)


def train_input_fn(features, labels, batch_size):
    """An input function for training."""
    dataset = tf.data.Dataset.from_tensor_slices((dict(features), labels))
    return dataset.shuffle(1000).repeat().batch(batch_size)


def eval_input_fn(features, labels, batch_size):
    """An input function for evaluation or prediction."""
    features = dict(features)
    inputs = features if labels is None else (features, labels)
    dataset = tf.data.Dataset.from_tensor_slices(inputs)
    return dataset.batch(batch_size)


def serving_input_receiver_fn():
    """Raw float features, one placeholder per column, for export_saved_model."""
    inputs = {key: tf.placeholder(tf.float32, [None], name=key) for key in CSV_COLUMN_NAMES[:-1]}
    return tf.estimator.export.ServingInputReceiver(inputs, inputs)


def train_evaluate_predict(classifier, batch_size, steps):
    """The main() of tensorflow/models' iris samples: train, evaluate, predict 3 rows."""
    (train_x, train_y), (test_x, test_y) = load_data()
    classifier.train(input_fn=lambda: train_input_fn(train_x, train_y, batch_size), steps=steps)
    eval_result = classifier.evaluate(input_fn=lambda: eval_input_fn(test_x, test_y, batch_size))
    predictions = classifier.predict(input_fn=lambda: eval_input_fn(test_x[:3], None, batch_size))
    eval_result["predicted"] = [int(p["class_ids"][0]) for p in predictions]
    return eval_result


def is_chief_task():
    """Whether this task exports: TF_CONFIG's chief, or worker 0 of a cluster with no chief.

    Not ``estimator.config.is_chief``: with a strategy and TF_CONFIG, RunConfig leaves it
    to the distribute coordinator, and it reads True on every worker.
    """
    tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    task = tf_config.get("task", {})
    chief_type = "chief" if "chief" in tf_config.get("cluster", {}) else "worker"
    return not task or (task.get("type") == chief_type and task.get("index", 0) == 0)
