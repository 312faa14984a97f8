"""A job with an evaluator ends soon after training ends."""
import os
import re
import sys
import time

import pytest
import tensorflow as tf

from estimator_dist.job import events
from tests.support import REPO_ROOT
from tests.programs import legacy_train_and_evaluate as legacy

pytestmark = [pytest.mark.slow, pytest.mark.multi_process, pytest.mark.alone]

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


@pytest.mark.parametrize("behaviour", ["tf1", "tf2"])
def test_legacy_program_default_eval_spec_ends_soon_after_training(python_run, model_dir,
                                                                   behaviour):
    """A program's own EvalSpec (start_delay_secs=120, throttle_secs=600): its evaluator
    evaluates the final checkpoint within seconds of it, and the job ends (mend
    ``evaluator_end``; plain TensorFlow would end 120 s after the evaluator started)."""
    result = python_run(["-m", "estimator_dist.launch", "--workers", "2", "--evaluator",
                         "--timeout", "180", "--", sys.executable, legacy.__file__, model_dir,
                         behaviour], timeout=240, env={"PYTHONPATH": REPO_ROOT})
    ended = time.time()
    assert result.returncode == 0, result.stdout[-3000:]
    last = tf.train.latest_checkpoint(model_dir)
    assert last.endswith(f"-{legacy.MAX_STEPS}"), last
    assert ended - os.path.getmtime(last + ".index") < _AFTER_LAST_CHECKPOINT_SECONDS
    metrics = events.last_values(os.path.join(model_dir, "eval"))
    assert metrics.get("global_step") == legacy.MAX_STEPS and "accuracy" in metrics, metrics
    waiting = (r"^\[evaluator 0\] evaluator: waiting \d+ s \(EvalSpec.start_delay_secs=120\) "
               rf"before the first evaluation; a checkpoint at step {legacy.MAX_STEPS} ")
    assert re.search(waiting, result.stdout, re.M), result.stdout[-3000:]
