"""One training job: RunSettings -> RunConfig -> Estimator -> train, evaluate, export.

Every check on the settings, the data and the model dir runs before the model dir is
written to, so a refused run leaves an existing model dir as it was.
"""
import dataclasses
import datetime
import errno
import os
import re
import shutil
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

from estimator_dist import (checkpoint_step, export, models, plan as plan_lib, precision,
                            run_record)
from estimator_dist.job import (checkpoint_saver, checkpoints, events, model_dir_lock, model_size,
                                progress as progress_lib)
from estimator_dist.job.settings import RunSettings
from estimator_dist.distribute import strategy_table
from estimator_dist.errors import EnvironmentFault, UsageError, check_writable_path, os_fault
from estimator_dist.estimator import make_estimator
from estimator_dist.hooks.preemption import PreemptionHook
from input_fns import check_files, from_arrays, from_files
from input_fns.checks import DEFAULT_LIMIT

_EVAL_THROTTLE_SECONDS = 1
_SUMMARY_POINTS = 50
# Training steps per Session.run when the flag is not given (see docs/benchmarks.md).
DEFAULT_STEPS_PER_RUN = 20


@dataclasses.dataclass(frozen=True)
class Result:
    """What a finished run reports."""

    model_dir: str
    metrics: dict  # Empty on a worker that neither evaluates nor finds eval events.
    export_path: str  # None on a worker that does not export, or with export off.
    seconds: float  # Wall time of the whole run.
    throughput: progress_lib.Throughput  # None when training had no step left to run.
    max_steps: int
    task_type: str = None  # The TF_CONFIG task type of a cluster strategy, else None.


