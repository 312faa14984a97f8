"""``to_keras(estimator, portable=True)``: a canned Estimator as a model of Keras 3's own
layers and ops, which ``keras.models.load_model`` reads in a process without
``estimator_dist`` (TensorFlow 2.16+; on 2.15 it is refused in one line).

One module fixture trains four Estimators of ``canned_programs`` a few steps (every column
kind, every head) and takes their ``predict`` of the same eight examples: out-of-vocabulary
values, '' and -1 (dropped), hash collisions, weights <= 0.
"""
import glob
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

import estimator_dist
from estimator_dist import mends
from estimator_dist.commands import migrate
from estimator_dist.conversion import canned, keras_conversion
from estimator_dist.conversion.feature_columns import InexpressibleColumn
from estimator_dist.errors import UsageError
from estimator_dist.mends import releases
from tests.estimator_dist.conversion import canned_programs
from tests.estimator_dist.conversion.canned_programs import (FEATURES, check_equal,
                                                              keras_outputs)
from tests.support import REPO_ROOT, run_python
from tests.train_support import keep_tf_logging  # noqa: F401

pytestmark = [pytest.mark.both_ends, pytest.mark.usefixtures("keep_tf_logging")]

CURRENT = mends.tensorflow_release() in releases.CURRENT
_PROGRAMS = "tests.estimator_dist.conversion.canned_programs"
_GUIDE = os.path.join(REPO_ROOT, "docs", "migration.md")
# Every column kind (wide and deep), batch norm and two label dimensions, three classes and
# the mean combiner, a binary head named by a label vocabulary.
_NAMES = ("default_key_wide_and_deep", "dnn_regressor", "linear_classifier",
          "binary_linear_classifier")
_LABELS = {**canned_programs.LABELS,
           "default_key_wide_and_deep": canned_programs.LABELS["wide_and_deep"]}
# Loads each .keras file of a folder and prints, as JSON, its outputs of FEATURES (saved
# beside them), the losses of three epochs of fit (logits towards 0), and which of
# estimator_dist and tf_keras the process imported.
_LOAD = """
import glob, json, sys
import numpy as np
import keras
import tensorflow as tf
folder = sys.argv[1]
features = dict(np.load(folder + "/features.npz"))
outputs, losses = {}, {}
for path in sorted(glob.glob(folder + "/*.keras")):
    model = keras.models.load_model(path)
    given = {k: features[k] for k in model.input}
    outputs[path] = {k: np.asarray(v).astype(str if np.asarray(v).dtype.kind in "SO" else
                                             float).tolist() for k, v in model(given).items()}
    name = "logits" if "logits" in model.output else "predictions"
    model.compile(optimizer=keras.optimizers.SGD(1e-4), loss={name: "mse"})
    targets = {name: np.zeros(model.output[name].shape[1:], np.float32)[None].repeat(8, 0)}
    data = tf.data.Dataset.from_tensors((given, targets))
    losses[path] = model.fit(data, epochs=3, verbose=0).history["loss"]
imported = [m for m in sys.modules if m.split(".")[0] in ("estimator_dist", "tf_keras")]
print(json.dumps({"outputs": outputs, "losses": losses, "imported": imported}))
"""


@pytest.fixture(scope="module")
def estimators(tmp_path_factory):
    """name -> (the trained Estimator, its predictions of FEATURES)."""
    if not CURRENT:
        pytest.skip("Keras 2 (TensorFlow 2.15) has no portable build: "
                    "test_portable_needs_a_keras_with_unique")
    root = tmp_path_factory.mktemp("portable")
    vocabulary = root / "fruits.txt"
    vocabulary.write_text("\n".join(canned_programs.FRUITS) + "\n")
    runs = {}
    for name in _NAMES:
        estimator = getattr(canned_programs, name)(str(root / name), str(vocabulary))
        estimator.train(lambda: tf.data.Dataset.from_tensors(
            (FEATURES, _LABELS[name])).repeat(), steps=5)
        runs[name] = (estimator, next(estimator.predict(
            lambda: tf.data.Dataset.from_tensors(FEATURES), yield_single_examples=False)))
    canned_programs.export(runs["default_key_wide_and_deep"][0], root / "export")
    return runs


