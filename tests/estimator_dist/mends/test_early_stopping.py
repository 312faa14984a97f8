"""TensorFlow's early-stopping hooks under the strategies of make_run_config.

The facts behind ``estimator_dist.mends.early_stopping`` run in plain TensorFlow in a process
of their own (``early_stopping_probe.py``); the mended hooks run in-process under
"mirrored" (2 logical CPU replicas), as user code calls them.
"""
import pytest
import tensorflow as tf

import estimator_dist
from tests.support import assert_passes_under_tf1_behaviour
from tests.programs import tf1_models

_PARAMS = {"learning_rate": 0.01}


@pytest.mark.slow
def test_tf_refuses_the_default_check_interval_under_mirrored(python_run, model_dir):
    """TF picks its multi-worker hook for any strategy: ``run_every_secs`` is refused."""
    result = python_run(["-m", "tests.programs.early_stopping_probe", "secs", model_dir],
                        timeout=120)
    assert ("ERROR ValueError: run_every_secs should not be set when using "
            "MultiWorkerMirroredStrategy") in result.stdout, result.stderr[-2000:]


@pytest.mark.slow
def test_tf_hook_fetches_a_per_replica_value_under_mirrored(python_run, model_dir):
    result = python_run(["-m", "tests.programs.early_stopping_probe", "steps", model_dir],
                        timeout=120)
    assert "ERROR TypeError: Argument `fetch` = PerReplica" in result.stdout, \
        result.stderr[-2000:]


def _mirrored_estimator(model_dir):
    config = estimator_dist.make_run_config("mirrored", num_replicas=2, model_dir=model_dir,
                                            tf_random_seed=1)
    return tf.estimator.Estimator(tf1_models.regression_model_fn, config=config,
                                  params=_PARAMS)


def _train(estimator, hook, max_steps):
    x, y = tf1_models.regression_data()
    estimator.train(tf1_models.context_input_fn(x, y, 16), max_steps=max_steps, hooks=[hook])
    return estimator.get_variable_value("global_step")


@pytest.mark.slow
def test_stop_if_no_decrease_hook_with_its_defaults_trains_under_mirrored(model_dir):
    estimator = _mirrored_estimator(model_dir)
    hook = tf.estimator.experimental.stop_if_no_decrease_hook(estimator, "loss", 100)
    assert _train(estimator, hook, 6) == 6


@pytest.mark.parametrize("timing", [{"run_every_secs": None, "run_every_steps": 2},
                                    {"run_every_secs": 0}], ids=["steps", "secs"])
@pytest.mark.slow
def test_early_stopping_hook_stops_training_under_mirrored(model_dir, timing):
    estimator = _mirrored_estimator(model_dir)
    hook = tf.estimator.experimental.make_early_stopping_hook(estimator, lambda: True,
                                                              **timing)
    assert _train(estimator, hook, 100) < 10


class _ClusterExtended:
    @staticmethod
    def _in_multi_worker_mode():
        return True


class _ClusterStrategy:
    """What the hook factory reads of a strategy whose workers are separate processes."""

    extended = _ClusterExtended()


def test_a_cluster_keeps_tf_rule_of_checking_by_steps(model_dir):
    """Workers must check at the same step (the stop signal is summed over them)."""
    estimator = _mirrored_estimator(model_dir)
    estimator._config._train_distribute = _ClusterStrategy()
    with pytest.raises(ValueError, match="run_every_secs should not be set"):
        tf.estimator.experimental.make_early_stopping_hook(estimator, lambda: True)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_module_under_tf1_behaviour():
    """The in-process tests above again, under TF1 behaviour."""
    assert_passes_under_tf1_behaviour(__file__, "-m", "not slow", timeout=240)
