"""``tensorflow.python.distribute.estimator_training``, which TensorFlow 2.16 removed.

tensorflow-estimator 2.15 imports this module by name and calls five of its functions:
``init_run_config`` (RunConfig reads TF_CONFIG through it), ``should_run_distribute_coordinator``
and ``train_and_evaluate`` (a cluster's ``train_and_evaluate``), ``estimator_train`` and
``estimator_evaluate`` (a cluster's ``Estimator.train`` / ``evaluate``). The distribute
coordinator they drive is still part of TensorFlow; only this glue went. This module is
the glue again, written for the coordinator as it stands: installed as that module name
on TensorFlow 2.16 and later, never on 2.15 (whose own module stays).
"""
from __future__ import annotations

import copy
import sys
from typing import TYPE_CHECKING, Any, Callable

from tensorflow.python.distribute import distribute_coordinator as coordinator
from tensorflow.python.distribute import distribute_coordinator_context as coordinator_context
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.platform import tf_logging as logging
from tensorflow.python.training import server_lib

if TYPE_CHECKING:
    import tensorflow as tf

MODULE = "tensorflow.python.distribute.estimator_training"

CHIEF = "chief"
EVALUATOR = "evaluator"
PS = "ps"
WORKER = "worker"
_MODES = (coordinator.CoordinatorMode.STANDALONE_CLIENT,
          coordinator.CoordinatorMode.INDEPENDENT_WORKER)


def install() -> None:
    """Makes this module importable under TensorFlow's old name (idempotent)."""
    from tensorflow.python import distribute  # Late: loads TensorFlow.

    sys.modules.setdefault(MODULE, sys.modules[__name__])
    distribute.estimator_training = sys.modules[MODULE]


def _global_id(cluster_spec: Any, task_type: str | None, task_id: int) -> int:
    """The task's index in RunConfig's order: chief, other jobs by name, ps last."""
    if not task_type:
        return 0
    jobs = [CHIEF] if CHIEF in cluster_spec.jobs else []
    jobs += [job for job in sorted(cluster_spec.jobs) if job not in (CHIEF, PS)]
    jobs += [PS] if PS in cluster_spec.jobs else []
    first = 0
    for job in jobs:
        if job == task_type:
            return first + task_id
        first += len(cluster_spec.job_tasks(job))
    raise RuntimeError(f"task_type must be a job of the cluster. Received: "
                       f"task_type={task_type!r}, cluster={cluster_spec.as_dict()}")


def _init_run_config_from_worker_context(config: tf.estimator.RunConfig,
                                         worker_context: Any) -> None:
    """Fills ``config``'s distributed settings from the coordinator's worker context."""
    config._service = None
    config._cluster_spec = worker_context.cluster_spec
    config._task_type = worker_context.task_type
    config._task_id = worker_context.task_id
    config._evaluation_master = worker_context.master_target
    config._master = worker_context.master_target
    config._is_chief = worker_context.is_chief
    if not config._cluster_spec:
        config._global_id_in_cluster = 0
        config._num_ps_replicas = 0
        config._num_worker_replicas = 1
    elif config._task_type == EVALUATOR:
        # An evaluator sees no other task.
        config._cluster_spec = server_lib.ClusterSpec({})
        config._num_ps_replicas = 0
        config._num_worker_replicas = 0
        config._global_id_in_cluster = None
    else:
        jobs = config._cluster_spec.as_dict()
        config._num_ps_replicas = len(jobs.get(PS, []))
        config._num_worker_replicas = len(jobs.get(WORKER, [])) + len(jobs.get(CHIEF, []))
        config._global_id_in_cluster = _global_id(config._cluster_spec, config._task_type,
                                                  config._task_id)


def _take_experimental_distribute(config: tf.estimator.RunConfig) -> None:
    """Moves ``experimental_distribute``'s strategies to the config's own fields."""
    experimental = config._experimental_distribute
    if experimental is None:
        return
    for field in ("train_distribute", "eval_distribute"):
        strategy = getattr(experimental, field)
        if strategy is None:
            continue
        if getattr(config, "_" + field):
            raise ValueError(f"Either `{field}` or `experimental_distribute.{field}` can be "
                             "set.")
        setattr(config, "_" + field, strategy)


def init_run_config(config: tf.estimator.RunConfig, tf_config: dict[str, Any]) -> None:
    """Sets ``config``'s coordinator mode and cluster from ``tf_config`` (TF_CONFIG)."""
    _take_experimental_distribute(config)
    cluster_spec = server_lib.ClusterSpec(tf_config.get("cluster", {}))
    config._init_distributed_setting_from_environment_var({})
    experimental = config._experimental_distribute
    if config._train_distribute and experimental and experimental.remote_cluster:
        if cluster_spec:
            raise ValueError('Cannot set both "cluster_spec" of TF_CONFIG and '
                             "`experimental_distribute.remote_cluster`")
        config._distribute_coordinator_mode = coordinator.CoordinatorMode.STANDALONE_CLIENT
        config._cluster_spec = experimental.remote_cluster
        logging.info("RunConfig initialized for Distribute Coordinator with "
                     "STANDALONE_CLIENT mode")
        return
    if not cluster_spec or "master" in cluster_spec.jobs or not config._train_distribute:
        # Local training, a TF1 master cluster, or no strategy: Estimator's own path.
        config._distribute_coordinator_mode = None
        config._init_distributed_setting_from_environment_var(tf_config)
        config._maybe_overwrite_session_config_for_distributed_training()
        logging.info("Not using Distribute Coordinator.")
        return
    config._cluster_spec = cluster_spec
    config._distribute_coordinator_mode = coordinator.CoordinatorMode.INDEPENDENT_WORKER
    logging.info("RunConfig initialized for Distribute Coordinator with INDEPENDENT_WORKER "
                 "mode")


