"""Canned Estimators over every feature column kind the Keras conversion reproduces, their
data (also as tf.Example strings), their export, the functions ``migrate --estimator``
calls (``MODULE:FUNCTION``), and the check that a Keras model predicts as one."""
import base64
import json

import numpy as np
import tensorflow as tf

from estimator_dist.mends import internals
from tests.support import run_python

fc = tf.feature_column
TOLERANCE = 1e-5  # Of a converted model's numbers against the Estimator's.

# Eight examples: out-of-vocabulary values, empty strings and -1 ids (dropped), identity ids
# out of range (their default), more cities than hash buckets (collisions), a weight <= 0.
FEATURES = {
    "age": np.array([[10.], [20.], [40.], [70.], [25.], [33.], [51.], [18.]], np.float32),
    "size": np.array([[1., 2.], [0., -1.], [3., 3.], [-2., 5.], [0., 0.], [1., 1.],
                      [2., -3.], [4., 0.]], np.float32),
    "color": np.array([["red", ""], ["x", "red"], ["blue", "green"], ["", ""],
                       ["green", "y"], ["red", "red"], ["blue", ""], ["z", "blue"]]),
    "city": np.array([["a"], ["b"], ["c"], ["d"], ["e"], ["f"], ["g"], ["h"]]),
    "fruit": np.array([["apple"], ["pear"], ["kiwi"], ["plum"], ["fig"], ["apple"],
                       ["lime"], ["pear"]]),
    "slot": np.array([[0, 1], [1, -1], [4, 9], [2, 2], [3, -1], [7, 0], [1, 4], [-1, -1]],
                     np.int64),
    "tag": np.array([[0, 1], [1, 2], [4, 9], [2, 2], [3, 0], [7, 0], [1, 4], [3, 3]],
                    np.int64),
    "tag_weight": np.array([[0.5, 2.], [1., 3.], [0.25, 1.], [2., 2.], [1.5, 1.], [1., 1.],
                            [-1., 2.], [1., 1.]], np.float32),
    "zip": np.array([[101], [202], [303], [404], [505], [606], [707], [808]], np.int64),
    "weight": np.array([[1.], [2.], [1.], [0.5], [1.], [1.], [3.], [1.]], np.float32),
}
FRUITS = ["apple", "pear", "kiwi"]


def _columns(vocabulary_file, hash_key=7):
    age = fc.numeric_column("age")
    age_buckets = fc.bucketized_column(age, [18., 30., 50.])
    color = fc.categorical_column_with_vocabulary_list(
        "color", ["red", "green", "blue"], num_oov_buckets=2)
    city = fc.categorical_column_with_hash_bucket("city", 3)
    fruit = vocabulary_file and fc.categorical_column_with_vocabulary_file(
        "fruit", vocabulary_file, default_value=0)
    slot = fc.categorical_column_with_identity("slot", 5, default_value=0)
    weighted_tag = fc.weighted_categorical_column(
        fc.categorical_column_with_identity("tag", 5, default_value=0), "tag_weight")
    zip_code = fc.categorical_column_with_hash_bucket("zip", 4, dtype=tf.int64)
    cross = fc.crossed_column([age_buckets, "city"], 5, hash_key=hash_key)
    return {"age": age, "age_buckets": age_buckets, "color": color, "city": city,
            "fruit": fruit, "slot": slot, "weighted_tag": weighted_tag, "zip": zip_code,
            "cross": cross, "size": fc.numeric_column("size", shape=(2,))}


