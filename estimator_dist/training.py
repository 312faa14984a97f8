"""One training job: RunSettings -> RunConfig -> Estimator -> train, evaluate, export.

Every check on the settings, the data and the model dir runs before the model dir is
written to, so a refused run leaves an existing model dir as it was.
"""
import dataclasses
import datetime
import os
import sys
import tempfile
import time

import tensorflow as tf

from estimator_dist import cluster, events, export, hooks, run_record
from estimator_dist.config import CLUSTER_STRATEGIES, RunSettings
from estimator_dist.errors import UsageError
from estimator_dist.estimator import make_estimator, tpu_input_fn
from estimator_dist.models import MODELS
from estimator_dist.peer_failure import PeerFailureHook
from estimator_dist.run_config import make_run_config
from input_fns import from_arrays, from_files

_EVAL_THROTTLE_SECONDS = 1
_SUMMARY_POINTS = 50


@dataclasses.dataclass(frozen=True)
class Result:
    """What a finished run reports."""

    model_dir: str
    metrics: dict  # Empty on a worker that neither evaluates nor finds eval events.
    export_path: str  # None on a worker that does not export, or with export off.
    seconds: float  # Wall time of the whole run.
    throughput: hooks.Throughput  # None when training had no step left to run.
    max_steps: int
    task_type: str = None  # The TF_CONFIG task type of a cluster strategy, else None.


