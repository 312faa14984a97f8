"""``canned.optimizer``: Keras ``fit`` continues a canned Estimator's training.

N Estimator steps, converted, then M Keras steps with the carried optimizer, against N+M
Estimator steps from the same seed on the same batch.
"""
import importlib
import warnings

import numpy as np
import pytest
import tensorflow as tf

import estimator_dist
from estimator_dist.conversion import canned, keras_conversion
from estimator_dist.errors import UsageError
from estimator_dist.mends import releases
from tests.estimator_dist.conversion.canned_programs import FEATURES, LABELS
from tests.train_support import keep_tf_logging  # noqa: F401

pytestmark = [pytest.mark.both_ends, pytest.mark.slow, pytest.mark.usefixtures("keep_tf_logging"),
              pytest.mark.xdist_group("canned")]

_STEPS, _MORE_STEPS = 5, 3
# Keras's Adagrad adds epsilon under the square root, the Estimator's beside it.
_TOLERANCE = 1e-4
fc = tf.feature_column


def _linear(model_dir):
    """V2: FTRL."""
    return tf.estimator.LinearRegressor(
        [fc.numeric_column("age"), fc.categorical_column_with_hash_bucket("city", 3),
         fc.crossed_column(["city", "fruit"], 7)], model_dir=model_dir)


def _dnn(model_dir, optimizer="Adagrad"):
    """V2: Adagrad, or ``optimizer``."""
    return tf.estimator.DNNRegressor(
        [4], [fc.numeric_column("size", shape=(2,)), fc.embedding_column(
            fc.categorical_column_with_identity("slot", 5, default_value=0), 2)],
        model_dir=model_dir, config=tf.estimator.RunConfig(tf_random_seed=3),
        optimizer=optimizer)


def _keras2_sgd(**kwargs):
    """The Keras 2 SGD a V2 canned Estimator takes: ``tf.keras``'s on 2.15, ``tf_keras``'s
    on current TensorFlow."""
    current = releases.tensorflow_release() in releases.CURRENT
    keras2 = importlib.import_module("tf_keras") if current else tf.keras
    return keras2.optimizers.legacy.SGD(**kwargs)


def _adam(model_dir):
    """Adam's moments over an embedding's rows, its bias correction by the global step."""
    return _dnn(model_dir, "Adam")


def _sgd(model_dir):
    """SGD without momentum over a linear part's categorical rows."""
    return tf.estimator.LinearRegressor(
        [fc.numeric_column("age"), fc.categorical_column_with_hash_bucket("city", 3)],
        model_dir=model_dir, optimizer="SGD")


def _momentum(model_dir):
    """SGD's momentum over weights updated whole."""
    return tf.estimator.DNNRegressor(
        [4], [fc.numeric_column("size", shape=(2,))], model_dir=model_dir,
        config=tf.estimator.RunConfig(tf_random_seed=3),
        optimizer=_keras2_sgd(learning_rate=0.01, momentum=0.9))


_LABELS = LABELS["linear_regressor"]


def _data():
    return tf.data.Dataset.from_tensors((FEATURES, _LABELS)).repeat()


@pytest.mark.parametrize("build", [_linear, _dnn, _adam, _sgd, _momentum],
                         ids=["ftrl", "adagrad", "adam", "sgd", "momentum"])
def test_fit_with_the_carried_optimizer_continues_the_estimator(build, tmp_path):
    short, long = build(str(tmp_path / "short")), build(str(tmp_path / "long"))
    short.train(_data, steps=_STEPS)
    long.train(_data, steps=_STEPS + _MORE_STEPS)
    expected = next(long.predict(lambda: tf.data.Dataset.from_tensors(FEATURES),
                                 yield_single_examples=False))["predictions"]
    model = estimator_dist.to_keras(short)
    features = {k: FEATURES[k] for k in model.input}
    keras_data = tf.data.Dataset.from_tensors((features, {"predictions": _LABELS})).repeat()
    model.compile(optimizer=canned.optimizer(model, tf.train.latest_checkpoint(short.model_dir)),
                  loss={"predictions": "mse"})
    model.fit(keras_data, steps_per_epoch=_MORE_STEPS, epochs=1, verbose=0)
    outputs = np.asarray(model(features)["predictions"])
    np.testing.assert_allclose(outputs, expected, atol=_TOLERANCE, rtol=0)


@pytest.mark.parametrize("optimizer,message", [
    (lambda: _keras2_sgd(learning_rate=0.01, momentum=0.9),
     r"optimizer SGD with momentum must have updated every weight whole .* Received: "
     r"momentum=0\.9 over the rows of dnn_slot_embedding$"),
    (lambda: _keras2_sgd(learning_rate=0.01, decay=0.5),
     r"optimizer SGD must train without a learning-rate decay .* Received: decay=0\.5$")],
    ids=["sparse-momentum", "decay"])
def test_optimizer_refuses_what_keras_would_continue_otherwise(optimizer, message, tmp_path):
    estimator = _dnn(str(tmp_path), optimizer)
    estimator.train(_data, steps=1)
    model = estimator_dist.to_keras(estimator)
    with pytest.raises(UsageError, match=message):
        canned.optimizer(model, tf.train.latest_checkpoint(estimator.model_dir))


def test_optimizer_refuses_a_model_not_converted():
    model = tf.keras.Sequential([tf.keras.Input((1,)), tf.keras.layers.Dense(1)])
    with pytest.raises(UsageError, match="model must be a Keras model to_keras converted"):
        canned.optimizer(model, "unused")


