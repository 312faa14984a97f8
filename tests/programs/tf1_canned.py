"""A legacy canned-Estimator program: TF1 behaviour from its first lines, feature columns
from ``tf.compat.v1``, ``numpy_input_fn``, a ``DNNLinearCombinedRegressor``.

    python -m tests.programs.tf1_canned MODEL_DIR

trains it and writes ``FEATURES`` and the Estimator's predictions of them to
``MODEL_DIR/predictions.json``. ``build_estimator`` (what ``python -m estimator_dist.migrate
--estimator tests.programs.tf1_canned:build_estimator`` calls, without arguments) reads the
model dir from ``TF1_CANNED_MODEL_DIR``. Importing this module turns TF2 behaviour off.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

import estimator_dist  # noqa: F401  (tf.estimator on TensorFlow 2.16+)

tf.compat.v1.disable_v2_behavior()

fc = tf.compat.v1.feature_column
FEATURES = {"age": np.array([[23.], [41.], [67.], [35.]], np.float32),
            "city": np.array([["paris"], ["rome"], ["oslo"], ["paris"]]),
            "job": np.array([["cook"], ["pilot"], ["cook"], ["baker"]])}
LABELS = np.array([[1.], [2.], [0.5], [1.5]], np.float32)


def build_estimator(model_dir=None):
    city = fc.categorical_column_with_hash_bucket("city", 10)
    job = fc.categorical_column_with_vocabulary_list("job", ["cook", "pilot"], num_oov_buckets=1)
    return tf.compat.v1.estimator.DNNLinearCombinedRegressor(
        model_dir=model_dir or os.environ["TF1_CANNED_MODEL_DIR"],
        linear_feature_columns=[fc.crossed_column([job, "city"], 20)],
        dnn_feature_columns=[fc.embedding_column(city, 3), fc.indicator_column(job),
                             fc.numeric_column("age")],
        dnn_hidden_units=[4], config=tf.estimator.RunConfig(tf_random_seed=1))


def main(model_dir):
    estimator = build_estimator(model_dir)
    estimator.train(tf.compat.v1.estimator.inputs.numpy_input_fn(
        FEATURES, LABELS, batch_size=4, num_epochs=None, shuffle=False), steps=5)
    predictions = estimator.predict(tf.compat.v1.estimator.inputs.numpy_input_fn(
        FEATURES, batch_size=4, shuffle=False))
    with open(os.path.join(model_dir, "predictions.json"), "w", encoding="utf-8") as file:
        json.dump({"features": {k: v.tolist() for k, v in FEATURES.items()},
                   "predictions": [float(p["predictions"][0]) for p in predictions]}, file)


if __name__ == "__main__":
    main(sys.argv[1])
