"""Keras layers called inside a model_fn (the half-migrated habit), ``tf.train`` optimizer,
an input_fn that reads ``params["batch_size"]``, and ``export_saved_model``."""
import os

import tensorflow.compat.v1 as tf

from tests.end_to_end.legacy.programs import iris_data

TRAIN_STEPS = 20


def model_fn(features, labels, mode, params):
    x = tf.stack([features[key] for key in iris_data.CSV_COLUMN_NAMES[:-1]], axis=1)
    hidden = tf.keras.layers.Dense(16, activation="relu")(x)
    hidden = tf.keras.layers.Dropout(0.1)(hidden, training=mode == tf.estimator.ModeKeys.TRAIN)
    logits = tf.keras.layers.Dense(3)(hidden)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits},
                                          export_outputs={"serving_default":
                                                          tf.estimator.export.PredictOutput(
                                                              {"logits": logits})})
    loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
        labels, logits, from_logits=True))
    metrics = {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1))}
    optimizer = tf.train.AdamOptimizer(params["learning_rate"])
    train_op = optimizer.minimize(loss, global_step=tf.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                      eval_metric_ops=metrics)


def input_fn(params, features, labels, training):
    dataset = tf.data.Dataset.from_tensor_slices((dict(features), labels))
    if training:
        dataset = dataset.shuffle(256).repeat()
    return dataset.batch(params["batch_size"], drop_remainder=training)


def main(make_config, model_dir):
    (train_x, train_y), (test_x, test_y) = iris_data.load_data()
    estimator = tf.estimator.Estimator(
        model_fn, config=make_config(model_dir=model_dir, tf_random_seed=1),
        params={"batch_size": 16, "learning_rate": 0.05})
    estimator.train(lambda params: input_fn(params, train_x, train_y, True), max_steps=TRAIN_STEPS)
    metrics = estimator.evaluate(lambda params: input_fn(params, test_x, test_y, False))
    if iris_data.is_chief_task():  # Every task runs this script; one exports.
        export_dir = estimator.export_saved_model(model_dir + "_export",
                                                  iris_data.serving_input_receiver_fn)
        metrics["exported"] = os.path.isfile(os.path.join(export_dir, b"saved_model.pb"))
    return metrics