def test_a_dense_empty_string_in_a_crossed_raw_key_is_crossed_by_the_estimator_only(tmp_path):
    """What docs/migration.md says: the Estimator's predict crosses a dense ``''`` of a
    crossed column's raw key as a value; the Keras model drops it, as a parsed
    ``tf.Example`` without the feature has none. Rows without ``''`` agree."""
    estimator = tf.estimator.LinearRegressor([fc.crossed_column(["city", "color"], 7)],
                                             model_dir=str(tmp_path))
    estimator.train(_data, steps=_STEPS)
    expected = next(estimator.predict(lambda: tf.data.Dataset.from_tensors(FEATURES),
                                      yield_single_examples=False))["predictions"]
    model = estimator_dist.to_keras(estimator)
    outputs = np.asarray(model({k: FEATURES[k] for k in model.input})["predictions"])
    blank = (FEATURES["color"] == "").any(axis=1)
    np.testing.assert_allclose(outputs[~blank], expected[~blank], atol=1e-5, rtol=0)
    assert (np.abs(outputs[blank] - expected[blank]) > 1e-3).all()


def _cross_ids(column, features):
    """The ids TensorFlow's feature column gives ``column`` for ``features``."""
    from tensorflow.python.feature_column import feature_column_v2  # The column's own path.

    cache = feature_column_v2.FeatureTransformationCache(features)
    return tf.sparse.to_dense(column.get_sparse_tensors(cache, None).id_tensor).numpy()


def test_a_raw_key_before_a_categorical_column_crosses_as_the_export_does():
    """What docs/migration.md says: TensorFlow crosses a dense raw feature after the
    sparse ids of a categorical column (dense input: arrays, ``numpy_input_fn``), a
    parsed one (sparse: ``tf.Example``, the export's serving input) in the order given. The
    Keras layers cross as the export does, and the conversion warns of such a column;
    with the categorical column first both orders agree, and nothing is said."""
    from estimator_dist.conversion import _column_layers, feature_columns

    job = fc.categorical_column_with_vocabulary_list("job", ["cook", "pilot"],
                                                     num_oov_buckets=1)
    dense = {"city": tf.constant([["paris"], ["rome"], ["oslo"], ["paris"]]),
             "job": tf.constant([["cook"], ["pilot"], ["cook"], ["baker"]])}
    parsed = {"city": tf.sparse.from_dense(dense["city"]), "job": dense["job"]}
    for keys, warned in ((["city", job], True), ([job, "city"], False)):
        column = fc.crossed_column(keys, 20)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            spec = feature_columns.linear_spec(column)
        assert [w.category for w in caught] == (
            [feature_columns.CrossOrderWarning] if warned else []), caught
        ours = _column_layers.categorical_ids(spec, dense)[0].numpy()
        np.testing.assert_array_equal(ours, _cross_ids(column, parsed))
        assert (ours != _cross_ids(column, dense)).any() == warned


def _shared_columns(kind):
    """Embeddings of "city" and "color" sharing one table: V1's ``shared_embedding_columns``
    or V2's ``shared_embeddings``, built in a graph as TensorFlow requires."""
    v1 = tf.compat.v1.feature_column
    make = v1.shared_embedding_columns if kind == "v1" else tf.feature_column.shared_embeddings
    with tf.Graph().as_default():
        return make([v1.categorical_column_with_hash_bucket(key, 5) for key in ("city", "color")],
                    3, combiner="sqrtn")


@pytest.mark.parametrize("columns,estimator", [("v1", "v1"), ("v2", "v1"), ("v2", "v2")])
def test_shared_embeddings_convert_as_the_estimator_predicts(columns, estimator, tmp_path):
    """Each layout of a shared table in the checkpoint: V1 columns in a V1 DNN, V2 columns
    in a V1 DNN, V2 columns in a V2 DNN (which does not train the table)."""
    build = tf.compat.v1.estimator.DNNRegressor if estimator == "v1" else tf.estimator.DNNRegressor
    model = build([4], _shared_columns(columns) + [fc.numeric_column("age")],
                  model_dir=str(tmp_path), config=tf.estimator.RunConfig(tf_random_seed=3))
    model.train(_data, steps=_STEPS)
    slots = [n for n, _ in tf.train.list_variables(model.model_dir)
             if "shared_embedding" in n and "Adagrad" in n]
    assert bool(slots) == (estimator == "v1"), slots  # TensorFlow's V2 DNN's own choice.
    expected = next(model.predict(lambda: tf.data.Dataset.from_tensors(FEATURES),
                                  yield_single_examples=False))["predictions"]
    keras_model = estimator_dist.to_keras(model)
    assert "dnn_city_color_shared_embedding" in [layer.name for layer in keras_model.layers]
    outputs = np.asarray(keras_model({k: FEATURES[k] for k in keras_model.input})["predictions"])
    np.testing.assert_allclose(outputs, expected, atol=1e-5, rtol=0)
    saved = keras_conversion.save(keras_model, tmp_path / "keras")  # With its parsing spec.
    served = tf.saved_model.load(saved).signatures["features"](
        **{k: tf.constant(FEATURES[k]) for k in keras_model.input})
    np.testing.assert_allclose(served["predictions"].numpy(), expected, atol=1e-5, rtol=0)
