"""The evaluator of ``train_and_evaluate`` ends with the training.

An evaluator task runs ``_TrainingExecutor._start_continuous_evaluation`` (read in
``tensorflow_estimator/python/estimator/training.py``): it sleeps
``EvalSpec.start_delay_secs`` (default 120), then evaluates the newest checkpoint and
sleeps what is left of ``EvalSpec.throttle_secs`` (default 600), until it has evaluated a
checkpoint whose global step is at least ``TrainSpec.max_steps``. Both sleeps ignore the
model dir, and the throttle follows the final evaluation too: a cluster that trained for
a minute waits up to twelve more for its evaluator, without a word (a two-worker job
that trained 40 steps in 12 s ended 717 s after its final checkpoint: the evaluation
came at 116 s, then the throttle's sleep; with this mend it ended after 2 s).

``install()`` (mend ``evaluator_end`` of ``mends.catalogue``, installed by
``make_run_config`` for the cluster strategies) runs TensorFlow's loop with both sleeps
replaced by a wait that reads the newest checkpoint's step once a second and ends as
soon as that step reaches ``TrainSpec.max_steps`` in a checkpoint not yet evaluated; the
evaluation of the final checkpoint is followed by no wait, so the task ends. A checkpoint
before ``max_steps`` does not end a wait: between checkpoints the throttle is
TensorFlow's, and the evaluator evaluates no checkpoint TensorFlow would skip. The
evaluator sees no other process, so the checkpoint is the signal: training that stops
before ``max_steps`` (its input ended) or has no ``max_steps`` leaves TensorFlow's waits
as they are.

Under the launcher the evaluator also learns when training has ended (``training_end``:
every chief and worker exited 0): a training that stopped short of ``max_steps``, or has
none, leaves no checkpoint that would end the loop, so the evaluator would wait for ever.
Then every wait ends, the newest checkpoint is evaluated if it was not yet, and the loop
ends with one line saying so (``ended_line``).

The loop starts with one line on stderr saying what ends it (``start_line``: the model
dir and the step), and a wait longer than ``_ANNOUNCE_AFTER_SECONDS`` says why, one line
at most every ``_ANNOUNCE_EVERY_SECONDS`` (stderr, because the CLI silences TensorFlow's
logging).
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Any

import tensorflow as tf
from tensorflow_estimator.python.estimator import training as tf_training

from estimator_dist import training_end

_Executor = tf_training._TrainingExecutor
_EvalStatus = tf_training._EvalStatus
_assert_eval_spec = tf_training._assert_eval_spec

_POLL_SECONDS = 1.0
_ANNOUNCE_AFTER_SECONDS = 30
_ANNOUNCE_EVERY_SECONDS = 60
# When the last wait line was printed (time.monotonic()).
_announced: dict[str, float | None] = {"at": None}
_announce_lock = threading.Lock()


def wait_line(remaining: float, field: str, seconds: float, max_steps: int | None,
              evaluated_step: int | None, told: bool = False) -> str:
    """The line a long wait prints: how long, for which EvalSpec field, what ends it early
    (``told``: the launcher will say when training ends, ``training_end``)."""
    if field == "start_delay_secs":
        before = "the first evaluation"
    elif evaluated_step is None:
        before = "the next evaluation (no checkpoint evaluated yet)"
    else:
        before = f"evaluating a newer checkpoint than step {evaluated_step}"
    if max_steps:
        early = (f"a checkpoint at step {max_steps} (TrainSpec.max_steps) is evaluated as "
                 "soon as it is written")
    else:
        early = "TrainSpec.max_steps is None, so no checkpoint is known to be the last"
    if told:
        early += "; the launcher's word that training has ended ends it too"
    return (f"evaluator: waiting {remaining:.0f} s (EvalSpec.{field}={seconds:g}) before "
            f"{before}; {early}")


def start_line(model_dir: str, max_steps: int | None, told: bool) -> str:
    """The loop's first line: where it reads checkpoints and what ends it."""
    if max_steps:
        until = f"until one at step {max_steps} (TrainSpec.max_steps) is evaluated"
    else:
        until = "with no end of its own (TrainSpec.max_steps is None)"
    if told:
        until += ", or the launcher says that training has ended"
    elif not max_steps:
        until += ": stop it when training is done"
    return f"evaluator: evaluating each new checkpoint in {model_dir} {until}"


def ended_line(max_steps: int | None, evaluated_step: int | None, model_dir: str) -> str:
    """The loop's last line when training ended with no checkpoint at ``max_steps``."""
    short = f" before step {max_steps} (TrainSpec.max_steps)" if max_steps else ""
    if evaluated_step is None:
        return (f"evaluator: training ended{short} with no checkpoint in {model_dir}; "
                "nothing to evaluate")
    return (f"evaluator: training ended{short}; evaluated its last checkpoint, step "
            f"{evaluated_step}")


def _announce(line: str) -> None:
    with _announce_lock:
        now = time.monotonic()
        if _announced["at"] is not None and now - _announced["at"] < _ANNOUNCE_EVERY_SECONDS:
            return
        _announced["at"] = now
    print(line, file=sys.stderr, flush=True)


