"""A wide model: ``LinearClassifier`` over bucketized and crossed columns (sparse gradients
whose length varies from batch to batch), DataFrames through a Dataset input_fn,
``train_and_evaluate``."""
import tensorflow.compat.v1 as tf

from tests.end_to_end.legacy.programs import iris_data

BATCH_SIZE = 16
TRAIN_STEPS = 20


def main(make_config, model_dir):
    (train_x, train_y), (test_x, test_y) = iris_data.load_data()
    petal = tf.feature_column.numeric_column("PetalLength")
    sepal = tf.feature_column.numeric_column("SepalLength")
    petal_buckets = tf.feature_column.bucketized_column(petal, boundaries=[2.0, 4.0, 5.0])
    sepal_buckets = tf.feature_column.bucketized_column(sepal, boundaries=[5.5, 6.2])
    crossed = tf.feature_column.crossed_column([petal_buckets, sepal_buckets], hash_bucket_size=16)
    estimator = tf.estimator.LinearClassifier(
        feature_columns=[petal_buckets, sepal_buckets, crossed], n_classes=3,
        config=make_config(model_dir=model_dir, tf_random_seed=1, save_checkpoints_steps=10))
    train_spec = tf.estimator.TrainSpec(
        input_fn=lambda: iris_data.train_input_fn(train_x, train_y, BATCH_SIZE),
        max_steps=TRAIN_STEPS)
    eval_spec = tf.estimator.EvalSpec(
        input_fn=lambda: iris_data.eval_input_fn(test_x, test_y, BATCH_SIZE),
        steps=None, start_delay_secs=0, throttle_secs=0)
    result = tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
    metrics = result[0] if result else {}
    metrics["final_step"] = estimator.get_variable_value("global_step")
    return metrics
