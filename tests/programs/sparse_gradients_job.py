"""A wide LinearClassifier on a two-worker cluster, configured by plain TensorFlow.

    python -m estimator_dist.launch --workers 2 -- \
        python -m tests.programs.sparse_gradients_job MODEL_DIR

RunConfig's own ``train_distribute=tf.distribute.MultiWorkerMirroredStrategy()`` (no
make_run_config, so no mend but tf.estimator's own on TF 2.16+): prints ``ERROR Type:
first line`` or ``FINISHED``.
"""
import json
import os
import sys

# tf.estimator on TensorFlow 2.16+: the import-scope mends only (nothing on 2.15); no
# other mend is installed without make_run_config.
import estimator_dist  # noqa: F401  (imported for its mends)
import tensorflow as tf

from tests.end_to_end.legacy.programs import iris_data


def _rows_in_order(features, labels, batch_size):
    """iris_data.train_input_fn without its shuffle."""
    dataset = tf.data.Dataset.from_tensor_slices((dict(features), labels))
    return dataset.repeat().batch(batch_size)


def main(model_dir):
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            timeout_seconds=60))
    config = tf.estimator.RunConfig(model_dir=model_dir, train_distribute=strategy)
    petal = tf.feature_column.bucketized_column(
        tf.feature_column.numeric_column("PetalLength"), boundaries=[2.0, 4.0, 5.0])
    sepal = tf.feature_column.bucketized_column(
        tf.feature_column.numeric_column("SepalLength"), boundaries=[5.5, 6.2])
    crossed = tf.feature_column.crossed_column([petal, sepal], hash_bucket_size=16)
    estimator = tf.estimator.LinearClassifier([petal, sepal, crossed], n_classes=3,
                                              config=config)
    (train_x, train_y), _ = iris_data.load_data()
    if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 1:
        # The rows in reverse on worker 1: unshuffled, so each worker's batches, and the
        # number of feature ids each batch touches, are the same in every run.
        train_x, train_y = train_x[::-1], train_y[::-1]
    try:
        tf.estimator.train_and_evaluate(
            estimator,
            tf.estimator.TrainSpec(lambda: _rows_in_order(train_x, train_y, 16), max_steps=4),
            tf.estimator.EvalSpec(lambda: iris_data.train_input_fn(train_x, train_y, 16)))
    except Exception as error:  # Any failure is the probe's result.
        print(f"ERROR {type(error).__name__}: {str(error).strip().splitlines()[0]}", flush=True)
        return
    print("FINISHED", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
