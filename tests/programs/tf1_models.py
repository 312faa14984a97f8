"""TF1-style user code, written the way older Estimator codebases write it.

These model_fns and input_fns use only ``tensorflow.compat.v1`` and know nothing of
estimator_dist: the tests run them unchanged under ``make_run_config(...)``.
"""
import numpy as np
import tensorflow.compat.v1 as tf

NUM_FEATURES = 4


def regression_data(num_examples=256, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(num_examples, NUM_FEATURES)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32) + 0.1).astype(np.float32)
    return x, y


def regression_model_fn(features, labels, mode, params):
    """Linear regression, MSE, v1 SGD.

    With ``params["count_examples"]`` it also counts the examples it trained on, in a
    per-replica (ON_READ, SUM) variable.
    """
    kernel = tf.get_variable("kernel", [NUM_FEATURES, 1],
                             initializer=tf.random_normal_initializer(seed=7))
    bias = tf.get_variable("bias", [1], initializer=tf.zeros_initializer())
    predictions = tf.matmul(features["x"], kernel) + bias
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"y": predictions})
    loss = tf.losses.mean_squared_error(labels, predictions)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss)
    optimizer = tf.train.GradientDescentOptimizer(params["learning_rate"])
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    if not params.get("count_examples"):
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)
    seen = tf.get_variable("seen_examples", [], tf.int64, tf.zeros_initializer(),
                           trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                           aggregation=tf.VariableAggregation.SUM)
    with tf.control_dependencies([train_op]):
        count = seen.assign_add(tf.cast(tf.shape(features["x"])[0], tf.int64))
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.group(train_op, count))


def iris_style_model_fn(features, labels, mode, params):
    """Feature columns, tf.layers, tf.losses, tf.metrics and a metric summary."""
    columns = [tf.feature_column.numeric_column("x", shape=[NUM_FEATURES])]
    net = tf.feature_column.input_layer(features, columns)
    net = tf.layers.dense(net, 16, activation=tf.nn.relu)
    logits = tf.layers.dense(net, 3)
    classes = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"classes": classes})
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    accuracy = tf.metrics.accuracy(labels, classes)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss,
                                          eval_metric_ops={"accuracy": accuracy})
    tf.summary.scalar("accuracy", accuracy[1])
    train_op = tf.train.AdagradOptimizer(params["learning_rate"]).minimize(
        loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _adam_classifier_spec(mode, logits, labels, params):
    """Predicted logits; cross-entropy; v1 Adam."""
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss)
    train_op = tf.train.AdamOptimizer(params["learning_rate"]).minimize(
        loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def basic_lstm_model_fn(features, labels, mode, params):
    """BasicLSTMCell + dynamic_rnn classifier, v1 Adam."""
    cell = tf.nn.rnn_cell.BasicLSTMCell(8)
    outputs, _ = tf.nn.dynamic_rnn(cell, features["x"], dtype=tf.float32)
    logits = tf.layers.dense(outputs[:, -1], 3)
    return _adam_classifier_spec(mode, logits, labels, params)


def classification_data(num_examples=256, time_steps=None, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, num_examples).astype(np.int64)
    shape = (num_examples, NUM_FEATURES) if time_steps is None else (num_examples, time_steps, 2)
    x = rng.normal(size=shape) + labels.reshape((-1,) + (1,) * (len(shape) - 1))
    return x.astype(np.float32), labels


def dataset_input_fn(x, y, batch_size):
    """The usual older input_fn: batches to ``batch_size``, knows no input_context."""

    def input_fn():
        dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, y))
        return dataset.repeat().batch(batch_size, drop_remainder=True)

    return input_fn


def context_input_fn(x, y, global_batch_size):
    """The same, sharded and sized per replica through ``input_context``."""

    def input_fn(input_context=None):
        dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, y))
        batch = global_batch_size
        if input_context is not None:
            dataset = dataset.shard(input_context.num_input_pipelines,
                                    input_context.input_pipeline_id)
            batch = input_context.get_per_replica_batch_size(global_batch_size)
        return dataset.repeat().batch(batch, drop_remainder=True)

    return input_fn


def train(estimator, input_fn, max_steps, strategy, eval_steps):
    """Trains as the jobs' programs do: ``train_and_evaluate`` on a multi-worker cluster
    (evaluating ``eval_steps`` at once and at most every second), else ``train``."""
    if strategy == "multi_worker":
        tf.estimator.train_and_evaluate(
            estimator, tf.estimator.TrainSpec(input_fn, max_steps=max_steps),
            tf.estimator.EvalSpec(input_fn, steps=eval_steps, start_delay_secs=0,
                                  throttle_secs=1))
    else:
        estimator.train(input_fn, max_steps=max_steps)


def iterator_input_fn(x, y, batch_size):
    """Older still: returns iterator tensors instead of the Dataset."""

    def input_fn():
        dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(batch_size)
        return tf.data.make_one_shot_iterator(dataset).get_next()

    return input_fn


def mlp_model_fn(features, labels, mode, params):
    """tf.layers MLP with seeded initializers, tf.losses cross-entropy, v1 SGD, a summary."""
    net = features["x"]
    for i, units in enumerate(params.get("hidden_units", [16, 16])):
        net = tf.layers.dense(net, units, activation=tf.nn.relu, name=f"hidden_{i}",
                              kernel_initializer=tf.glorot_uniform_initializer(seed=i))
    logits = tf.layers.dense(net, 3, name="logits",
                             kernel_initializer=tf.glorot_uniform_initializer(seed=9))
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    tf.summary.scalar("mean_logit", tf.reduce_mean(logits))
    train_op = tf.train.GradientDescentOptimizer(params["learning_rate"]).minimize(
        loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


@tf.custom_gradient
def _clip_gradient(x):
    """Identity forward; the gradient clipped to [-1, 1], a usual ``custom_gradient``."""
    return tf.identity(x), lambda dy: tf.clip_by_value(dy, -1.0, 1.0)


def custom_gradient_model_fn(features, labels, mode, params):
    """A tf.layers classifier whose hidden layer's gradient goes through a
    ``tf.custom_gradient`` function; v1 Adam."""
    net = tf.layers.dense(features["x"], 32, activation=tf.nn.relu)
    logits = tf.layers.dense(_clip_gradient(net), 3)
    return _adam_classifier_spec(mode, logits, labels, params)
