"""A ``train_and_evaluate`` job whose training input ends long before ``max_steps``.

    python -m tests.programs.short_input_job MODEL_DIR

Each chief and worker trains on one pass over 256 examples (16 steps of 16) towards
``max_steps`` 100000, so no checkpoint ever reaches it; the EvalSpec keeps TensorFlow's
default delays (120 s before the first evaluation, 600 s between two). Prints ``ENDED``
when ``train_and_evaluate`` returns.
"""
import sys

import tensorflow as tf

import estimator_dist
from tests.programs import tf1_models


def _one_pass():
    x, y = tf1_models.regression_data()
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).batch(16, drop_remainder=True)


def main(model_dir):
    config = estimator_dist.make_run_config("multi_worker", model_dir=model_dir,
                                            save_checkpoints_steps=5)
    estimator = tf.estimator.Estimator(tf1_models.regression_model_fn, config=config,
                                       params={"learning_rate": 0.01})
    tf.estimator.train_and_evaluate(
        estimator, tf.estimator.TrainSpec(_one_pass, max_steps=100000),
        tf.estimator.EvalSpec(_one_pass, steps=2))
    print("ENDED", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