def wide_and_deep(model_dir=None, vocabulary_file=None, hash_key=7):
    """Binary, label vocabulary, weight column; every column kind once."""
    c = _columns(vocabulary_file, hash_key)
    return tf.estimator.DNNLinearCombinedClassifier(
        model_dir=model_dir, label_vocabulary=["no", "yes"], weight_column="weight",
        linear_feature_columns=[c["color"], c["fruit"], c["cross"], c["weighted_tag"],
                                c["age_buckets"], c["size"], c["zip"]],
        dnn_feature_columns=[
            fc.embedding_column(c["city"], 3, combiner="mean"),
            fc.embedding_column(c["fruit"], 2, combiner="sqrtn", max_norm=0.5),
            fc.embedding_column(c["weighted_tag"], 2, combiner="sum"),
            fc.indicator_column(c["color"]), fc.indicator_column(c["cross"]),
            fc.indicator_column(c["weighted_tag"]), c["age"], c["age_buckets"]],
        dnn_hidden_units=[4, 3], dnn_activation_fn=tf.nn.tanh)


def dnn_regressor(model_dir=None, vocabulary_file=None):
    """Two label dimensions, batch norm, an embedding of multivalent ids."""
    c = _columns(vocabulary_file)
    return tf.estimator.DNNRegressor(
        [4], [c["size"], fc.embedding_column(c["slot"], 2), fc.indicator_column(c["zip"])],
        model_dir=model_dir, label_dimension=2, batch_norm=True)


def linear_classifier(model_dir=None, vocabulary_file=None):
    """Three classes, the mean sparse combiner."""
    c = _columns(vocabulary_file)
    return tf.estimator.LinearClassifier(
        [c["color"], c["city"], c["slot"], c["age"]], model_dir=model_dir, n_classes=3,
        sparse_combiner="mean")


def linear_regressor(model_dir=None, vocabulary_file=None):
    """V1."""
    c = _columns(vocabulary_file)
    return tf.compat.v1.estimator.LinearRegressor(
        [c["cross"], c["age"], c["zip"]], model_dir=model_dir)


def dnn_classifier(model_dir=None, vocabulary_file=None):
    """V1, three classes, relu."""
    c = _columns(vocabulary_file)
    return tf.compat.v1.estimator.DNNClassifier(
        [5], [fc.embedding_column(c["color"], 2), c["age"]], model_dir=model_dir,
        n_classes=3)


def wide_and_deep_regressor(model_dir=None, vocabulary_file=None):
    """V1, relu."""
    c = _columns(vocabulary_file)
    return tf.compat.v1.estimator.DNNLinearCombinedRegressor(
        model_dir=model_dir, linear_feature_columns=[c["color"], c["cross"]],
        dnn_feature_columns=[fc.embedding_column(c["fruit"], 2), c["size"]],
        dnn_hidden_units=[3])


def binary_linear_classifier(model_dir=None, vocabulary_file=None):
    """V1, two classes named by a label vocabulary."""
    c = _columns(vocabulary_file)
    return tf.compat.v1.estimator.LinearClassifier(
        [c["city"], c["weighted_tag"]], model_dir=model_dir, label_vocabulary=["no", "yes"])


def default_key_wide_and_deep(model_dir=None, vocabulary_file=None):
    """``wide_and_deep``, its cross on TensorFlow's default hash key (Keras's
    HashedCrossing has no other)."""
    return wide_and_deep(model_dir, vocabulary_file, hash_key=None)


def normalized_age():
    """A numeric column with a normalizer_fn: refused."""
    age = fc.numeric_column("age", normalizer_fn=lambda x: x / 100.)
    return tf.estimator.DNNRegressor([2], [age])