def should_run_distribute_coordinator(config: tf.estimator.RunConfig) -> bool:
    """Whether ``train_and_evaluate`` goes through the distribute coordinator."""
    mode = getattr(config, "_distribute_coordinator_mode", None)
    if mode is None:
        logging.info("Not using Distribute Coordinator.")
        return False
    if mode not in _MODES:
        logging.warning("Unexpected distribute_coordinator_mode: %r", mode)
        return False
    if not config.cluster_spec:
        logging.warning("Running `train_and_evaluate` locally, ignoring "
                        "`experimental_distribute_coordinator_mode`.")
        return False
    return True


def _local_estimator(estimator: tf.estimator.Estimator, field: str,
                     strategy: tf.distribute.Strategy) -> tf.estimator.Estimator:
    """A copy of ``estimator`` that runs ``strategy`` as this task, off the coordinator."""
    local = copy.deepcopy(estimator)
    setattr(local._config, "_" + field, strategy)
    _init_run_config_from_worker_context(local._config,
                                         coordinator_context.get_current_worker_context())
    logging.info("Updated config: %s", str(vars(local._config)))
    setattr(local, "_" + field.replace("distribute", "distribution"), strategy)
    # The copy's own train/evaluate must not enter the coordinator again.
    local._config._distribute_coordinator_mode = None
    return local


def train_and_evaluate(estimator: tf.estimator.Estimator, train_spec: tf.estimator.TrainSpec,
                       eval_spec: tf.estimator.EvalSpec, executor_cls: type) -> None:
    """``train_and_evaluate`` on a cluster, each task's part run by the coordinator."""
    run_config = estimator.config
    mode = run_config._distribute_coordinator_mode
    if not mode:
        raise ValueError("Distribute coordinator mode is not specified in `RunConfig`.")

    def _worker_fn(strategy: tf.distribute.Strategy) -> None:
        context = coordinator_context.get_current_worker_context()
        local = _local_estimator(estimator, "train_distribute", strategy)
        # A standalone client runs hooks on the chief only: a hook's tensors belong to
        # the graph of the thread that built them.
        independent = mode == coordinator.CoordinatorMode.INDEPENDENT_WORKER
        hooks = list(train_spec.hooks) if independent or context.is_chief else []
        local.train(input_fn=train_spec.input_fn, max_steps=train_spec.max_steps,
                    hooks=hooks)

    def _eval_fn(strategy: tf.distribute.Strategy) -> None:
        local = _local_estimator(estimator, "eval_distribute", strategy)
        executor = executor_cls(local, train_spec, eval_spec)
        executor._start_continuous_evaluation()

    standalone = mode == coordinator.CoordinatorMode.STANDALONE_CLIENT
    coordinator.run_distribute_coordinator(
        _worker_fn, run_config.train_distribute, _eval_fn, run_config.eval_distribute,
        mode=mode, cluster_spec=run_config.cluster_spec if standalone else None,
        session_config=run_config.session_config)


def _run_on_cluster(estimator: tf.estimator.Estimator, field: str,
                    distributed_fn: Callable[..., Any], hooks: Any, method: str) -> Any:
    """``Estimator.train`` or ``evaluate`` through the coordinator (standalone client)."""
    run_config = estimator._config
    cluster_spec = multi_worker_util.normalize_cluster_spec(run_config.cluster_spec)
    strategy = getattr(run_config, field)
    if EVALUATOR in cluster_spec.jobs:
        raise ValueError("'evaluator' job is not supported if you don't use "
                         "`train_and_evaluate`")
    mode = run_config._distribute_coordinator_mode
    if mode != coordinator.CoordinatorMode.STANDALONE_CLIENT:
        raise ValueError(f"Only `STANDALONE_CLIENT` mode is supported when you call "
                         f"`{method}`")
    if strategy.extended.experimental_between_graph:
        raise ValueError(f"`{method}` API is not supported for "
                         f"{type(strategy).__name__} with `STANDALONE_CLIENT` mode.")

    def _worker_fn(task_strategy: tf.distribute.Strategy) -> Any:
        local = _local_estimator(estimator, field, task_strategy)
        chief_hooks = hooks if coordinator_context.get_current_worker_context().is_chief \
            else []
        return distributed_fn(local, task_strategy, chief_hooks)

    return coordinator.run_distribute_coordinator(
        _worker_fn, strategy, mode=mode, cluster_spec=cluster_spec,
        session_config=run_config.session_config)


def estimator_train(estimator: tf.estimator.Estimator, train_distributed_fn: Callable[..., Any],
                    hooks: Any) -> Any:
    """``Estimator.train`` on a cluster: a standalone client only."""

    def _train(local: tf.estimator.Estimator, strategy: tf.distribute.Strategy,
               chief_hooks: Any) -> tf.estimator.Estimator:
        train_distributed_fn(local, strategy, chief_hooks)
        return local

    return _run_on_cluster(estimator, "train_distribute", _train, hooks, "estimator.train")


def estimator_evaluate(estimator: tf.estimator.Estimator,
                       evaluate_distributed_fn: Callable[..., Any], hooks: Any) -> Any:
    """``Estimator.evaluate`` on a cluster: a standalone client only."""
    return _run_on_cluster(estimator, "eval_distribute", evaluate_distributed_fn, hooks,
                           "Estimator.evaluate")
