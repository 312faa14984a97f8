"""The newest checkpoint's step, read without TensorFlow, as TensorFlow writes it."""
import subprocess
import sys

import pytest

from estimator_dist import checkpoint_step


def test_newest_step_reads_the_state_file_as_text(tmp_path):
    assert checkpoint_step.newest_step(str(tmp_path)) == 0
    (tmp_path / "checkpoint").write_text(
        f'model_checkpoint_path: "{tmp_path}/model.ckpt-1200"\n'
        'all_model_checkpoint_paths: "model.ckpt-600"\n')
    assert checkpoint_step.newest_step(str(tmp_path)) == 1200
    assert checkpoint_step.newest_step("gs://bucket/run") is None
    assert checkpoint_step.newest_step(None) is None


def test_newest_step_agrees_with_tensorflow(tmp_path):
    import tensorflow as tf  # Late: loads TensorFlow.
    step = tf.Variable(0, dtype=tf.int64)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(step=step), str(tmp_path),
                                         max_to_keep=2, checkpoint_name="model.ckpt")
    for value in (3, 70, 1200):
        manager.save(checkpoint_number=value)
    assert checkpoint_step.newest_step(str(tmp_path)) == 1200
    assert checkpoint_step.step_of(tf.train.latest_checkpoint(str(tmp_path))) == 1200


def test_step_of_refuses_a_prefix_without_a_step():
    with pytest.raises(ValueError, match="must end in -STEP. Received: 'model.ckpt'"):
        checkpoint_step.step_of("model.ckpt")


def test_module_imports_no_tensorflow():
    code = ("import sys; import estimator_dist.checkpoint_step; "
            "print(sorted({'numpy', 'tensorflow'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, timeout=60)
    assert result.stdout.strip() == "[]"
