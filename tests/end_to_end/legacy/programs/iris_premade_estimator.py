"""tensorflow/models ``premade_estimator.py``: a canned ``DNNClassifier`` over feature columns."""
import tensorflow.compat.v1 as tf

from tests.end_to_end.legacy.programs import iris_data

BATCH_SIZE = 16
TRAIN_STEPS = 20


def main(make_config, model_dir):
    (train_x, _), _ = iris_data.load_data()
    my_feature_columns = [tf.feature_column.numeric_column(key=key) for key in train_x.keys()]
    classifier = tf.estimator.DNNClassifier(
        feature_columns=my_feature_columns, hidden_units=[10, 10], n_classes=3,
        config=make_config(model_dir=model_dir, tf_random_seed=1))
    return iris_data.train_evaluate_predict(classifier, BATCH_SIZE, TRAIN_STEPS)
