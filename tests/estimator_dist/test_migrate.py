"""``estimator_dist.migrate``: a train run's checkpoint -> a Keras model with the same logits.

The Estimator side of every comparison is the run's own exported SavedModel (or the
Estimator's predictions), fed the same inputs as the Keras model that
``tf.keras.models.load_model`` reads back.
"""
import glob
import io
import os

import numpy as np
import pytest
import tensorflow as tf

import model_fns
from estimator_dist import run_record
from estimator_dist.commands import migrate
from estimator_dist.job import training
from estimator_dist.job.settings import RunSettings
from estimator_dist.conversion import _keras_lstm, keras_conversion
from estimator_dist.errors import UsageError
from tests.train_support import keep_tf_logging, snapshot  # noqa: F401

# migrate.main lowers TensorFlow's log levels, as the CLI does; put them back after each test.
# The trained runs (module fixtures) serve every test: one worker trains them.
pytestmark = [pytest.mark.usefixtures("keep_tf_logging"), pytest.mark.xdist_group("migrate")]

_TOLERANCE = 1e-5
_NUM_UNITS = 8


def _train(directory, model, params, max_steps=3):
    """Trains a built-in model a few steps; returns (model dir, exported serving function)."""
    model_dir = str(directory / "model")
    settings = RunSettings(model=model, params=params, max_steps=max_steps, model_dir=model_dir)
    training.run(settings, stream=io.StringIO())
    export_dir, = glob.glob(os.path.join(model_dir, "export", "*"))
    return model_dir, tf.saved_model.load(export_dir).signatures["serving_default"]


@pytest.fixture(scope="module")
def lstm_run(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("lstm"), "lstm", {"num_units": _NUM_UNITS})


@pytest.fixture(scope="module")
def dense_run(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("dense"), "dense", {"hidden_units": [8, 8]})


def _lstm_features(rng, *, batch=4, time=7, state_size=_NUM_UNITS):
    return {"x": rng.normal(size=(batch, time, 1)).astype(np.float32),
            "state_c": rng.normal(size=(batch, state_size)).astype(np.float32),
            "state_h": rng.normal(size=(batch, state_size)).astype(np.float32)}


def _max_difference(estimator_outputs, keras_outputs, names):
    return max(np.abs(np.asarray(estimator_outputs[n]) - np.asarray(keras_outputs[n])).max()
               for n in names)


# --- Weight conversion ---------------------------------------------------------------------


def test_keras_lstm_weights_reorder_gates_and_add_forget_bias():
    """Units 1, input 1: kernel rows [x, h], columns i j f o -> i f j o; bias f + 1."""
    kernel = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])
    bias = np.array([0.1, 0.2, 0.3, 0.4])
    keras_kernel, recurrent, keras_bias = _keras_lstm.keras_lstm_weights(kernel, bias,
                                                                         input_dim=1)
    np.testing.assert_array_equal(keras_kernel, [[1.0, 3.0, 2.0, 4.0]])
    np.testing.assert_array_equal(recurrent, [[5.0, 7.0, 6.0, 8.0]])
    np.testing.assert_allclose(keras_bias, [0.1, 1.3, 0.2, 0.4])


def test_keras_lstm_matches_basic_lstm_cell_step_by_step():
    rng = np.random.default_rng(3)
    units, dim = 5, 3
    cell = tf.compat.v1.nn.rnn_cell.BasicLSTMCell(units)
    x = rng.normal(size=(2, 4, dim)).astype(np.float32)
    c0, h0 = (rng.normal(size=(2, units)).astype(np.float32) for _ in range(2))
    state = tf.compat.v1.nn.rnn_cell.LSTMStateTuple(tf.constant(c0), tf.constant(h0))
    for t in range(4):
        expected_h, state = cell(tf.constant(x[:, t]), state)
    kernel, bias = (w.numpy() for w in cell.weights)
    lstm = tf.keras.layers.LSTM(units, return_state=True)
    lstm.build((None, None, dim))
    lstm.set_weights(_keras_lstm.keras_lstm_weights(kernel, bias, input_dim=dim))
    _, h, c = lstm(x, initial_state=[tf.constant(h0), tf.constant(c0)])
    np.testing.assert_allclose(h, expected_h, atol=_TOLERANCE)
    np.testing.assert_allclose(c, state.c, atol=_TOLERANCE)


