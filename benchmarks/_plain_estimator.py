"""The soak's peer: the CLI's dense model trained by a plain ``tf.estimator.Estimator`` with
a plain ``RunConfig`` until it is stopped: of estimator_dist only its data and model
tables, no config, mend or hook.

    python benchmarks/_plain_estimator.py --model-dir DIR

What plain TensorFlow does over a long run (its RSS above all) is the line the package's
own cases are read against.
"""
from __future__ import annotations

import argparse

import tensorflow as tf

from estimator_dist import datasets, models
from input_fns import from_arrays
from model_fns.dense import dense_classifier_model_fn


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True)
    args = parser.parse_args(argv)
    model = models.MODELS["dense"]
    data = datasets.blobs(8192, seed=0)
    estimator = tf.estimator.Estimator(
        dense_classifier_model_fn, params=dict(model.params),
        config=tf.estimator.RunConfig(model_dir=args.model_dir, save_checkpoints_steps=100000,
                                      log_step_count_steps=10000))
    estimator.train(from_arrays(data.features, data.labels, batch_size=model.batch_size),
                    max_steps=100000000)


if __name__ == "__main__":
    main()
