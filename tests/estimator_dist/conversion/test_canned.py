"""``to_keras(estimator)``: trained canned Estimators → Keras models with their predictions.

One module fixture trains each Estimator of ``canned_programs`` a few steps, takes its
``predict`` on the same eight examples, then converts it (on TensorFlow 2.15 Keras models
are built after the Estimator's calls, as ``keras_conversion.to_keras`` says).
"""
import base64
import glob
import os

import numpy as np
import pytest
import tensorflow as tf

import estimator_dist
from estimator_dist.commands import migrate
from estimator_dist.conversion import canned, feature_columns, keras_conversion
from estimator_dist.conversion.feature_columns import InexpressibleColumn
from estimator_dist.errors import UsageError
from estimator_dist import mends
from estimator_dist.mends import internals
from tests.estimator_dist.conversion import canned_programs
from tests.estimator_dist.conversion.canned_programs import (FEATURES, check_equal,
                                                              keras_outputs)
from tests.support import REPO_ROOT
from tests.train_support import keep_tf_logging  # noqa: F401

pytestmark = [pytest.mark.both_ends, pytest.mark.usefixtures("keep_tf_logging"),
              pytest.mark.xdist_group("canned")]

_PROGRAMS = "tests.estimator_dist.conversion.canned_programs"
_GUIDE = os.path.join(REPO_ROOT, "docs", "migration.md")


def _read(path):
    with open(path, encoding="utf-8") as file:
        return file.read()


def _input_fn(features, labels=None):
    def input_fn():
        data = features if labels is None else (features, labels)
        dataset = tf.data.Dataset.from_tensors(data)
        return dataset if labels is None else dataset.repeat()
    return input_fn


# The categorical features as a tf.Example's variable-length features come: rows of fewer
# values, an empty row; what a row keeps of FEATURES' values includes '' and -1, which the
# columns take from a sparse feature (and drop from a dense one).
_ROW_LENGTHS = [2, 1, 2, 0, 1, 2, 2, 1]
_MULTIVALENT = ("color", "city", "fruit", "slot", "tag", "tag_weight", "zip")


def _multivalent(features, sparse):
    """``features`` as tensors, the categorical ones ragged (or sparse)."""
    given = {key: tf.constant(value) for key, value in features.items()}
    for key in _MULTIVALENT:
        values = features[key]
        rows = [list(row[:length]) for row, length in zip(values, _ROW_LENGTHS)]
        ragged = tf.ragged.constant(rows, dtype=tf.as_dtype(values.dtype)
                                    if values.dtype.kind != "U" else tf.string)
        given[key] = ragged.to_sparse() if sparse else ragged
    return given


def _predict(estimator, features):
    """The Estimator's predictions of ``features()``, built in its input_fn."""
    return next(estimator.predict(lambda: tf.data.Dataset.from_tensors(features()),
                                  yield_single_examples=False))


@pytest.fixture(scope="module")
def estimators(tmp_path_factory):
    """name -> (the trained Estimator, its predictions of FEATURES, and of FEATURES with
    the categorical ones sparse)."""
    root = tmp_path_factory.mktemp("canned")
    vocabulary = root / "fruits.txt"
    vocabulary.write_text("\n".join(canned_programs.FRUITS) + "\n")
    runs = {}
    for name, build in canned_programs.BUILDERS.items():
        estimator = build(str(root / name), str(vocabulary))
        estimator.train(_input_fn(FEATURES, canned_programs.LABELS[name]), steps=5)
        runs[name] = (estimator, _predict(estimator, lambda: FEATURES),
                      _predict(estimator, lambda: _multivalent(FEATURES, sparse=True)))
    canned_programs.export(runs["wide_and_deep"][0], root / "export")
    return runs


@pytest.fixture(scope="module")
def trained(estimators):
    """name -> (model dir, the Estimator's predictions, the converted Keras model)."""
    return {name: (estimator.model_dir, predictions, estimator_dist.to_keras(estimator))
            for name, (estimator, predictions, _) in estimators.items()}


def _exported(model_dir):
    (path,) = glob.glob(os.path.join(os.path.dirname(model_dir), "export", "*"))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(canned_programs.BUILDERS))
def test_to_keras_predicts_as_the_estimator(trained, name):
    _, predictions, model = trained[name]
    outputs = keras_outputs(model, FEATURES)
    assert set(outputs) == set(predictions)
    check_equal(predictions, outputs)


