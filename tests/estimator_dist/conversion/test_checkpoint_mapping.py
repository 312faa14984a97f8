"""The mapping mode of migrate: legacy checkpoints of users' own model_fns into Keras.

The checkpoints are fixtures written once by tests/fixtures/make_fixtures.py with plain
``tf.estimator.Estimator``s: converting them must keep working, and so must reading them.
"""
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from estimator_dist.commands import migrate
from estimator_dist.conversion import checkpoint_mapping
from estimator_dist.errors import UsageError
from tests.support import REPO_ROOT
from tests.fixtures import fixture_models

_FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures")
_TOLERANCE = 1e-5
# Fixture -> (its mapping file, the Keras builder, the model_fn that wrote it).
_CASES = {
    "tf1_lstm": ("mapping.yaml", fixture_models.lstm_keras_model, fixture_models.lstm_model_fn),
    "tf1_mlp": ("mapping.json", fixture_models.mlp_keras_model, fixture_models.mlp_model_fn),
}
_KERAS_SPECS = {"tf1_lstm": "tests.fixtures.fixture_models:lstm_keras_model",
                "tf1_mlp": "tests.fixtures.fixture_models:mlp_keras_model"}


def _fixture(name, *parts):
    return os.path.join(_FIXTURES, name, *parts)


def _expected(name):
    with np.load(_fixture(name, "expected.npz")) as data:
        return data["x"], data["logits"]


def _mapping(name):
    return checkpoint_mapping.load_mapping(_fixture(name, _CASES[name][0]))


@pytest.mark.parametrize("name", sorted(_CASES))
def test_fixture_checkpoint_still_predicts_its_recorded_logits(name, tmp_path):
    """Reading old checkpoints: the model_fn that wrote a fixture restores it unchanged."""
    model_dir = shutil.copytree(_fixture(name), tmp_path / name)
    x, logits = _expected(name)
    estimator = tf.estimator.Estimator(_CASES[name][2], model_dir=str(model_dir))
    predicted = estimator.predict(lambda: tf.data.Dataset.from_tensors({"x": x}))
    np.testing.assert_allclose(np.stack([p["logits"] for p in predicted]), logits,
                               atol=1e-6)


@pytest.mark.parametrize("name", sorted(_CASES))
def test_convert_fixture_gives_the_estimator_logits(name):
    model = _CASES[name][1]()
    report = checkpoint_mapping.convert_checkpoint(model, _mapping(name), _fixture(name))
    assert report.problems == ""
    assert len(report.assigned) == len(model.weights)
    x, logits = _expected(name)
    np.testing.assert_allclose(model({"x": x}), logits, atol=_TOLERANCE)


def test_convert_lstm_leaves_behind_only_optimizer_bookkeeping():
    report = checkpoint_mapping.convert_checkpoint(fixture_models.lstm_keras_model(),
                                        _mapping("tf1_lstm"), _fixture("tf1_lstm"))
    assert "global_step" in report.left_behind
    assert "rnn/basic_lstm_cell/kernel/Adam" in report.left_behind
    assert report.assigned["lstm/recurrent_kernel"] == "rnn/basic_lstm_cell (BasicLSTMCell)"


def test_convert_problems_are_named_and_no_weight_is_set():
    model = fixture_models.mlp_keras_model()
    before = [w.numpy() for w in model.weights]
    mapping = checkpoint_mapping.check_mapping({"weights": {
        "hidden_0/kernel": "dense_1/kernel",  # [8, 8] for a [3, 8] weight.
        "hidden_0/bias": "dense/bias", "hidden_1/kernel": "dense_1/kernel",
        "hidden_1/bias": "dense_1/bias", "logits/kernel": "nope/kernel"}})
    report = checkpoint_mapping.convert_checkpoint(model, mapping, _fixture("tf1_mlp"))
    assert report.unmapped_weights == ("logits/bias",)
    assert report.missing_variables == ("nope/kernel",)
    assert report.shape_mismatches == ("hidden_0/kernel (3, 8) <- dense_1/kernel (8, 8)",)
    assert set(report.unused_variables) == {"dense/kernel", "dense_2/kernel", "dense_2/bias"}
    for weight, value in zip(model.weights, before):
        np.testing.assert_array_equal(weight.numpy(), value)
    with pytest.raises(UsageError, match=r"^mapping must give every Keras weight .* "
                                         r"Received: Keras weights without .*logits/bias"):
        checkpoint_mapping.convert_or_raise(model, mapping, _fixture("tf1_mlp"))


def test_convert_ignore_globs_leave_variables_behind():
    values = json.loads(open(_fixture("tf1_mlp", "mapping.json"), encoding="utf-8").read())
    del values["weights"]["logits/bias"]
    values["ignore"] = ["dense_2/*"]
    report = checkpoint_mapping.convert_checkpoint(fixture_models.mlp_keras_model(),
                                        checkpoint_mapping.check_mapping(values),
                                        _fixture("tf1_mlp"))
    assert report.unused_variables == ()
    assert "dense_2/bias" in report.left_behind
    assert report.unmapped_weights == ("logits/bias",)


