"""The habits of a long-lived production model_fn: batch norm with its ``UPDATE_OPS``
control dependency, a decayed learning rate, gradients clipped by global norm between
``compute_gradients`` and ``apply_gradients``, summaries, a ``LoggingTensorHook`` in
``training_hooks``, ``tf.metrics``; ``train_and_evaluate`` with an early-stopping hook and
a ``LatestExporter``, then ``evaluate`` as the script's last word."""
import os

import tensorflow.compat.v1 as tf

from tests.end_to_end.legacy.programs import iris_data

BATCH_SIZE = 16
TRAIN_STEPS = 20


def model_fn(features, labels, mode, params):
    training = mode == tf.estimator.ModeKeys.TRAIN
    net = tf.feature_column.input_layer(features, params["feature_columns"])
    for units in params["hidden_units"]:
        net = tf.layers.dense(net, units, use_bias=False)
        net = tf.layers.batch_normalization(net, momentum=0.9, training=training)
        net = tf.nn.relu(net)
    logits = tf.layers.dense(net, 3)
    classes = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        predictions = {"class_ids": classes[:, tf.newaxis], "logits": logits}
        return tf.estimator.EstimatorSpec(
            mode, predictions=predictions,
            export_outputs={"serving_default": tf.estimator.export.PredictOutput(predictions)})
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    metrics = {"accuracy": tf.metrics.accuracy(labels, classes),
               "mean_loss": tf.metrics.mean(loss)}
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
    global_step = tf.train.get_global_step()
    learning_rate = tf.train.exponential_decay(0.05, global_step, decay_steps=10,
                                               decay_rate=0.9, staircase=True)
    tf.summary.scalar("learning_rate", learning_rate)
    optimizer = tf.train.MomentumOptimizer(learning_rate, momentum=0.9)
    gradients, variables = zip(*optimizer.compute_gradients(loss))
    gradients, global_norm = tf.clip_by_global_norm(gradients, 5.0)
    tf.summary.scalar("global_norm", global_norm)
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train_op = optimizer.apply_gradients(zip(gradients, variables), global_step=global_step)
    logging_hook = tf.train.LoggingTensorHook({"loss": loss, "step": global_step},
                                              every_n_iter=5)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                      training_hooks=[logging_hook])


def main(make_config, model_dir):
    (train_x, train_y), (test_x, test_y) = iris_data.load_data()
    columns = [tf.feature_column.numeric_column(key) for key in train_x.keys()]
    estimator = tf.estimator.Estimator(
        model_fn, config=make_config(model_dir=model_dir, tf_random_seed=1,
                                     save_checkpoints_steps=10),
        params={"feature_columns": columns, "hidden_units": [16, 16]})
    early_stopping = tf.estimator.experimental.stop_if_no_decrease_hook(
        estimator, "loss", max_steps_without_decrease=1000, run_every_secs=None,
        run_every_steps=5)
    exporter = tf.estimator.LatestExporter("latest", iris_data.serving_input_receiver_fn)
    train_spec = tf.estimator.TrainSpec(
        lambda: iris_data.train_input_fn(train_x, train_y, BATCH_SIZE),
        max_steps=TRAIN_STEPS, hooks=[early_stopping])
    eval_spec = tf.estimator.EvalSpec(
        lambda: iris_data.eval_input_fn(test_x, test_y, BATCH_SIZE), steps=None,
        exporters=[exporter], start_delay_secs=0, throttle_secs=0)
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
    metrics = estimator.evaluate(lambda: iris_data.eval_input_fn(test_x, test_y, BATCH_SIZE))
    # The script's own checks: batch norm's moving statistics were updated, and the
    # exporter wrote a SavedModel wherever an evaluation ran (in this process unless a
    # cluster leaves evaluation to an evaluator task).
    moving_mean = [name for name in estimator.get_variable_names() if "moving_mean" in name]
    assert abs(estimator.get_variable_value(moving_mean[0])).sum() > 0, "moving_mean never moved"
    if not os.environ.get("TF_CONFIG"):
        exports = os.path.join(model_dir, "export", "latest")
        assert os.path.isdir(exports) and os.listdir(exports), "LatestExporter wrote nothing"
    return metrics