@pytest.mark.slow
@pytest.mark.parametrize("sparse", [True, False], ids=["sparse", "ragged"])
@pytest.mark.parametrize("name", sorted(canned_programs.BUILDERS))
def test_to_keras_takes_sparse_and_ragged_features_as_the_estimator(estimators, trained,
                                                                     name, sparse):
    _, dense_predictions, predictions = estimators[name]
    check_equal(predictions, keras_outputs(trained[name][2], _multivalent(FEATURES, sparse)))
    if name == "wide_and_deep":  # The values the columns drop from dense features count.
        assert np.abs(predictions["logits"] - dense_predictions["logits"]).max() > 1e-3


@pytest.mark.slow
def test_keras_3_refuses_features_that_mix_tensors_and_arrays(trained):
    """What docs/migration.md says: call the model with tensors only (Keras 2 takes both)."""
    _, predictions, model = trained["binary_linear_classifier"]
    features = {"city": FEATURES["city"], "tag": tf.constant(FEATURES["tag"]),
                "tag_weight": tf.constant(FEATURES["tag_weight"])}
    if mends.tensorflow_release() == "2.15":
        check_equal(predictions, keras_outputs(model, features))
        return
    with pytest.raises(ValueError, match="you cannot mix tensors and non-tensors"):
        model(features)


@pytest.mark.slow
def test_to_keras_takes_a_numeric_feature_of_rank_one(trained):
    _, predictions, model = trained["linear_regressor"]
    check_equal(predictions, keras_outputs(model, {**FEATURES, "age": FEATURES["age"][:, 0]}))


@pytest.mark.slow
def test_to_keras_inputs_are_the_raw_features_but_the_weight(trained):
    model = trained["wide_and_deep"][2]
    dtypes = {k: tf.as_dtype(v.dtype).name for k, v in model.input.items()}
    assert dtypes == {"age": "float32", "city": "string", "color": "string", "fruit": "string",
                      "size": "float32", "tag": "int64", "tag_weight": "float32",
                      "zip": "int64"}


@pytest.mark.slow
def test_migrate_estimator_writes_a_model_with_the_predictions(trained, tmp_path, capsys):
    model_dir, predictions, _ = trained["linear_regressor"]
    output = str(tmp_path / "keras")
    assert migrate.main(["--estimator", f"{_PROGRAMS}:linear_regressor", "--model-dir",
                         model_dir, "--output", output]) == 0
    assert "saved" in capsys.readouterr().out
    loaded = tf.keras.models.load_model(output)
    check_equal(predictions, keras_outputs(loaded, FEATURES))


def test_migrate_estimator_refuses_an_inexpressible_column(tmp_path, capsys):
    output, model_dir = str(tmp_path / "keras"), tmp_path / "model"
    model_dir.mkdir()
    assert migrate.main(["--estimator", f"{_PROGRAMS}:normalized_age", "--model-dir",
                         str(model_dir), "--output", output]) == 2
    error = capsys.readouterr().err
    assert error == ("python -m estimator_dist.migrate: error: feature column 'age' must use "
                     "only options the Keras conversion reproduces exactly; normalizer_fn is "
                     "not one. Received: normalizer_fn=normalized_age.<locals>.<lambda>\n")
    assert error in _read(_GUIDE)  # docs/migration.md shows this line.
    assert not os.path.exists(output)


def test_check_refuses_another_activation():
    age = tf.feature_column.numeric_column("age")
    estimator = tf.estimator.DNNClassifier([2], [age], activation_fn=tf.nn.leaky_relu)
    with pytest.raises(InexpressibleColumn, match=r"activation_fn must be .* tf\.nn\.relu"):
        canned.check(estimator)


def test_to_keras_refuses_an_estimator_of_a_model_fn():
    estimator = tf.estimator.Estimator(lambda features, labels, mode: None)
    with pytest.raises(UsageError, match="estimator must be a model dir or one of the "
                                         "canned Estimators"):
        estimator_dist.to_keras(estimator)


