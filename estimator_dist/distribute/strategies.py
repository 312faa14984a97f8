"""Distribution strategies by name, built so that Estimator never hangs on them.

One table maps a strategy name to a builder. Builders return a
``tf.distribute.Strategy`` (or ``None`` for no distribution) plus the number of local
devices the Estimator session must keep.

Two facts about TF 2.15 shape this module:

* Estimator + ``MirroredStrategy`` over logical CPU devices deadlocks with the default
  all-reduce when the inter-op thread pool is as small as the core count. CPU replicas
  therefore reduce through ``tf.distribute.ReductionToOneDevice``.
* Logical CPU devices exist only if they are configured before the TF runtime starts.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import logging
from typing import Any, Callable, Dict, Optional, cast

import tensorflow as tf

from estimator_dist import mends
from estimator_dist.distribute import cluster, cluster_sources, rendezvous, strategy_table
from estimator_dist.distribute.input_checks import checked_input_fn
from estimator_dist.errors import UsageError, check_positive_int
from estimator_dist.hooks import divergence, exchange_advice, ps_watch, watchdog
from estimator_dist.mends import extended, internals

_LOG = logging.getLogger(__name__)

DEFAULT_CPU_REPLICAS = 2
DEFAULT_COLLECTIVE_TIMEOUT_SECONDS = 300


@dataclasses.dataclass(frozen=True)
class StrategySetup:
    """What a strategy builder hands to the RunConfig.

    Attributes:
      train_distribute: the strategy for training, or None.
      eval_distribute: the strategy for evaluation, or None for one device. Mirrored
        setups evaluate on one device: a mirrored ``evaluate()`` whose last global batch
        is short drops that batch in some runs (the v1 input pipeline's end of data
        races across replicas); one device counts every example exactly once.
      cpu_devices: how many CPU devices the Estimator session must keep.
    """

    train_distribute: tf.distribute.Strategy | None = None
    eval_distribute: tf.distribute.Strategy | None = None
    cpu_devices: int = 1


# A strategy's builder (what ``StrategyKind.builder`` names): (num_replicas, options,
# tf_config) -> its setup.
Builder = Callable[[Optional[int], Dict[str, Any], Optional[cluster.TFConfig]], StrategySetup]


class _InputChecksMixin(extended.Mixin):
    """Checks what a user's input_fn returns before the strategy consumes it."""

    def make_input_fn_iterator(self, input_fn: Callable[..., Any], *args: Any,
                               **kwargs: Any) -> Any:
        checked = checked_input_fn(input_fn, self.num_replicas_in_sync)
        return super().make_input_fn_iterator(checked, *args, **kwargs)


class _DivergenceCheckMixin(extended.Mixin):
    """Stops training when the replicas' copies of a variable differ (``divergence``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        mends.apply("divergence_check", self, make_hook=divergence.DivergenceHook)


class _MirroredStrategy(_DivergenceCheckMixin, _InputChecksMixin,
                        tf.distribute.MirroredStrategy):
    """``tf.distribute.MirroredStrategy`` whose input_fn results and replicas are checked."""


class _MultiWorkerMendsMixin(extended.Mixin):
    """Applies the mends MultiWorkerMirroredStrategy needs under Estimator
    (``mends.catalogue``): sparse gradients exchanged as rows (or dense, by the mend's
    rule), batch norm's moving statistics mirrored, finite input ending on every worker
    after the same step, collective keys of its own in the process and instance keys of
    its own in each training graph."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        mends.apply("collective_keys", type(self))  # Read by TensorFlow's constructor.
        super().__init__(*args, **kwargs)
        mends.apply("collective_instances", self)
        mends.apply("sparse_gradients", self)
        mends.apply("batch_norm_statistics", self)
        mends.apply("input_end", self)


class _MultiWorkerMirroredStrategy(_DivergenceCheckMixin, _MultiWorkerMendsMixin,
                                   _InputChecksMixin, tf.distribute.MultiWorkerMirroredStrategy):
    """``tf.distribute.MultiWorkerMirroredStrategy``, input_fn results and workers checked,
    mended for Estimator (``_MultiWorkerMendsMixin``)."""


