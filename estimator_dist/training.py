"""One training job: RunSettings -> RunConfig -> Estimator -> train, evaluate, export."""
import dataclasses
import datetime
import json
import os
import time

import tensorflow as tf

from estimator_dist import cluster, export
from estimator_dist.estimator import make_estimator, tpu_input_fn
from estimator_dist.models import MODELS
from estimator_dist.run_config import make_run_config
from input_fns import from_arrays

_EVAL_THROTTLE_SECONDS = 1


@dataclasses.dataclass(frozen=True)
class Result:
    """What a finished run reports."""

    model_dir: str
    metrics: dict  # Empty on a worker that does not evaluate.
    export_path: str  # None on a worker that does not export.
    seconds: float
    examples_per_second: float


def default_model_dir(model, now=None):
    stamp = (now or datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{model}-{stamp}")


def _run_config(settings, model_dir):
    kwargs = {"tf_random_seed": settings.seed, "log_step_count_steps": 100}
    if settings.save_checkpoints_steps:
        kwargs["save_checkpoints_steps"] = settings.save_checkpoints_steps
    if settings.strategy == "tpu":
        kwargs.update(tpu=settings.tpu_name, use_tpu=not settings.tpu_validate)
    if settings.collective_timeout:
        kwargs["collective_timeout"] = settings.collective_timeout
    return make_run_config(settings.strategy, num_replicas=settings.num_replicas,
                           model_dir=model_dir, **kwargs)


def _input_fns(model, settings, batch_size, on_tpu):
    train, evaluation = model.train_data(), model.eval_data()
    train_fn = from_arrays(train.features, train.labels, batch_size=batch_size,
                           seed=settings.seed)
    eval_fn = from_arrays(evaluation.features, evaluation.labels, batch_size=batch_size,
                          shuffle=False, num_epochs=1)
    if on_tpu:
        return tpu_input_fn(train_fn), tpu_input_fn(eval_fn)
    return train_fn, eval_fn


def _is_chief(settings):
    if settings.strategy != "multi_worker":
        return True
    return cluster.tf_config_from_env().is_chief


def _to_python(metrics):
    return {k: v.item() if hasattr(v, "item") else v for k, v in metrics.items()}


def run(settings):
    """Trains, evaluates and exports one model; returns a ``Result``."""
    model = MODELS[settings.model]
    model_dir = settings.model_dir or default_model_dir(settings.model)
    batch_size = settings.batch_size or model.batch_size
    max_steps = settings.max_steps or model.max_steps
    config = _run_config(settings, model_dir)
    estimator = make_estimator(model.model_fn, config, dict(model.params), batch_size=batch_size)
    train_fn, eval_fn = _input_fns(model, settings, batch_size, settings.strategy == "tpu")
    start = time.monotonic()
    if settings.strategy == "multi_worker":
        tf.estimator.train_and_evaluate(
            estimator, tf.estimator.TrainSpec(train_fn, max_steps=max_steps),
            tf.estimator.EvalSpec(eval_fn, steps=settings.eval_steps,
                                  throttle_secs=_EVAL_THROTTLE_SECONDS, start_delay_secs=0))
        metrics = {}
    else:
        estimator.train(train_fn, max_steps=max_steps)
        metrics = _to_python(estimator.evaluate(eval_fn, steps=settings.eval_steps))
    seconds = time.monotonic() - start
    export_path = None
    if _is_chief(settings):
        export_path = export.export_saved_model(
            estimator, os.path.join(model_dir, "export"), model.serving_shapes(model.params))
    return Result(model_dir=model_dir, metrics=metrics, export_path=export_path,
                  seconds=seconds, examples_per_second=max_steps * batch_size / seconds)


def result_json(result):
    return json.dumps(dataclasses.asdict(result), sort_keys=True)
