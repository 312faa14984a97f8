"""Builds the Estimator for a RunConfig: ``tf.estimator.Estimator``, ``LoopEstimator`` or
``TPUEstimator``; and what a ``TPUEstimator(...)`` constructor given a strategy config
builds instead (mend ``tpu_estimator_kept``, which ``estimator_dist/__init__.py`` hands
``kept_tpu_estimator``)."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Mapping, cast

import tensorflow as tf

from estimator_dist.distribute.input_checks import PerReplicaBatchParams
from estimator_dist.distribute.run_config import StrategyRunConfig, TPURunConfig
from estimator_dist.errors import UsageError, check_positive_int
from estimator_dist import mends, run_config_facts

_MODEL_FN_ARGS = ("features", "labels", "mode", "params", "config")
_MODE = tf.estimator.ModeKeys
# ``model_fn(features, labels, mode, params, config)``, or any of its leading arguments.
ModelFn = Callable[..., Any]


def make_estimator(model_fn: ModelFn, config: tf.estimator.RunConfig,
                   params: Mapping[str, Any] | None = None, *, batch_size: int | None = None,
                   eval_batch_size: int | None = None, predict_batch_size: int | None = None,
                   warm_start_from: Any = None,
                   steps_per_run: int | None = None) -> tf.estimator.Estimator:
    """Returns the Estimator that runs ``model_fn`` under ``config``.

    A plain ``tf.estimator.Estimator`` for every strategy but "tpu"; for "tpu" a
    ``TPUEstimator`` (on CPU when the config asks for ``use_tpu=False``), which needs the
    global ``batch_size``. Input functions for a ``TPUEstimator`` go through
    ``tpu_input_fn`` first.

    A TPUEstimator program runs unchanged on the plain Estimator too: a
    ``TPUEstimatorSpec`` its model_fn returns becomes an ``EstimatorSpec``
    (``as_estimator_spec()``), and given ``batch_size`` (global) its input_fn and model_fn
    find ``params["batch_size"]`` = the per-replica batch, as TPUEstimator gives per shard.
    ``batch_size``, ``eval_batch_size`` and ``predict_batch_size`` are TPUEstimator's
    ``train_batch_size``, ``eval_batch_size`` and ``predict_batch_size``: global, one per
    mode (the eval and predict sizes default to ``batch_size``).

    ``steps_per_run`` (default: the config's, see ``make_run_config``; else 1) trains that
    many steps per ``Session.run`` off TPU (``LoopEstimator``); on TPU the
    config's ``iterations_per_loop`` does that.

    A "tpu" config with ``mixed_precision="bfloat16"`` builds ``model_fn`` under
    ``tf.compat.v1.tpu.bfloat16_scope()`` (see ``estimator_dist.precision``).
    """
    sizes = {_MODE.TRAIN: batch_size, _MODE.EVAL: eval_batch_size or batch_size,
             _MODE.PREDICT: predict_batch_size or batch_size}
    if not isinstance(config, TPURunConfig):
        model_fn = _estimator_spec_model_fn(model_fn)
        steps = steps_per_run_of(config, steps_per_run)
        if batch_size is None:
            by_mode = {}
        else:
            by_mode = _per_replica_params(params, sizes, config)
            params = by_mode[_MODE.TRAIN]
        if steps > 1:
            estimator = LoopEstimator(
                model_fn, config=config, params=params, warm_start_from=warm_start_from,
                steps_per_run=steps)
        else:
            estimator = tf.estimator.Estimator(model_fn, config=config, params=params,
                                               warm_start_from=warm_start_from)
        if len({p["batch_size"] for p in by_mode.values()}) > 1:
            mends.apply("params_by_mode", estimator, by_mode=by_mode,
                        asked="eval_batch_size or predict_batch_size")
        return estimator
    if batch_size is None:
        raise UsageError("batch_size must be given for a TPUEstimator. Received: batch_size=None")
    if config.mixed_precision == "bfloat16":
        model_fn = _bfloat16_scope_model_fn(model_fn)
    return tf.compat.v1.estimator.tpu.TPUEstimator(
        model_fn, config=config, params=params, use_tpu=config.use_tpu,
        train_batch_size=batch_size, eval_batch_size=sizes[_MODE.EVAL],
        predict_batch_size=sizes[_MODE.PREDICT], warm_start_from=warm_start_from)


def steps_per_run_of(config: tf.estimator.RunConfig, steps_per_run: int | None = None) -> int:
    """``steps_per_run`` when given, else the one ``config`` carries (else 1); checked."""
    if steps_per_run is None:
        steps_per_run = run_config_facts.steps_per_run_of(config)
    return check_positive_int("steps_per_run", steps_per_run)


class LoopEstimator(tf.estimator.Estimator):
    """A ``tf.estimator.Estimator`` that trains ``steps_per_run`` steps per Session.run.

    Its train graph runs the model_fn ``steps_per_run`` times in one loop, as TPUEstimator
    does with ``iterations_per_loop`` (mend ``steps_per_run``, which describes the loop).
    Evaluation, prediction and export are those of ``tf.estimator.Estimator``. With
    ``steps_per_run=1`` training is too. The train input_fn must return a
    ``tf.data.Dataset`` (a strategy feeds the loop from it).

    Raises:
      UsageError: ``steps_per_run > 1`` with the mend turned off.
    """

    def __init__(self, model_fn: ModelFn, model_dir: str | None = None,
                 config: tf.estimator.RunConfig | None = None,
                 params: Mapping[str, Any] | None = None, warm_start_from: Any = None, *,
                 steps_per_run: int = 1) -> None:
        check_positive_int("steps_per_run", steps_per_run)
        super().__init__(model_fn, model_dir=model_dir, config=config, params=params,
                         warm_start_from=warm_start_from)
        self._steps_per_run = steps_per_run
        if steps_per_run > 1:
            mends.apply("steps_per_run", self, asked=f"steps_per_run={steps_per_run}")

    @property
    def steps_per_run(self) -> int:
        return self._steps_per_run


def kept_tpu_estimator(model_fn: ModelFn | None = None, model_dir: str | None = None,
                       config: tf.estimator.RunConfig | None = None,
                       params: Mapping[str, Any] | None = None, use_tpu: bool = True,
                       train_batch_size: int | None = None, eval_batch_size: int | None = None,
                       predict_batch_size: int | None = None, *args: Any,
                       warm_start_from: Any = None, embedding_config_spec: Any = None,
                       **kwargs: Any) -> tf.estimator.Estimator | None:
    """What ``TPUEstimator(...)`` builds (mend ``tpu_estimator_kept``): for a
    ``make_run_config`` config of a tf.distribute strategy, the Estimator ``make_estimator``
    builds from the same arguments; None for any other config (TensorFlow's constructor).

    ``train_batch_size`` / ``eval_batch_size`` / ``predict_batch_size`` are global, as in
    TPUEstimator, and ``params["batch_size"]`` is the per-replica batch of each mode (as
    TPUEstimator gives it per shard).
    """
    del use_tpu, args, kwargs  # No TPU under a tf.distribute strategy; TPU-only settings.
    if not isinstance(config, StrategyRunConfig):
        return None
    if embedding_config_spec is not None:
        raise UsageError(
            "embedding_config_spec needs a TPU: build the Estimator with "
            "estimator_dist.make_estimator for this strategy and use embedding columns. "
            "Received: embedding_config_spec with a non-TPU config")
    if model_dir is not None:
        config = config.replace(model_dir=model_dir)
    return make_estimator(
        cast(ModelFn, model_fn), config, params, batch_size=train_batch_size,
        eval_batch_size=eval_batch_size, predict_batch_size=predict_batch_size,
        warm_start_from=warm_start_from)


def _per_replica_params(params: Mapping[str, Any] | None, sizes: Mapping[str, Any],
                        config: tf.estimator.RunConfig) -> dict[str, PerReplicaBatchParams]:
    """{mode: params whose "batch_size" is that mode's per-replica batch}.

    Training runs under ``train_distribute``, evaluation under ``eval_distribute`` (one
    device when None), prediction on one device.
    """
    strategies = {_MODE.TRAIN: config.train_distribute,
                  _MODE.EVAL: config.eval_distribute, _MODE.PREDICT: None}
    names = {_MODE.TRAIN: "batch_size", _MODE.EVAL: "eval_batch_size",
             _MODE.PREDICT: "predict_batch_size"}
    by_mode: dict[str, PerReplicaBatchParams] = {}
    for mode, size in sizes.items():
        check_positive_int(names[mode], size)
        strategy = strategies[mode]
        replicas = strategy.num_replicas_in_sync if strategy is not None else 1
        if size % replicas:
            raise UsageError(f"{names[mode]} must be a multiple of the {replicas} replicas. "
                             f"Received: {names[mode]}={size}")
        by_mode[mode] = PerReplicaBatchParams(params or {}, batch_size=size // replicas)
    return by_mode


def _with_accepted_args(model_fn: ModelFn) -> Callable[..., Any]:
    """``model_fn`` as a function of all five model_fn arguments, passing on those it takes."""
    accepted = inspect.signature(model_fn).parameters

    def call(**given: Any) -> Any:
        return model_fn(**{name: given[name] for name in _MODEL_FN_ARGS if name in accepted})

    return call


def _estimator_spec_model_fn(model_fn: ModelFn) -> ModelFn:
    """Wraps ``model_fn`` so a ``TPUEstimatorSpec`` it returns becomes an ``EstimatorSpec``."""
    call = _with_accepted_args(model_fn)

    @functools.wraps(model_fn)
    def wrapped(features: Any, labels: Any, mode: str, params: Any,
                config: tf.estimator.RunConfig) -> Any:
        spec = call(features=features, labels=labels, mode=mode, params=params, config=config)
        if isinstance(spec, tf.compat.v1.estimator.tpu.TPUEstimatorSpec):
            return spec.as_estimator_spec()
        return spec

    del wrapped.__wrapped__  # Estimator reads the wrapper's own arguments.
    return wrapped


def _bfloat16_scope_model_fn(model_fn: ModelFn) -> ModelFn:
    """Wraps ``model_fn`` to build under ``tf.compat.v1.tpu.bfloat16_scope()``, the TPU way
    to mixed bfloat16: variables asked for in bfloat16 are stored float32 and read as
    bfloat16."""
    call = _with_accepted_args(model_fn)

    @functools.wraps(model_fn)
    def wrapped(features: Any, labels: Any, mode: str, params: Any,
                config: tf.estimator.RunConfig) -> Any:
        with tf.compat.v1.tpu.bfloat16_scope():
            return call(features=features, labels=labels, mode=mode, params=params,
                        config=config)

    del wrapped.__wrapped__  # Estimator reads the wrapper's own arguments.
    return wrapped


def tpu_input_fn(input_fn: Callable[..., Any]) -> Callable[[Mapping[str, Any]], Any]:
    """Adapts an ``input_fn(input_context=None)`` to TPUEstimator's ``input_fn(params)``.

    TPUEstimator hands ``params["context"]``; on a TPU host this becomes an
    ``InputContext`` for that host's share of the global batch. On CPU (``use_tpu=False``)
    the input_fn runs whole, as on one device.
    """

    def wrapped(params: Mapping[str, Any]) -> Any:
        context = params.get("context")
        if context is None or not params.get("use_tpu", False):
            return input_fn()
        _, host_id, num_hosts = context.current_input_fn_deployment()
        return input_fn(input_context=tf.distribute.InputContext(
            num_input_pipelines=num_hosts, input_pipeline_id=host_id,
            num_replicas_in_sync=context.num_replicas))

    return wrapped
