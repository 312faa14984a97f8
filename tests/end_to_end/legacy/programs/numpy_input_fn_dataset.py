"""``input_fns.numpy_input_fn`` (the Dataset version of ``tf.estimator.inputs.numpy_input_fn``,
same arguments) feeding a ``DNNLinearCombinedClassifier``; train, evaluate, export."""
import os

import numpy as np
import tensorflow.compat.v1 as tf

import input_fns
from tests.end_to_end.legacy.programs import iris_data

BATCH_SIZE = 16
TRAIN_STEPS = 20


def main(make_config, model_dir):
    (train_x, train_y), (test_x, test_y) = iris_data.load_data()
    columns = [tf.feature_column.numeric_column(key) for key in train_x.keys()]
    estimator = tf.estimator.DNNLinearCombinedClassifier(
        linear_feature_columns=columns[:2], dnn_feature_columns=columns[2:],
        dnn_hidden_units=[8], n_classes=3,
        config=make_config(model_dir=model_dir, tf_random_seed=1))
    estimator.train(
        input_fn=input_fns.numpy_input_fn(
            x={key: train_x[key].values for key in train_x}, y=train_y.values,
            batch_size=BATCH_SIZE, num_epochs=None, shuffle=True),
        steps=TRAIN_STEPS)
    metrics = estimator.evaluate(input_fn=input_fns.numpy_input_fn(
        x={key: test_x[key].values for key in test_x}, y=np.asarray(test_y),
        batch_size=BATCH_SIZE, num_epochs=1, shuffle=False))
    if iris_data.is_chief_task():  # Every task runs this script; one exports.
        export_dir = estimator.export_saved_model(model_dir + "_export",
                                                  iris_data.serving_input_receiver_fn)
        metrics["exported"] = os.path.isfile(os.path.join(export_dir, b"saved_model.pb"))
    return metrics
