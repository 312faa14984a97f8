"""A train_and_evaluate program as older codebases write it: a ``tf.compat.v1`` model_fn,
input_fns that know no ``input_context``, and ``EvalSpec``'s own start delay and throttle.
The one line a user changes is the RunConfig, now ``make_run_config("multi_worker")``.

    python -m estimator_dist.launch --workers 2 --evaluator -- \\
        python tests/programs/legacy_train_and_evaluate.py MODEL_DIR {tf1,tf2}

"tf1" calls ``tf.disable_v2_behavior()`` first, as most such scripts do.
"""
import sys

import numpy as np
import tensorflow.compat.v1 as tf

import estimator_dist

MAX_STEPS = 40
SAVE_CHECKPOINTS_STEPS = 20
EVAL_STEPS = 4


def _data(num_examples=512):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(num_examples, 8)).astype(np.float32)
    y = (x[:, :1] - 2.0 * x[:, 1:2] > 0).astype(np.int32)
    return x, y


def model_fn(features, labels, mode):
    net = tf.layers.dense(features["x"], 16, activation=tf.nn.relu)
    logits = tf.layers.dense(net, 2)
    classes = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"class": classes})
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        metrics = {"accuracy": tf.metrics.accuracy(labels, classes)}
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
    optimizer = tf.train.AdamOptimizer(0.01)
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def train_input_fn():
    x, y = _data()
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).shuffle(512).repeat().batch(32)


def eval_input_fn():
    x, y = _data()
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(32)


def main(model_dir):
    config = estimator_dist.make_run_config("multi_worker", model_dir=model_dir,
                                            save_checkpoints_steps=SAVE_CHECKPOINTS_STEPS)
    estimator = tf.estimator.Estimator(model_fn, config=config)
    train_spec = tf.estimator.TrainSpec(train_input_fn, max_steps=MAX_STEPS)
    eval_spec = tf.estimator.EvalSpec(eval_input_fn, steps=EVAL_STEPS)
    tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)


if __name__ == "__main__":
    if sys.argv[2] == "tf1":
        tf.disable_v2_behavior()
    main(sys.argv[1])
