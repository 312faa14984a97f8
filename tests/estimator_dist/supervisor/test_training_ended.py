"""An evaluator never waits for ever: the launcher tells it when every chief and worker has
exited 0, and it evaluates the last checkpoint and ends; outside the launcher it says in
one line what it waits for, and creates no model dir.

The file's life is checked alone; then a real job whose input ends long before
``max_steps`` (``short_input_job.py``) under ``launch --evaluator``, and the train
command's evaluator outside the launcher.
"""
import json
import os
import re
import subprocess
import sys
import time

import pytest

from estimator_dist import training_end
from estimator_dist.supervisor.training_ended import TrainingEnded
from tests.support import REPO_ROOT, WatchedPython

# The evaluator ends within this long of the trainers (issue: it waited until an outer
# timeout); its last evaluation takes seconds, more on a loaded 2-core CI.
_ENDS_WITHIN_SECONDS = 60


def test_training_ended_file_marked_reset_and_removed(monkeypatch):
    ended = TrainingEnded()
    try:
        monkeypatch.setenv(training_end.ENV, ended.env()[training_end.ENV])
        assert training_end.told() and not training_end.ended()
        ended.mark()
        ended.mark()
        assert training_end.ended()
        ended.reset()
        assert not training_end.ended()
        ended.mark()
    finally:
        ended.close()
    assert not os.path.exists(os.path.dirname(ended.path))
    monkeypatch.delenv(training_end.ENV)
    assert not training_end.told() and not training_end.ended()


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.both_ends
@pytest.mark.timeout(300)
def test_launch_evaluator_ends_with_trainers_that_never_reach_max_steps(tmp_path):
    model_dir = str(tmp_path / "model")
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    process = subprocess.Popen(
        [sys.executable, "-m", "estimator_dist.launch", "--workers", "1", "--evaluator",
         "--timeout", "240", "--", sys.executable, "-m", "tests.programs.short_input_job",
         model_dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        cwd=REPO_ROOT, env={**env, "PYTHONPATH": REPO_ROOT})
    lines, trained = [], None
    try:
        for line in process.stdout:
            lines.append(line)
            if line.startswith("[worker 0] ENDED"):
                trained = time.monotonic()
        code = process.wait(timeout=30)
        ended = time.monotonic()
    finally:
        process.kill()
        process.wait()
    output = "".join(lines)
    assert code == 0, output[-3000:]
    assert trained is not None, output[-3000:]
    print(f"the evaluator ended {ended - trained:.1f} s after the trainers")
    assert ended - trained < _ENDS_WITHIN_SECONDS
    assert re.search(r"^\[evaluator 0\] evaluator: training ended before step 100000 "
                     r"\(TrainSpec\.max_steps\); evaluated its last checkpoint, step 16$",
                     output, re.MULTILINE), output[-3000:]


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.both_ends
@pytest.mark.timeout(180)
def test_train_evaluator_outside_launcher_says_what_it_waits_for_and_creates_no_dir(tmp_path):
    model_dir = str(tmp_path / "model")
    tf_config = {"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]},
                 "task": {"type": "evaluator", "index": 0}}
    with WatchedPython(["-m", "estimator_dist.train", "--strategy", "multi_worker",
                        "--model-dir", model_dir, "--max-steps", "50"],
                       env={"TF_CONFIG": json.dumps(tf_config),
                            "PYTHONPATH": REPO_ROOT}) as evaluator:
        assert evaluator.wait_for_line(r"^evaluator: evaluating", timeout=150), \
            evaluator.output[-3000:]
        time.sleep(2)  # A poll or two of the model dir.
        assert not os.path.exists(model_dir)
    assert (f"evaluator: evaluating each new checkpoint in {model_dir} until one at step 50 "
            "(TrainSpec.max_steps) is evaluated\n") in evaluator.output