LABELS = {
    "wide_and_deep": np.array([["no"], ["yes"], ["yes"], ["no"], ["no"], ["yes"], ["no"],
                               ["yes"]]),
    "dnn_regressor": np.arange(16, dtype=np.float32).reshape(8, 2) / 8.,
    "linear_classifier": np.array([[0], [1], [2], [1], [0], [2], [1], [0]]),
    "linear_regressor": np.arange(8, dtype=np.float32).reshape(8, 1) / 4.,
    "dnn_classifier": np.array([[2], [1], [0], [1], [0], [2], [1], [0]]),
    "wide_and_deep_regressor": np.arange(8, dtype=np.float32).reshape(8, 1) / 2.,
    "binary_linear_classifier": np.array([["yes"], ["no"], ["no"], ["yes"], ["yes"], ["no"],
                                          ["no"], ["yes"]]),
}
BUILDERS = {"wide_and_deep": wide_and_deep, "dnn_regressor": dnn_regressor,
            "linear_classifier": linear_classifier, "linear_regressor": linear_regressor,
            "dnn_classifier": dnn_classifier, "wide_and_deep_regressor": wide_and_deep_regressor,
            "binary_linear_classifier": binary_linear_classifier}


def export(estimator, export_dir):
    """The Estimator's own export, serving tf.Example strings parsed by its columns' spec."""
    arguments = internals.canned_estimator_arguments(estimator)
    columns = list(arguments["linear_feature_columns"]) + list(arguments["dnn_feature_columns"])
    receiver = tf.estimator.export.build_parsing_serving_input_receiver_fn(
        tf.feature_column.make_parse_example_spec(columns))
    estimator.export_saved_model(str(export_dir), receiver)


def serialized_examples(features, missing, keep_dropped=False):
    """Base64 tf.Example strings of ``features``' rows, without the features ``missing``
    names for a row, and without the values the columns drop from dense features ('' and
    -1) unless ``keep_dropped``: a tf.Example's are values the columns take."""
    examples = []
    for row in range(len(features["age"])):
        feature = {}
        for key, values in features.items():
            if key in missing.get(row, ()):
                continue
            values = values[row].ravel()
            if values.dtype.kind == "f":
                feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
            elif values.dtype.kind == "i":
                feature[key] = tf.train.Feature(
                    int64_list=tf.train.Int64List(value=[v for v in values
                                                         if keep_dropped or v != -1]))
            else:
                feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[v.encode() for v in values if keep_dropped or v]))
        example = tf.train.Example(features=tf.train.Features(feature=feature))
        examples.append(base64.b64encode(example.SerializeToString()).decode())
    return examples


def keras_outputs(model, features):
    """The Keras model's outputs of the ``features`` it takes, as NumPy arrays."""
    return {k: np.asarray(v) for k, v in model({k: features[k] for k in model.input}).items()}


def check_equal(predictions, outputs):
    """Every output of the Keras model equals the Estimator's; numbers to TOLERANCE."""
    for key, value in outputs.items():
        if value.dtype.kind in "SOU":
            np.testing.assert_array_equal(value.astype(bytes),
                                          np.asarray(predictions[key]).astype(bytes), err_msg=key)
        else:
            np.testing.assert_allclose(value, predictions[key], atol=TOLERANCE, rtol=0,
                                       err_msg=key)


def check_served_as_the_export(examples, saved_model, exported, folder):
    """Serves the base64 tf.Example strings ``examples`` with the signatures of
    ``saved_model`` and of the Estimator's export ``exported`` in a process of TensorFlow
    alone (the interpreter-start hook off); checks that they have the export's keys and
    values. Returns what ``saved_model``'s ``predict`` gave."""
    path = folder / "examples.json"
    path.write_text(json.dumps(examples))
    result = run_python(["tests/programs/serve_examples.py", str(path), saved_model, exported],
                        timeout=240, env={"ESTIMATOR_DIST_STARTUP_HOOK": "0"})
    assert result.returncode == 0, result.stderr[-3000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])
    assert served["imported"][0] == []
    ours, export = ({name: {k: np.asarray(v) for k, v in signature.items()}
                     for name, signature in model_outputs.items()}
                    for model_outputs in served["outputs"])
    assert set(ours) == set(export) == {"predict", "classification", "regression",
                                        "serving_default"}
    for name, outputs in export.items():  # The export's contract: its keys and values.
        assert set(ours[name]) == set(outputs), name
        check_equal(outputs, ours[name])
    return ours["predict"]