def test_linear_spec_refuses_an_embedding():
    city = tf.feature_column.categorical_column_with_hash_bucket("city", 3)
    with pytest.raises(InexpressibleColumn, match="as a linear model input"):
        feature_columns.linear_spec(tf.feature_column.embedding_column(city, 2))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_saved_model_serves_examples_as_the_estimator_export_in_a_plain_process(
        trained, tmp_path):
    model_dir, predictions, model = trained["wide_and_deep"]
    output = keras_conversion.save(model, tmp_path / "keras")
    # The eighth example has no city: a hash bucket, an embedding and a cross without it.
    # The last eight keep '' and -1, which the export's parsing gives the columns.
    serialized = canned_programs.serialized_examples
    served = canned_programs.check_served_as_the_export(
        serialized(FEATURES, {7: ("city",)}) + serialized(FEATURES, {}, keep_dropped=True),
        output, _exported(model_dir), tmp_path)
    first = {k: v[:7] for k, v in served.items()}
    check_equal({k: v[:7] for k, v in predictions.items()}, first)


@pytest.mark.slow
def test_wide_and_deep_checkpoint_holds_the_slots_of_two_optimizers(trained):
    """What docs/migration.md says of training on: FTRL trains the linear part, Adagrad
    the DNN, so ``canned.optimizer`` refuses to carry them into one Keras optimizer."""
    names = [name for name, _ in tf.train.list_variables(trained["wide_and_deep"][0])]
    assert any(n.startswith("training/Ftrl/linear/") and n.endswith("/accumulator")
               for n in names)
    assert any(n.startswith("training/Ftrl/linear/") and n.endswith("/linear") for n in names)
    assert any(n.startswith("training/Adagrad/dnn/") and n.endswith("/accumulator")
               for n in names)
    model_dir, _, model = trained["wide_and_deep"]
    with pytest.raises(UsageError, match=r"one optimizer .* Received: Adagrad, Ftrl"):
        canned.optimizer(model, tf.train.latest_checkpoint(model_dir))


# Of the last tests of the module fixture: fit changes the wide-and-deep model's weights.
@pytest.mark.slow
def test_keras_predict_and_fit_take_the_estimator_input_of_parsed_examples(estimators,
                                                                           trained):
    """A TFRecord pipeline's input as the Estimator took it: tf.Example strings parsed by
    the columns' spec, variable-length features sparse, give the model's ``predict``
    the Estimator's predictions and train it in ``fit``."""
    estimator, _, predictions = estimators["wide_and_deep"]
    model = trained["wide_and_deep"][2]
    arguments = internals.canned_estimator_arguments(estimator)
    spec = tf.feature_column.make_parse_example_spec(
        list(arguments["linear_feature_columns"]) + list(arguments["dnn_feature_columns"]))
    rows = {key: [row[:length] for row, length in zip(values, _ROW_LENGTHS)]
            if key in _MULTIVALENT else values for key, values in FEATURES.items()}
    serialized = [base64.b64decode(e) for e in
                  canned_programs.serialized_examples(rows, {}, keep_dropped=True)]
    features = tf.data.Dataset.from_tensor_slices(serialized).batch(4).map(
        lambda examples: {key: value for key, value in
                          tf.io.parse_example(examples, spec).items() if key in model.input})
    outputs = model.predict(features, verbose=0)
    check_equal({key: predictions[key] for key in ("logits", "probabilities")},
                 {key: outputs[key] for key in ("logits", "probabilities")})
    model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss={"logits": "mse"})
    targets = features.map(lambda f: (f, {"logits": tf.zeros([tf.shape(f["age"])[0], 1])}))
    before = model.evaluate(targets, verbose=0)
    model.fit(targets, epochs=3, verbose=0)
    assert model.evaluate(targets, verbose=0) < before


# Last of the tests of the module fixture: fit changes the linear regressor's weights.
@pytest.mark.slow
def test_converted_model_trains_on_with_fit(trained):
    """The converted layers are trainable Keras layers: ``fit`` lowers the regressor's
    loss from the Estimator's weights (with a new optimizer)."""
    model_dir, _, model = trained["linear_regressor"]
    labels = {"predictions": canned_programs.LABELS["linear_regressor"]}
    data = tf.data.Dataset.from_tensors(({k: FEATURES[k] for k in model.input}, labels))
    model.compile(optimizer=tf.keras.optimizers.SGD(1e-4), loss={"predictions": "mse"})
    history = model.fit(data, epochs=5, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0]
    assert tf.train.load_checkpoint(model_dir).get_tensor("global_step") == 5
