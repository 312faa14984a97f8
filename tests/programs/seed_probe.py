"""Prints the initial weights a seeded Estimator's tf.compat.v1.layers get in this process.

    python -m tests.programs.seed_probe MODEL_DIR [tf1]

Trains one step (of no update) of a model_fn with one ``tf.compat.v1.layers.dense`` layer
and ``tf_random_seed=1``: first under a plain ``tf.estimator.RunConfig`` (no process-wide
mend installed), then under ``estimator_dist.make_run_config("default")``. Prints one JSON
line: each run's kernel, and whether Python's ``random`` state and Keras 2's seed
generator are as they were before the second run.
"""
import json
import os
import random
import sys

if "tf1" in sys.argv[2:]:
    import tensorflow as _tf

    _tf.compat.v1.disable_v2_behavior()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import estimator_dist  # noqa: E402  (tf.estimator on current TensorFlow)
from estimator_dist.mends import keras_2_seeds  # noqa: E402


def model_fn(features, labels, mode):
    del labels
    outputs = tf.compat.v1.layers.dense(features["x"], 4)
    step = tf.compat.v1.train.get_global_step()
    return tf.estimator.EstimatorSpec(mode, loss=tf.reduce_mean(outputs),
                                      train_op=tf.compat.v1.assign_add(step, 1))


def input_fn():
    return tf.data.Dataset.from_tensors(({"x": np.ones((2, 3), np.float32)}, 0)).repeat()


def kernel(config):
    tf.estimator.Estimator(model_fn, config=config).train(input_fn, max_steps=1)
    return tf.train.load_checkpoint(config.model_dir).get_tensor("dense/kernel").tolist()


def main(model_dir):
    plain = kernel(tf.estimator.RunConfig(model_dir=os.path.join(model_dir, "plain"),
                                          tf_random_seed=1))
    config = estimator_dist.make_run_config("default", model_dir=os.path.join(model_dir, "mended"),
                                            tf_random_seed=1)
    state = random.getstate()
    generators = [getattr(holder, "generator", None) for holder in keras_2_seeds._seed_generators()]
    mended = kernel(config)
    print(json.dumps({
        "plain": plain, "mended": mended, "random_kept": random.getstate() == state,
        "keras_kept": generators == [getattr(holder, "generator", None)
                                     for holder in keras_2_seeds._seed_generators()]}))


if __name__ == "__main__":
    main(sys.argv[1])
