"""A run resolved and checked before anything is written: its settings (model dir,
params, batch size, steps), the strategy's plan, the model dir's lock and run record,
the checkpoint a resume restores, the model's size and params, and the data.

A refused run leaves an existing model dir as it was."""
from __future__ import annotations

import dataclasses
import datetime
import os
from typing import TYPE_CHECKING, Any, Mapping

from estimator_dist import models, plan as plan_lib, remote_files, run_record
from estimator_dist.distribute import strategy_table
from estimator_dist.errors import UsageError, check_writable_path
from estimator_dist.job import (checkpoints, data as data_lib, model_dir_lock, model_size,
                                progress as progress_lib, scratch_graph)
from estimator_dist.job.settings import RunSettings

if TYPE_CHECKING:
    from estimator_dist.distribute.cluster import TFConfig

_SUMMARY_POINTS = 50
# Training steps per Session.run when the flag is not given (see docs/benchmarks.md).
DEFAULT_STEPS_PER_RUN = 20


def default_model_dir(model: str, now: datetime.datetime | None = None) -> str:
    stamp = (now or datetime.datetime.now()).strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{model}-{stamp}")


def _summary_steps(max_steps: int) -> int:
    """Steps between summaries: about ``_SUMMARY_POINTS`` per run, at most 100 apart."""
    return max(1, min(100, max_steps // _SUMMARY_POINTS))


def _steps_per_run(settings: RunSettings, kind: strategy_table.StrategyKind) -> int | None:
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


def _strategy_plan(settings: RunSettings, kind: strategy_table.StrategyKind,
                   task: TFConfig | None) -> plan_lib.Plan:
    """The run's ``plan.Plan`` for ``kind`` (the ``StrategyKind`` of the settings'
    strategy): its RunConfig (which sets up CPU replicas, so this comes before any TF op
    runs), replicas and role."""
    kwargs: dict[str, Any] = {"tf_random_seed": settings.seed, "log_step_count_steps": 100,
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
    if settings.sparse_gradients:
        kwargs["sparse_gradients"] = settings.sparse_gradients
    return plan_lib.resolve(kind, task, num_replicas=settings.num_replicas,
                            model_dir=settings.model_dir, **kwargs)


def _check_export_dir(settings: RunSettings) -> None:
    """An ``export_dir`` must be a directory that exists or can be made, checked before
    training (the default, MODEL_DIR/export, goes with the model dir's own check)."""
    if settings.export and settings.export_dir:
        check_writable_path("export_dir", settings.export_dir, is_dir=True)


def _check_no_stray_cluster(settings: RunSettings, kind: strategy_table.StrategyKind) -> None:
    """A TF_CONFIG makes Estimator treat even a one-process run as a cluster task."""
    if not (kind.cluster or kind.tpu) and os.environ.get("TF_CONFIG"):
        raise UsageError(
            f"TF_CONFIG applies to strategies {', '.join(strategy_table.CLUSTER_NAMES)} only; "
            "unset it, or pass one of them. Received: "
            f"strategy={settings.strategy!r} with TF_CONFIG set")


def _resume_point(settings: RunSettings, task: TFConfig | None) -> checkpoints.Resume:
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


@dataclasses.dataclass(frozen=True)
class Run:
    """A run whose settings, params, model dir and strategy all passed their checks."""

    model: models.BuiltinModel
    settings: RunSettings  # Resolved: model_dir, params, batch_size and max_steps set.
    plan: plan_lib.Plan  # The strategy resolved for this process.
    data: data_lib.Data
    resume: checkpoints.Resume


def prepare(settings: RunSettings, record: Mapping[str, Any] | None, *,
            check_lock: bool = False) -> Run:
    """Resolves and checks ``settings``; reads the model dir but writes nothing.

    ``check_lock``: refuse a model dir that a live run holds (``model_dir_lock``), first,
    as its files may change under the other checks.
    """
    model, kind = models.MODELS[settings.model], settings.kind
    resolved = settings.with_model_defaults(
        model_dir=settings.model_dir or default_model_dir(settings.model))
    if remote_files.is_remote(resolved.model_dir):
        remote_files.check_reachable("model_dir", resolved.model_dir)
    if record is None:
        record = run_record.load(resolved.model_dir)
    run_record.check_resume(resolved.model_dir, resolved, record)
    _check_no_stray_cluster(resolved, kind)
    task = plan_lib.task_of(kind)
    if check_lock and (task is None or task.is_chief):
        model_dir_lock.check_free(resolved.model_dir)
    resume = _resume_point(resolved, task)  # Reads files only: no TF op runs.
    plan = _strategy_plan(resolved, kind, task)
    # The built-in data's width of x stands in for files' (read later): the bulk of a
    # model too large lies in its layers and classes.
    model_size.check(model.name, resolved.params,
                     int(model.train_data().features["x"].shape[-1]))
    scratch_graph.check_params(model, resolved.params)
    plan.check_batch_size(resolved.batch_size)
    _check_export_dir(resolved)
    data = data_lib.for_run(model, resolved, plan)
    if resume.path:
        scratch_graph.check_fits_checkpoint(model, resolved, data.x_shape, resume.path)
    return Run(model, resolved, plan, data, resume)