class _ParameterServerStrategy(_InputChecksMixin,
                               tf.compat.v1.distribute.experimental.ParameterServerStrategy):
    """The v1 ``ParameterServerStrategy`` (RunConfig refuses the v2 one), input checked."""


def cpu_device_count() -> int:
    """Returns how many logical CPU devices the runtime has or will have.

    Does not start the TF runtime.
    """
    cpu = tf.config.list_physical_devices("CPU")[0]
    configured = tf.config.get_logical_device_configuration(cpu)
    return len(configured) if configured else 1


def setup_cpu_replicas(num_devices: int) -> None:
    """Makes ``num_devices`` logical CPU devices available, before the runtime starts.

    Call this (or ``make_run_config``) before any TF op runs. Asking for fewer devices
    than are already configured keeps the existing ones.

    Raises:
      RuntimeError: the TF runtime already started with fewer CPU devices.
    """
    check_positive_int("num_replicas", num_devices)
    if cpu_device_count() >= num_devices:
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)
    except RuntimeError:
        have = len(tf.config.list_logical_devices("CPU"))
        if have >= num_devices:
            return
        raise RuntimeError(
            f"mirrored needs {num_devices} logical CPU devices, but the TensorFlow runtime "
            f"already started with {have}: call estimator_dist.make_run_config (or "
            f"estimator_dist.setup_cpu_replicas({num_devices})) before any TensorFlow op "
            "runs, e.g. at the top of your script.") from None


def check_collectives_configurable() -> None:
    """Raises when collective ops can no longer be configured (the runtime started).

    ``MultiWorkerMirroredStrategy`` configures them in eager mode (TF2 behaviour), which
    TensorFlow allows only before its runtime starts; after any eager op it raises
    "Collective ops must be configured at program startup", which names no fix. In graph
    mode (TF1 behaviour) the session configures them, late or not.
    """
    if not internals.collectives_configurable():
        raise RuntimeError(
            "multi_worker configures TensorFlow's collective ops, which must happen before "
            "the TensorFlow runtime starts, but it already started: call "
            "estimator_dist.make_run_config at the start of the program, before any "
            "TensorFlow op runs.")


def _default(num_replicas: int | None, options: dict[str, Any],
             tf_config: cluster.TFConfig | None) -> StrategySetup:
    del num_replicas, options, tf_config  # One replica (build() checks); no options.
    return StrategySetup(cpu_devices=cpu_device_count())


def _mirrored(num_replicas: int | None, options: dict[str, Any],
              tf_config: cluster.TFConfig | None) -> StrategySetup:
    del options, tf_config  # build() passes none for this strategy.
    check_positive_int("num_replicas", num_replicas, allow_none=True)
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        num_replicas = num_replicas or len(gpus)
        if num_replicas > len(gpus):
            raise UsageError(
                f"num_replicas must be at most the {len(gpus)} visible GPUs for strategy "
                f"'mirrored'. Received: num_replicas={num_replicas}")
        strategy = _MirroredStrategy([f"/gpu:{i}" for i in range(num_replicas)])
        return StrategySetup(strategy, None, cpu_devices=cpu_device_count())
    num_replicas = num_replicas or DEFAULT_CPU_REPLICAS
    setup_cpu_replicas(num_replicas)
    strategy = _MirroredStrategy(
        [f"/cpu:{i}" for i in range(num_replicas)],
        cross_device_ops=tf.distribute.ReductionToOneDevice(reduce_to_device="/cpu:0"))
    return StrategySetup(strategy, None, cpu_devices=cpu_device_count())


