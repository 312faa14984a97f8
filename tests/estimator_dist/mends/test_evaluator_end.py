"""The evaluator of ``train_and_evaluate`` ends with the training (mend ``evaluator_end``).

Plain TensorFlow's evaluator runs in a process of its own (``evaluator_end_probe.py``); the
mended evaluator runs in a thread of this process, as the evaluator task of a
"parameter_server" cluster whose checkpoints this test writes. The whole cluster under
the launcher, in TF1 and TF2 behaviour, is in ``test_evaluator_timing.py``.
"""
import json
import threading
import time

import pytest
import tensorflow as tf

import estimator_dist
from estimator_dist import training_end
from estimator_dist.mends import evaluator_end
from tests.support import WatchedPython
from tests.programs import tf1_models

_PARAMS = {"learning_rate": 0.01}
_EVALUATOR_TF_CONFIG = {"cluster": {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"]},
                        "task": {"type": "evaluator", "index": 0}}
# The final evaluation starts within a poll (1 s) of the final checkpoint and takes a few
# seconds; a loaded 2-core CI may take several times that. TF's throttle here is 600 s.
_ENDS_WITHIN_SECONDS = 30


def _input_fn():
    x, y = tf1_models.regression_data()
    return tf1_models.dataset_input_fn(x, y, 16)


def _train(model_dir, max_steps):
    """Trains to ``max_steps`` outside the cluster: one checkpoint, at ``max_steps``."""
    estimator = tf.estimator.Estimator(tf1_models.regression_model_fn, model_dir=model_dir,
                                       params=_PARAMS)
    estimator.train(_input_fn(), max_steps=max_steps)


class _EvaluatedSteps(tf.estimator.SessionRunHook):
    """Records the global step of each evaluation as it ends."""

    def __init__(self):
        self.steps = []
        self.changed = threading.Condition()

    def begin(self):
        self._step = tf.compat.v1.train.get_global_step()

    def end(self, session):
        with self.changed:
            self.steps.append(int(session.run(self._step)))
            self.changed.notify_all()

    def wait_for(self, step, timeout):
        with self.changed:
            return self.changed.wait_for(lambda: step in self.steps, timeout)


def _start_evaluator(monkeypatch, model_dir, max_steps, **eval_spec):
    """The evaluator task in a daemon thread; returns (thread, its _EvaluatedSteps)."""
    monkeypatch.setenv("TF_CONFIG", json.dumps(_EVALUATOR_TF_CONFIG))
    config = estimator_dist.make_run_config("parameter_server", model_dir=model_dir)
    monkeypatch.delenv("TF_CONFIG")
    estimator = tf.estimator.Estimator(tf1_models.regression_model_fn, config=config,
                                       params=_PARAMS)
    evaluated = _EvaluatedSteps()
    specs = (tf.estimator.TrainSpec(_input_fn(), max_steps=max_steps),
             tf.estimator.EvalSpec(_input_fn(), steps=2, hooks=[evaluated], **eval_spec))
    thread = threading.Thread(target=tf.estimator.train_and_evaluate,
                              args=(estimator, *specs), daemon=True)
    thread.start()
    return thread, evaluated


@pytest.fixture(autouse=True)
def _first_wait_line_printed(monkeypatch):
    """Each test's first long wait prints its line (at most one a minute per process)."""
    monkeypatch.setitem(evaluator_end._announced, "at", None)


@pytest.mark.slow
def test_tf_evaluator_waits_out_the_throttle_after_the_final_checkpoint(model_dir):
    """Plain TF: the checkpoint at max_steps waits for the throttle (60 s here)."""
    _train(model_dir, 4)
    with WatchedPython(["-m", "tests.programs.evaluator_end_probe", model_dir, "8",
                        "60"]) as evaluator:
        assert evaluator.wait_for_line(r"^EVALUATED 4$", timeout=120), evaluator.output[-2000:]
        _train(model_dir, 8)
        assert evaluator.outlives(20), evaluator.output[-2000:]
        assert "EVALUATED 8" not in evaluator.output


@pytest.mark.alone
def test_evaluator_default_delays_evaluates_a_final_checkpoint_at_once(monkeypatch, model_dir):
    """The default EvalSpec would sleep 120 s before its first evaluation."""
    _train(model_dir, 6)
    started = time.monotonic()
    thread, evaluated = _start_evaluator(monkeypatch, model_dir, 6)
    thread.join(_ENDS_WITHIN_SECONDS)
    assert not thread.is_alive(), f"still evaluating after {time.monotonic() - started:.0f} s"
    assert evaluated.steps == [6]


@pytest.mark.alone
@pytest.mark.slow
def test_evaluator_throttle_ends_at_the_final_checkpoint_only(monkeypatch, capsys, model_dir):
    _train(model_dir, 4)
    thread, evaluated = _start_evaluator(monkeypatch, model_dir, 10, start_delay_secs=0,
                                         throttle_secs=600)
    assert evaluated.wait_for(4, timeout=60)
    _train(model_dir, 7)
    time.sleep(3)  # Three polls: an intermediate checkpoint is left to the throttle.
    assert evaluated.steps == [4]
    _train(model_dir, 10)
    trained = time.monotonic()
    thread.join(_ENDS_WITHIN_SECONDS)
    assert not thread.is_alive(), f"still evaluating after {time.monotonic() - trained:.0f} s"
    assert evaluated.steps == [4, 10]
    waits = [line for line in capsys.readouterr().err.splitlines()
             if line.startswith("evaluator: waiting ")]
    assert len(waits) == 1, waits
    assert "(EvalSpec.throttle_secs=600) before evaluating a newer checkpoint than step 4; " \
           "a checkpoint at step 10 (TrainSpec.max_steps)" in waits[0]


def test_wait_line_without_max_steps_says_only_the_delay_ends_it():
    line = evaluator_end.wait_line(119.6, "start_delay_secs", 120, None, None)
    assert line == ("evaluator: waiting 120 s (EvalSpec.start_delay_secs=120) before the first "
                    "evaluation; TrainSpec.max_steps is None, so no checkpoint is known to be "
                    "the last")


def _evaluator_lines(capsys):
    return [line for line in capsys.readouterr().err.splitlines()
            if line.startswith("evaluator: ") and not line.startswith("evaluator: waiting ")]


@pytest.mark.alone
@pytest.mark.slow
def test_evaluator_told_training_ended_evaluates_the_last_checkpoint_and_ends(
        monkeypatch, capsys, model_dir, tmp_path):
    """Training that stopped short of max_steps (its input ended): once the launcher says
    training ended, the newest checkpoint is evaluated and the loop ends."""
    ended = tmp_path / "training-ended"
    monkeypatch.setenv(training_end.ENV, str(ended))
    _train(model_dir, 4)
    thread, evaluated = _start_evaluator(monkeypatch, model_dir, 100, start_delay_secs=0,
                                         throttle_secs=600)
    assert evaluated.wait_for(4, timeout=60)
    _train(model_dir, 7)
    ended.touch()
    told = time.monotonic()
    thread.join(_ENDS_WITHIN_SECONDS)
    assert not thread.is_alive(), f"still evaluating after {time.monotonic() - told:.0f} s"
    assert evaluated.steps == [4, 7]
    assert _evaluator_lines(capsys) == [
        f"evaluator: evaluating each new checkpoint in {model_dir} until one at step 100 "
        "(TrainSpec.max_steps) is evaluated, or the launcher says that training has ended",
        "evaluator: training ended before step 100 (TrainSpec.max_steps); evaluated its last "
        "checkpoint, step 7"]


@pytest.mark.alone
def test_evaluator_told_training_ended_without_a_checkpoint_ends_saying_so(
        monkeypatch, capsys, tmp_path):
    ended = tmp_path / "training-ended"
    ended.touch()
    monkeypatch.setenv(training_end.ENV, str(ended))
    model_dir = str(tmp_path / "never-written")
    thread, evaluated = _start_evaluator(monkeypatch, model_dir, None)
    thread.join(_ENDS_WITHIN_SECONDS)
    assert not thread.is_alive()
    assert evaluated.steps == []
    assert _evaluator_lines(capsys)[-1] == (
        f"evaluator: training ended with no checkpoint in {model_dir}; nothing to evaluate")


@pytest.mark.parametrize("max_steps, told, words", [
    (50, False, "until one at step 50 (TrainSpec.max_steps) is evaluated"),
    (None, False, "with no end of its own (TrainSpec.max_steps is None): stop it when "
                  "training is done"),
    (None, True, "with no end of its own (TrainSpec.max_steps is None), or the launcher says "
                 "that training has ended")])
def test_start_line_says_the_dir_and_what_ends_the_loop(max_steps, told, words):
    assert evaluator_end.start_line("/runs/a", max_steps, told) == (
        f"evaluator: evaluating each new checkpoint in /runs/a {words}")


def test_wait_line_under_the_launcher_says_training_s_end_ends_it():
    line = evaluator_end.wait_line(30, "throttle_secs", 600, 100, 4, told=True)
    assert line.endswith("a checkpoint at step 100 (TrainSpec.max_steps) is evaluated as "
                         "soon as it is written; the launcher's word that training has "
                         "ended ends it too")
