"""Several training steps per ``Session.run`` off TPU (mend ``steps_per_run``): the train
path of ``estimator_dist.LoopEstimator``, the off-TPU ``iterations_per_loop``.

``apply(estimator)`` gives an Estimator a train graph that runs the model_fn
``estimator.steps_per_run`` times inside one ``tf.while_loop``, each iteration on the
next batch of the input and applying the optimizer, as TPUEstimator does with
``iterations_per_loop``. Hooks, the progress line and checkpoints see one
``Session.run`` per loop; the global step still advances by one per step.

TF 2.15 already has the pieces, used by Estimator only for TPU strategies (read in
``tensorflow_estimator/python/estimator/estimator.py``):
``strategy.extended.experimental_run_steps_on_iterator`` (implemented by
``OneDeviceStrategy`` and ``MirroredStrategy``, hence ``MultiWorkerMirroredStrategy``)
builds the loop; its trip count is the steps-per-run variable of
``get_or_create_steps_per_run_variable``, which a hook sets before each run. Without a
strategy the loop runs under ``OneDeviceStrategy`` on the first device.

Estimator's private train path (three methods) is replaced on the instance, once its
constructor has run: that constructor refuses a class that overrides Estimator's members
(TPUEstimator excepted by name), and deep copies of the Estimator keep the class.

Loop boundaries: each run takes at most ``steps_per_run`` steps and stops at
``max_steps`` (never past it) and at every multiple of ``save_checkpoints_steps``, so
checkpoints land on the requested steps. Summaries the model_fn writes in TRAIN are
those of a loop's last step. Training hooks the model_fn returns must not fetch tensors
of the step (they live inside the loop); the loss they see is the last step's.
"""
from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf
from tensorflow.python.training import basic_session_run_hooks
from tensorflow_estimator.python.estimator import estimator as estimator_lib
from tensorflow_estimator.python.estimator import util as estimator_util

from estimator_dist.mends import extended

v1 = tf.compat.v1
ModeKeys = tf.estimator.ModeKeys

_SUMMARIES = "summaries"
_LOSS = "loss"


def _loop_device() -> str:
    gpus = tf.config.list_logical_devices("GPU")
    return "/gpu:0" if gpus else "/cpu:0"