@pytest.mark.parametrize("values, match", [
    ({"weight": {}}, r"^mapping sections must be among weights, basic_lstm_cells, ignore\. "
                     r"Received: weight$"),
    ({"weights": {"a/kernel": 3}}, r"^weights must map names to checkpoint variable names"),
    ({"basic_lstm_cells": {"lstm": {"scope": "rnn", "bias": 1}}},
     r"^basic_lstm_cells\.lstm must be a scope name or"),
    ({"ignore": "dense"}, r"^ignore must be a list of variable names or globs"),
])
def test_check_mapping_bad_entry_names_it(values, match):
    with pytest.raises(UsageError, match=match):
        checkpoint_mapping.check_mapping(values)


def test_checkpoint_path_prefix_or_dir():
    prefix = _fixture("tf1_mlp", "model.ckpt-3")
    assert checkpoint_mapping.checkpoint_path(prefix) == prefix
    assert checkpoint_mapping.checkpoint_path(_fixture("tf1_mlp")).endswith("model.ckpt-3")
    with pytest.raises(UsageError, match=r"^checkpoint must be a checkpoint prefix or a "
                                         r"directory holding one\. Received: checkpoint="):
        checkpoint_mapping.checkpoint_path(_fixture("tf1_mlp", "model.ckpt-4"))


def test_build_keras_model_bad_spec_names_it():
    with pytest.raises(UsageError, match=r"^keras_model must be MODULE:FUNCTION .* "
                                         r"Received: keras_model='tests\.fixtures:nope'"):
        checkpoint_mapping.build_keras_model("tests.fixtures:nope")


def test_build_keras_model_of_the_other_keras_names_it():
    """--keras tf-keras wants a tf_keras model on TF 2.16+; on 2.15 tf.keras is it."""
    spec = _KERAS_SPECS["tf1_mlp"]
    if tf.__version__.startswith("2.15."):
        assert isinstance(checkpoint_mapping.build_keras_model(spec, "tf-keras"), tf.keras.Model)
        return
    with pytest.raises(UsageError, match=r"^keras_model must return a tf_keras\.Model "
                                         r"\(keras 'tf-keras'\)\. Received: .* returning "
                                         r"keras\..*Functional$"):
        checkpoint_mapping.build_keras_model(spec, "tf-keras")


@pytest.mark.parametrize("argv, match", [
    (["--output", "o"], r"model_dir must be given \(or --checkpoint"),
    (["--checkpoint", "c", "--output", "o"], r"needs --checkpoint, --mapping and "
                                             r"--keras-model\. Received: no --mapping, "
                                             r"--keras-model$"),
    (["--checkpoint", "c", "--model-dir", "d", "--mapping", "m", "--keras-model", "k:f",
      "--output", "o"], r"^model_dir must not be given with --checkpoint"),
])
def test_migrate_mapping_flags_checked(argv, match):
    args = migrate.migrate_parser().parse_args(argv)
    with pytest.raises(UsageError, match=match):
        migrate._mapping_mode(args)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_CASES))
def test_migrate_mapping_cli_saved_model_gives_the_estimator_logits(name, tmp_path,
                                                                   python_run):
    output = str(tmp_path / "keras")
    result = python_run(["-m", "estimator_dist.migrate", "--checkpoint", _fixture(name),
                         "--mapping", _fixture(name, _CASES[name][0]),
                         "--keras-model", _KERAS_SPECS[name], "--output", output],
                        timeout=240)
    assert result.returncode == 0, result.stderr
    assert "left behind: global_step" in result.stdout
    x, logits = _expected(name)
    np.testing.assert_allclose(tf.keras.models.load_model(output)({"x": x}), logits,
                               atol=_TOLERANCE)


@pytest.mark.slow
def test_migrate_mapping_cli_bad_mapping_is_one_line_and_writes_nothing(tmp_path, python_run):
    mapping = tmp_path / "mapping.json"
    mapping.write_text(json.dumps({"weights": {"logits/kernel": "dense_2/kernel"}}))
    output = tmp_path / "keras"
    result = python_run(["-m", "estimator_dist.migrate", "--checkpoint", _fixture("tf1_mlp"),
                         "--mapping", str(mapping), "--keras-model", _KERAS_SPECS["tf1_mlp"],
                         "--output", str(output)], timeout=240)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Received: Keras weights without a checkpoint variable: " \
        "hidden_0/kernel" in lines[0], result.stderr
    assert "checkpoint variables neither mapped nor ignored: dense/bias" in lines[0]
    assert not output.exists()


@pytest.mark.slow
def test_migrate_mapping_cli_refuses_output_in_the_checkpoint_dir(tmp_path, python_run):
    checkpoint = shutil.copytree(_fixture("tf1_mlp"), tmp_path / "ckpt")
    result = python_run(["-m", "estimator_dist.migrate", "--checkpoint", str(checkpoint),
                         "--mapping", _fixture("tf1_mlp", "mapping.json"),
                         "--keras-model", _KERAS_SPECS["tf1_mlp"],
                         "--output", str(checkpoint / "keras")], timeout=240)
    assert result.returncode == 2
    assert "output must be outside the checkpoint's directory" in result.stderr
    assert sorted(os.listdir(checkpoint)) == sorted(os.listdir(_fixture("tf1_mlp")))
