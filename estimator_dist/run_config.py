"""``make_run_config``: a ``tf.estimator.RunConfig`` wired for a named strategy."""
import os

import tensorflow as tf

from estimator_dist import strategies
from estimator_dist.errors import UsageError, check_positive_int

DEFAULT_ITERATIONS_PER_LOOP = 100


class TPURunConfig(tf.compat.v1.estimator.tpu.RunConfig):
    """A TPUEstimator ``RunConfig`` that also records whether a TPU is used.

    ``use_tpu=False`` is the CPU validation mode: the same model_fn and input_fn run
    through ``TPUEstimator`` on the CPU, which checks static shapes and the TPU code
    path without a TPU.
    """

    def __init__(self, *, use_tpu=True, **kwargs):
        super().__init__(**kwargs)
        self.use_tpu = use_tpu


def session_config(cpu_devices, base=None):
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


def _resolve_tpu(tpu):
    name = tpu or os.environ.get("TPU_NAME")
    if not name:
        raise UsageError(
            "strategy 'tpu' found no TPU (set TPU_NAME or pass tpu=NAME); to validate a TPU "
            "model_fn on CPU ask for it with use_tpu=False (CLI: --tpu-validate). "
            "Received: no TPU name")
    try:
        return tf.distribute.cluster_resolver.TPUClusterResolver(tpu=name)
    except (ValueError, RuntimeError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else "unreachable"
        raise UsageError(
            f"strategy 'tpu' could not reach TPU {name!r} ({first_line}); check TPU_NAME, or "
            "validate on CPU with use_tpu=False (CLI: --tpu-validate).") from None


def _tpu_run_config(num_replicas, model_dir, tpu, use_tpu, kwargs):
    check_positive_int("num_replicas", num_replicas, allow_none=True)
    tpu_lib = tf.compat.v1.estimator.tpu
    resolver = _resolve_tpu(tpu) if use_tpu else None
    if not use_tpu and num_replicas not in (None, 1):
        raise UsageError(
            "num_replicas must be 1 or None when validating on CPU (use_tpu=False). "
            f"Received: num_replicas={num_replicas}")
    tpu_config = tpu_lib.TPUConfig(
        iterations_per_loop=kwargs.pop("iterations_per_loop", DEFAULT_ITERATIONS_PER_LOOP),
        num_shards=num_replicas,
        per_host_input_for_training=tpu_lib.InputPipelineConfig.PER_HOST_V2)
    base = kwargs.pop("session_config", None)
    return TPURunConfig(
        use_tpu=use_tpu, cluster=resolver, tpu_config=tpu_config, model_dir=model_dir,
        session_config=session_config(strategies.cpu_device_count(), base), **kwargs)


def make_run_config(strategy="default", *, num_replicas=None, model_dir=None, tpu=None,
                    use_tpu=True, collective_timeout=None, **run_config_kwargs):
    """Returns a ``tf.estimator.RunConfig`` that runs an Estimator under ``strategy``.

    Hand the result to a plain ``tf.estimator.Estimator(model_fn, config=...)``.

    Args:
      strategy: "default" (no distribution), "mirrored" (GPUs, or logical CPU devices
        when there is no GPU), "multi_worker" (``MultiWorkerMirroredStrategy`` from
        ``TF_CONFIG``), "parameter_server" (asynchronous training with variables on the
        ``ps`` tasks of ``TF_CONFIG``) or "tpu" (``TPUEstimator`` wiring; build the
        Estimator with ``estimator_dist.make_estimator``).
      num_replicas: replicas for "mirrored" (default: every GPU, else 2 CPU devices);
        TPU shards for "tpu".
      model_dir: where checkpoints and events go.
      tpu: TPU name or address for "tpu" (default: the ``TPU_NAME`` environment variable).
      use_tpu: for "tpu" only; ``False`` validates the TPU code path on CPU.
      collective_timeout: seconds a "multi_worker" collective waits for a peer before it
        fails (default 300), so a dead worker ends the run instead of hanging it.
      **run_config_kwargs: passed to ``tf.estimator.RunConfig`` (``tf_random_seed``,
        ``save_checkpoints_steps``, ``session_config``, ...).

    Raises:
      UsageError (a ValueError): an unknown strategy, a bad ``num_replicas``, a bad
        ``TF_CONFIG`` under "multi_worker" or "parameter_server", or no TPU under "tpu".
      RuntimeError: "mirrored" on CPU after the TF runtime started with fewer devices.
    """
    for key in ("train_distribute", "eval_distribute"):
        if key in run_config_kwargs:
            raise UsageError(
                f"{key} is set by make_run_config from strategy={strategy!r}; pass the "
                f"strategy name instead. Received: {key}={run_config_kwargs[key]!r}")
    if strategy != "tpu" and (tpu is not None or use_tpu is not True):
        raise UsageError(
            f"tpu and use_tpu apply to strategy 'tpu' only. Received: strategy={strategy!r}")
    if strategy == "tpu":
        return _tpu_run_config(num_replicas, model_dir, tpu, use_tpu, run_config_kwargs)
    options = {} if collective_timeout is None else {"collective_timeout": collective_timeout}
    setup = strategies.build(strategy, num_replicas, **options)
    config = session_config(setup.cpu_devices, run_config_kwargs.pop("session_config", None))
    return tf.estimator.RunConfig(
        model_dir=model_dir, train_distribute=setup.train_distribute,
        eval_distribute=setup.eval_distribute, session_config=config, **run_config_kwargs)
