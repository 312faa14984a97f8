"""Several training steps per Session.run (``steps_per_run``): same training, fewer runs."""
import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

import estimator_dist
from estimator_dist.supervisor.tasks import free_ports
from estimator_dist.mends import steps_per_run
from tests.programs import tf1_models
from tests.support import run_workers

_JOB = ["-m", "tests.programs.steps_per_run_job"]


def _result(stdout):
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, stdout[-2000:]
    return {int(k): v for k, v in json.loads(lines[-1][len("RESULT "):]).items()}


def test_next_boundary_stops_at_last_step():
    assert steps_per_run._next_boundary(17, 23, None, 0) == 23


def test_next_boundary_stops_at_checkpoint_steps_from_first_step():
    assert steps_per_run._next_boundary(12, 100, 5, 2) == 17
    assert steps_per_run._next_boundary(17, 100, 5, 2) == 22


def test_next_boundary_without_limits_is_none():
    assert steps_per_run._next_boundary(12, None, None, 0) is None


def test_make_estimator_steps_per_run_keyword_builds_loop_estimator(model_dir):
    config = estimator_dist.make_run_config(model_dir=model_dir)
    estimator = estimator_dist.make_estimator(tf1_models.mlp_model_fn, config,
                                              steps_per_run=10)
    assert isinstance(estimator, estimator_dist.LoopEstimator)
    assert estimator.steps_per_run == 10


def test_make_run_config_steps_per_run_reaches_make_estimator(model_dir):
    config = estimator_dist.make_run_config(model_dir=model_dir, steps_per_run=7)
    assert config.steps_per_run == 7
    estimator = estimator_dist.make_estimator(tf1_models.mlp_model_fn, config)
    assert estimator.steps_per_run == 7


class _StepsPerRun(tf.compat.v1.train.SessionRunHook):
    """The global step after each Session.run of training, read by a run of its own: a
    fetch in the training run itself may read the step before or after the train op's
    increment (no order between them)."""

    def __init__(self):
        self.steps = []

    def begin(self):
        self._global_step = tf.compat.v1.train.get_global_step()

    def after_run(self, run_context, run_values):
        self.steps.append(int(run_context.session.run(self._global_step)))


@pytest.mark.parametrize("strategy, kwargs", [("default", {}),
                                              ("mirrored", {"num_replicas": 2})])
@pytest.mark.slow
def test_tf_estimator_runs_one_step_per_session_run_off_tpu(model_dir, strategy, kwargs):
    """TensorFlow's own train loop: one Session.run per step, whatever the strategy (six
    runs for six steps, the global step one further at each)."""
    config = estimator_dist.make_run_config(strategy, model_dir=model_dir, **kwargs)
    estimator = tf.estimator.Estimator(tf1_models.mlp_model_fn, config=config,
                                       params={"learning_rate": 0.1})
    x, y = tf1_models.classification_data()
    hook = _StepsPerRun()
    estimator.train(tf1_models.context_input_fn(x, y, 16), max_steps=6, hooks=[hook])
    assert len(hook.steps) == 6 and np.all(np.diff(hook.steps) == 1), hook.steps
    assert estimator.get_variable_value("global_step") == 6


def test_make_estimator_one_step_per_run_is_plain_estimator(model_dir):
    config = estimator_dist.make_run_config(model_dir=model_dir, steps_per_run=1)
    estimator = estimator_dist.make_estimator(tf1_models.mlp_model_fn, config)
    assert type(estimator) is tf.estimator.Estimator


def test_make_run_config_steps_per_run_names_plain_estimator(model_dir, caplog):
    with caplog.at_level("INFO", logger="estimator_dist.distribute.run_config"):
        estimator_dist.make_run_config(model_dir=model_dir, steps_per_run=5)
    assert "estimator_dist.make_estimator" in caplog.text


@pytest.mark.parametrize("value", [0, -3, 2.5, True])
def test_steps_per_run_not_positive_int_is_refused(model_dir, value):
    with pytest.raises(ValueError, match=r"steps_per_run must be a positive int\. Received: "
                                         r"steps_per_run="):
        estimator_dist.make_estimator(tf1_models.mlp_model_fn,
                                      estimator_dist.make_run_config(model_dir=model_dir),
                                      steps_per_run=value)


@pytest.mark.slow
def test_loop_estimator_trains_evaluates_predicts_in_process(model_dir):
    config = estimator_dist.make_run_config(model_dir=model_dir, save_checkpoints_steps=4,
                                            steps_per_run=3)
    estimator = estimator_dist.make_estimator(tf1_models.mlp_model_fn, config,
                                              {"learning_rate": 0.1})
    x, y = tf1_models.classification_data()
    input_fn = tf1_models.dataset_input_fn(x, y, 16)
    estimator.train(input_fn, steps=10)
    assert estimator.get_variable_value("global_step") == 10
    assert tf.train.latest_checkpoint(model_dir).endswith("-10")
    assert estimator.evaluate(input_fn, steps=2)["global_step"] == 10


def _assert_same_training(results):
    one, loop = results[1], results[10]
    assert (one["estimator"], loop["estimator"]) == ("EstimatorV2", "LoopEstimator")
    assert one["global_step"] == loop["global_step"] == 23
    assert one["checkpoints"] == loop["checkpoints"] == [0, 5, 10, 15, 20, 23]
    assert loop["summary_steps"]
    for name, kernel in one["weights"].items():
        np.testing.assert_allclose(loop["weights"][name], kernel, rtol=0, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("behavior", [[], ["--v1-behavior"]], ids=["tf2", "tf1"])
@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_steps_per_run_trains_like_one_step_per_run(python_run, tmp_path, strategy, behavior):
    """K=1 and K=10, 23 SGD steps, checkpoints every 5: same weights, same checkpoint steps,
    the last loop stops at max_steps."""
    result = python_run(_JOB + [strategy, str(tmp_path), "1", "10", *behavior], timeout=280)
    assert result.returncode == 0, result.stderr[-3000:]
    _assert_same_training(_result(result.stdout))


@pytest.mark.slow
@pytest.mark.multi_process
def test_steps_per_run_multi_worker_two_processes(tmp_path):
    command = [sys.executable, *_JOB, "multi_worker", str(tmp_path), "10"]
    results = run_workers([command] * 2, free_ports(2), 280)
    for stdout, stderr, code in results:
        assert code == 0, stderr[-3000:]
    chief = _result(results[0][0])[10]
    assert chief["estimator"] == "LoopEstimator"
    assert chief["global_step"] == 23
    assert chief["checkpoints"] == [0, 5, 10, 15, 20, 23]
    assert os.path.exists(tmp_path / "k10" / "model.ckpt-23.index")
