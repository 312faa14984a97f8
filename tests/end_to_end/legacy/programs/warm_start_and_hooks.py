"""Fine-tuning habits: a canned ``DNNClassifier`` trained first, then warm-started
(``WarmStartSettings`` over the hidden layers) into a second one whose metrics are
extended with ``tf.estimator.add_metrics``; an ``InMemoryEvaluatorHook`` while it
trains; ``predict``."""
import os

import tensorflow.compat.v1 as tf

from tests.end_to_end.legacy.programs import iris_data

BATCH_SIZE = 16
TRAIN_STEPS = 20


def _classifier(make_config, model_dir, warm_start_from=None):
    columns = [tf.feature_column.numeric_column(key) for key in iris_data.CSV_COLUMN_NAMES[:-1]]
    return tf.estimator.DNNClassifier(
        hidden_units=[10, 10], feature_columns=columns, n_classes=3,
        config=make_config(model_dir=model_dir, tf_random_seed=1),
        warm_start_from=warm_start_from)


def _mean_probability(labels, predictions):
    del labels
    return {"mean_top_probability": tf.metrics.mean(
        tf.reduce_max(predictions["probabilities"], axis=1))}


def main(make_config, model_dir):
    (train_x, train_y), (test_x, test_y) = iris_data.load_data()

    def train_input_fn():
        return iris_data.train_input_fn(train_x, train_y, BATCH_SIZE)

    def eval_input_fn():
        return iris_data.eval_input_fn(test_x, test_y, BATCH_SIZE)

    base = _classifier(make_config, model_dir + "_base")
    base.train(train_input_fn, max_steps=TRAIN_STEPS)
    warm_start = tf.estimator.WarmStartSettings(base.model_dir,
                                                vars_to_warm_start=".*hiddenlayer.*")
    tuned = tf.estimator.add_metrics(_classifier(make_config, model_dir, warm_start),
                                     _mean_probability)
    in_memory = tf.estimator.experimental.InMemoryEvaluatorHook(
        tuned, eval_input_fn, every_n_iter=10)
    tuned.train(train_input_fn, max_steps=TRAIN_STEPS, hooks=[in_memory])
    metrics = tuned.evaluate(eval_input_fn)
    predictions = list(tuned.predict(lambda: iris_data.eval_input_fn(test_x[:3], None, 3)))
    # The script's own checks.
    assert len(predictions) == 3, f"predicted {len(predictions)} of 3 rows"
    assert "mean_top_probability" in metrics, "add_metrics' metric is missing"
    assert os.listdir(tuned.eval_dir()), "InMemoryEvaluatorHook wrote no eval events"
    return metrics
