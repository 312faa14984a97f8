"""``tf.estimator.inputs.numpy_input_fn`` feeding a ``LinearClassifier`` (queue-based input)."""
import numpy as np
import tensorflow.compat.v1 as tf

from tests.end_to_end.legacy.programs import iris_data

BATCH_SIZE = 16
TRAIN_STEPS = 20


def main(make_config, model_dir):
    (train_x, train_y), (test_x, test_y) = iris_data.load_data()
    x = {key: np.array(values) for key, values in train_x.items()}
    feature_columns = [tf.feature_column.numeric_column(key) for key in x]
    classifier = tf.estimator.LinearClassifier(
        feature_columns=feature_columns, n_classes=3,
        config=make_config(model_dir=model_dir, tf_random_seed=1))
    train_input_fn = tf.estimator.inputs.numpy_input_fn(
        x=x, y=np.array(train_y), batch_size=BATCH_SIZE, num_epochs=None, shuffle=True)
    classifier.train(input_fn=train_input_fn, steps=TRAIN_STEPS)
    test_input_fn = tf.estimator.inputs.numpy_input_fn(
        x={key: np.array(values) for key, values in test_x.items()}, y=np.array(test_y),
        batch_size=BATCH_SIZE, num_epochs=1, shuffle=False)
    return classifier.evaluate(input_fn=test_input_fn)