@pytest.fixture(scope="module")
def portable(estimators):
    """name -> the portable Keras model of each trained Estimator."""
    return {name: estimator_dist.to_keras(estimator, portable=True)
            for name, (estimator, _) in estimators.items()}


def _read(path):
    with open(path, encoding="utf-8") as file:
        return file.read()


@pytest.mark.slow
@pytest.mark.parametrize("name", _NAMES)
def test_portable_model_predicts_as_the_estimator(estimators, portable, name):
    predictions, given = estimators[name][1], keras_outputs(portable[name], FEATURES)
    assert set(given) == set(predictions)
    check_equal(predictions, given)


@pytest.mark.slow
def test_portable_model_holds_only_keras_classes(portable):
    for model in portable.values():
        modules = {type(layer).__module__ for layer in model.layers}
        assert all(m.startswith("keras.") for m in modules), modules


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_portable_model_loads_predicts_and_fits_in_a_process_without_estimator_dist(
        estimators, portable, tmp_path):
    """``keras.models.load_model`` alone, with the interpreter-start hook turned off:
    neither estimator_dist nor tf_keras imported, the Estimator's predictions, and ``fit``
    trains the loaded model on."""
    np.savez(tmp_path / "features.npz", **FEATURES)
    for name, model in portable.items():
        keras_conversion.save(model, tmp_path / f"{name}.keras")
    result = run_python(["-c", _LOAD, str(tmp_path)], timeout=240,
                        env={"ESTIMATOR_DIST_STARTUP_HOOK": "0"})
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["imported"] == []
    assert len(loaded["outputs"]) == len(_NAMES)
    for name in _NAMES:
        outputs = loaded["outputs"][str(tmp_path / f"{name}.keras")]
        check_equal(estimators[name][1], {k: np.asarray(v) for k, v in outputs.items()})
        losses = loaded["losses"][str(tmp_path / f"{name}.keras")]
        assert losses[-1] < losses[0], (name, losses)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_portable_saved_model_serves_examples_as_the_estimator_export(estimators, portable,
                                                                       tmp_path):
    """A portable model's directory serves the Estimator export's tf.Example signatures
    with its outputs, in a process of TensorFlow alone; variable-length features come
    padded with '' and -1 (so a tf.Example holding those values is the one case served
    otherwise: docs/migration.md)."""
    estimator, predictions = estimators["default_key_wide_and_deep"]
    output = keras_conversion.save(portable["default_key_wide_and_deep"], tmp_path / "keras")
    (exported,) = glob.glob(os.path.join(os.path.dirname(estimator.model_dir), "export", "*"))
    # The eighth example has no city: a hash bucket, an embedding and a cross without it.
    served = canned_programs.check_served_as_the_export(
        canned_programs.serialized_examples(FEATURES, {7: ("city",)}), output, exported,
        tmp_path)
    check_equal({k: v[:7] for k, v in predictions.items()},
                {k: v[:7] for k, v in served.items()})


@pytest.mark.slow
def test_portable_fit_continues_the_estimator_with_its_optimizer(estimators, portable):
    """The carried optimizer (FTRL, the linear classifier's) takes a portable model too:
    N Estimator steps then M Keras steps give the predictions of N+M Estimator steps, a
    hash collision's rows summed once per batch."""
    estimator, _ = estimators["linear_classifier"]
    model = portable["linear_classifier"]
    checkpoint = tf.train.latest_checkpoint(estimator.model_dir)
    model.compile(optimizer=canned.optimizer(model, checkpoint),
                  loss={"logits": tf.keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True)})
    labels = canned_programs.LABELS["linear_classifier"]
    data = tf.data.Dataset.from_tensors(({k: FEATURES[k] for k in model.input},
                                         {"logits": labels}))
    model.fit(data.repeat(3), epochs=1, verbose=0)
    estimator.train(lambda: tf.data.Dataset.from_tensors((FEATURES, labels)).repeat(),
                    steps=3)
    predictions = next(estimator.predict(lambda: tf.data.Dataset.from_tensors(FEATURES),
                                         yield_single_examples=False))
    np.testing.assert_allclose(keras_outputs(model, FEATURES)["logits"], predictions["logits"],
                               atol=1e-4, rtol=0)


