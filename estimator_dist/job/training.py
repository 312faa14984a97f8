"""One training job: RunSettings -> RunConfig -> Estimator -> train, evaluate, export.

Every check on the settings, the data and the model dir runs first (``preparation``),
before the model dir is written to, so a refused run leaves an existing model dir as it
was. Then the chief records the run, every task trains and evaluates (``loop``), and the
chief exports; a failure that is the data's or the disk's is one line (``faults``).
"""
from __future__ import annotations

import dataclasses
import errno
import os
import sys
import tempfile
import time
from typing import IO, TYPE_CHECKING, Any, Callable, Mapping

import tensorflow as tf

from estimator_dist import export, precision, remote_files, run_record
from estimator_dist.errors import EnvironmentFault, UsageError, os_fault
from estimator_dist.estimator import make_estimator
from estimator_dist.job import (checkpoints, faults, loop, model_dir_lock, preparation,
                                progress as progress_lib)

if TYPE_CHECKING:
    from estimator_dist.job.settings import RunSettings
    from estimator_dist.plan import Plan


@dataclasses.dataclass(frozen=True)
class Result:
    """What a finished run reports."""

    model_dir: str
    metrics: dict[str, Any]  # Empty on a worker that neither evaluates nor finds eval events.
    export_path: str | None  # None on a worker that does not export, or with export off.
    seconds: float  # Wall time of the whole run.
    throughput: progress_lib.Throughput | None  # None when training had no step left to run.
    max_steps: int
    task_type: str | None = None  # The TF_CONFIG task type of a cluster strategy, else None.


def _prepare_model_dir(model_dir: str) -> None:
    """Creates ``model_dir`` if needed and proves it writable, before anything is written
    (a remote one, through TensorFlow's file system: ``remote_files``)."""
    if remote_files.is_remote(model_dir):
        try:
            remote_files.makedirs(model_dir)
        except OSError as error:
            raise UsageError(f"model_dir must be a writable directory. Received: "
                             f"model_dir={model_dir!r} ({error.strerror})") from None
        return
    try:
        os.makedirs(model_dir, exist_ok=True)
        with tempfile.TemporaryFile(dir=model_dir):
            pass
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise os_fault("model_dir", error, model_dir) from None
        raise UsageError(f"model_dir must be a writable directory. Received: "
                         f"model_dir={model_dir!r} "
                         f"({faults.path_fault(model_dir) or error.strerror})") from None


def _announce(stream: IO[str], settings: RunSettings, plan: Plan) -> None:
    start = loop.newest_step(settings.model_dir)
    if start >= settings.max_steps:
        print(f"{settings.model} in {settings.model_dir} is already at step {start} of "
              f"{settings.max_steps}: nothing to train", file=stream, flush=True)
        return
    verb = f"Resuming {settings.model} at step {start}" if start else f"Training {settings.model}"
    batch = plan.describe_batch(settings.batch_size)
    print(f"{verb} to step {settings.max_steps}: {batch} (strategy {settings.strategy}), "
          f"{precision.describe(settings.mixed_precision)}, model dir {settings.model_dir}",
          file=stream, flush=True)


def _record_start(prepared: preparation.Run) -> None:
    """On the chief, once every check passed: the checkpoint fallback, then run.json."""
    model_dir = prepared.settings.model_dir
    try:
        if prepared.resume.needs_fallback:
            aside = checkpoints.fall_back(model_dir, prepared.resume)
            print(f"warning: {checkpoints.describe(prepared.resume)} (the damaged files are kept, "
                  f"unchanged, in {aside})", file=sys.stderr, flush=True)
    except OSError as error:
        raise os_fault("model_dir", error, os.path.join(model_dir, checkpoints.STATE_FILE)) \
            from None
    try:
        run_record.write(model_dir, run_record.make_record(prepared.settings, prepared.data.spec))
    except OSError as error:  # A write to a full disk names no file.
        raise os_fault("model_dir", error, run_record.path(model_dir)) from None


def _hold(model_dir: str) -> model_dir_lock.Held:
    """The model dir's lock (``model_dir_lock.hold``); a failed write is one line."""
    try:
        return model_dir_lock.hold(model_dir)
    except OSError as error:
        raise os_fault("model_dir", error, model_dir_lock.path(model_dir)) from None


def run(settings: RunSettings, *, stream: IO[str] | None = None,
        record: Mapping[str, Any] | None = None, on_stopped: Callable[..., Any] | None = None,
        hold_model_dir: bool = False) -> Result:
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
    prepared = preparation.prepare(settings, record, check_lock=hold_model_dir)
    model_dir = prepared.settings.model_dir
    if prepared.plan.task_type != "evaluator":  # It reads what the chief writes there.
        _prepare_model_dir(model_dir)
    held = _hold(model_dir) if hold_model_dir and prepared.plan.is_chief else None
    try:
        return _run_prepared(prepared, stream, on_stopped, start)
    finally:
        if held is not None:
            held.release()


def _run_prepared(prepared: preparation.Run, stream: IO[str],
                  on_stopped: Callable[..., Any] | None, start: float) -> Result:
    model, settings, plan = prepared.model, prepared.settings, prepared.plan
    chief = plan.is_chief
    if chief:
        _record_start(prepared)
        _announce(stream, settings, plan)
    estimator = make_estimator(model.model_fn, plan.config, settings.params,
                               batch_size=settings.batch_size)
    progress = progress_lib.ProgressHook(
        settings.max_steps, settings.batch_size,
        mode=progress_lib.display_mode(stream) if chief else None, stream=stream,
        summary_dir=settings.model_dir if chief else None,
        summary_steps=plan.config.save_summary_steps,
        learning_rate=settings.params.get("learning_rate"),
        steps_per_run=plan.config.steps_per_run)
    try:
        metrics = loop.train(estimator, settings, plan, prepared.data, progress, on_stopped)
        export_path = None
        if chief and settings.export:
            export_path = export.export_saved_model(
                estimator, settings.export_dir or os.path.join(settings.model_dir, "export"),
                model.serving_shapes(settings.params, prepared.data.x_shape))
    except tf.compat.v1.train.NanLossDuringTrainingError:
        raise faults.nan_error(progress.step, settings) from None
    except (tf.errors.OpError, OSError) as error:
        fault = faults.runtime_fault(error, settings)
        if fault is None:
            raise
        if isinstance(fault, EnvironmentFault):
            faults.remove_partial_writes(settings.model_dir)
        raise fault from error
    finally:
        progress.close()
    return Result(model_dir=settings.model_dir, metrics=metrics, export_path=export_path,
                  seconds=time.monotonic() - start, throughput=progress.throughput,
                  max_steps=settings.max_steps, task_type=plan.task_type)
