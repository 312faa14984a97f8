"""``make_run_config``: a ``tf.estimator.RunConfig`` wired for a named strategy."""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Union

import tensorflow as tf

from estimator_dist import mends, precision
from estimator_dist.distribute import strategies, strategy_table
from estimator_dist.errors import UsageError, check_positive_int
from estimator_dist.run_config_facts import RunFacts

if TYPE_CHECKING:
    from estimator_dist.distribute.cluster import TFConfig

DEFAULT_ITERATIONS_PER_LOOP = 100
_LOG = logging.getLogger(__name__)
# Keys of RunConfig.replace that make_run_config derives from the strategy name.
_STRATEGY_KEYS = ("train_distribute", "eval_distribute", "experimental_distribute")


def _refuse_strategy_keys(kwargs: dict[str, Any], keys: tuple[str, ...], way: str) -> None:
    """The RunConfig arguments that carry a strategy, refused: ``make_run_config`` sets them
    from the strategy name; ``way`` says how to get another strategy."""
    for key in keys:
        if key in kwargs:
            raise UsageError(f"{key} is set by make_run_config from the strategy name; {way}. "
                             f"Received: {key}={kwargs[key]!r}")


def _replace_kwargs(config: StrategyRunConfig | TPURunConfig,
                    kwargs: dict[str, Any]) -> dict[str, Any]:
    """``RunConfig.replace``'s arguments with the strategy's wiring kept.

    A ``session_config`` gets the CPU devices the strategy places replicas on (without
    them TensorFlow fails with "Cannot assign a device ... CPU:1"), as
    ``make_run_config(session_config=...)`` gives it; ``model_dir`` is read as
    ``RunConfig`` reads it (a path-like becomes a str); the strategy keys are refused.
    """
    _refuse_strategy_keys(kwargs, _STRATEGY_KEYS, "call estimator_dist.make_run_config("
                          "STRATEGY, ...) again for another strategy")
    if "session_config" in kwargs:
        devices = config.session_config.device_count.get("CPU", 1)
        kwargs["session_config"] = cpu_session_config(devices, kwargs["session_config"])
        if config.mixed_precision is not None:
            precision.with_rewrite(kwargs["session_config"], config.mixed_precision)
    if "model_dir" in kwargs:
        if kwargs["model_dir"] == "":
            raise UsageError("model_dir must be a non-empty path or None. Received: "
                             "model_dir=''")
        kwargs["model_dir"] = os.fspath(kwargs["model_dir"])
    return kwargs


class StrategyRunConfig(RunFacts, tf.estimator.RunConfig):
    """The ``RunConfig`` ``make_run_config`` returns for a tf.distribute strategy.

    Its ``replace`` keeps the strategy's wiring (``_replace_kwargs``): official programs
    write ``RunConfig().replace(session_config=...)``, and TensorFlow's ``replace`` would
    drop the logical CPU devices the replicas run on. ``steps_per_run`` and
    ``mixed_precision`` say what ``make_run_config`` was asked for (``RunFacts``).
    """

    def replace(self, **kwargs: Any) -> StrategyRunConfig:
        return super().replace(**_replace_kwargs(self, kwargs))