@pytest.mark.slow
def test_migrate_portable_writes_a_model_keras_reads_back(estimators, tmp_path, capsys):
    estimator, predictions = estimators["dnn_regressor"]
    output = str(tmp_path / "model.keras")
    assert migrate.main(["--estimator", f"{_PROGRAMS}:dnn_regressor", "--model-dir",
                         estimator.model_dir, "--output", output, "--portable"]) == 0
    assert "saved" in capsys.readouterr().out
    import keras  # Keras 3: the one whose load_model reads a .keras file without us.

    check_equal(predictions, keras_outputs(keras.models.load_model(output), FEATURES))


def test_migrate_portable_refuses_a_crossed_column_hash_key(tmp_path, capsys):
    output, model_dir = str(tmp_path / "model.keras"), tmp_path / "model"
    model_dir.mkdir()
    assert migrate.main(["--estimator", f"{_PROGRAMS}:linear_regressor", "--model-dir",
                         str(model_dir), "--output", output, "--portable"]) == 2
    error = capsys.readouterr().err
    if CURRENT:
        assert error == (
            "python -m estimator_dist.migrate: error: feature column 'age_bucketized_X_city' "
            "must cross with TensorFlow's default hash key for a portable Keras model "
            "(Keras's HashedCrossing takes no other); leave portable off to keep it. "
            "Received: hash_key=7\n")
        assert error in _read(_GUIDE)  # docs/migration.md shows this line.
    else:
        assert error.startswith("python -m estimator_dist.migrate: error: portable needs "
                                "Keras 3.15 or later")
    assert error.count("\n") == 1
    assert not os.path.exists(output)


def test_migrate_portable_needs_an_estimator(tmp_path, capsys):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    assert migrate.main(["--model-dir", str(model_dir), "--output", str(tmp_path / "out"),
                         "--portable"]) == 2
    assert capsys.readouterr().err == (
        "python -m estimator_dist.migrate: error: portable needs --estimator (the other "
        "conversions build from Keras's own layers already). Received: --portable without "
        "--estimator\n")


def test_portable_needs_a_keras_with_unique(monkeypatch):
    """Keras 2 (TensorFlow 2.15), or a Keras 3 before keras.ops.unique (here taken away):
    one line naming the version."""
    import keras

    if CURRENT:
        monkeypatch.delattr(keras.ops, "unique")
    age = tf.feature_column.numeric_column("age")
    with pytest.raises(UsageError, match=r"^portable needs Keras 3\.15 or later "
                                         r"\(keras\.ops\.unique.*Received: Keras "
                                         + re.escape(keras.__version__) + "$"):
        canned.check(tf.estimator.DNNRegressor([2], [age]), portable=True)


@pytest.mark.skipif(not CURRENT, reason="Keras 2: test_portable_needs_a_keras_with_unique")
def test_portable_refuses_a_cross_of_a_bucketized_column_of_two_values():
    size = tf.feature_column.numeric_column("size", shape=(2,))
    cross = tf.feature_column.crossed_column(
        [tf.feature_column.bucketized_column(size, [0.]), "city"], 5)
    estimator = tf.estimator.LinearRegressor([cross])
    with pytest.raises(InexpressibleColumn, match=r"must cross one value per example .* "
                                                  r"Received: 'size_bucketized' of shape "
                                                  r"\(2,\)"):
        canned.check(estimator, portable=True)
