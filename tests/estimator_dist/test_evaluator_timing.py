"""A CLI job with an evaluator ends soon after training ends."""
import os
import sys
import time

import pytest
import tensorflow as tf

pytestmark = [pytest.mark.slow, pytest.mark.multi_process]

_AFTER_LAST_CHECKPOINT_SECONDS = 60


def test_multi_worker_evaluator_ends_soon_after_training(python_run, model_dir):
    """The evaluator starts at once and evaluates each new checkpoint, so the job ends
    within a minute of the chief's last checkpoint (TensorFlow's default EvalSpec would
    wait 120 s to start and up to 600 s between evaluations)."""
    result = python_run(["-m", "estimator_dist.launch", "--workers", "2", "--evaluator",
                         "--timeout", "400", "--", sys.executable, "-m", "estimator_dist.train",
                         "--strategy", "multi_worker", "--max-steps", "60",
                         "--save-checkpoints-steps", "20", "--model-dir", model_dir,
                         "--collective-timeout", "60", "--no-export"], timeout=450)
    ended = time.time()
    assert result.returncode == 0, result.stdout[-3000:]
    last = tf.train.latest_checkpoint(model_dir)
    assert last.endswith("-60")
    assert ended - os.path.getmtime(last + ".index") < _AFTER_LAST_CHECKPOINT_SECONDS
    evaluated = [line for line in result.stdout.splitlines()
                 if line.startswith("[evaluator 0] metrics")]
    assert evaluated and "(step 60)" in evaluated[-1], result.stdout[-3000:]
