"""``--engine``: the built-in runs on Estimator, Keras fit and a custom training loop."""
import io

import pytest

from estimator_dist import models
from estimator_dist.commands import train
from estimator_dist.job import engines, training
from estimator_dist.job.settings import RunSettings
from estimator_dist.errors import UsageError

# The band docs/migration.md states: every engine above the floor, all within the gap.
_ACCURACY_FLOOR = 0.85
_ACCURACY_GAP = 0.05


def test_engine_flag_defaults_to_estimator():
    assert train.train_parser().parse_args([]).engine == "estimator"
    assert train.train_parser().parse_args(["--engine", "loop"]).engine == "loop"


def test_engine_flag_is_not_a_run_setting():
    args = train.train_parser().parse_args(["--engine", "keras", "--max-steps", "5"])
    assert train.settings_from_args(args).max_steps == 5  # RunSettings took the rest.


@pytest.mark.parametrize("settings, match", [
    (RunSettings(strategy="parameter_server"),
     r"^strategy must be one of default, mirrored with engine 'keras'\. "
     r"Received: strategy='parameter_server'$"),
    (RunSettings(train_data=["a.csv"]), r"^train_data must be left out with engine 'keras'"),
    (RunSettings(params={"dropout": 0.5}),
     r"^params must be among hidden_units, num_classes, learning_rate with engine 'keras'\. "
     r"Received: dropout=0\.5$"),
])
def test_check_settings_refuses_what_the_engines_do_not_express(settings, match):
    with pytest.raises(UsageError, match=match):
        engines.check_settings(settings, "keras")


@pytest.mark.slow
def test_engine_cli_bad_strategy_is_one_line(python_run):
    result = python_run(["-m", "estimator_dist.train", "--engine", "loop", "--strategy",
                         "multi_worker"], timeout=240)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "python -m estimator_dist.train: error: strategy must be one of default, mirrored "
        "with engine 'loop'. Received: strategy='multi_worker'"]


@pytest.mark.slow
@pytest.mark.parametrize("model", ["dense", "lstm"])
def test_engines_reach_the_same_accuracy_band(model, tmp_path):
    settings = RunSettings(model=model, strategy="mirrored", num_replicas=2, max_steps=200,
                           model_dir=str(tmp_path / "model"), export=False)
    # The Estimator first: on TF 2.15 Keras models built before an Estimator call stop working.
    accuracies = {"estimator": training.run(settings, stream=io.StringIO()).metrics["accuracy"]}
    for engine in ("keras", "loop"):  # They write no model dir, and refuse one.
        result = engines.run(settings.replace(model_dir=None), engine)
        assert (result.replicas, result.steps, result.batch_size) == (
            2, 200, 128 if model == "dense" else 64)
        accuracies[engine] = result.metrics["accuracy"]
    assert min(accuracies.values()) > _ACCURACY_FLOOR, accuracies
    assert max(accuracies.values()) - min(accuracies.values()) <= _ACCURACY_GAP, accuracies


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("engine", [e for e in engines.ENGINES if e != "estimator"])
@pytest.mark.parametrize("model", models.NAMES)
def test_engine_runs_every_model_of_the_table(model, engine):
    settings = RunSettings(model=model, max_steps=3, export=False)
    result = engines.run(settings, engine)
    assert (result.engine, result.replicas, result.steps) == (engine, 1, 3)
    assert set(result.metrics) == {"accuracy", "loss"}