def default_model_dir(model, now=None):
    stamp = (now or datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{model}-{stamp}")


def check_params(model, params):
    """Builds ``model`` once in a scratch graph, so that params its model_fn refuses fail
    before the model dir is touched.

    Raises:
      UsageError: the model_fn's own message about the params.
    """
    data = model.train_data()
    with tf.Graph().as_default():
        tf.compat.v1.train.create_global_step()
        features = {k: tf.constant(v[:1]) for k, v in data.features.items()}
        try:
            model.model_fn(features, tf.constant(data.labels[:1]), tf.estimator.ModeKeys.TRAIN,
                           dict(params))
        except ValueError as error:
            raise UsageError(f"params must suit model_fn {model.model_fn.__name__}: "
                             f"{error}") from None


def _summary_steps(max_steps):
    """Steps between summaries: about ``_SUMMARY_POINTS`` per run, at most 100 apart."""
    return max(1, min(100, max_steps // _SUMMARY_POINTS))


def _run_config(settings):
    kwargs = {"tf_random_seed": settings.seed, "log_step_count_steps": 100,
              "save_summary_steps": _summary_steps(settings.max_steps)}
    if settings.save_checkpoints_steps:
        kwargs["save_checkpoints_steps"] = settings.save_checkpoints_steps
    if settings.strategy == "tpu":
        kwargs.update(tpu=settings.tpu_name, use_tpu=not settings.tpu_validate)
    if settings.collective_timeout:
        kwargs["collective_timeout"] = settings.collective_timeout
    return make_run_config(settings.strategy, num_replicas=settings.num_replicas,
                           model_dir=settings.model_dir, **kwargs)


def _num_replicas(settings, config):
    if settings.strategy == "multi_worker":
        return cluster.tf_config_from_env().num_workers
    if settings.strategy == "parameter_server":
        return 1  # Workers step asynchronously, each on a whole batch.
    if settings.strategy == "tpu":
        return config.tpu_config.num_shards or 1
    return config.train_distribute.num_replicas_in_sync if config.train_distribute else 1


def _check_batch_size(batch_size, replicas):
    if batch_size % replicas:
        raise UsageError(
            f"batch_size must be divisible by the {replicas} replicas (it is the global "
            f"batch, split evenly across them). Received: batch_size={batch_size}")


def _prepare_model_dir(model_dir):
    """Creates ``model_dir`` if needed and proves it writable, before anything is written."""
    try:
        os.makedirs(model_dir, exist_ok=True)
        with tempfile.TemporaryFile(dir=model_dir):
            pass
    except OSError as error:
        raise UsageError(f"model_dir must be a writable directory. Received: "
                         f"model_dir={model_dir!r} ({error.strerror})") from None


@dataclasses.dataclass(frozen=True)
class _Data:
    """The run's input_fns, the shape of one example's ``x``, and what run.json records."""

    train_fn: object
    eval_fn: object
    x_shape: list
    spec: dict


def _builtin_data(model, settings):
    train, evaluation = model.train_data(), model.eval_data()
    train_fn = from_arrays(train.features, train.labels, batch_size=settings.batch_size,
                           seed=settings.seed)
    eval_fn = from_arrays(evaluation.features, evaluation.labels,
                          batch_size=settings.batch_size, shuffle=False, num_epochs=1)
    return _Data(train_fn, eval_fn, list(train.features["x"].shape[1:]),
                 {"train": "built-in", "eval": "built-in"})


def _files_input_fn(name, files, model, **options):
    try:
        return from_files(files, x_shape=model.x_shape, **options)
    except (OSError, ValueError) as error:
        raise UsageError(f"{name} must be CSV or TFRecord files in the layout of "
                         f"docs/input.md: {error}") from None


def _file_data(model, settings):
    eval_files = settings.eval_data or settings.train_data
    train_fn = _files_input_fn("train_data", settings.train_data, model,
                               batch_size=settings.batch_size, seed=settings.seed)
    eval_fn = _files_input_fn("eval_data", eval_files, model, batch_size=settings.batch_size,
                              shuffle=False, num_epochs=1)
    x_shape = train_fn().element_spec[0]["x"].shape[1:].as_list()
    return _Data(train_fn, eval_fn, x_shape, {"train": settings.train_data, "eval": eval_files})


def _data(model, settings):
    """The run's data, checked (files exist and fit the model) before anything is written."""
    data = _file_data(model, settings) if settings.train_data else _builtin_data(model, settings)
    if settings.strategy != "tpu":
        return data
    return dataclasses.replace(data, train_fn=tpu_input_fn(data.train_fn),
                               eval_fn=tpu_input_fn(data.eval_fn))


def _is_chief(settings):
    if settings.strategy not in CLUSTER_STRATEGIES:
        return True
    return cluster.tf_config_from_env().is_chief


def _task_type(settings):
    if settings.strategy not in CLUSTER_STRATEGIES:
        return None
    return cluster.tf_config_from_env().task_type


def _to_python(metrics):
    return {k: v.item() if hasattr(v, "item") else v for k, v in metrics.items()}


def _nan_error(step):
    return UsageError(
        f"loss must stay finite; training stopped at step {step} and the checkpoints from "
        "before it are kept (try a smaller learning rate, e.g. --param learning_rate=0.001). "
        "Received: loss=nan")


def _checkpoint_step(model_dir):
    latest = tf.train.latest_checkpoint(model_dir)
    return int(latest.rsplit("-", 1)[1]) if latest else 0


def _announce(stream, settings, replicas):
    start = _checkpoint_step(settings.model_dir)
    if start >= settings.max_steps:
        print(f"{settings.model} in {settings.model_dir} is already at step {start} of "
              f"{settings.max_steps}: nothing to train", file=stream, flush=True)
        return
    verb = f"Resuming {settings.model} at step {start}" if start else f"Training {settings.model}"
    if settings.strategy == "parameter_server":
        batch = f"batch {settings.batch_size} per worker step, asynchronous"
    else:
        batch = (f"global batch {settings.batch_size} over {replicas} "
                 f"replica{'s' if replicas > 1 else ''}")
    print(f"{verb} to step {settings.max_steps}: {batch} (strategy {settings.strategy}), "
          f"model dir {settings.model_dir}", file=stream, flush=True)


def _eval_stops(start, max_steps, every):
    """The global steps to pause training at and evaluate: each checkpoint, and the end."""
    if not every:
        return [max_steps]
    return list(range((start // every + 1) * every, max_steps, every)) + [max_steps]


def _final_eval(model_dir, max_steps):
    """The eval metrics at ``max_steps`` written by the cluster's evaluator, or {} while
    the evaluator has not reached it (its own summary reports them then)."""
    metrics = events.last_values(os.path.join(model_dir, "eval"))
    return metrics if metrics.get("global_step", 0) >= max_steps else {}


def _train(estimator, settings, train_fn, eval_fn, progress):
    """Trains and evaluates; returns the last metrics this process saw."""
    if settings.strategy in CLUSTER_STRATEGIES:
        # A lost peer is fatal to collectives; parameter servers recover by design.
        peer = [PeerFailureHook()] if settings.strategy == "multi_worker" else []
        tf.estimator.train_and_evaluate(
            estimator,
            tf.estimator.TrainSpec(train_fn, max_steps=settings.max_steps,
                                   hooks=[progress] + peer),
            tf.estimator.EvalSpec(eval_fn, steps=settings.eval_steps,
                                  throttle_secs=_EVAL_THROTTLE_SECONDS, start_delay_secs=0))
        return _final_eval(estimator.model_dir, settings.max_steps)
    metrics = {}
    for stop in _eval_stops(_checkpoint_step(estimator.model_dir), settings.max_steps,
                            settings.save_checkpoints_steps):
        estimator.train(train_fn, max_steps=stop, hooks=[progress],
                        saving_listeners=[hooks.FiniteWeightsListener()])
        metrics = _to_python(estimator.evaluate(eval_fn, steps=settings.eval_steps))
    return metrics


@dataclasses.dataclass(frozen=True)
class _Plan:
    """A run whose settings, params, model dir and replicas all passed their checks."""

    model: object  # A BuiltinModel.
    settings: RunSettings  # Resolved: model_dir, params, batch_size and max_steps set.
    config: tf.estimator.RunConfig
    replicas: int
    data: _Data


def _plan(settings):
    """Resolves and checks ``settings``; reads the model dir but writes nothing."""
    model = MODELS[settings.model]
    resolved = settings.replace(
        model_dir=settings.model_dir or default_model_dir(settings.model),
        params={**model.params, **settings.params},
        batch_size=settings.batch_size or model.batch_size,
        max_steps=settings.max_steps or model.max_steps)
    run_record.check_resume(resolved.model_dir, resolved.to_dict())
    # The RunConfig sets up the CPU replicas, which must come before any TF op runs.
    config = _run_config(resolved)
    check_params(model, resolved.params)
    replicas = _num_replicas(resolved, config)
    _check_batch_size(resolved.batch_size, replicas)
    return _Plan(model, resolved, config, replicas, _data(model, resolved))


def run(settings, *, stream=None):
    """Trains, evaluates and exports one model; returns a ``Result``.

    Progress goes to ``stream`` (default: stdout), on the chief only.
    """
    start = time.monotonic()
    stream = stream or sys.stdout
    plan = _plan(settings)
    model, settings = plan.model, plan.settings
    _prepare_model_dir(settings.model_dir)
    chief = _is_chief(settings)
    if chief:
        run_record.write(settings.model_dir,
                         run_record.make_record(settings.to_dict(), plan.data.spec))
        _announce(stream, settings, plan.replicas)
    estimator = make_estimator(model.model_fn, plan.config, settings.params,
                               batch_size=settings.batch_size)
    progress = hooks.ProgressHook(
        settings.max_steps, settings.batch_size,
        mode=hooks.display_mode(stream) if chief else None, stream=stream,
        summary_dir=settings.model_dir if chief else None,
        summary_steps=plan.config.save_summary_steps,
        learning_rate=settings.params.get("learning_rate"))
    try:
        metrics = _train(estimator, settings, plan.data.train_fn, plan.data.eval_fn, progress)
    except tf.compat.v1.train.NanLossDuringTrainingError:
        raise _nan_error(progress.step) from None
    finally:
        progress.close()
    export_path = None
    if chief and settings.export:
        export_path = export.export_saved_model(
            estimator, settings.export_dir or os.path.join(settings.model_dir, "export"),
            model.serving_shapes(settings.params, plan.data.x_shape))
    return Result(model_dir=settings.model_dir, metrics=metrics, export_path=export_path,
                  seconds=time.monotonic() - start, throughput=progress.throughput,
                  max_steps=settings.max_steps, task_type=_task_type(settings))