# --- Same logits as the Estimator -------------------------------------------------------------


@pytest.mark.slow
def test_migrate_lstm_cli_saved_model_gives_exported_logits_and_state(lstm_run, tmp_path,
                                                                        capsys):
    model_dir, serving = lstm_run
    output = str(tmp_path / "keras_lstm")
    assert migrate.main(["--model-dir", model_dir, "--output", output]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"saved       {output}"
    loaded = tf.keras.models.load_model(output)
    keras_serving = tf.saved_model.load(output).signatures["serving_default"]
    rng = np.random.default_rng(0)
    for time in (1, 7, 24):  # The time axis varies from call to call.
        features = _lstm_features(rng, time=time)
        tensors = {k: tf.constant(v) for k, v in features.items()}
        exported = serving(**tensors)
        for keras_outputs in (loaded(features), keras_serving(**tensors)):
            assert _max_difference(exported, keras_outputs,
                                   ["logits", "state_c", "state_h"]) < _TOLERANCE


@pytest.mark.slow
def test_migrate_lstm_keras_file_carries_state_across_chunks(lstm_run, tmp_path):
    model_dir, serving = lstm_run
    output = str(tmp_path / "lstm.keras")
    keras_conversion.save(keras_conversion.to_keras(model_dir), output)
    loaded = tf.keras.models.load_model(output)
    features = _lstm_features(np.random.default_rng(1), time=10)
    whole = serving(**{k: tf.constant(v) for k, v in features.items()})
    first = loaded({**features, "x": features["x"][:, :6]})
    # Keras 3 takes no dict mixing NumPy arrays and tensors: the carried state is a tensor.
    second = loaded({"x": tf.constant(features["x"][:, 6:]), "state_c": first["state_c"],
                     "state_h": first["state_h"]})
    assert _max_difference(whole, second, ["logits", "state_c", "state_h"]) < _TOLERANCE


@pytest.mark.slow
def test_migrate_dense_gives_exported_logits(dense_run, tmp_path):
    model_dir, serving = dense_run
    output = str(tmp_path / "keras_dense")
    keras_conversion.save(keras_conversion.to_keras(model_dir), output)
    x = np.random.default_rng(2).normal(size=(6, 16)).astype(np.float32)
    logits = tf.keras.models.load_model(output)({"x": x})["logits"]
    np.testing.assert_allclose(logits, serving(x=tf.constant(x))["logits"], atol=_TOLERANCE)


@pytest.mark.slow
def test_migrate_tf_keras_gives_exported_logits_and_state(lstm_run, tmp_path, capsys):
    """``--keras tf-keras``: a Keras 2 SavedModel that tf_keras.models.load_model reads (on
    2.15 tf.keras is Keras 2 itself); on 2.16+ a .keras OUT is refused in one line."""
    model_dir, serving = lstm_run
    if not tf.__version__.startswith("2.15."):
        assert migrate.main(["--model-dir", model_dir, "--output", str(tmp_path / "m.keras"),
                             "--keras", "tf-keras"]) == 2
        assert "output must be a directory (a SavedModel) for a tf-keras model" in \
            capsys.readouterr().err
        assert os.listdir(tmp_path) == []
    output = str(tmp_path / "tf_keras")
    assert migrate.main(["--model-dir", model_dir, "--output", output,
                         "--keras", "tf-keras"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"saved       {output}"
    keras_2 = keras_conversion.keras_module("tf-keras")
    loaded = keras_2.models.load_model(output)
    assert isinstance(loaded, keras_2.Model)
    if not tf.__version__.startswith("2.15."):
        assert keras_2.__name__.split(".")[0] == "tf_keras"
    features = _lstm_features(np.random.default_rng(8), time=5)
    exported = serving(**{k: tf.constant(v) for k, v in features.items()})
    assert _max_difference(exported, loaded(features), ["logits", "state_c", "state_h"]) < \
        _TOLERANCE


def test_keras_module_unknown_choice_raises():
    with pytest.raises(UsageError, match=r"^keras must be one of keras, tf-keras\. "
                                         r"Received: keras='jax'$"):
        keras_conversion.keras_module("jax")


@pytest.mark.slow
def test_migrate_dense_with_batch_norm_and_dropout_gives_exported_logits(tmp_path):
    model_dir, serving = _train(tmp_path, "dense", {"hidden_units": [8, 4], "batch_norm": True,
                                                    "dropout": 0.2}, max_steps=5)
    output = keras_conversion.save(keras_conversion.to_keras(model_dir),
                                   str(tmp_path / "batch_norm"))
    keras_model = tf.keras.models.load_model(output)
    moving_mean = keras_model.get_layer("batch_norm_0").moving_mean.numpy()
    assert np.abs(moving_mean).max() > 0  # Trained statistics, not the initial zeros.
    x = np.random.default_rng(4).normal(size=(6, 16)).astype(np.float32)
    np.testing.assert_allclose(keras_model({"x": x})["logits"], serving(x=tf.constant(x))["logits"],
                               atol=_TOLERANCE)


@pytest.mark.slow
def test_migrate_two_layer_regression_lstm_gives_exported_logits_and_state(tmp_path):
    params = {"num_units": 6, "num_layers": 2, "dropout": 0.1, "task": "regression"}
    model_dir, serving = _train(tmp_path, "lstm", params)
    output = keras_conversion.save(keras_conversion.to_keras(model_dir),
                                   str(tmp_path / "two_layers.keras"))
    keras_model = tf.keras.models.load_model(output)
    assert [layer.name for layer in keras_model.layers if "lstm" in layer.name] == [
        "lstm_0", "lstm_1"]
    features = _lstm_features(np.random.default_rng(5), time=9, state_size=12)
    exported = serving(**{k: tf.constant(v) for k, v in features.items()})
    assert exported["logits"].shape == (4, 1)
    assert _max_difference(exported, keras_model(features),
                           ["logits", "state_c", "state_h"]) < _TOLERANCE


_STREAM_FEATURES = {"stream": np.arange(8, dtype=np.int32), "reset": np.ones(8, bool)}


@pytest.mark.parametrize("extra_params, train_features, label_shape", [
    ({"output": "sequence"}, {}, (8, 5)),
    ({"num_streams": 8}, _STREAM_FEATURES, (8,)),
], ids=["sequence_output", "carried_stream_state"])
@pytest.mark.slow
def test_to_keras_without_run_record_matches_predictions(tmp_path, extra_params,
                                                         train_features, label_shape):
    """A model dir of the user's own Estimator: model and params passed in."""
    params = {"num_units": 4, "num_classes": 3, "learning_rate": 0.1, "optimizer": "sgd",
              **extra_params}
    rng = np.random.default_rng(6)
    x = rng.normal(size=(8, 5, 2)).astype(np.float32)
    labels = rng.integers(0, 3, size=label_shape)
    estimator = tf.estimator.Estimator(model_fns.lstm_model_fn, model_dir=str(tmp_path / "m"),
                                       params=params)
    data = ({"x": x, **train_features}, labels)
    estimator.train(lambda: tf.data.Dataset.from_tensors(data), steps=2)
    features = {**_lstm_features(rng, batch=8, time=5, state_size=4), "x": x}
    predicted = list(estimator.predict(lambda: tf.data.Dataset.from_tensors(features)))
    expected = {name: np.stack([p[name] for p in predicted]) for name in ("logits", "state_c")}
    keras_model = keras_conversion.to_keras(estimator.model_dir, model="lstm", params=params)
    outputs = keras_model(features)
    assert outputs["logits"].shape == expected["logits"].shape
    assert _max_difference(expected, outputs, ["logits", "state_c"]) < _TOLERANCE


# --- The model dir is only read; the output is whole or absent --------------------------------


@pytest.mark.slow
def test_migrate_cli_leaves_model_dir_unchanged(lstm_run, tmp_path, python_run):
    model_dir, _ = lstm_run
    before = snapshot(model_dir)
    output = str(tmp_path / "out")
    result = python_run(["-m", "estimator_dist.migrate", "--model-dir", model_dir,
                         "--output", output], timeout=120)
    assert result.returncode == 0, result.stderr
    assert "inputs x, state_c, state_h; outputs logits, state_c, state_h" in result.stdout
    assert snapshot(model_dir) == before
    serving = tf.saved_model.load(output).signatures["serving_default"]
    assert sorted(serving.structured_input_signature[1]) == ["state_c", "state_h", "x"]
    assert sorted(serving.structured_outputs) == ["logits", "state_c", "state_h"]


class _FailingModel:
    """Writes part of a model, then fails, as a save cut short would."""

    input = None

    def save(self, path, **kwargs):
        del kwargs  # Whatever a Keras save takes.
        os.makedirs(path)
        with open(os.path.join(path, "saved_model.pb"), "wb") as file:
            file.write(b"partial")
        raise OSError("disk full")


def test_save_failing_midway_leaves_no_output(tmp_path):
    output = tmp_path / "out"
    with pytest.raises(OSError, match="disk full"):
        keras_conversion.save(_FailingModel(), str(output))
    assert os.listdir(tmp_path) == []


def test_save_failing_midway_keeps_the_previous_output(tmp_path):
    output = tmp_path / "out"
    output.mkdir()
    (output / keras_conversion.MARKER).write_text("{}")  # An earlier output of migrate.
    with pytest.raises(OSError, match="disk full"):
        keras_conversion.save(_FailingModel(), str(output), overwrite=True)
    assert os.listdir(tmp_path) == ["out"] and os.listdir(output) == [keras_conversion.MARKER]


def test_save_overwrite_replaces_an_existing_output(dense_run, tmp_path):
    output = tmp_path / "dense.keras"
    keras_conversion.save(keras_conversion.to_keras(dense_run[0]), str(output))
    keras_conversion.save(keras_conversion.to_keras(dense_run[0]), str(output), overwrite=True)
    assert tf.keras.models.load_model(str(output)).output_names == ["logits"]
    assert os.listdir(tmp_path) == ["dense.keras"]


def test_save_existing_output_without_overwrite_raises(tmp_path):
    (tmp_path / "out").mkdir()
    with pytest.raises(UsageError, match=r"output must not exist yet .* Received: output="):
        keras_conversion.save(_FailingModel(), str(tmp_path / "out"))


# --- Errors: one line, exit 2 ---------------------------------------------------------------


def _copy_checkpoint_only(model_dir, destination):
    """A model dir holding ``model_dir``'s checkpoint files but no run record."""
    os.makedirs(destination)
    for path in glob.glob(os.path.join(model_dir, "*")):
        if os.path.isfile(path) and os.path.basename(path) != run_record.FILENAME:
            with open(path, "rb") as source, open(os.path.join(destination,
                                                               os.path.basename(path)),
                                                  "wb") as target:
                target.write(source.read())
    return str(destination)


def test_migrate_missing_model_dir_exits_2_in_one_line(tmp_path, python_run):
    result = python_run(["-m", "estimator_dist.migrate", "--model-dir", str(tmp_path / "nope"),
                         "--output", str(tmp_path / "out")], timeout=60)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "python -m estimator_dist.migrate: error: model_dir must be an existing directory. "
        f"Received: model_dir={str(tmp_path / 'nope')!r}"]
    assert not os.path.exists(tmp_path / "out")


def test_migrate_model_dir_without_checkpoint_exits_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert migrate.main(["--model-dir", str(tmp_path / "empty"),
                         "--output", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert "model_dir must hold a checkpoint" in error and error.count("\n") == 1


def test_migrate_model_dir_without_run_record_exits_2(lstm_run, tmp_path, capsys):
    model_dir = _copy_checkpoint_only(lstm_run[0], tmp_path / "bare")
    assert migrate.main(["--model-dir", model_dir, "--output", str(tmp_path / "out")]) == 2
    assert "must hold the run.json of an estimator_dist.train run" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "out")


def test_migrate_output_inside_model_dir_exits_2(lstm_run, capsys):
    model_dir, _ = lstm_run
    output = os.path.join(model_dir, "keras")
    assert migrate.main(["--model-dir", model_dir, "--output", output]) == 2
    assert "output must be outside model_dir" in capsys.readouterr().err
    assert not os.path.exists(output)


def test_migrate_h5_output_exits_2(lstm_run, tmp_path, capsys):
    assert migrate.main(["--model-dir", lstm_run[0], "--output", str(tmp_path / "m.h5")]) == 2
    assert "output must be a SavedModel directory or a .keras file" in capsys.readouterr().err


def _with_record(lstm_run, tmp_path, model, params):
    model_dir = _copy_checkpoint_only(lstm_run[0], tmp_path / "edited")
    # A record edited by hand: it may name what no train run would.
    run_record.write(model_dir, {"settings": {"model": model, "params": params}, "data": {}})
    return model_dir


def test_to_keras_param_the_conversion_cannot_express_raises(lstm_run, tmp_path):
    params = {"num_units": _NUM_UNITS, "num_classes": 3, "learning_rate": 0.01,
              "use_peepholes": True}
    model_dir = _with_record(lstm_run, tmp_path, "lstm", params)
    with pytest.raises(UsageError, match=r"params must be ones the Keras conversion of 'lstm' "
                                         r"expresses .*Received: use_peepholes=True"):
        keras_conversion.to_keras(model_dir)


def test_to_keras_unknown_model_raises(lstm_run, tmp_path):
    model_dir = _with_record(lstm_run, tmp_path, "cnn", {})
    with pytest.raises(UsageError, match="model must be one of dense, lstm. Received: "
                                         "model='cnn'"):
        keras_conversion.to_keras(model_dir)


def test_to_keras_checkpoint_of_another_model_raises(lstm_run, tmp_path):
    params = {"hidden_units": [8], "num_classes": 3, "learning_rate": 0.01}
    model_dir = _with_record(lstm_run, tmp_path, "dense", params)
    with pytest.raises(UsageError, match=r"checkpoint must hold variable 'hidden_0/kernel', .*"
                                         r"Received: checkpoint=.*model.ckpt-3' without it"):
        keras_conversion.to_keras(model_dir)


def test_to_keras_checkpoint_shapes_not_matching_params_raises(lstm_run, tmp_path):
    params = {"num_units": _NUM_UNITS, "num_classes": 5, "learning_rate": 0.01}
    model_dir = _with_record(lstm_run, tmp_path, "lstm", params)
    expected = r"\[\(8, 5\), \(5,\)\] .*Received: shapes \[\(8, 3\), \(3,\)\]"
    with pytest.raises(UsageError, match=f"checkpoint variables of layer 'logits' must have "
                                         f"shapes {expected}"):
        keras_conversion.to_keras(model_dir)


def test_to_keras_model_without_params_raises(lstm_run):
    with pytest.raises(UsageError, match="model and params must be given together. "
                                         "Received: no params"):
        keras_conversion.to_keras(lstm_run[0], model="lstm")
