"""A regression model_fn whose input_fn returns ``make_one_shot_iterator(dataset).get_next()``
(the tf.data habit of TF 1.4-era code)."""
import numpy as np
import tensorflow.compat.v1 as tf

TRAIN_STEPS = 20


def input_fn():
    rng = np.random.RandomState(0)
    x = rng.randn(128, 3).astype(np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(16)
    iterator = tf.data.make_one_shot_iterator(dataset)
    return iterator.get_next()


def model_fn(features, labels, mode):
    predictions = tf.layers.dense(features["x"], 1)
    loss = tf.losses.mean_squared_error(labels, predictions)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def main(make_config, model_dir):
    estimator = tf.estimator.Estimator(model_fn, config=make_config(model_dir=model_dir))
    estimator.train(input_fn, max_steps=TRAIN_STEPS)
    return estimator.evaluate(input_fn, steps=2)
