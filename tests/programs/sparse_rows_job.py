"""One worker of a two-worker job whose gradients are sparse; run as a module with
TF_CONFIG set.

    python -m tests.programs.sparse_rows_job MODEL_DIR MODEL MODE STEPS [tf1] [warm=DIR]

MODEL: "gather" (a model_fn with three 4096 x 32 tables read by ``tf.gather``, trained
by v1 Adagrad, FTRL and Adam, one each) or "canned" (a DNNLinearCombinedClassifier with a
100,000-bucket crossed column in its linear part, FTRL, and an embedding of a
20,000-bucket hashed column in its DNN part, Adam). MODE: the ``sparse_gradients`` option
of ``make_run_config("multi_worker")``. "tf1" disables v2 behaviour first; "warm=DIR"
starts the model variables from the checkpoint in DIR. Each worker reads its own rows
(unshuffled), so the workers' row counts differ within a step and from step to step.
Prints "FINISHED" at the end.
"""
import json
import os
import sys

if "tf1" in sys.argv[5:]:
    import tensorflow as _tf

    _tf.compat.v1.disable_v2_behavior()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import estimator_dist  # noqa: E402

TABLE_ROWS, WIDTH, BATCH = 4096, 32, 16
CROSSED_BUCKETS, HASHED_BUCKETS = 100_000, 20_000


def gather_model_fn(features, labels, mode, params):
    """Three tables, each read by ``tf.gather`` and trained by its own v1 optimizer."""
    v1 = tf.compat.v1
    logits, train_ops = 0.0, []
    optimizers = (("adagrad", v1.train.AdagradOptimizer(0.5), v1.random_normal_initializer),
                  ("ftrl", v1.train.FtrlOptimizer(0.5), v1.zeros_initializer),
                  ("adam", v1.train.AdamOptimizer(0.05), v1.random_normal_initializer))
    for seed, (name, _, initializer) in enumerate(optimizers):
        kwargs = {"seed": seed} if initializer is v1.random_normal_initializer else {}
        table = v1.get_variable(f"{name}_table", [TABLE_ROWS, WIDTH],
                                initializer=initializer(**kwargs))
        rows = tf.reduce_mean(tf.gather(table, features["ids"]), axis=1)
        logits += tf.reduce_sum(rows, axis=1, keepdims=True)
    loss = v1.losses.sigmoid_cross_entropy(labels, logits)
    for name, optimizer, _ in optimizers:
        train_ops.append(optimizer.minimize(
            loss, var_list=[v for v in v1.trainable_variables() if v.name.startswith(name)]))
    with tf.control_dependencies(train_ops):
        train_op = v1.assign_add(v1.train.get_global_step(), 1)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _gather_input(worker):
    rng = np.random.default_rng(worker)
    # Worker 0 reads ids from a narrow range (few rows a step), worker 1 from all rows.
    high = TABLE_ROWS // 8 if worker == 0 else TABLE_ROWS
    ids = rng.integers(0, high, size=(BATCH * 64, 4)).astype(np.int64)
    labels = (ids[:, :1] % 2).astype(np.float32)
    return lambda: tf.data.Dataset.from_tensor_slices(({"ids": ids}, labels)).repeat().batch(
        BATCH, drop_remainder=True)


def _canned_input(worker):
    rng = np.random.default_rng(worker)
    size = BATCH * 64
    a = rng.integers(0, 300 if worker == 0 else 3000, size=(size, 1)).astype(np.int64)
    b = rng.integers(0, 300, size=(size, 1)).astype(np.int64)
    c = rng.integers(0, 50_000, size=(size, 1)).astype(np.int64)
    labels = ((a + b) % 2).astype(np.int64)
    features = {"a": a, "b": b, "c": c}
    return lambda: tf.data.Dataset.from_tensor_slices((features, labels)).repeat().batch(
        BATCH, drop_remainder=True)


def canned(config, warm, tf1):
    columns = tf.feature_column
    crossed = columns.crossed_column(["a", "b"], hash_bucket_size=CROSSED_BUCKETS)
    hashed = columns.categorical_column_with_hash_bucket("c", HASHED_BUCKETS, dtype=tf.int64)
    estimators = tf.compat.v1.estimator if tf1 else tf.estimator
    return estimators.DNNLinearCombinedClassifier(
        linear_feature_columns=[crossed], linear_optimizer="Ftrl",
        dnn_feature_columns=[columns.embedding_column(hashed, 8)], dnn_hidden_units=[4],
        dnn_optimizer="Adam", config=config, warm_start_from=warm)


def main(model_dir, model, mode, steps, options):
    tf1 = "tf1" in options
    warm = next((o.split("=", 1)[1] for o in options if o.startswith("warm=")), None)
    worker = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    config = estimator_dist.make_run_config(
        "multi_worker", model_dir=model_dir, collective_timeout=60, tf_random_seed=1,
        sparse_gradients=mode, save_checkpoints_steps=steps)
    if model == "gather":
        estimator = tf.estimator.Estimator(gather_model_fn, config=config, warm_start_from=warm)
        input_fn = _gather_input(worker)
    else:
        estimator = canned(config, warm, tf1)
        input_fn = _canned_input(worker)
    estimator.train(input_fn, max_steps=steps)
    print("FINISHED", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:])
