"""A model_fn over Keras 2's feature-column layers, as Estimator code and libraries write it:
``tf.keras.layers.DenseFeatures``, ``tf.compat.v1.keras.layers.DenseFeatures`` (with
``cols_to_output_tensors``, tensorflow_ranking's habit), ``tf.keras.experimental.
SequenceFeatures`` and ``tf.keras.experimental.LinearModel``. Trains, then evaluates (a new
graph restoring the checkpoint).

    python tests/programs/feature_layers_model_fn.py MODEL_DIR

Prints ``RESULT feature_layers <json>`` with the evaluation and tf.keras's module.
"""
import json
import sys

import numpy as np
import tensorflow as tf

import estimator_dist  # noqa: F401  (tf.estimator on TensorFlow 2.16+)


def _columns():
    ids = tf.feature_column.categorical_column_with_identity("id", 5)
    sequence = tf.feature_column.sequence_categorical_column_with_identity("tokens", 7)
    return ([tf.feature_column.numeric_column("x", shape=[2]),
             tf.feature_column.embedding_column(ids, 3)],
            tf.feature_column.embedding_column(sequence, 4), ids)


def model_fn(features, labels, mode):
    dense_columns, sequence_column, ids = _columns()
    dense = tf.keras.layers.DenseFeatures(dense_columns)(features)
    outputs = {}
    tf.compat.v1.keras.layers.DenseFeatures(dense_columns, name="encoding")(
        features, cols_to_output_tensors=outputs)
    sequence, _ = tf.keras.experimental.SequenceFeatures([sequence_column])(features)
    wide = tf.keras.experimental.LinearModel(units=1)(
        tf.concat([dense, outputs[dense_columns[0]]], 1))
    logits = (tf.compat.v1.layers.dense(dense, 1) + wide
              + tf.compat.v1.layers.dense(tf.reduce_mean(sequence, 1), 1))
    del ids  # Unused: its embedding is in dense.
    loss = tf.compat.v1.losses.sigmoid_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss)
    train_op = tf.compat.v1.train.AdagradOptimizer(0.1).minimize(
        loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def input_fn():
    rng = np.random.default_rng(0)
    features = {"x": rng.random((32, 2)).astype(np.float32),
                "id": rng.integers(0, 5, (32, 1)),
                "tokens": rng.integers(0, 7, (32, 3))}
    labels = (features["x"][:, :1] > 0.5).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(8)


def main(model_dir):
    estimator = tf.estimator.Estimator(model_fn, model_dir=model_dir)
    estimator.train(input_fn, steps=3)
    metrics = estimator.evaluate(input_fn, steps=2)
    print("RESULT feature_layers " + json.dumps(
        {"loss": float(metrics["loss"]), "global_step": int(metrics["global_step"]),
         "keras": tf.keras.__name__}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
