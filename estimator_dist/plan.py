"""What one run's strategy means, resolved once: ``resolve(strategy, ...) -> Plan``.

A run asks its ``Plan`` — how many replicas split the global batch, this task's role,
the training hooks, how input_fns are adapted — instead of branching on strategy names.
The name is looked up once (a ``strategy_table.StrategyKind``, which ``task_of`` and
``resolve`` take as well as a name) and the kind handed down to ``make_run_config`` and
the builder it names. The cluster is parsed once here (from ``TF_CONFIG`` or another
cluster source).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, cast

import tensorflow as tf

from estimator_dist.distribute import cluster, cluster_sources, strategy_table
from estimator_dist.distribute.run_config import make_run_config
from estimator_dist.errors import UsageError
from estimator_dist.estimator import tpu_input_fn
from estimator_dist.hooks.peer_failure import PeerFailureHook
from estimator_dist.hooks.preemption import PreemptionHook


@dataclasses.dataclass(frozen=True)
class Plan:
    """A strategy resolved for one process.

    Attributes:
      kind: the ``strategy_table.StrategyKind``.
      config: the ``tf.estimator.RunConfig`` (a ``TPURunConfig`` for "tpu").
      replicas: how many replicas split one global batch (1 where workers step
        asynchronously, each on a whole batch).
      task: this process's ``cluster.TFConfig`` under a cluster strategy, else None.
    """

    kind: strategy_table.StrategyKind
    config: tf.estimator.RunConfig
    replicas: int
    task: cluster.TFConfig | None = None

    @property
    def is_chief(self) -> bool:
        """Whether this process writes the run's record, progress and export."""
        return self.task is None or self.task.is_chief

    @property
    def task_type(self) -> str | None:
        """The cluster task type ("chief", "worker", "evaluator", "ps"), else None."""
        return self.task.task_type if self.task else None

    def check_batch_size(self, batch_size: int) -> None:
        """Refuses a global batch that does not split evenly over the replicas."""
        if batch_size % self.replicas:
            raise UsageError(
                f"batch_size must be divisible by the {self.replicas} replicas (it is the "
                f"global batch, split evenly across them). Received: batch_size={batch_size}")

    def describe_batch(self, batch_size: int) -> str:
        """How ``batch_size`` is consumed, in words for the run's first line."""
        if not self.kind.synchronous:
            return f"batch {batch_size} per worker step, asynchronous"
        return (f"global batch {batch_size} over {self.replicas} "
                f"replica{'s' if self.replicas > 1 else ''}")

    def train_hooks(self) -> list[tf.compat.v1.train.SessionRunHook]:
        """The hooks every training call of this run needs: a preemption save, and under
        collectives an end to the run when a peer is lost (instead of endless retries)."""
        return [PreemptionHook()] + ([PeerFailureHook()] if self.kind.collectives else [])

    def adapt_input(self, input_fn: Callable[..., Any]) -> Callable[..., Any]:
        """``input_fn`` as the run's Estimator calls it (TPUEstimator passes params)."""
        return tpu_input_fn(input_fn) if self.kind.tpu else input_fn


def _replicas(kind: strategy_table.StrategyKind, config: tf.estimator.RunConfig,
              task: cluster.TFConfig | None) -> int:
    if not kind.synchronous:
        return 1
    if kind.cluster:
        return cast(cluster.TFConfig, task).num_workers  # A cluster kind has a task.
    if kind.tpu:
        return config.tpu_config.num_shards or 1
    return config.train_distribute.num_replicas_in_sync if config.train_distribute else 1


def task_of(strategy: strategy_table.StrategyKind | str) -> cluster.TFConfig | None:
    """This process's validated cluster task under a cluster ``strategy`` (a
    ``StrategyKind`` or its name), else None.

    Reads the environment only (``make_run_config`` writes ``TF_CONFIG`` for TensorFlow
    when the cluster came from elsewhere); starts no TensorFlow runtime.
    """
    kind = strategy_table.as_kind(strategy)
    if not kind.cluster:
        return None
    task = cluster_sources.task_from_env(strategy=kind.name)
    if kind.collectives and "ps" in task.cluster:
        raise UsageError(
            f"TF_CONFIG must have no 'ps' tasks under strategy {kind.name!r} (its workers "
            "keep the variables; parameter servers serve strategy 'parameter_server'). "
            f"Received: ps={task.cluster['ps']!r}")
    return task


def resolve(strategy: strategy_table.StrategyKind | str, task: cluster.TFConfig | None = None, *,
            num_replicas: int | None = None, **run_config_kwargs: Any) -> Plan:
    """Builds the RunConfig for ``strategy`` and returns the run's ``Plan``.

    Args:
      strategy: a ``strategy_table.StrategyKind``, or its name.
      task: this process's cluster task when the caller read it already (``task_of``).
      num_replicas, **run_config_kwargs: as ``make_run_config`` takes them.

    Raises:
      UsageError: as ``make_run_config`` raises it.
    """
    kind = strategy_table.as_kind(strategy)
    task = task or task_of(kind)
    config = make_run_config(kind, num_replicas=num_replicas, tf_config=task,
                             **run_config_kwargs)
    return Plan(kind=kind, config=config, replicas=_replicas(kind, config, task), task=task)