def _next_boundary(step: int, last_step: int | None, checkpoint_steps: int | None,
                   first_step: int) -> int | None:
    """The first step after ``step`` where a loop must end (None: no limit).

    Checkpoints are saved every ``checkpoint_steps`` counted from ``first_step``, the
    step the session started at (as ``CheckpointSaverHook`` counts them).
    """
    bounds = []
    if last_step is not None:
        bounds.append(last_step)
    if checkpoint_steps:
        bounds.append(first_step + ((step - first_step) // checkpoint_steps + 1) *
                      checkpoint_steps)
    return min(bounds) if bounds else None


class StepsPerRunHook(tf.estimator.SessionRunHook):
    """Sets each run's number of steps; stops at ``last_step`` like ``StopAtStepHook``.

    A run takes ``steps_per_run`` steps, fewer when ``last_step`` or the next checkpoint
    step (every ``checkpoint_steps`` from the session's first step) comes first.
    """

    def __init__(self, steps_per_run: int, *, num_steps: int | None = None,
                 last_step: int | None = None, checkpoint_steps: int | None = None) -> None:
        self._steps_per_run = steps_per_run
        self._num_steps = num_steps
        self._last_step = last_step
        self._checkpoint_steps = checkpoint_steps
        self._first_step: Any = None  # An int once the session starts.

    def begin(self) -> None:
        self._global_step = v1.train.get_global_step()
        self._variable = basic_session_run_hooks.get_or_create_steps_per_run_variable()

    def _load(self, session: tf.compat.v1.Session, step: int) -> None:
        boundary = _next_boundary(step, self._last_step, self._checkpoint_steps,
                                  self._first_step)
        steps = self._steps_per_run if boundary is None else min(boundary - step,
                                                                 self._steps_per_run)
        self._variable.load(steps, session=session)

    def after_create_session(self, session: tf.compat.v1.Session,
                             coord: tf.train.Coordinator) -> None:
        step = self._first_step = session.run(self._global_step)
        if self._num_steps is not None:
            self._last_step = step + self._num_steps
        self._load(session, step)

    def after_run(self, run_context: tf.estimator.SessionRunContext,
                  run_values: tf.estimator.SessionRunValues) -> None:
        step = run_context.session.run(self._global_step)
        if self._last_step is not None and step >= self._last_step:
            run_context.request_stop()
        else:
            self._load(run_context.session, step)


def _take_new_summaries(known: int) -> tf.Tensor | None:
    """Removes the summaries added since the collection held ``known`` and merges them."""
    collection = v1.get_collection_ref(v1.GraphKeys.SUMMARIES)
    new = collection[known:]
    del collection[known:]
    return v1.summary.merge(new) if new else None


class _LoopTrainPath(extended.Mixin):
    """Estimator's train path, ``self.steps_per_run`` steps per ``Session.run``."""

    def _convert_train_steps_to_hooks(self, steps: int | None,
                                      max_steps: int | None) -> list[StepsPerRunHook]:
        return [StepsPerRunHook(self.steps_per_run, num_steps=steps, last_step=max_steps,
                                checkpoint_steps=self._config.save_checkpoints_steps)]

    def _train_model(self, input_fn: Callable[..., Any], hooks: list[Any],
                     saving_listeners: list[Any]) -> Any:
        if self._train_distribution is not None:
            return super()._train_model(input_fn, hooks, saving_listeners)
        strategy = tf.distribute.OneDeviceStrategy(_loop_device())
        return self._actual_train_model_distributed(strategy, input_fn, hooks,
                                                    saving_listeners)

    def _actual_train_model_distributed(self, strategy: tf.distribute.Strategy,
                                        input_fn: Callable[..., Any], hooks: list[Any],
                                        saving_listeners: list[Any]) -> Any:
        worker_hooks = []
        with tf.Graph().as_default() as graph:
            steps_variable = basic_session_run_hooks.get_or_create_steps_per_run_variable()
            with strategy.scope(), strategy._scale_loss_for_estimator_enabled():
                v1.random.set_random_seed(self._config.tf_random_seed)
                iterator, input_hooks = self._get_iterator_from_input_fn(
                    input_fn, ModeKeys.TRAIN, strategy)
                worker_hooks.extend(input_hooks)
                global_step = self._create_and_assert_global_step(graph)
                v1.add_to_collection(estimator_lib.training_util.GLOBAL_STEP_READ_KEY,
                                     strategy.extended.read_var(global_step))
                spec = self._loop_spec(strategy, iterator, steps_variable)
                return self._train_with_estimator_spec(spec, worker_hooks, hooks,
                                                       global_step, saving_listeners)

    def _loop_spec(self, strategy: tf.distribute.Strategy, iterator: Any,
                   steps_variable: tf.Variable) -> tf.estimator.EstimatorSpec:
        """The EstimatorSpec of one run: ``steps_variable`` steps in a while loop."""
        empty_summary = v1.Summary().SerializeToString()
        outputs = {_LOSS: tf.constant(1e7), _SUMMARIES: tf.constant(empty_summary)}

        def step_fn(ctx: Any, inputs: Any) -> tf.Operation:
            features, labels = estimator_util.parse_iterator_result(inputs)
            known = len(v1.get_collection(v1.GraphKeys.SUMMARIES))
            spec = strategy.extended.call_for_each_replica(
                self._call_model_fn, args=(features, labels, ModeKeys.TRAIN, self.config))
            ctx.set_last_step_output(
                _LOSS, spec.loss,
                reduce_op=estimator_lib._get_loss_reduce_op_for_reporting())
            summaries = _take_new_summaries(known)
            ctx.set_last_step_output(
                _SUMMARIES, tf.constant(empty_summary) if summaries is None else summaries,
                reduce_op=None)
            ctx.set_non_tensor_output(name="estimator_spec", output=spec)
            return strategy.group(spec.train_op)

        ctx = strategy.extended.experimental_run_steps_on_iterator(
            step_fn, iterator, iterations=steps_variable, initial_loop_values=outputs)
        grouped = ctx.non_tensor_outputs["estimator_spec"]
        v1.add_to_collection(v1.GraphKeys.SUMMARIES, ctx.last_step_outputs[_SUMMARIES])
        first = strategy.experimental_local_results
        return tf.estimator.EstimatorSpec(
            mode=grouped.mode, loss=ctx.last_step_outputs[_LOSS],
            train_op=strategy.group(ctx.run_op),
            training_hooks=[first(hook)[0] for hook in grouped.training_hooks],
            training_chief_hooks=[first(hook)[0] for hook in grouped.training_chief_hooks],
            scaffold=estimator_lib._combine_distributed_scaffold(grouped.scaffold, strategy))


def apply(estimator: tf.estimator.Estimator) -> None:
    """Makes ``estimator`` (an Estimator with a ``steps_per_run`` property) train that many
    steps per ``Session.run``; call it once its constructor has run."""
    extended.mix_into(estimator, _LoopTrainPath, name=type(estimator).__name__)
