"""Facts docs/strategies.md states that differ between TF2 and TF1 behaviour.

Each probe runs plain TensorFlow (no estimator_dist) in its own process, under TF2
behaviour or after ``tf.compat.v1.disable_v2_behavior()``. The TF2 deadlock itself is
``test_end_to_end.py::test_default_cross_device_ops_deadlock_on_cpu_replicas_in_tf2_behaviour``.
"""
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.multi_process]


def _probe(python_run, behaviour, probe, model_dir, timeout=120):
    result = python_run(["-m", "tests.estimator_dist.behaviour_probe", behaviour, probe,
                         model_dir], timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_mirrored_defaults_train_in_tf1_behaviour(python_run, model_dir):
    """Under TF1 behaviour MirroredStrategy picks ReductionToOneDevice for CPU replicas
    itself, and Estimator trains with TensorFlow's defaults."""
    stdout = _probe(python_run, "tf1", "mirrored_defaults", model_dir)
    assert "CROSS_DEVICE_OPS ReductionToOneDevice" in stdout
    assert "FINISHED" in stdout


def _initial_weights(python_run, behaviour, tmp_path):
    return [_probe(python_run, behaviour, "seeded_init", str(tmp_path / f"run{i}"))
            .split("INIT ")[1].strip() for i in range(2)]


def test_tf_random_seed_repeats_initial_weights_in_tf1_behaviour(python_run, tmp_path):
    first, second = _initial_weights(python_run, "tf1", tmp_path)
    assert first == second


def test_tf_random_seed_does_not_repeat_initial_weights_in_tf2_behaviour(python_run, tmp_path):
    """tf.layers' initializers without a seed of their own draw afresh in each process
    under TF2 behaviour, whatever tf_random_seed says."""
    first, second = _initial_weights(python_run, "tf2", tmp_path)
    assert first != second
