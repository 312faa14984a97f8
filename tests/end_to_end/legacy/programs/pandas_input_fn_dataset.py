"""``input_fns.pandas_input_fn`` (the Dataset version of ``tf.estimator.inputs.pandas_input_fn``,
same arguments) feeding a ``LinearClassifier`` over numeric columns; ``train_and_evaluate``."""
import tensorflow.compat.v1 as tf

import input_fns
from tests.end_to_end.legacy.programs import iris_data

BATCH_SIZE = 16
TRAIN_STEPS = 20


def main(make_config, model_dir):
    (train_x, train_y), (test_x, test_y) = iris_data.load_data()
    estimator = tf.estimator.LinearClassifier(
        feature_columns=[tf.feature_column.numeric_column(key) for key in train_x.columns],
        n_classes=3, optimizer="Adagrad",
        config=make_config(model_dir=model_dir, tf_random_seed=1, save_checkpoints_steps=10))
    train_spec = tf.estimator.TrainSpec(
        input_fn=input_fns.pandas_input_fn(x=train_x, y=train_y, batch_size=BATCH_SIZE,
                                           num_epochs=None, shuffle=True),
        max_steps=TRAIN_STEPS)
    eval_spec = tf.estimator.EvalSpec(
        input_fn=input_fns.pandas_input_fn(x=test_x, y=test_y, batch_size=BATCH_SIZE,
                                           num_epochs=1, shuffle=False),
        steps=None, start_delay_secs=0, throttle_secs=0)
    result = tf.estimator.train_and_evaluate(estimator, train_spec, eval_spec)
    metrics = result[0] if result else {}
    metrics["final_step"] = estimator.get_variable_value("global_step")
    return metrics