def _multi_worker(num_replicas: int | None, options: dict[str, Any],
                  tf_config: cluster.TFConfig) -> StrategySetup:
    del num_replicas  # One replica per worker process (build() checks).
    if tf_config.task_type == "evaluator":
        # The evaluator trains nothing, but Estimator routes it through the distribute
        # coordinator only when train_distribute is set; MultiWorkerMirroredStrategy
        # itself cannot be built there when the cluster lists no evaluator.
        local = _MirroredStrategy(["/cpu:0"], cross_device_ops=tf.distribute.ReductionToOneDevice())
        return StrategySetup(local, None, cpu_devices=cpu_device_count())
    timeout = options.get("collective_timeout", DEFAULT_COLLECTIVE_TIMEOUT_SECONDS)
    check_positive_int("collective_timeout", timeout)
    packing = _packing_options(options)
    reduction = _reduction_dtype(options.get("all_reduce_dtype", "float32"))
    sparse = options.get("sparse_gradients", "auto")
    choices = strategy_table.SPARSE_GRADIENTS
    if sparse not in choices:
        raise UsageError(f"sparse_gradients must be one of {list(choices)}. "
                         f"Received: sparse_gradients={sparse!r}")

    def build() -> tf.distribute.MultiWorkerMirroredStrategy:
        check_collectives_configurable()
        mends.apply("coordination_heartbeat", cluster=tf_config.cluster,
                    task_type=tf_config.task_type, seconds=timeout)
        return _MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(
                timeout_seconds=timeout, **packing))

    strategy = rendezvous.form_cluster(build, options.get("rendezvous_timeout"),
                                       tf_config=tf_config, rebuilt=_rebuilt_together)
    if reduction == "bfloat16":
        mends.apply("bfloat16_all_reduce", strategy, asked="all_reduce_dtype='bfloat16'")
    if sparse != "auto":
        mends.apply("sparse_gradients", strategy, mode=sparse,
                    asked=f"sparse_gradients={sparse!r}")
    # Mend collective_watchdog: no timeout on the collectives (in TF 2.15 each one would
    # hold a thread for the whole timeout); the watchdog bounds a stalled step instead.
    mends.apply("collective_watchdog", strategy,
                make_hook=functools.partial(watchdog.StallWatchdogHook, timeout))
    if tf_config.is_chief:
        extended.add_training_hook(strategy, functools.partial(
            exchange_advice.ExchangeAdviceHook, tf_config.num_workers))
    return StrategySetup(strategy, None, cpu_devices=cpu_device_count())


def _rebuilt_together(count: int, timeout: float) -> None:
    """Returns once every chief and worker has built its ``count``-th multi-worker strategy.

    In TF2 behaviour each ``MultiWorkerMirroredStrategy`` re-creates this task's collective
    executors. A peer that built its next strategy first and started its collectives
    (e.g. the broadcast of a new Estimator's initial values) would reach the executors this
    task is about to drop, and fail with "Delete called on non-empty BufRendezvous". The
    coordination service's barrier puts every task's rebuild before any task's next
    collective. Graph mode (TF1 behaviour) keeps the executors of the first build.

    Raises:
      RendezvousError: a task did not build its strategy within ``timeout`` seconds.
    """
    if not internals.collectives_reconfigured():
        return
    try:
        internals.wait_at_barrier(f"estimator_dist_strategy_{count}", timeout)
    except tf.errors.OpError as error:
        reason = error.message.strip().splitlines()[0] if error.message.strip() else ""
        raise rendezvous.RendezvousError(
            f"rendezvous: every chief and worker must build a multi_worker strategy as "
            f"often as the others (in TF2 behaviour each build re-creates the collective "
            f"executors), but not every task built its strategy number {count} within "
            f"{timeout} s. Received: {type(error).__name__} ({reason})") from None


def _packing_options(options: dict[str, Any]) -> dict[str, int]:
    """CommunicationOptions fields of the all-reduce's packing (``all_reduce_bytes_per_pack``;
    0 or absent: TensorFlow's default, every gradient in one collective)."""
    bytes_per_pack = options.get("all_reduce_bytes_per_pack")
    if bytes_per_pack is None:
        return {}
    if not isinstance(bytes_per_pack, int) or bytes_per_pack < 0:
        raise UsageError("all_reduce_bytes_per_pack must be a non-negative int. "
                         f"Received: all_reduce_bytes_per_pack={bytes_per_pack!r}")
    return {"bytes_per_pack": bytes_per_pack}


# The dtypes float32 values may be all-reduced in across workers (float32: TensorFlow's own).
_REDUCTION_DTYPES = ("bfloat16", "float32")