class _FinalCheckpoint:
    """Whether the model dir holds a checkpoint at ``max_steps`` not evaluated yet."""

    def __init__(self, estimator: tf.estimator.Estimator, max_steps: int | None) -> None:
        self._estimator = estimator
        self.max_steps = max_steps
        self.evaluated_path = None
        self.evaluated_step = None
        self._steps: dict[str, int] = {}  # Checkpoint path -> its global step, read once each.

    def _step(self, path: str) -> int | None:
        if path not in self._steps:
            try:
                self._steps[path] = int(tf.train.load_variable(
                    path, tf.compat.v1.GraphKeys.GLOBAL_STEP))
            except (tf.errors.OpError, ValueError):  # Removed meanwhile (max_to_keep).
                return None
        return self._steps[path]

    def evaluated(self, eval_result: Any) -> None:
        if eval_result is not None and eval_result.status == _EvalStatus.EVALUATED:
            self.evaluated_path = eval_result.checkpoint_path
            self.evaluated_step = eval_result.metrics.get(tf.compat.v1.GraphKeys.GLOBAL_STEP)

    def evaluated_last(self) -> bool:
        return bool(self.max_steps and self.evaluated_step is not None
                    and self.evaluated_step >= self.max_steps)

    def training_over(self) -> bool:
        """True once the launcher said training ended and the newest checkpoint (if any)
        has been evaluated: no checkpoint will come to end the loop."""
        if not training_end.ended():
            return False
        path = self._estimator.latest_checkpoint()
        return not path or path == self.evaluated_path

    def due(self) -> bool:
        """True when the newest checkpoint is the final one and not evaluated yet: at
        ``max_steps``, or the last once training has ended."""
        path = self._estimator.latest_checkpoint()
        if not path or path == self.evaluated_path:
            return training_end.ended()  # Ended: nothing (newer) will come.
        if training_end.ended():
            return True
        if not self.max_steps:
            return False
        step = self._step(path)
        return step is not None and step >= self.max_steps

    def wait(self, seconds: float, field: str, value: float) -> None:
        """Sleeps ``seconds`` (for EvalSpec ``field`` of ``value``) unless the final
        checkpoint waits for evaluation first."""
        deadline = time.monotonic() + seconds
        announce = seconds > _ANNOUNCE_AFTER_SECONDS
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.due():
                return
            if announce:
                _announce(wait_line(remaining, field, value, self.max_steps,
                                    self.evaluated_step, training_end.told()))
            time.sleep(min(_POLL_SECONDS, remaining))


def _final_checkpoint(executor: Any) -> _FinalCheckpoint:
    """The executor's ``_FinalCheckpoint``, made on first use."""
    final = getattr(executor, "_estimator_dist_final", None)
    if final is None:
        final = _FinalCheckpoint(executor._estimator, executor._train_spec.max_steps)
        executor._estimator_dist_final = final
    return final


def _start_continuous_evaluation(self: Any) -> None:
    """TensorFlow's loop, its start delay a wait that the final checkpoint ends."""
    _assert_eval_spec(self._eval_spec)
    final = _final_checkpoint(self)
    print(start_line(self._estimator.model_dir, self._train_spec.max_steps,
                     training_end.told()), file=sys.stderr, flush=True)
    if self._eval_spec.start_delay_secs:
        final.wait(self._eval_spec.start_delay_secs, "start_delay_secs",
                   self._eval_spec.start_delay_secs)

    latest_eval_result = None
    evaluator = _Executor._Evaluator(self._estimator, self._eval_spec,
                                     self._train_spec.max_steps)
    should_early_stop = False
    while not should_early_stop:
        if latest_eval_result and latest_eval_result.status == _EvalStatus.EVALUATED:
            global_step = latest_eval_result.metrics.get(tf.compat.v1.GraphKeys.GLOBAL_STEP)
            if (global_step and self._train_spec.max_steps
                    and global_step >= self._train_spec.max_steps):
                tf.compat.v1.logging.info(
                    "Exiting evaluation, global_step=%s >= train max_steps=%s", global_step,
                    self._train_spec.max_steps)
                return
        if final.training_over():
            print(ended_line(self._train_spec.max_steps, final.evaluated_step,
                             self._estimator.model_dir), file=sys.stderr, flush=True)
            return
        latest_eval_result, should_early_stop = self._execute_evaluator_once(
            evaluator, self._continuous_eval_listener, self._eval_spec.throttle_secs)


def _execute_evaluator_once(self: Any, evaluator: Any, continuous_eval_listener: Any,
                            throttle_secs: float) -> tuple[Any, bool]:
    """TensorFlow's evaluation pass, its throttle a wait that the final checkpoint ends."""
    _assert_eval_spec(self._eval_spec)
    start = time.time()
    if not continuous_eval_listener.before_eval():
        tf.compat.v1.logging.info(
            "Exiting evaluation, as requested by _ContinuousEvalListener.before_eval.")
        return None, True
    eval_result, _ = evaluator.evaluate_and_export()
    if not self._continuous_eval_listener.after_eval(eval_result):
        tf.compat.v1.logging.info(
            "Exiting evaluation, as requested by _ContinuousEvalListener.after_eval.")
        return eval_result, True
    final = _final_checkpoint(self)
    final.evaluated(eval_result)
    if final.evaluated_last() or final.training_over():  # The loop ends: no wait.
        return eval_result, False
    difference = throttle_secs - (time.time() - start)
    if difference > 0:
        tf.compat.v1.logging.info("Waiting %f secs before starting next eval run.", difference)
        final.wait(difference, "throttle_secs", throttle_secs)
    elif throttle_secs == 0 and eval_result.status != _EvalStatus.EVALUATED:
        tf.compat.v1.logging.warning(
            "EvalSpec.throttle_secs is set as 0. This might overload the job before finding "
            "(next) new checkpoint. Please consider to increase it.")
    return eval_result, False


def install() -> None:
    """Ends the evaluator's waits at the final checkpoint (idempotent)."""
    _Executor._start_continuous_evaluation = _start_continuous_evaluation
    _Executor._execute_evaluator_once = _execute_evaluator_once