def default_model_dir(model, now=None):
    stamp = (now or datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{model}-{stamp}")


def _variable_shapes(model, params, features, labels):
    """Builds ``model``'s TRAIN graph in a scratch graph; returns variable name -> shape."""
    with tf.Graph().as_default():
        tf.compat.v1.train.create_global_step()
        model.model_fn({k: tf.constant(v) for k, v in features.items()}, tf.constant(labels),
                       tf.estimator.ModeKeys.TRAIN, dict(params))
        return {v.op.name: v.shape.as_list() for v in tf.compat.v1.global_variables()}


def check_params(model, params):
    """Builds ``model`` once in a scratch graph, so that params its model_fn refuses fail
    before the model dir is touched.

    Raises:
      UsageError: the model_fn's own message about the params.
    """
    data = model.train_data()
    try:
        _variable_shapes(model, params, {k: v[:1] for k, v in data.features.items()},
                         data.labels[:1])
    except ValueError as error:
        raise UsageError(f"params must suit model_fn {model.model_fn.__name__}: "
                         f"{error}") from None


def _check_fits_checkpoint(model, settings, x_shape, checkpoint):
    """Refuses data whose ``x`` would build variables of other shapes than ``checkpoint``'s
    (Estimator would fail on restore, after the model dir was written)."""
    built = _variable_shapes(model, settings.params, {"x": np.zeros([1, *x_shape], np.float32)},
                             np.zeros([1], np.int64))
    for name, shape in tf.train.list_variables(checkpoint):
        if name in built and built[name] != shape:
            source = "train_data" if settings.train_data else "the built-in data"
            raise UsageError(
                f"{source} must give x the shape the checkpoint was trained on; resume with "
                f"the recorded data or use a new --model-dir. Received: x of shape {x_shape} "
                f"(variable {name} is {shape} in {os.path.basename(checkpoint)}, "
                f"{built[name]} with this data)")


def _summary_steps(max_steps):
    """Steps between summaries: about ``_SUMMARY_POINTS`` per run, at most 100 apart."""
    return max(1, min(100, max_steps // _SUMMARY_POINTS))


def _steps_per_run(settings, kind):
    """The flag's value; else, where the loop is supported, ``DEFAULT_STEPS_PER_RUN`` or
    the steps between two progress lines if fewer; else None (TPU: the config's
    ``iterations_per_loop``; asynchronous workers: one step)."""
    if not kind.synchronous and (settings.steps_per_run or 1) > 1:
        raise UsageError(f"steps_per_run must be 1 under strategy {kind.name!r} (its "
                         "workers step asynchronously, one step per run). Received: "
                         f"steps_per_run={settings.steps_per_run}")
    if settings.steps_per_run is not None or not kind.loops:
        return settings.steps_per_run
    return max(1, min(DEFAULT_STEPS_PER_RUN, settings.max_steps // progress_lib.PLAIN_LINES))


def _strategy_plan(settings, kind, task):
    """The run's ``plan.Plan`` for ``kind`` (the ``StrategyKind`` of the settings'
    strategy): its RunConfig (which sets up CPU replicas, so this comes before any TF op
    runs), replicas and role."""
    kwargs = {"tf_random_seed": settings.seed, "log_step_count_steps": 100,
              "save_summary_steps": _summary_steps(settings.max_steps)}
    if settings.save_checkpoints_steps:
        kwargs["save_checkpoints_steps"] = settings.save_checkpoints_steps
    if kind.tpu:
        kwargs.update(tpu=settings.tpu_name, use_tpu=not settings.tpu_validate)
    if settings.collective_timeout:
        kwargs["collective_timeout"] = settings.collective_timeout
    if settings.rendezvous_timeout:
        kwargs["rendezvous_timeout"] = settings.rendezvous_timeout
    kwargs["steps_per_run"] = _steps_per_run(settings, kind)
    kwargs["mixed_precision"] = settings.mixed_precision
    return plan_lib.resolve(kind, task, num_replicas=settings.num_replicas,
                            model_dir=settings.model_dir, **kwargs)


def _path_fault(path):
    """Why ``path`` (or a directory above it) cannot be a directory, when a symlink is the
    cause, in words; else None. ``makedirs`` reports a symlink loop as "File exists"."""
    while path and path != os.path.dirname(path):
        if os.path.islink(path) and not os.path.exists(path):
            try:
                os.stat(path)
            except OSError as error:
                kind = "a symlink loop" if error.errno == errno.ELOOP else "a dangling symlink"
                return f"{path!r} is {kind}: {error.strerror}"
        path = os.path.dirname(path)
    return None


def _prepare_model_dir(model_dir):
    """Creates ``model_dir`` if needed and proves it writable, before anything is written."""
    try:
        os.makedirs(model_dir, exist_ok=True)
        with tempfile.TemporaryFile(dir=model_dir):
            pass
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise os_fault("model_dir", error, model_dir) from None
        raise UsageError(f"model_dir must be a writable directory. Received: "
                         f"model_dir={model_dir!r} "
                         f"({_path_fault(model_dir) or error.strerror})") from None


@dataclasses.dataclass(frozen=True)
class _Data:
    """The run's input_fns, the shape of one example's ``x``, and what run.json records."""

    train_fn: object
    eval_fn: object
    x_shape: list
    spec: dict


def _check_eval_examples(count, batch_size, where):
    """Refuses an eval set smaller than one batch: evaluation would see no example (the last
    partial batch is dropped) and report zeros."""
    if count < batch_size:
        raise UsageError(f"eval data must hold at least one batch ({batch_size} examples), or "
                         f"evaluation sees none. Received: {count} examples in {where}")


def _builtin_data(model, settings):
    train, evaluation = model.train_data(), model.eval_data()
    _check_eval_examples(len(evaluation.labels), settings.batch_size, "the built-in eval data")
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


def _checked_sample(name, files, settings):
    """A first pass over the files' first records (``input_fns.check_files``)."""
    try:
        sample = check_files(files, num_classes=settings.params.get("num_classes"),
                             limit=max(DEFAULT_LIMIT, settings.batch_size))
    except (OSError, ValueError) as error:  # UnicodeDecodeError is a ValueError.
        raise UsageError(f"{name} {error}") from None
    if not sample.records:
        raise UsageError(f"{name} must hold records. Received: no records in {files}")
    return sample


def _check_samples(settings, eval_files):
    train = _checked_sample("train_data", settings.train_data, settings)
    if eval_files is settings.train_data:
        evaluation = train
    else:
        evaluation = _checked_sample("eval_data", eval_files, settings)
        if evaluation.x_size != train.x_size:
            raise UsageError(
                f"eval_data must have the {train.x_size} values of x per record that "
                f"train_data has. Received: {evaluation.x_size} in {eval_files}")
    if evaluation.complete:
        _check_eval_examples(evaluation.records, settings.batch_size, eval_files)


def _file_data(model, settings):
    eval_files = settings.eval_data or settings.train_data
    train_fn = _files_input_fn("train_data", settings.train_data, model,
                               batch_size=settings.batch_size, seed=settings.seed)
    eval_fn = _files_input_fn("eval_data", eval_files, model, batch_size=settings.batch_size,
                              shuffle=False, num_epochs=1)
    _check_samples(settings, eval_files)
    x_shape = train_fn().element_spec[0]["x"].shape[1:].as_list()
    return _Data(train_fn, eval_fn, x_shape, {"train": settings.train_data, "eval": eval_files})


def _data(model, settings, strategy):
    """The run's data, checked (files exist and fit the model) before anything is written,
    with input_fns as ``strategy`` (a ``plan.Plan``) calls them."""
    data = _file_data(model, settings) if settings.train_data else _builtin_data(model, settings)
    return dataclasses.replace(data, train_fn=strategy.adapt_input(data.train_fn),
                               eval_fn=strategy.adapt_input(data.eval_fn))


def _check_export_dir(settings):
    """An ``export_dir`` must be a directory that exists or can be made, checked before
    training (the default, MODEL_DIR/export, goes with the model dir's own check)."""
    if settings.export and settings.export_dir:
        check_writable_path("export_dir", settings.export_dir, is_dir=True)


def _check_no_stray_cluster(settings, kind):
    """A TF_CONFIG makes Estimator treat even a one-process run as a cluster task."""
    if not (kind.cluster or kind.tpu) and os.environ.get("TF_CONFIG"):
        raise UsageError(
            f"TF_CONFIG applies to strategies {', '.join(strategy_table.CLUSTER_NAMES)} only; "
            "unset it, or pass one of them. Received: "
            f"strategy={settings.strategy!r} with TF_CONFIG set")


def _resume_point(settings, task):
    """The checkpoint a resume restores; a fallback past damage runs in one process only
    (the advice names --max-steps 1 at step 0, as --max-steps 0 is refused).

    In a cluster (``task`` set) only the chief inspects the checkpoints (the others would
    race its saves).
    """
    if task is not None and not task.is_chief:
        return checkpoints.Resume()
    resume = checkpoints.inspect(settings.model_dir)
    if resume.needs_fallback and task is not None:
        raise UsageError(
            f"model_dir must have an intact newest checkpoint to resume under strategy "
            f"{settings.strategy!r}; run once, without TF_CONFIG, with --strategy default "
            f"--max-steps {max(resume.step, 1)} --no-export to fall back. "
            f"Received: {checkpoints.describe(resume)}")
    return resume


def _to_python(metrics):
    return {k: v.item() if hasattr(v, "item") else v for k, v in metrics.items()}


def _nan_error(step, settings):
    data = (" or check the data past the first records checked for NaN or Inf"
            if settings.train_data else "")
    return UsageError(
        f"loss must stay finite; training stopped at step {step} and the checkpoints from "
        "before it are kept (try a smaller learning rate, e.g. --param learning_rate=0.001"
        f"{data}). Received: loss=nan")


def _checkpoint_step(model_dir):
    step = checkpoint_step.newest_step(model_dir)
    if step is None:  # A bucket path, or a state file only TensorFlow reads.
        step = checkpoint_step.step_of(tf.train.latest_checkpoint(model_dir))
    return step


def _announce(stream, settings, strategy):
    start = _checkpoint_step(settings.model_dir)
    if start >= settings.max_steps:
        print(f"{settings.model} in {settings.model_dir} is already at step {start} of "
              f"{settings.max_steps}: nothing to train", file=stream, flush=True)
        return
    verb = f"Resuming {settings.model} at step {start}" if start else f"Training {settings.model}"
    batch = strategy.describe_batch(settings.batch_size)
    print(f"{verb} to step {settings.max_steps}: {batch} (strategy {settings.strategy}), "
          f"{precision.describe(settings.mixed_precision)}, model dir {settings.model_dir}",
          file=stream, flush=True)


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


def _train(estimator, settings, strategy, data, progress, on_stopped):
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
    stops = _eval_stops(_checkpoint_step(estimator.model_dir), settings.max_steps,
                        settings.save_checkpoints_steps)
    for stop in stops:
        estimator.train(train_fn, max_steps=stop,
                        **_saving(estimator, strategy, train_hooks, settle))
        metrics = _to_python(estimator.evaluate(eval_fn, steps=settings.eval_steps))
    return metrics


def _settling(strategy, model_dir, train_hooks, on_stopped):
    """The hook, last of a ``train`` call's, that tells ``on_stopped`` of a stop on a
    signal (``progress_lib.SettleOnStopHook``), in a list; none without ``on_stopped``."""
    preemption = next((h for h in train_hooks if isinstance(h, PreemptionHook)), None)
    if on_stopped is None or preemption is None:
        return []
    step = (lambda: _checkpoint_step(model_dir)) if strategy.is_chief else None
    return [progress_lib.SettleOnStopHook(preemption, on_stopped, checkpoint_step=step)]


def _saving(estimator, strategy, train_hooks, last_hooks):
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


@dataclasses.dataclass(frozen=True)
class _Run:
    """A run whose settings, params, model dir and strategy all passed their checks."""

    model: object  # A BuiltinModel.
    settings: RunSettings  # Resolved: model_dir, params, batch_size and max_steps set.
    strategy: plan_lib.Plan
    data: _Data
    resume: checkpoints.Resume


def _prepare(settings, record, *, check_lock=False):
    """Resolves and checks ``settings``; reads the model dir but writes nothing.

    ``check_lock``: refuse a model dir that a live run holds (``model_dir_lock``), first,
    as its files may change under the other checks.
    """
    model, kind = models.MODELS[settings.model], settings.kind
    resolved = settings.with_model_defaults(
        model_dir=settings.model_dir or default_model_dir(settings.model))
    if record is None:
        record = run_record.load(resolved.model_dir)
    run_record.check_resume(resolved.model_dir, resolved, record)
    _check_no_stray_cluster(resolved, kind)
    task = plan_lib.task_of(kind)
    if check_lock and (task is None or task.is_chief):
        model_dir_lock.check_free(resolved.model_dir)
    resume = _resume_point(resolved, task)  # Reads files only: no TF op runs.
    strategy = _strategy_plan(resolved, kind, task)
    # The built-in data's width of x stands in for files' (read later): the bulk of a
    # model too large lies in its layers and classes.
    model_size.check(model.name, resolved.params,
                     int(model.train_data().features["x"].shape[-1]))
    check_params(model, resolved.params)
    strategy.check_batch_size(resolved.batch_size)
    _check_export_dir(resolved)
    data = _data(model, resolved, strategy)
    if resume.path:
        _check_fits_checkpoint(model, resolved, data.x_shape, resume.path)
    return _Run(model, resolved, strategy, data, resume)


def _record_start(plan):
    """On the chief, once every check passed: the checkpoint fallback, then run.json."""
    model_dir = plan.settings.model_dir
    try:
        if plan.resume.needs_fallback:
            aside = checkpoints.fall_back(model_dir, plan.resume)
            print(f"warning: {checkpoints.describe(plan.resume)} (the damaged files are kept, "
                  f"unchanged, in {aside})", file=sys.stderr, flush=True)
    except OSError as error:
        raise os_fault("model_dir", error, os.path.join(model_dir, checkpoints.STATE_FILE)) \
            from None
    try:
        run_record.write(model_dir, run_record.make_record(plan.settings, plan.data.spec))
    except OSError as error:  # A write to a full disk names no file.
        raise os_fault("model_dir", error, run_record.path(model_dir)) from None


_DATA_FAULTS = ("bad CSV record at ", "corrupt or truncated TFRecord file ", "Name: ")
_DISK_FULL = "No space left on device"


# What TensorFlow leaves when a write fails part-way (a full disk): atomic writes
# "NAME.tmp<uuid>" (checkpoint state, events), a checkpoint's shard staging directory
# "PREFIX_temp" and its bundle's "*.tempstate<n>", and an export's "temp-<time>" directory.
_PARTIAL_FILE = re.compile(r".*(\.tmp[0-9a-f]{32}|\.tempstate\d+)$")
_PARTIAL_DIR = re.compile(r".*_temp$|^temp-\d+$")


def remove_partial_writes(model_dir):
    """Removes the files of writes that failed part-way under ``model_dir``; whole
    checkpoints, events and exports stay."""
    for root, dirs, files in os.walk(model_dir):
        for name in [d for d in dirs if _PARTIAL_DIR.match(d)]:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            dirs.remove(name)
        for name in files:
            if _PARTIAL_FILE.match(name):
                os.remove(os.path.join(root, name))


def _runtime_fault(error, settings):
    """A one-line error for a failure during training that is the data's or the disk's,
    else None."""
    if isinstance(error, OSError):
        fault = os_fault("model_dir", error, settings.model_dir)
        return fault if isinstance(fault, EnvironmentFault) else None
    text = str(getattr(error, "message", error))
    if _DISK_FULL in text:
        return EnvironmentFault(
            "model_dir needs free disk space; the checkpoints saved so far are kept (free "
            f"space and run again to resume). Received: {_DISK_FULL} under {settings.model_dir}")
    found = [(line, line.find(m)) for line in text.splitlines() for m in _DATA_FAULTS
             if m in line]
    if not found or not settings.train_data:
        return None
    line, at = found[0]
    return UsageError(f"train_data and eval_data must hold valid records; the checkpoints "
                      f"saved so far are kept. Received: {line[at:].rstrip(']')[:300]}")


def _hold(model_dir):
    """The model dir's lock (``model_dir_lock.hold``); a failed write is one line."""
    try:
        return model_dir_lock.hold(model_dir)
    except OSError as error:
        raise os_fault("model_dir", error, model_dir_lock.path(model_dir)) from None


def run(settings, *, stream=None, record=None, on_stopped=None, hold_model_dir=False):
    """Trains, evaluates and exports one model; returns a ``Result``.

    Progress goes to ``stream`` (default: stdout), on the chief only. ``record`` is the
    run recorded in ``settings.model_dir`` (``run_record.load``) when the caller read it
    already; None: read here. ``on_stopped``: called with the words of a stop on a signal
    once this task has saved what it owns (before TensorFlow closes the session).
    ``hold_model_dir``: the chief (the one writer of a cluster) holds the model dir's lock
    while it runs (``model_dir_lock``); a model dir a live run holds is refused.
    """
    start = time.monotonic()
    stream = stream or sys.stdout
    plan = _prepare(settings, record, check_lock=hold_model_dir)
    _prepare_model_dir(plan.settings.model_dir)
    held = _hold(plan.settings.model_dir) if hold_model_dir and plan.strategy.is_chief else None
    try:
        return _run_prepared(plan, stream, on_stopped, start)
    finally:
        if held is not None:
            held.release()


def _run_prepared(plan, stream, on_stopped, start):
    model, settings, strategy = plan.model, plan.settings, plan.strategy
    chief = strategy.is_chief
    if chief:
        _record_start(plan)
        _announce(stream, settings, strategy)
    estimator = make_estimator(model.model_fn, strategy.config, settings.params,
                               batch_size=settings.batch_size)
    progress = progress_lib.ProgressHook(
        settings.max_steps, settings.batch_size,
        mode=progress_lib.display_mode(stream) if chief else None, stream=stream,
        summary_dir=settings.model_dir if chief else None,
        summary_steps=strategy.config.save_summary_steps,
        learning_rate=settings.params.get("learning_rate"),
        steps_per_run=strategy.config.steps_per_run)
    try:
        metrics = _train(estimator, settings, strategy, plan.data, progress, on_stopped)
        export_path = None
        if chief and settings.export:
            export_path = export.export_saved_model(
                estimator, settings.export_dir or os.path.join(settings.model_dir, "export"),
                model.serving_shapes(settings.params, plan.data.x_shape))
    except tf.compat.v1.train.NanLossDuringTrainingError:
        raise _nan_error(progress.step, settings) from None
    except (tf.errors.OpError, OSError) as error:
        fault = _runtime_fault(error, settings)
        if fault is None:
            raise
        if isinstance(fault, EnvironmentFault):
            remove_partial_writes(settings.model_dir)
        raise fault from error
    finally:
        progress.close()
    return Result(model_dir=settings.model_dir, metrics=metrics, export_path=export_path,
                  seconds=time.monotonic() - start, throughput=progress.throughput,
                  max_steps=settings.max_steps, task_type=strategy.task_type)
