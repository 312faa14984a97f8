"""Wide-and-deep by epochs over finite CSV files: canned ``DNNLinearCombinedClassifier``,
``train``/``evaluate`` in a loop by epochs (no ``steps``: each call ends with its
input), then one more epoch through ``train_and_evaluate``; the training files sharded
across input pipelines, so workers get uneven shards (3 files and 2)."""
import os

import numpy as np
import tensorflow.compat.v1 as tf

from tests.end_to_end.legacy.programs import iris_data

BATCH_SIZE = 16
EPOCHS = 2
PARTS = 5
ROWS_PER_PART = 32


def write_parts(data_dir):
    """The training data as PARTS CSV files (written once, atomically)."""
    (train_x, train_y), _ = iris_data.load_data()
    rows = np.column_stack([np.resize(train_x.values, (PARTS * ROWS_PER_PART, 4)),
                            np.resize(train_y.values, PARTS * ROWS_PER_PART)])
    os.makedirs(data_dir, exist_ok=True)
    paths = []
    for part in range(PARTS):
        path = os.path.join(data_dir, f"train-{part}.csv")
        if not os.path.exists(path):
            scratch = f"{path}.{os.getpid()}"
            chunk = rows[part * ROWS_PER_PART:(part + 1) * ROWS_PER_PART]
            np.savetxt(scratch, chunk, delimiter=",", fmt=["%.4f"] * 4 + ["%d"])
            os.replace(scratch, path)
        paths.append(path)
    return paths


def _parse(line):
    fields = tf.io.decode_csv(line, record_defaults=[[0.0]] * 4 + [[0]])
    return dict(zip(iris_data.CSV_COLUMN_NAMES[:-1], fields[:4])), fields[4]


def train_input_fn(paths, input_context=None):
    """One pass over the files; each input pipeline reads its share of them."""
    files = tf.data.Dataset.from_tensor_slices(paths)
    batch_size = BATCH_SIZE
    if input_context:
        files = files.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        batch_size = input_context.get_per_replica_batch_size(BATCH_SIZE)
    return files.flat_map(tf.data.TextLineDataset).map(_parse).batch(batch_size)


def main(make_config, model_dir):
    paths = write_parts(os.path.join(os.path.dirname(model_dir), "finite_input_data"))
    _, (test_x, test_y) = iris_data.load_data()
    petal = tf.feature_column.numeric_column("PetalLength")
    sepal = tf.feature_column.numeric_column("SepalLength")
    petal_buckets = tf.feature_column.bucketized_column(petal, boundaries=[2.0, 4.0, 5.0])
    sepal_buckets = tf.feature_column.bucketized_column(sepal, boundaries=[5.5, 6.2])
    crossed = tf.feature_column.crossed_column([petal_buckets, sepal_buckets], hash_bucket_size=16)
    deep = [tf.feature_column.numeric_column(key) for key in iris_data.CSV_COLUMN_NAMES[:-1]]
    estimator = tf.estimator.DNNLinearCombinedClassifier(
        linear_feature_columns=[petal_buckets, sepal_buckets, crossed],
        dnn_feature_columns=deep, dnn_hidden_units=[10, 10], n_classes=3,
        config=make_config(model_dir=model_dir, tf_random_seed=1))

    def input_fn(input_context=None):
        return train_input_fn(paths, input_context)

    def eval_input_fn():
        return iris_data.eval_input_fn(test_x, test_y, BATCH_SIZE)

    for epoch in range(EPOCHS):
        estimator.train(input_fn)
        metrics = estimator.evaluate(eval_input_fn)
        print(f"epoch {epoch}: accuracy {metrics['accuracy']:.3f}", flush=True)
    result = tf.estimator.train_and_evaluate(
        estimator, tf.estimator.TrainSpec(input_fn),
        tf.estimator.EvalSpec(eval_input_fn, steps=None, start_delay_secs=0, throttle_secs=0))
    metrics = dict(result[0]) if result else {"loss": metrics["loss"]}  # No evaluation here.
    metrics["final_step"] = estimator.get_variable_value("global_step")
    return metrics