class TPURunConfig(RunFacts, tf.compat.v1.estimator.tpu.RunConfig):
    """A TPUEstimator ``RunConfig`` that also records whether a TPU is used, and its
    ``mixed_precision`` (``RunFacts``).

    ``use_tpu=False`` is the CPU validation mode: the same model_fn and input_fn run
    through ``TPUEstimator`` on the CPU, which checks static shapes and the TPU code
    path without a TPU. A plain ``tf.estimator.Estimator`` given this config would train
    on the host CPU without a word, so it is refused (mend ``tpu_estimator_guard``).
    """

    def __init__(self, *, use_tpu: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.use_tpu = use_tpu
        mends.apply("tpu_estimator_guard", self)
        mends.apply("tpu_validate_logging", self)

    def replace(self, **kwargs: Any) -> TPURunConfig:
        return super().replace(**_replace_kwargs(self, kwargs))


# What make_run_config returns.
RunConfig = Union[StrategyRunConfig, TPURunConfig]


def cpu_session_config(cpu_devices: int,
                       base: tf.compat.v1.ConfigProto | None = None) -> tf.compat.v1.ConfigProto:
    """Returns a ``ConfigProto`` that keeps ``cpu_devices`` CPU devices in the session.

    Without ``device_count``, a session config drops the extra logical CPU devices and
    placing a replica on ``/cpu:1`` fails.
    """
    config = tf.compat.v1.ConfigProto()
    if base is not None:
        config.CopyFrom(base)
    else:
        config.allow_soft_placement = True
    config.device_count["CPU"] = max(config.device_count.get("CPU", 1), cpu_devices)
    return config


def _resolve_tpu(tpu: str | None, zone: str | None = None,
                 project: str | None = None) -> tf.distribute.cluster_resolver.TPUClusterResolver:
    name = tpu or os.environ.get("TPU_NAME")
    if not name:
        raise UsageError(
            "strategy 'tpu' found no TPU (set TPU_NAME or pass tpu=NAME); to validate a TPU "
            "model_fn on CPU ask for it with use_tpu=False (CLI: --tpu-validate). "
            "Received: no TPU name")
    try:
        return tf.distribute.cluster_resolver.TPUClusterResolver(tpu=name, zone=zone,
                                                                 project=project)
    except (ValueError, RuntimeError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else "unreachable"
        raise UsageError(
            f"strategy 'tpu' could not reach TPU {name!r} ({first_line}); check TPU_NAME, or "
            "validate on CPU with use_tpu=False (CLI: --tpu-validate).") from None


def _tpu_cluster(tpu: str | None, use_tpu: bool, *, cluster: Any, master: str | None,
                 tpu_zone: str | None, gcp_project: str | None) -> Any:
    """The ``cluster`` resolver, or None.

    Scripts written for ``tf.compat.v1.estimator.tpu.RunConfig`` pass ``cluster`` (a
    resolver they built) or ``master``; ``tpu_zone`` and ``gcp_project`` go to the resolver
    built here.
    """
    if cluster is not None and tpu is not None:
        raise UsageError(f"tpu and cluster name the TPU twice; pass one. Received: tpu={tpu!r}")
    if not use_tpu or cluster is not None or master:
        return cluster
    return _resolve_tpu(tpu, tpu_zone, gcp_project)


def _tpu_config(num_replicas: int | None, iterations: int | None, given: Any) -> Any:
    tpu_lib = tf.compat.v1.estimator.tpu
    if given is None:
        return tpu_lib.TPUConfig(
            iterations_per_loop=iterations or DEFAULT_ITERATIONS_PER_LOOP,
            num_shards=num_replicas,
            per_host_input_for_training=tpu_lib.InputPipelineConfig.PER_HOST_V2)
    if iterations is not None or num_replicas not in (None, given.num_shards):
        raise UsageError(
            "tpu_config already sets iterations_per_loop and num_shards; pass them there. "
            f"Received: iterations_per_loop={iterations!r}, num_replicas={num_replicas!r}")
    return given


def _tpu_run_config(*, num_replicas: int | None, model_dir: str | os.PathLike | None,
                    tpu: str | None, use_tpu: bool, cluster: Any = None, master: str | None = None,
                    tpu_zone: str | None = None, gcp_project: str | None = None,
                    tpu_config: Any = None, iterations_per_loop: int | None = None,
                    session_config: tf.compat.v1.ConfigProto | None = None,
                    **run_config_kwargs: Any) -> TPURunConfig:
    check_positive_int("num_replicas", num_replicas, allow_none=True)
    if not use_tpu and num_replicas not in (None, 1):
        raise UsageError(
            "num_replicas must be 1 or None when validating on CPU (use_tpu=False). "
            f"Received: num_replicas={num_replicas}")
    resolver = _tpu_cluster(tpu, use_tpu, cluster=cluster, master=master, tpu_zone=tpu_zone,
                            gcp_project=gcp_project)
    return TPURunConfig(
        use_tpu=use_tpu, cluster=resolver, master=master,
        tpu_config=_tpu_config(num_replicas, iterations_per_loop, tpu_config),
        model_dir=model_dir,
        session_config=cpu_session_config(strategies.cpu_device_count(), session_config),
        **run_config_kwargs)


def with_steps_per_run(config: RunConfig, steps_per_run: int | None) -> RunConfig:
    """Returns ``config`` carrying ``steps_per_run`` (None: leaves it as it is)."""
    if steps_per_run is None:
        return config
    check_positive_int("steps_per_run", steps_per_run)
    config.steps_per_run = steps_per_run
    if steps_per_run > 1:
        _LOG.info("steps_per_run=%d applies to estimators built by "
                  "estimator_dist.make_estimator; a plain tf.estimator.Estimator runs one "
                  "step per Session.run.", steps_per_run)
    return config


def with_mixed_precision(config: RunConfig, mixed_precision: str | None) -> RunConfig:
    """Returns ``config`` computing in ``mixed_precision`` (see ``estimator_dist.precision``),
    recorded as ``config.mixed_precision``; None leaves it in float32."""
    config.mixed_precision = mixed_precision
    if mixed_precision is not None:
        precision.with_rewrite(config.session_config, mixed_precision)
    if mixed_precision == "float16":
        mends.apply("loss_scaling", asked="mixed_precision='float16'")
    return config


def _check_run_config_args(kind: strategy_table.StrategyKind,
                           run_config_kwargs: dict[str, Any]) -> None:
    """Refuses the arguments only another strategy takes (its ``run_config_args``)."""
    for other in strategy_table.STRATEGIES.values():
        foreign = sorted(set(run_config_kwargs) & set(other.run_config_args)
                         - set(kind.run_config_args))
        if foreign:
            raise UsageError(
                f"{', '.join(foreign)} apply to strategy {other.name!r} only: drop them from "
                f"the make_run_config call. Received: strategy={kind.name!r}")


def make_run_config(strategy: strategy_table.StrategyKind | str = "default", *,
                    num_replicas: int | None = None, model_dir: str | os.PathLike | None = None,
                    tpu: str | None = None, use_tpu: bool = True,
                    collective_timeout: float | None = None,
                    rendezvous_timeout: float | None = None, steps_per_run: int | None = None,
                    tf_config: TFConfig | None = None, all_reduce_bytes_per_pack: int | None = None,
                    all_reduce_dtype: str | None = None, sparse_gradients: str | None = None,
                    mixed_precision: str | None = None, **run_config_kwargs: Any) -> RunConfig:
    """Returns a ``tf.estimator.RunConfig`` that runs an Estimator under ``strategy``.

    Hand the result to a plain ``tf.estimator.Estimator(model_fn, config=...)``.

    Args:
      strategy: "default" (no distribution), "mirrored" (GPUs, or logical CPU devices
        when there is no GPU), "multi_worker" (``MultiWorkerMirroredStrategy`` from
        ``TF_CONFIG``), "parameter_server" (asynchronous training with variables on the
        ``ps`` tasks of ``TF_CONFIG``) or "tpu" (``TPUEstimator`` wiring; build the
        Estimator with ``estimator_dist.make_estimator``); or the name's
        ``strategy_table.StrategyKind``, resolved already (as ``plan.resolve`` passes it).
      num_replicas: replicas for "mirrored" (default: every GPU, else 2 CPU devices);
        TPU shards for "tpu".
      model_dir: where checkpoints and events go.
      tpu: TPU name or address for "tpu" (default: the ``TPU_NAME`` environment variable).
      use_tpu: for "tpu" only; ``False`` validates the TPU code path on CPU.
        Under "tpu", the arguments of ``tf.compat.v1.estimator.tpu.RunConfig`` are taken
        too: ``cluster`` (a resolver), ``master``, ``tpu_config`` (a ``TPUConfig``; else
        one is built from ``num_replicas`` and ``iterations_per_loop``), and ``tpu_zone`` /
        ``gcp_project`` for the resolver built from ``tpu``.
      collective_timeout: seconds a "multi_worker" run may stall on a dead or frozen peer
        (default 300): a task whose training makes no progress that long ends with one
        line naming the peer (``estimator_dist.hooks.watchdog``), instead of hanging.
      rendezvous_timeout: seconds a "multi_worker" or "parameter_server" task waits for
        its peers to answer before it fails naming the tasks not reached (default 300;
        see ``estimator_dist.distribute.rendezvous``).
      steps_per_run: training steps per ``Session.run`` (default 1), carried by the
        config as ``config.steps_per_run`` for ``estimator_dist.make_estimator``; for
        "tpu" it sets ``iterations_per_loop``.
      all_reduce_bytes_per_pack: for "multi_worker", gradients are all-reduced in packs of
        about this many bytes, each pack as soon as its gradients are ready (default 0:
        TensorFlow's one collective for all gradients, after the whole backward pass).
      all_reduce_dtype: for "multi_worker", "bfloat16" all-reduces float32 gradients as
        bfloat16 (half the bytes; the update is float32); default "float32".
      sparse_gradients: for "multi_worker", how ``IndexedSlices`` gradients (embedding,
        linear and crossed columns, ``tf.gather``) cross between workers: "auto" (default)
        as the rows a step touched where that is fewer bytes than the dense tensor, and
        dense for tables under 256 KiB; "rows" always as rows; "dense" always as dense
        tensors. The choice for each table is printed once; see docs/strategies.md.
      mixed_precision: None (float32), "bfloat16" (CPUs with bfloat16 units, and TPUs) or
        "float16" (GPUs, with dynamic loss scaling of the model_fn's v1 optimizers), for
        an unchanged model_fn; variables and checkpoints stay float32. Carried as
        ``config.mixed_precision``; see docs/precision.md.
      tf_config: this task's cluster for "multi_worker" and "parameter_server", parsed
        already (a ``TFConfig``, as ``estimator_dist.resolve_cluster`` returns it);
        default: parsed here from ``TF_CONFIG`` or another cluster source. TensorFlow
        reads ``TF_CONFIG`` itself, so it must say the same cluster.
      **run_config_kwargs: passed to ``tf.estimator.RunConfig`` (``tf_random_seed``,
        ``save_checkpoints_steps``, ``session_config``, ...).

    Raises:
      UsageError (a ValueError): an unknown strategy, a bad ``num_replicas``, a bad
        ``TF_CONFIG`` under "multi_worker" or "parameter_server", no TPU under "tpu", or
        a ``mixed_precision`` this machine has no units for.
      RuntimeError: "mirrored" on CPU after the TF runtime started with fewer devices, or
        "multi_worker" after it started under TF2 behaviour.
    """
    kind = strategy_table.as_kind(strategy)
    _refuse_strategy_keys(run_config_kwargs, ("train_distribute", "eval_distribute"),
                          f"pass the strategy name instead (strategy={kind.name!r})")
    precision.check_mixed_precision(mixed_precision)
    precision.check_device(mixed_precision, tpu=kind.tpu and use_tpu)
    if not kind.tpu and (tpu is not None or use_tpu is not True):
        raise UsageError(
            f"tpu and use_tpu apply to strategy 'tpu' only. Received: strategy={kind.name!r}")
    _check_run_config_args(kind, run_config_kwargs)
    mends.install_for(kind)
    if kind.tpu:
        if steps_per_run is not None:
            run_config_kwargs["iterations_per_loop"] = steps_per_run
        return with_mixed_precision(
            _tpu_run_config(num_replicas=num_replicas, model_dir=model_dir, tpu=tpu,
                            use_tpu=use_tpu, **run_config_kwargs), mixed_precision)
    options: dict[str, Any] = ({} if collective_timeout is None
                               else {"collective_timeout": collective_timeout})
    for name, value in (("all_reduce_bytes_per_pack", all_reduce_bytes_per_pack),
                        ("all_reduce_dtype", all_reduce_dtype),
                        ("sparse_gradients", sparse_gradients)):
        if value is not None:
            options[name] = value
    if rendezvous_timeout is not None:
        options["rendezvous_timeout"] = check_positive_int("rendezvous_timeout",
                                                           rendezvous_timeout)
    setup = strategies.build(kind, num_replicas, tf_config=tf_config, **options)
    config = cpu_session_config(setup.cpu_devices, run_config_kwargs.pop("session_config", None))
    run_config = StrategyRunConfig(
        model_dir=model_dir, train_distribute=setup.train_distribute,
        eval_distribute=setup.eval_distribute, session_config=config, **run_config_kwargs)
    return with_mixed_precision(with_steps_per_run(run_config, steps_per_run), mixed_precision)
