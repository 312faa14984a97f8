"""Evaluates a TF1-style model_fn many times and prints how many examples each counted.

    python -m tests.programs.exact_eval_job MODEL_DIR BEHAVIOUR INPUT WIRING EVALUATIONS

BEHAVIOUR is "tf1" (``disable_v2_behavior()`` first, as legacy scripts do) or "tf2";
INPUT is "legacy" (an input_fn that ignores input_context) or "context"; WIRING is
"package" (``make_run_config("mirrored")``) or "cluster"
(a task of a multi_worker cluster with an evaluator: run it under
``python -m estimator_dist.launch --workers 2 --evaluator``; EVALUATIONS is ignored).
Prints ``COUNTS n1 n2 ...``: the examples each evaluation counted, of ``NUM_EXAMPLES``
(in the cluster, the evaluator's counts are in the eval events under ``examples``).
"""
import sys

import numpy as np

NUM_EXAMPLES = 150
GLOBAL_BATCH = 128
CLUSTER_STEPS = 60


def count_model_fn(features, labels, mode, params):
    """A linear model whose eval metric ``examples`` counts the examples evaluated."""
    import tensorflow.compat.v1 as tf
    del params
    kernel = tf.get_variable("kernel", [4, 1], initializer=tf.zeros_initializer())
    predictions = tf.matmul(features["x"], kernel)
    loss = tf.losses.mean_squared_error(labels, predictions)
    if mode == tf.estimator.ModeKeys.EVAL:
        ones = tf.ones_like(labels[:, 0], tf.bool)
        return tf.estimator.EstimatorSpec(
            mode, loss=loss, eval_metric_ops={"examples": tf.metrics.true_positives(ones, ones)})
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
        loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(NUM_EXAMPLES, 4)).astype(np.float32)
    return {"x": x}, x.sum(axis=1, keepdims=True)


def legacy_input_fn():
    import tensorflow.compat.v1 as tf
    return tf.data.Dataset.from_tensor_slices(_data()).batch(GLOBAL_BATCH)


def context_input_fn(input_context=None):
    import tensorflow.compat.v1 as tf
    dataset = tf.data.Dataset.from_tensor_slices(_data())
    batch = GLOBAL_BATCH
    if input_context is not None:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        batch = input_context.get_per_replica_batch_size(GLOBAL_BATCH)
    return dataset.batch(batch)


def _train_input_fn(input_context=None):
    return context_input_fn(input_context).repeat()


def _config(model_dir, wiring):
    import estimator_dist
    if wiring == "cluster":
        return estimator_dist.make_run_config("multi_worker", model_dir=model_dir,
                                              collective_timeout=60, save_checkpoints_steps=20)
    return estimator_dist.make_run_config("mirrored", num_replicas=2, model_dir=model_dir)


def main(model_dir, behaviour, input_kind, wiring, evaluations):
    import tensorflow as tf
    if behaviour == "tf1":
        tf.compat.v1.disable_v2_behavior()
    config = _config(model_dir, wiring)  # Imports estimator_dist: tf.estimator on TF 2.16+.
    estimator = tf.estimator.Estimator(count_model_fn, config=config)
    input_fn = legacy_input_fn if input_kind == "legacy" else context_input_fn
    if wiring == "cluster":
        tf.estimator.train_and_evaluate(
            estimator, tf.estimator.TrainSpec(_train_input_fn, max_steps=CLUSTER_STEPS),
            tf.estimator.EvalSpec(input_fn, steps=None, start_delay_secs=0, throttle_secs=1))
        return
    estimator.train(_train_input_fn, max_steps=1)
    counts = [int(estimator.evaluate(input_fn)["examples"]) for _ in range(evaluations)]
    print("COUNTS", *counts, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
