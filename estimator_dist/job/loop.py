"""Training and evaluation of one task: under a cluster strategy TensorFlow's
``train_and_evaluate``; otherwise ``train`` to each checkpoint step and the end, with an
evaluation after each. The hooks and checkpoint saver of every ``train`` call."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Mapping

import tensorflow as tf

from estimator_dist import checkpoint_step
from estimator_dist.hooks.preemption import PreemptionHook
from estimator_dist.job import checkpoint_saver, events, progress as progress_lib

if TYPE_CHECKING:
    from estimator_dist.job.data import Data
    from estimator_dist.job.settings import RunSettings
    from estimator_dist.plan import Plan

_EVAL_THROTTLE_SECONDS = 1


def _to_python(metrics: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v.item() if hasattr(v, "item") else v for k, v in metrics.items()}


def newest_step(model_dir: str) -> int:
    """The newest checkpoint's step in ``model_dir`` (0 without one)."""
    step = checkpoint_step.newest_step(model_dir)
    if step is None:  # A bucket path, or a state file only TensorFlow reads.
        step = checkpoint_step.step_of(tf.train.latest_checkpoint(model_dir))
    return step


def _eval_stops(start: int, max_steps: int, every: int | None) -> list[int]:
    """The global steps to pause training at and evaluate: each checkpoint, and the end."""
    if not every:
        return [max_steps]
    return list(range((start // every + 1) * every, max_steps, every)) + [max_steps]


def _final_eval(model_dir: str, max_steps: int) -> dict[str, float]:
    """The eval metrics at ``max_steps`` written by the cluster's evaluator, or {} while
    the evaluator has not reached it (its own summary reports them then)."""
    metrics = events.last_values(os.path.join(model_dir, "eval"))
    return metrics if metrics.get("global_step", 0) >= max_steps else {}


def train(estimator: tf.estimator.Estimator, settings: RunSettings, strategy: Plan, data: Data,
          progress: progress_lib.ProgressHook,
          on_stopped: Callable[..., Any] | None) -> dict[str, Any]:
    """Trains and evaluates; returns the last metrics this process saw."""
    train_fn, eval_fn = data.train_fn, data.eval_fn
    # The strategy's hooks first: under collectives a re-created session ends the run with
    # one line (PeerLostError) before the progress hook would report the recovery.
    train_hooks = strategy.train_hooks() + [progress]
    settle = _settling(strategy, estimator.model_dir, train_hooks, on_stopped)
    if strategy.kind.cluster:
        tf.estimator.train_and_evaluate(
            estimator,
            tf.estimator.TrainSpec(train_fn, max_steps=settings.max_steps,
                                   hooks=train_hooks + settle),
            tf.estimator.EvalSpec(eval_fn, steps=settings.eval_steps,
                                  throttle_secs=_EVAL_THROTTLE_SECONDS, start_delay_secs=0))
        return _final_eval(estimator.model_dir, settings.max_steps)
    metrics = {}
    stops = _eval_stops(newest_step(estimator.model_dir), settings.max_steps,
                        settings.save_checkpoints_steps)
    for stop in stops:
        estimator.train(train_fn, max_steps=stop,
                        **_saving(estimator, strategy, train_hooks, settle))
        metrics = _to_python(estimator.evaluate(eval_fn, steps=settings.eval_steps))
    return metrics


def _settling(strategy: Plan, model_dir: str, train_hooks: list[Any],
              on_stopped: Callable[..., Any] | None) -> list[progress_lib.SettleOnStopHook]:
    """The hook, last of a ``train`` call's, that tells ``on_stopped`` of a stop on a
    signal (``progress_lib.SettleOnStopHook``), in a list; none without ``on_stopped``."""
    preemption = next((h for h in train_hooks if isinstance(h, PreemptionHook)), None)
    if on_stopped is None or preemption is None:
        return []
    step = (lambda: newest_step(model_dir)) if strategy.is_chief else None
    return [progress_lib.SettleOnStopHook(preemption, on_stopped, checkpoint_step=step)]


def _saving(estimator: tf.estimator.Estimator, strategy: Plan, train_hooks: list[Any],
            last_hooks: list[Any]) -> dict[str, list[Any]]:
    """The hooks and saving listeners of one ``train`` call.

    Its checkpoint saver leaves the graph out of the events file, which gets it once, when
    the process opens its writer. TPUEstimator adds a saver of its own whatever the hooks,
    so under "tpu" Estimator's saver is kept (and writes the graph at every call).
    """
    listeners = [progress_lib.FiniteWeightsListener()]
    if strategy.kind.tpu:
        return {"hooks": train_hooks + last_hooks, "saving_listeners": listeners}
    saver = checkpoint_saver.CheckpointSaverHook(estimator.config, listeners=listeners)
    return {"hooks": train_hooks + [saver] + last_hooks}