def _reduction_dtype(dtype: str) -> str:
    """``dtype``, checked as an ``all_reduce_dtype``."""
    if dtype not in _REDUCTION_DTYPES:
        raise UsageError(f"all_reduce_dtype must be one of {sorted(_REDUCTION_DTYPES)}. "
                         f"Received: all_reduce_dtype={dtype!r}")
    return dtype


def _parameter_server(num_replicas: int | None, options: dict[str, Any],
                      tf_config: cluster.TFConfig) -> StrategySetup:
    del num_replicas  # One replica per worker process (build() checks).
    missing = [t for t in ("chief", "ps") if t not in tf_config.cluster]
    if missing:
        raise UsageError(
            "TF_CONFIG must list 'chief' and 'ps' tasks for strategy 'parameter_server' "
            "(`python -m estimator_dist.launch --ps N` adds them). Received: cluster task "
            f"types {sorted(tf_config.cluster)}")
    if tf_config.task_type == "evaluator":
        # The evaluator reads checkpoints alone, as in any Estimator cluster with a chief.
        return StrategySetup(cpu_devices=cpu_device_count())
    rendezvous.wait_for_ps_cluster(tf_config, options.get("rendezvous_timeout"))
    strategy = _ParameterServerStrategy()
    if tf_config.task_type in ("chief", "worker"):
        # A ps that is gone ends this task, naming it, instead of a wait without end.
        ps_watch.watch(tf_config)
    return StrategySetup(strategy, None, cpu_devices=cpu_device_count())


def build(strategy: strategy_table.StrategyKind | str, num_replicas: int | None = None, *,
          tf_config: cluster.TFConfig | None = None, **options: Any) -> StrategySetup:
    """Builds the ``StrategySetup`` of ``strategy`` (a ``strategy_table.StrategyKind``, or
    its name) with the builder its kind names.

    A cluster strategy builds on ``tf_config``, this task's parsed ``cluster.TFConfig``
    (default: read from the environment, ``cluster_sources.task_from_env``), written to
    ``TF_CONFIG`` for TensorFlow first (``cluster_sources.write_tf_config``). "tpu" is no
    tf.distribute strategy here: ``make_run_config`` wires it through TPUEstimator's own
    RunConfig.
    """
    kind = strategy_table.as_kind(strategy)
    name = kind.name
    if kind.builder is None:
        raise UsageError(f"strategy {name!r} runs through TPUEstimator's own RunConfig: build "
                         f"it with estimator_dist.make_run_config({name!r}). Received: "
                         f"strategy={name!r}")
    for option in options:
        if option not in kind.options:
            takers = strategy_table.names_where(lambda other, o=option: o in other.options)
            raise UsageError(f"{option} applies to strategy "
                             f"{' or '.join(map(repr, takers))} only. "
                             f"Received: strategy={name!r}")
    if kind.one_replica is not None and num_replicas not in (None, 1):
        raise UsageError(f"num_replicas must be 1 or None for strategy '{name}'"
                         f"{kind.one_replica}. Received: num_replicas={num_replicas!r}")
    if not kind.cluster:
        if tf_config is not None:
            raise UsageError(f"tf_config applies to strategies "
                             f"{' and '.join(map(repr, strategy_table.CLUSTER_NAMES))} only. "
                             f"Received: strategy={name!r}")
    elif tf_config is None:
        tf_config = cluster_sources.task_from_env(strategy=name)
    elif not isinstance(tf_config, cluster.TFConfig):
        raise UsageError(f"tf_config must be a TFConfig (estimator_dist.parse_tf_config or "
                         f"resolve_cluster returns one). Received: {type(tf_config).__name__}")
    if kind.cluster:
        cluster_sources.write_tf_config(cast(cluster.TFConfig, tf_config))  # Set above.
    return builder_of(kind)(num_replicas, options, tf_config)


def builder_of(kind: strategy_table.StrategyKind) -> Builder:
    """The function ``kind.builder`` names (``"module:function"``), imported."""
    module, _, function = cast(str, kind.builder).partition(":")  # Only "tpu" has none.
    return getattr(importlib.import_module(module), function)
