"""ProgressHook (display, rates from the steps run here, summaries) and the NaN guard."""
import io
import re

import numpy as np
import pytest
import tensorflow as tf

from estimator_dist.job import events, progress

v1 = tf.compat.v1


def _model_fn(features, labels, mode, params):
    """Fits y = 2x with one weight; ``params["poison"]`` sets the weight to NaN instead."""
    weight = v1.get_variable("w", [], initializer=v1.zeros_initializer())
    loss = tf.reduce_mean(tf.square(weight * features["x"] - labels))
    if params.get("poison"):
        train_op = tf.group(weight.assign(np.nan), v1.assign_add(v1.train.get_global_step(), 1))
        loss = tf.constant(1.0)  # Finite, so only the weights show the NaN.
    else:
        train_op = v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _input_fn():
    return tf.data.Dataset.from_tensors(({"x": [1.0, 2.0]}, [2.0, 4.0])).repeat()


def _estimator(model_dir, poison=False, save_checkpoints_steps=1000):
    config = tf.estimator.RunConfig(model_dir=model_dir, log_step_count_steps=None,
                                    save_checkpoints_steps=save_checkpoints_steps)
    return tf.estimator.Estimator(_model_fn, config=config, params={"poison": poison})


def _train(model_dir, max_steps, **hook_kwargs):
    hook_kwargs.setdefault("mode", "lines")
    hook_kwargs.setdefault("stream", io.StringIO())
    hook = progress.ProgressHook(max_steps, 2, **hook_kwargs)
    _estimator(model_dir).train(_input_fn, max_steps=max_steps, hooks=[hook])
    hook.close()
    return hook, hook_kwargs["stream"].getvalue()


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_display_mode_terminal_is_bar():
    assert progress.display_mode(_Terminal(), environ={}) == "bar"


def test_display_mode_terminal_under_ci_is_lines():
    assert progress.display_mode(_Terminal(), environ={"CI": "true"}) == "lines"


def test_display_mode_pipe_is_lines():
    assert progress.display_mode(io.StringIO(), environ={}) == "lines"


def test_throughput_counts_only_steps_run_here():
    done = progress.Throughput(start_step=100, final_step=150, seconds=2.0, batch_size=32)
    assert done.steps == 50
    assert done.examples_per_second == pytest.approx(800.0)


def test_progress_lines_show_step_loss_rates_and_eta(model_dir):
    hook, text = _train(model_dir, 20)
    lines = text.splitlines()
    assert 5 <= len(lines) <= 11
    assert lines[-1].startswith("step 20/20  loss ")
    for part in ("examples/s", "steps/s", "ETA "):
        assert part in lines[0]
    assert hook.throughput.steps == 20


@pytest.mark.slow
def test_progress_resumed_run_counts_from_restored_step(model_dir):
    _train(model_dir, 10)
    hook, text = _train(model_dir, 25)
    assert (hook.throughput.start_step, hook.throughput.steps) == (10, 15)
    assert text.splitlines()[-1].startswith("step 25/25")


def test_progress_bar_mode_draws_one_updating_line(model_dir):
    _, text = _train(model_dir, 10, mode="bar", stream=_Terminal())
    assert "\r" in text and "\n" not in text.rstrip("\n")
    assert "step 10/10" in text and "examples/s" in text and "loss " in text


def test_progress_none_mode_shows_nothing_but_measures(model_dir):
    hook, text = _train(model_dir, 5, mode=None)
    assert text == "" and hook.throughput.steps == 5


def test_progress_writes_examples_per_sec_and_learning_rate(model_dir):
    _train(model_dir, 10, summary_dir=model_dir, summary_steps=5, learning_rate=0.1)
    scalars = events.scalars(model_dir)
    assert [step for step, _ in scalars["examples/sec"]] == [5, 10]
    assert all(value > 0 for _, value in scalars["examples/sec"])
    assert scalars["learning_rate"] == [(5, pytest.approx(0.1)), (10, pytest.approx(0.1))]


def test_finite_weights_listener_keeps_last_finite_checkpoint(model_dir):
    estimator = _estimator(model_dir, poison=True, save_checkpoints_steps=1)
    with pytest.raises(v1.train.NanLossDuringTrainingError):
        estimator.train(_input_fn, max_steps=3, saving_listeners=[progress.FiniteWeightsListener()])
    assert tf.train.latest_checkpoint(model_dir).endswith("model.ckpt-0")


def test_progress_lines_come_at_least_once_a_minute(model_dir, monkeypatch):
    monkeypatch.setattr(progress, "_PLAIN_LINE_SECONDS", 0)
    _, text = _train(model_dir, 15)
    assert len(text.splitlines()) == 15


class _AbortOnce(tf.estimator.SessionRunHook):
    """Raises ``AbortedError`` (what a lost ps connection raises) after step ``at``."""

    def __init__(self, at):
        self._at, self._raised = at, False

    def before_run(self, run_context):
        return v1.train.SessionRunArgs(v1.train.get_global_step())

    def after_run(self, run_context, run_values):
        if run_values.results >= self._at and not self._raised:
            self._raised = True
            raise tf.errors.AbortedError(None, None, "connection to ps 0 lost")


@pytest.mark.parametrize("save_checkpoints_steps, restored", [(1000, 0), (5, 10)])
@pytest.mark.slow
def test_progress_reports_recreated_session_and_steps_lost(model_dir, capsys,
                                                           save_checkpoints_steps, restored):
    """Estimator's monitored session re-creates the session on ``AbortedError`` and
    restores the last checkpoint, silently: the steps since it are lost."""
    hook = progress.ProgressHook(40, 2, mode=None, stream=io.StringIO())
    _estimator(model_dir, save_checkpoints_steps=save_checkpoints_steps).train(
        _input_fn, max_steps=40, hooks=[hook, _AbortOnce(at=12)])
    assert hook.step == 40  # Trained to the end after the recovery.
    stderr = capsys.readouterr().err.strip().splitlines()
    assert len(stderr) == 1, stderr
    assert re.fullmatch(
        r"TensorFlow re-created the training session after an error it treats as a "
        r"preemption \(a lost connection to a ps or a worker; --verbose shows it\): training "
        rf"resumed from the last checkpoint, at step {restored}, and the (\d+) steps since it "
        r"are lost \(save checkpoints more often with --save-checkpoints-steps to lose "
        r"less\)\.", stderr[0]), stderr[0]
    assert 12 - restored <= int(re.search(r"the (\d+) steps", stderr[0])[1]) <= 13 - restored


def test_recovery_without_restore_says_training_goes_on(capsys):
    """A worker that is not the chief restores nothing: its step goes on."""
    progress._report_recovery(120, 121)
    assert capsys.readouterr().err.endswith("; training goes on from step 121.\n")
